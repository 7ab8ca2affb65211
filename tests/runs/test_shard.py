"""Shards (flag, torchrun and SLURM variables) and merging shard runs into one."""

from __future__ import annotations

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from medibench.cli import app
from medibench.datasets import load_dataset
from medibench.runs import RunStore, RunStoreError, generate
from medibench.runs._cli import merge as merge_command
from medibench.runs._shard import Shard, merge, resolve_shard, shard_run_dir
from tests.runs.conftest import make_native

runner = CliRunner()


def test_shard_flag_and_launcher_variables():
    assert resolve_shard("1/4") == Shard(1, 4)
    for bad in ("4/4", "-1/2", "1", "a/b", "1/0"):
        with pytest.raises(ValueError, match="--shard"):
            resolve_shard(bad)
    assert resolve_shard(None, {"RANK": "2", "WORLD_SIZE": "4"}) == Shard(2, 4)
    assert resolve_shard(None, {"SLURM_PROCID": "0", "SLURM_NTASKS": "3"}) == Shard(0, 3)
    assert resolve_shard(None, {"RANK": "0", "WORLD_SIZE": "1"}) is None
    assert resolve_shard(None, {}) is None
    assert resolve_shard("0/2", {"RANK": "1", "WORLD_SIZE": "2"}) == Shard(0, 2)  # flag wins
    items = list(range(10))
    parts = [Shard(i, 3).select(items) for i in range(3)]
    assert sorted(sum(parts, [])) == items and parts[1] == [1, 4, 7]
    assert shard_run_dir("runs/x-{shard}", Shard(1, 3)).name == "x-1-of-3"
    assert shard_run_dir("runs/x", Shard(1, 3)).name == "x"


def _cli_run(data, out, *extra, env=None):
    args = ["run", "--dataset", f"native:{data}", "--model", "classical", "--out", str(out)]
    res = runner.invoke(app, [*args, "--k", "2", "--no-progress", *extra], env=env)
    assert res.exit_code == 0, res.output
    return res


def _content(run_dir):
    with RunStore.open_existing(run_dir) as st:
        preds = sorted(
            (p.model, p.sample_id, p.k, p.seed, (st.run_dir / p.path).read_bytes())
            for p in st.predictions()
        )
        scores = sorted(
            (s.model, s.sample_id, s.k, s.protocol, s.status, s.metrics) for s in st.scores()
        )
        return preds, scores, len(st.samples()), st.get_meta("config")


def _merge_app():
    cli = typer.Typer()
    cli.command()(merge_command)
    cli.command("noop")(lambda: None)  # two commands, so 'merge' is a sub-command
    return cli


def test_shard_runs_merge_into_the_unsharded_run(tmp_path):
    data = make_native(tmp_path / "data", n=5)
    _cli_run(data, tmp_path / "whole")
    for i in range(2):
        _cli_run(data, tmp_path / "run-{shard}", "--shard", f"{i}/2")
    shards = [tmp_path / "run-0-of-2", tmp_path / "run-1-of-2"]
    assert [_content(s)[2] for s in shards] == [3, 2]
    res = runner.invoke(
        _merge_app(), ["merge", *map(str, shards), "--out", str(tmp_path / "merged")]
    )
    assert res.exit_code == 0, res.output
    assert "5 samples, 10 predictions (10 files)" in res.output
    whole, merged = _content(tmp_path / "whole"), _content(tmp_path / "merged")
    assert merged[:3] == whole[:3]
    assert "shard" not in merged[3] and merged[3]["seed"] == 0


