"""Output folders are injective in the model name; one name, one spec per run."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from medibench.cli import app
from medibench.datasets import load_dataset
from medibench.io import write_image
from medibench.models._spec import parse_model_spec
from medibench.runs import RunStore, RunStoreError, generate, output_folder
from medibench.runs._models import planned_name, resolved_spec
from medibench.samples import Prediction
from tests.runs.conftest import make_native

runner = CliRunner()


class Named:
    """Adds ``delta`` to every pixel; its name is whatever it is given."""

    def __init__(self, name, delta):
        self.name, self.delta = name, delta

    def edit(self, image, instruction, *, seed):
        return np.clip(image.astype(int) + self.delta, 0, 255).astype(np.uint8)


def test_folders_are_a_readable_slug_plus_a_hash_of_the_exact_name():
    assert output_folder("m 1") == "m_1-" + _sha("m 1")
    assert output_folder("m 1") != output_folder("m_1") != output_folder("m/1")
    assert output_folder("../../x").startswith("_.._x-")  # no escape, not hidden
    assert output_folder("..") == "model-" + _sha("..")
    names = ["a b", "a_b", "a/b", "a:b", "A_B", "a_b-" + _sha("a b")]
    assert len({output_folder(n) for n in names}) == len(names)


def _sha(name):
    import hashlib

    return hashlib.sha256(name.encode()).hexdigest()[:8]


def test_two_names_that_used_to_share_a_folder_keep_their_own_outputs(tmp_path):
    samples = list(load_dataset(f"native:{make_native(tmp_path / 'data', n=2)}"))
    with RunStore(tmp_path / "run") as st:
        generate(st, samples, Named("m 1", 10), model_name="m 1", progress=False)
        generate(st, samples, Named("m_1", 20), model_name="m_1", progress=False)
        paths = {(p.model, p.sample_id): st.run_dir / p.path for p in st.predictions()}
    assert len(set(paths.values())) == 4
    for (model, sid), path in paths.items():
        assert path.parent.name == output_folder(model)
        inp = next(s for s in samples if s.sample_id == sid).input
        from medibench.io import read_image

        diff = read_image(path, mode="rgb").astype(int) - read_image(inp, mode="rgb")
        assert int(np.median(diff)) == (10 if model == "m 1" else 20)


def test_a_folder_holding_another_models_files_is_refused(tmp_path):
    # A run written by an older naming, or a hash collision: never mix two models' files.
    samples = list(load_dataset(f"native:{make_native(tmp_path / 'data', n=1)}"))
    with RunStore(tmp_path / "run") as st:
        rel = f"outputs/{output_folder('b')}/s000_0.png"
        write_image(st.run_dir / rel, np.zeros((4, 4), np.uint8))
        st.put_prediction(Prediction(sample_id="s000", model="a", k=0, path=rel))
        with pytest.raises(RunStoreError, match="already holds the outputs of model 'a'"):
            generate(st, samples, Named("b", 1), model_name="b", progress=False)
        assert [p.model for p in st.predictions()] == ["a"]


def test_planned_names_and_resolved_specs():
    assert planned_name(parse_model_spec("identity")) == "identity"
    assert planned_name(parse_model_spec("classical", ["name=mine"])) == "mine"
    assert planned_name(parse_model_spec("openai-image:gpt-image-1")) == "gpt-image-1"
    assert planned_name(parse_model_spec("ip2p:/w/a")) == "ip2p"
    spec = resolved_spec(parse_model_spec("identity"))
    assert spec == {"model": "identity", "options": {"name": "identity"}}
    a = resolved_spec(parse_model_spec("openai-image:gpt-image-1"))
    b = resolved_spec(parse_model_spec("openai-image:gpt-image-1", ["quality=high"]))
    assert a["options"]["quality"] is None and b["options"]["quality"] == "high"
    assert a["options"]["base_url"] == "https://api.openai.com/v1"  # defaults are recorded


def _run(data, out, *models, options=()):
    argv = ["run", "--dataset", f"native:{data}", "--out", str(out), "--no-progress"]
    for m in models:
        argv += ["--model", m]
    for o in options:
        argv += ["--model-option", o]
    return runner.invoke(app, argv)


def test_two_model_entries_with_one_name_are_refused_before_anything_runs(tmp_path):
    data = make_native(tmp_path / "data", n=2)
    res = _run(data, tmp_path / "run", "identity", "classical", options=["name=same"])
    assert res.exit_code == 2
    msg = " ".join(res.output.split())
    assert "--model 'identity' and --model 'classical' resolve to the model name 'same'" in msg
    assert not (tmp_path / "run" / "outputs").exists()
    assert not (tmp_path / "run" / "run.sqlite").exists()

    res = _run(data, tmp_path / "run2", "identity", "identity")
    assert res.exit_code == 2 and "resolve to the model name 'identity'" in res.output


def test_a_different_spec_under_a_recorded_name_is_refused_showing_both(tmp_path):
    data = make_native(tmp_path / "data", n=2)
    run = tmp_path / "run"
    assert _run(data, run, "classical").exit_code == 0
    with RunStore.open_existing(run) as st:
        recorded = st.get_meta("model_specs_by_name")["classical"]
        before = {(p.sample_id, p.path) for p in st.predictions()}
    assert recorded["model"] == "classical" and recorded["options"]["name"] == "classical"

    res = _run(data, run, "classical", options=["alpha=0.3"])
    assert res.exit_code == 2, res.output
    msg = " ".join(res.output.split())
    old, new = (
        json.dumps(recorded, sort_keys=True),
        json.dumps({**recorded, "options": {**recorded["options"], "alpha": 0.3}}, sort_keys=True),
    )
    assert f"holds model 'classical' made with spec {old}, not {new}" in msg
    with RunStore.open_existing(run) as st:
        assert {(p.sample_id, p.path) for p in st.predictions()} == before  # nothing reused

    again = _run(data, run, "classical")  # the same spec resumes
    assert again.exit_code == 0 and "generate classical: 0 done, 2 already done" in again.output
