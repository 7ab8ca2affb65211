"""In-context runs under faults (issue 41): a pool holding a re-encoded copy of each query
(other id, other bytes, the same pixels) never hands a query its own copy, under ``random`` or
``nearest``, and the run's summary counts them; an undecodable pool image and an unknown
``--icl-embedding`` are one-line errors (exit 2) naming the file and sample, or the valid
embeddings."""

from __future__ import annotations

import json

import pytest
from PIL import Image
from typer.testing import CliRunner

from medibench.cli import app
from medibench.datasets import load_dataset
from medibench.runs._icl import DemonstrationError, plan_icl

from .icl_data import pixels

N = 6


def _write(root, records):
    (root / "img").mkdir(parents=True)
    lines = []
    for sid, seed, split, save in records:
        path = root / "img" / f"{sid}.png"
        save(Image.fromarray(pixels(seed)), path)
        lines.append(json.dumps({
            "sample_id": sid, "benchmark": "tempt", "input": f"img/{sid}.png",
            "instruction": f"Denoise image {sid}.", "perspective": "modification",
            "task": "denoise", "modality": "CT", "split": split,
            "source": {"patient": f"P-{sid}"}, "metadata": {},
        }))  # fmt: skip
        write_target = root / "img" / f"{sid}_t.png"
        Image.fromarray(255 - pixels(seed)).save(write_target)
        lines[-1] = lines[-1][:-1] + f', "target": "img/{sid}_t.png"}}'
    (root / "samples.jsonl").write_text("\n".join(lines) + "\n")
    return root


def _png(image, path):
    image.save(path, compress_level=6)


def _reencoded(image, path):  # the same pixels, other bytes (compression and a text chunk)
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    info.add_text("Software", "re-encoded")
    image.save(path, compress_level=1, pnginfo=info)


@pytest.fixture
def queries_and_pool(tmp_path):
    queries = _write(tmp_path / "q", [(f"q{i}", i, "test", _png) for i in range(N)])
    copies = [(f"copy{i}", i, "train", _reencoded) for i in range(N)]
    others = [(f"other{i}", 100 + i, "train", _png) for i in range(N)]
    pool = _write(tmp_path / "pool", copies + others)
    for i in range(N):
        a, b = (queries / "img" / f"q{i}.png"), (pool / "img" / f"copy{i}.png")
        assert a.read_bytes() != b.read_bytes()
    return queries, pool


def _plan(queries, pool, select="random", embedding="thumbnail", k=N):
    ds = load_dataset(f"native:{queries}")
    plan = plan_icl((k,), pool=f"native:{pool}", select=select, embedding=embedding,
                    dataset=f"native:{queries}", dataset_options={}, samples=list(ds),
                    loaded=ds, seed=0)  # fmt: skip
    return plan, list(ds)


@pytest.mark.parametrize("select", ["random", "nearest"])
def test_a_pixel_identical_copy_is_never_a_querys_demonstration(queries_and_pool, select):
    queries, pool = queries_and_pool
    plan, samples = _plan(queries, pool, select=select)
    for q in samples:
        own = q.sample_id.replace("q", "copy")
        allowed = {c.sample_id for c in plan.allowed(q, "target")}
        assert own not in allowed and len(allowed) == 2 * N - 1
        for draw in range(3):
            shown = [c.sample_id for c in plan.choose(q, draw, N, "target")]
            assert own not in shown and len(shown) == N
        assert plan.pixel_copies(q) == 1


def test_the_run_counts_the_copies_it_kept_out(queries_and_pool, tmp_path):
    queries, pool = queries_and_pool
    res = CliRunner().invoke(app, [
        "run", "--dataset", f"native:{queries}", "--stage", "generate", "--no-progress",
        "--model", "tests.runs.icl_data:make_mean", "--icl-k", "2", "--icl-pool",
        f"native:{pool}", "--icl-select", "nearest", "--out", str(tmp_path / "run"),
    ])  # fmt: skip
    said = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert f"{N} done" in said
    assert (
        f"{N} with a pixel-identical copy of their image in the demonstration pool (another id): "
        "never shown to them" in said
    )


def test_an_undecodable_pool_image_names_its_file_and_sample(queries_and_pool, tmp_path):
    queries, pool = queries_and_pool
    bad = pool / "img" / "other3.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    with pytest.raises(DemonstrationError) as info:
        _plan(queries, pool)
    message = str(info.value)
    assert f"demonstration pool native:{pool}: sample 'other3': {bad} does not decode" in message
    res = CliRunner().invoke(app, [
        "run", "--dataset", f"native:{queries}", "--stage", "generate", "--no-progress",
        "--model", "tests.runs.icl_data:make_mean", "--icl-k", "2", "--icl-pool",
        f"native:{pool}", "--out", str(tmp_path / "run"),
    ])  # fmt: skip
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert f"sample 'other3': {bad} does not decode" in " ".join(res.output.split())


def test_an_unknown_embedding_lists_the_valid_ones(queries_and_pool, tmp_path):
    queries, pool = queries_and_pool
    with pytest.raises(DemonstrationError, match="--icl-embedding 'thumbnails': .* \\(valid: "
                       "thumbnail, inception:PATH"):  # fmt: skip
        _plan(queries, pool, select="nearest", embedding="thumbnails")
    res = CliRunner().invoke(app, [
        "run", "--dataset", f"native:{queries}", "--stage", "generate", "--no-progress",
        "--model", "tests.runs.icl_data:make_mean", "--icl-k", "2", "--icl-select", "nearest",
        "--icl-embedding", "no_such_module:embed", "--out", str(tmp_path / "run"),
    ])  # fmt: skip
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert "--icl-embedding 'no_such_module:embed':" in said and "(valid: thumbnail," in said


@pytest.mark.slow  # a child process, and the run three times
def test_a_killed_in_context_run_resumes_to_the_uninterrupted_run(queries_and_pool, tmp_path):
    """SIGKILL in the middle of an in-context run (its third output's temp file on disk), then
    the same command: the predictions, their demonstrations and the scores are the
    uninterrupted run's, row for row, and the folder holds the same files."""
    from tests._kill import folder_state, hidden_temps, kill_mid_write
    from tests._sqlite import count_rows, table_rows

    queries, pool = queries_and_pool
    argv = ["run", "--dataset", f"native:{queries}", "--no-progress", "--model",
            "tests.runs.icl_data:make_mean", "--icl-k", "2", "--icl-pool", f"native:{pool}",
            "--icl-select", "nearest", "--out"]  # fmt: skip
    ref, out = tmp_path / "ref" / "run", tmp_path / "kill" / "run"
    assert CliRunner().invoke(app, [*argv, str(ref)]).exit_code == 0
    kill_mid_write([*argv, out], out, hang_at=2)
    assert hidden_temps(out) and count_rows(out / "run.sqlite", "predictions") == 2
    res = CliRunner().invoke(app, [*argv, str(out)])
    assert res.exit_code == 0, res.output
    assert f"{N - 2} done, 2 already done" in " ".join(res.output.split())
    tables = [t for t in _tables(ref / "run.sqlite") if t not in ("meta", "environment")]
    assert {"predictions", "scores"} <= set(tables)
    for table in tables:
        rows = table_rows(out / "run.sqlite", table, drop=("elapsed_s", "created_at"))
        assert rows == table_rows(ref / "run.sqlite", table, drop=("elapsed_s", "created_at"))
    assert len(table_rows(out / "run.sqlite", "predictions")) == N
    assert hidden_temps(out) == [] and folder_state(out) == folder_state(ref)


def _tables(db) -> list[str]:
    import sqlite3

    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    finally:
        con.close()