def test_limit_takes_the_first_samples_then_shards_split_them(tmp_path):
    data = make_native(tmp_path / "data", n=5)
    for i in range(2):  # the first 3 samples (s000-s002), split: s000, s002 | s001
        _cli_run(data, tmp_path / "part-{shard}", "--shard", f"{i}/2", "--limit", "3")
    got = [_content(tmp_path / f"part-{i}-of-2") for i in range(2)]
    assert [sorted({p[1] for p in c[0]}) for c in got] == [["s000", "s002"], ["s001"]]
    _cli_run(data, tmp_path / "three", "--limit", "3")
    parts = [str(tmp_path / f"part-{i}-of-2") for i in range(2)]
    res = runner.invoke(_merge_app(), ["merge", *parts, "--out", str(tmp_path / "merged")])
    assert res.exit_code == 0, res.output
    assert _content(tmp_path / "merged")[:3] == _content(tmp_path / "three")[:3]
    _cli_run(data, tmp_path / "all", "--limit", "2")
    _cli_run(data, tmp_path / "all")  # resumes: the 2 done are kept, 3 added
    preds, scores, n_samples, _ = _content(tmp_path / "all")
    assert n_samples == 5 and len(preds) == 10 and len(scores) == 10
    res = runner.invoke(app, ["run", "--dataset", f"native:{data}", "--model", "classical",
                              "--out", str(tmp_path / "x"), "--limit", "0"])  # fmt: skip
    assert res.exit_code == 2 and "--limit" in res.output


def test_launcher_variables_pick_the_shard_and_shards_can_share_one_store(tmp_path):
    data = make_native(tmp_path / "data", n=5)
    for rank in ("0", "1"):
        _cli_run(data, tmp_path / "shared", env={"RANK": rank, "WORLD_SIZE": "2"})
    preds, scores, n_samples, _ = _content(tmp_path / "shared")
    assert n_samples == 5 and len(preds) == 10 and len(scores) == 10


def _generate(run_dir, samples, model, *, seed=0, name="m"):
    with RunStore(run_dir) as st:
        st.set_meta("config", {"dataset": "d", "seed": seed, "protocols": {}, "models": [name]})
        st.put_samples(samples)
        generate(st, samples, model, model_name=name, seed=seed, progress=False)


class Plus:
    name = "plus"

    def __init__(self, delta=1, fail=False):
        self.delta, self.fail = delta, fail

    def edit(self, image, instruction, *, seed):
        if self.fail:
            raise RuntimeError("no GPU left")
        return np.clip(image.astype(int) + self.delta, 0, 255).astype(np.uint8)


def test_merge_refuses_other_configs_and_conflicting_outputs(tmp_path):
    samples = list(load_dataset(f"native:{make_native(tmp_path / 'data', n=2)}"))
    _generate(tmp_path / "a", samples, Plus())
    _generate(tmp_path / "b", samples, Plus(), seed=1)
    with pytest.raises(RunStoreError, match="seed=1, not 0"):
        merge([tmp_path / "a", tmp_path / "b"], tmp_path / "out")
    assert RunStore(tmp_path / "out").predictions() == []  # nothing written
    _generate(tmp_path / "c", samples, Plus(delta=2))
    with pytest.raises(RunStoreError, match="conflicting outputs:\n  m/s000_0"):
        merge([tmp_path / "a", tmp_path / "c"], tmp_path / "out2")
    with pytest.raises(RunStoreError, match="one of the runs"):
        merge([tmp_path / "a"], tmp_path / "a")


def test_merge_prefers_a_success_over_a_failure_and_keeps_identical_duplicates(tmp_path):
    samples = list(load_dataset(f"native:{make_native(tmp_path / 'data', n=2)}"))
    _generate(tmp_path / "failed", samples, Plus(fail=True))
    _generate(tmp_path / "ok", samples, Plus())
    _generate(tmp_path / "ok-again", samples, Plus())
    rep = merge([tmp_path / "failed", tmp_path / "ok", tmp_path / "ok-again"], tmp_path / "out")
    assert rep.predictions == 2
    with RunStore.open_existing(tmp_path / "out") as st:
        assert {p.status for p in st.predictions()} == {"ok"}
        assert all((st.run_dir / p.path).is_file() for p in st.predictions())
