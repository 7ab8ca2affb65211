"""The CLI's consoles: COLUMNS honoured when piped, tables never cut, messages verbatim."""

import io

from rich.table import Table

from medibench._console import PIPE_WIDTH, labelled, long_format, stderr_console, stdout_console


def _table() -> Table:
    table = Table(title="medebench@1 by model")
    for col in ("model", "ssim", "psnr"):
        table.add_column(col)
    table.add_row("instruct-pix2pix-finetuned-on-miedb", "0.123456", "27.654321")
    table.add_row("identity", "0.999999", "99.000000")
    return table


def _render(console, *objects) -> str:
    console.file = io.StringIO()
    console.print(*objects)
    return console.file.getvalue()


def test_columns_is_honoured_when_piped(monkeypatch):
    monkeypatch.setenv("COLUMNS", "57")
    assert stdout_console().width == 57
    monkeypatch.delenv("COLUMNS")
    assert stdout_console().width == PIPE_WIDTH  # pytest's stdout is not a terminal


def test_a_table_that_fits_is_a_table_with_every_value_whole(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    text = _render(stdout_console(), _table())
    assert "┃ model" in text and "…" not in text
    assert "instruct-pix2pix-finetuned-on-miedb" in text and "27.654321" in text


def test_a_table_too_wide_switches_to_the_long_format(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")  # narrower than the longest name plus the numbers
    text = _render(stdout_console(), _table())
    assert text.splitlines() == [
        "medebench@1 by model",
        "model: instruct-pix2pix-finetuned-on-miedb",
        "  ssim: 0.123456",
        "  psnr: 27.654321",
        "model: identity",
        "  ssim: 0.999999",
        "  psnr: 99.000000",
    ]
    assert long_format(_table()).plain == text.rstrip("\n")


def test_messages_keep_brackets_and_stay_on_one_line(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    hint = "no module named 'datasets': pip install 'medibench[hf]' and run this command again"
    text = _render(stderr_console(), labelled("error", hint))
    assert text == f"error: {hint}\n"


def test_a_wide_table_is_split_by_columns_repeating_its_keys(monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    table = Table(title="medgen@code by task", caption="n = samples")
    table.add_column("model", justify="left", no_wrap=True)
    table.add_column("task", justify="left", no_wrap=True)
    metrics = [f"metric_{i}" for i in range(6)]
    for m in metrics:
        table.add_column(m, justify="right", no_wrap=True)
    table.add_row("gpt-image-1", "vqa", *(f"0.{i}234" for i in range(6)))
    text = _render(stdout_console(), table)
    assert "…" not in text
    titles = [line for line in text.splitlines() if line.startswith("medgen@code")]
    assert titles == ["medgen@code by task (1/2)", "medgen@code by task (2/2)"]
    assert text.count("gpt-image-1") == 2 and text.count("n = samples") == 1
    assert all(len(line) <= 60 for line in text.splitlines())
    for i, m in enumerate(metrics):
        assert text.count(m) == 1 and f"0.{i}234" in text
