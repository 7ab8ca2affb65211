import json
import math

from medibench.report import latex_table, markdown_table, write_table
from medibench.report._formats import format_number, leaderboard_ci

ROWS = [
    {
        "model": "a_1",
        "by": "all",
        "n": 3,
        "n_missing": 1,
        "ssim": 0.5,
        "ssim_ci_low": 0.4,
        "ssim_ci_high": 0.6,
        "psnr": math.inf,
        "psnr_ci_low": None,
        "psnr_ci_high": None,
    },
    {
        "model": "b&c",
        "by": "all",
        "n": 2,
        "n_missing": 0,
        "ssim": None,
        "ssim_ci_low": None,
        "ssim_ci_high": None,
        "psnr": 31.25,
        "psnr_ci_low": 30.0,
        "psnr_ci_high": 32.5,
    },
]
COLS = ["model", "n", "n_missing", "ssim", "psnr"]
CI = leaderboard_ci(["ssim", "psnr"])


def test_markdown_table_hand_checked():
    assert markdown_table(ROWS, COLS, ci=CI) == (
        "| model | n | missing | ssim | psnr |\n"
        "|:---|---:|---:|---:|---:|\n"
        "| a_1 | 3 | 1 | 0.500 [0.400, 0.600] | inf |\n"
        "| b&c | 2 | 0 | - | 31.250 [30.000, 32.500] |"
    )


def test_markdown_escapes_pipes_and_honours_digits():
    rows = [{"model": "x|y", "v": 0.12345}]
    assert markdown_table(rows, ["model", "v"], digits=2).splitlines()[-1] == r"| x\|y | 0.12 |"


def test_latex_booktabs_hand_checked():
    assert latex_table(ROWS, COLS, ci=CI) == (
        "\\begin{tabular}{lrrrr}\n"
        "\\toprule\n"
        "model & n & missing & ssim & psnr \\\\\n"
        "\\midrule\n"
        "a\\_1 & 3 & 1 & 0.500 [0.400, 0.600] & $\\infty$ \\\\\n"
        "b\\&c & 2 & 0 & -- & 31.250 [30.000, 32.500] \\\\\n"
        "\\bottomrule\n"
        "\\end{tabular}"
    )


def test_latex_caption_and_label_wrap_in_a_table():
    tex = latex_table(ROWS[:1], ["model", "n"], caption="50% of a_b", label="tab:x")
    lines = tex.splitlines()
    assert lines[:4] == [
        "\\begin{table}[t]",
        "\\centering",
        "\\caption{50\\% of a\\_b}",
        "\\label{tab:x}",
    ]
    assert lines[-1] == "\\end{table}"


def test_format_number_p_values_counts_and_negative_infinity():
    assert format_number(0.000123456, column="wilcoxon_p") == "0.000123"
    assert format_number(3.0, column="n") == "3"
    assert format_number(-math.inf) == "-inf"
    assert format_number(None, latex=True) == "--"


def test_write_table_writes_four_formats(tmp_path):
    paths = write_table(ROWS, tmp_path / "t" / "leaderboard", columns=COLS, ci=CI, caption="cap")
    assert sorted(paths) == ["csv", "json", "md", "tex"]
    data = json.loads(paths["json"].read_text())
    assert data["caption"] == "cap"
    assert data["rows"][0]["psnr"] == "inf"  # JSON has no infinity
    assert paths["md"].read_text().startswith("cap\n\n| model |")
    assert "\\caption{cap}" in paths["tex"].read_text()
    assert paths["csv"].read_text().splitlines()[0].startswith("model,by,n,n_missing,ssim")


def test_write_table_without_rows_writes_headers(tmp_path):
    paths = write_table([], tmp_path / "empty", columns=["model", "n"])
    assert paths["csv"].read_text() == "model,n\n"
    assert json.loads(paths["json"].read_text())["rows"] == []
