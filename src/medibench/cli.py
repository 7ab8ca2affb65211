"""The ``medibench`` command line (filled in below)."""
import typer

app = typer.Typer(no_args_is_help=True)
