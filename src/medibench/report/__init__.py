"""Reports: aggregation of score records into leaderboards (more to come: CIs, HTML, plots)."""

from medibench.report._leaderboard import leaderboard, write_leaderboard_csv

__all__ = ["leaderboard", "write_leaderboard_csv"]
