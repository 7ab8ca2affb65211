"""``medibench analyze attention`` on every editing family: maps on the latent the pipeline
really runs at (InstructPix2Pix, SDXL InstructPix2Pix), a clear error for families without
cross-attention (cells: ``_editing_cells``)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("transformers")

from tests.conformance._diffusers_models import weights  # noqa: E402
from tests.conformance._editing_cells import cells  # noqa: E402
from tests.conformance._editing_data import four_by_three, invoke, outputs  # noqa: E402

torch.set_num_threads(1)

#: options of the supported cells: ip2p at its input's 4:3 size, SDXL ip2p at its own size
OPTIONS = {"ip2p": ["steps=2", "resolution=64"], "sdxl-ip2p": ["steps=2"]}


def _attention_rows(run):
    from medibench.analysis._store import read_attention
    from medibench.runs import RunStore

    with RunStore(run) as store:
        return [dict(r) for r in read_attention(store.connection)]


def _invoke(command, cell, folder, data, out, options):
    args = [*command, "--dataset", f"native:{data}", "--out", out,
            "--model", cell.spec.replace("PATH", str(folder))]  # fmt: skip
    for option in options:
        args += ["--model-option", option]
    return invoke(*args)


def _halvings(h, w):
    sizes = [(h, w)]
    while sizes[-1] != (1, 1):
        sizes.append((math.ceil(sizes[-1][0] / 2), math.ceil(sizes[-1][1] / 2)))
    return sizes


@pytest.mark.parametrize("cell", cells("attention", supported=True), ids=lambda c: c.id)
def test_attention_maps_have_the_latent_shape_of_the_working_resolution(
    cell, tmp_path
):
    """The run's output (the pipeline's working size) / 8 is the latent; every layer's map is
    that latent or one of its halvings, the first cross-attention block's one halving; the
    captured edit is the run's output, pixel for pixel."""
    folder, data = weights(cell.family), four_by_three(tmp_path / "data")
    options = OPTIONS[cell.family]
    res = _invoke(["run"], cell, folder, data, tmp_path / "run", options)
    assert res.exit_code == 0, res.output
    res = _invoke(["analyze", "attention"], cell, folder, data, tmp_path / "run", options)
    assert res.exit_code == 0, res.output
    (row,) = _attention_rows(tmp_path / "run")
    assert row["status"] == "ok", row["error"]
    assert row["matches_prediction"] == 1
    (edited,) = outputs(tmp_path / "run").values()
    latent = (edited.shape[0] // 8, edited.shape[1] // 8)
    grids = {tuple(v) for v in row["details"]["layers"].values()}
    assert grids <= set(_halvings(*latent)) and _halvings(*latent)[1] in grids
    assert row["details"]["size"] == [48, 64]  # the heat map at the mask's size


def test_sdxl_instruct_pix2pix_attention_uses_the_pipelines_working_latent():
    """The 48x64 input runs at SDXL's 64x64 sample size: an 8x8 latent (the input's size
    would say 6x8, whose halvings fit none of the maps)."""
    from medibench.analysis.attention import record_cross_attention
    from medibench.models.diffusers import DiffusionPipelineModel

    model = DiffusionPipelineModel(str(weights("sdxl-ip2p")), steps=2)
    image = torch.zeros(48, 64, 3, dtype=torch.uint8).numpy()
    record = record_cross_attention(model, image, "remove the lesion", seed=0, tokens=[2])
    assert record.edited.shape == (64, 64, 3)
    assert {m.shape[1:3] for m in record.maps.values()} == {(4, 4)}
    assert record.steps == 2 and record.n_chunks == 3 and record.chunk == 0


@pytest.mark.parametrize("cell", cells("attention", supported=False), ids=lambda c: c.id)
def test_a_family_without_cross_attention_fails_the_stage_with_a_clear_error(
    cell, tmp_path
):
    folder, data = weights(cell.family), four_by_three(tmp_path / "data")
    res = _invoke(["analyze", "attention"], cell, folder, data, tmp_path / "run", ["steps=1"])
    assert res.exit_code == 2, res.output
    assert cell.error in " ".join(res.output.split())
    assert "Traceback" not in res.output
    assert not (tmp_path / "run" / "run.sqlite").exists() or not _attention_rows(tmp_path / "run")
