import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import numpy as np

from medibench.datasets import load_dataset, load_images
from medibench.protocols import load_protocol
from medibench.runs import RunStore, generate, output_folder, score
from tests._sqlite import count_rows


class Flaky:
    """Fails on odd-numbered samples until ``healed``; otherwise brightens the image by 1."""

    name = "flaky"

    def __init__(self):
        self.healed = False
        self.calls = 0

    def edit(self, image, instruction, *, seed):
        self.calls += 1
        if not self.healed and int(instruction[-1]) % 2:
            raise RuntimeError("out of memory (simulated)")
        return np.clip(image.astype(int) + 1, 0, 255).astype(np.uint8)


def _samples(tiny_dataset):
    ds = load_dataset(f"native:{tiny_dataset}")
    # Give each sample an instruction ending in its index so Flaky knows which to fail.
    return [
        s.model_copy(update={"instruction": f"Remove the lesion {i}"}) for i, s in enumerate(ds)
    ]


def test_failures_are_recorded_and_only_failed_reruns_them(tiny_dataset, tmp_path):
    samples = _samples(tiny_dataset)
    model = Flaky()
    proto = load_protocol("native@1")
    with RunStore(tmp_path / "run") as st:
        rep = generate(st, samples, model, model_name="flaky", k=2, progress=False)
        assert (rep.done, rep.failed) == (6, 6)
        assert "RuntimeError: out of memory (simulated)" in rep.failures[0][1]
        rep = score(st, samples, proto, load_images=load_images, progress=False)
        statuses = sorted(s.status for s in st.scores())
        assert statuses == ["missing"] * 6 + ["ok"] * 6
        missing = [s for s in st.scores() if s.status == "missing"]
        assert all(v is None for s in missing for v in s.metrics.values())  # never 0

        model.healed, model.calls = True, 0
        rep = generate(
            st, samples, model, model_name="flaky", k=2, only_failed=True, progress=False
        )
        assert (rep.done, rep.failed, rep.skipped, model.calls) == (6, 0, 6, 6)
        rep = score(st, samples, proto, load_images=load_images, progress=False)
        assert rep.done == 6 and rep.skipped == 6
        scores = st.scores()
        assert len(scores) == 12 and {s.status for s in scores} == {"ok"}
        # values: the output is the input + 1 everywhere, so PSNR vs input outside the ROI is
        # 10 log10(255^2 / 1) exactly
        assert all(abs(s.metrics["cp_psnr"] - 48.1308036086791) < 1e-9 for s in scores)


def test_sigkill_mid_run_then_resume_loses_nothing_and_duplicates_nothing(
    tiny_dataset, tmp_path, monkeypatch
):
    from typer.testing import CliRunner

    from medibench.cli import app
    from tests.runs.conftest import make_native

    data = make_native(tmp_path / "data20", n=20)
    (tmp_path / "slowmod.py").write_text(
        textwrap.dedent("""
        import time
        import numpy as np

        class SlowModel:
            name = "slow"
            def edit(self, image, instruction, *, seed):
                time.sleep(0.1)
                out = image.copy()
                out[0, 0, 0] = seed % 251
                return out
    """)
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    run = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "medibench",
        "run",
        "--dataset",
        f"native:{data}",
        "--model",
        "slowmod:SlowModel",
        "--out",
        str(run),
        "--no-progress",
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    db = run / "run.sqlite"
    deadline = time.time() + 120
    while count_rows(db, "predictions") < 5:
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.time() < deadline, "the run never got going"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    con = sqlite3.connect(db)
    before = con.execute("SELECT sample_id, k, seed, path, created_at FROM predictions").fetchall()
    con.close()
    assert 5 <= len(before) < 20, "the kill did not land mid-run"

    # The resume runs in this process: only the killed run needs a process of its own.
    monkeypatch.syspath_prepend(str(tmp_path))
    done = CliRunner().invoke(app, cmd[3:])
    assert done.exit_code == 0, done.output

    con = sqlite3.connect(db)
    after = con.execute("SELECT sample_id, k, seed, path, created_at FROM predictions").fetchall()
    dup = con.execute(
        "SELECT COUNT(*) FROM (SELECT model, sample_id, k FROM predictions "
        "GROUP BY 1, 2, 3 HAVING COUNT(*) > 1)"
    ).fetchone()[0]
    n_scores = con.execute("SELECT COUNT(*) FROM scores WHERE status = 'ok'").fetchone()[0]
    assert dup == 0 and len(after) == 20 and n_scores == 20
    assert set(before) <= set(after), "a finished sample was redone or lost"
    outputs = sorted(p.name for p in (run / "outputs" / output_folder("slow")).iterdir())
    assert outputs == sorted(f"s{i:03d}_0.png" for i in range(20))  # no temp files left
