"""The diffusers adapters on a tiny randomly initialised InstructPix2Pix (no download)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")
transformers = pytest.importorskip("transformers")

from tests.runs.conftest import make_native  # noqa: E402

from medibench.cli import app  # noqa: E402
from medibench.models._spec import ModelOptionError, parse_model_spec  # noqa: E402
from medibench.models.diffusers import (  # noqa: E402
    InstructPix2PixModel,
    WeightsNotFoundError,
)
from medibench.runs import seed_for  # noqa: E402

torch.set_num_threads(1)

WORDS = "remove the lesion add a tumor enhance contrast denoise image segment liver in red".split()


def word_level_clip_tokenizer():
    """A CLIP BPE tokenizer whose merges spell out whole words (characters for anything else)."""
    vocab: dict[str, int] = {}
    for c in map(chr, range(33, 127)):
        vocab.setdefault(c, len(vocab))
        vocab.setdefault(c + "</w>", len(vocab))
    merges: list[tuple[str, str]] = []
    for word in WORDS:
        pieces = [*word[:-1], word[-1] + "</w>"]
        while len(pieces) > 1:
            pair = (pieces[0], pieces[1])
            if pair not in merges:
                merges.append(pair)
            pieces = [pieces[0] + pieces[1], *pieces[2:]]
            vocab.setdefault(pieces[0], len(vocab))
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    return transformers.CLIPTokenizer(vocab=vocab, merges=merges, model_max_length=16)


def build_tiny_ip2p(folder):
    """Save a randomly initialised InstructPix2Pix pipeline (about 1 MB) to ``folder``."""
    torch.manual_seed(0)
    unet = diffusers.UNet2DConditionModel(
        block_out_channels=(16, 32),
        layers_per_block=1,
        sample_size=8,
        in_channels=8,  # noisy latents + image latents
        out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=16,
        attention_head_dim=4,
        norm_num_groups=8,
    )
    vae = diffusers.AutoencoderKL(
        block_out_channels=(8, 8, 8, 8),  # four blocks: the 8x downsampling of the real VAE
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        latent_channels=4,
        norm_num_groups=4,
        layers_per_block=1,
    )
    tokenizer = word_level_clip_tokenizer()
    eos = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    text_encoder = transformers.CLIPTextModel(
        transformers.CLIPTextConfig(
            vocab_size=len(tokenizer),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            max_position_embeddings=16,
            projection_dim=16,
            bos_token_id=tokenizer.convert_tokens_to_ids("<|startoftext|>"),
            eos_token_id=eos,
            pad_token_id=eos,
        )
    )
    scheduler = diffusers.EulerAncestralDiscreteScheduler(
        beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear"
    )
    pipe = diffusers.StableDiffusionInstructPix2PixPipeline(
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        unet=unet,
        scheduler=scheduler,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipe.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def model(tiny_ip2p):
    return parse_model_spec(f"ip2p:{tiny_ip2p}", ["steps=4", "resolution=null"]).load()


def _image(seed=0, shape=(64, 64, 3)):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def test_tiny_ip2p_loads_like_real_weights_and_edits_64x64(model):
    # (How fast generation is, is bench/gpu_generate.py's to measure, not a wall-time bound here.)
    assert isinstance(model, InstructPix2PixModel) and model.name == "ip2p"
    assert model.device == "cpu" and model.dtype == torch.float32
    out = model.edit(_image(), "remove the lesion", seed=1)
    assert out.shape == (64, 64, 3) and out.dtype == np.uint8


def test_same_seed_same_bytes_other_seed_other_bytes(model):
    image = _image()
    a = model.edit(image, "remove the lesion", seed=7)
    b = model.edit(image, "remove the lesion", seed=7)
    c = model.edit(image, "remove the lesion", seed=8)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_a_batch_gives_each_item_its_own_generator(model):
    images = [_image(1), _image(2)]
    batch = model.edit_batch(images, ["remove the lesion", "add a tumor"], seeds=[3, 4])
    singles = [
        model.edit(images[0], "remove the lesion", seed=3),
        model.edit(images[1], "add a tumor", seed=4),
    ]
    for b, s in zip(batch, singles, strict=True):  # batched maths differ by ~1e-6 before rounding
        assert np.abs(b.astype(int) - s.astype(int)).max() <= 1
    with pytest.raises(ValueError, match="one size"):
        model.edit_batch([_image(1), _image(2, (32, 32, 3))], ["a", "b"], seeds=[1, 2])


def test_resolution_sets_the_working_size_and_outputs_keep_it(tiny_ip2p):
    m = InstructPix2PixModel(str(tiny_ip2p), steps=2, resolution=64)
    out = m.edit(_image(0, (48, 80, 3)), "denoise the image", seed=0)
    assert out.shape == (32, 64, 3)  # 80 -> 64, 48 -> 38.4 -> rounded down to a multiple of 8
    native = InstructPix2PixModel(str(tiny_ip2p), steps=2, resolution=None)
    assert native.edit(_image(0, (44, 60, 3)), "denoise", seed=0).shape == (40, 56, 3)


@pytest.mark.parametrize(
    "remove, named",
    [
        ("model_index.json", "model_index.json"),
        ("unet/config.json", "unet/config.json"),
        ("vae", "component folder"),
        ("text_encoder/model.safetensors", "text_encoder"),
        ("scheduler/scheduler_config.json", "scheduler/scheduler_config.json"),
    ],
)
def test_incomplete_weights_folder_names_the_missing_file(tiny_ip2p, tmp_path, remove, named):
    broken = shutil.copytree(tiny_ip2p, tmp_path / "broken")
    target = broken / remove
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    with pytest.raises(WeightsNotFoundError, match="incomplete weights folder") as info:
        InstructPix2PixModel(str(broken))
    assert named in str(info.value) and str(broken) in str(info.value)


def test_missing_folder_and_uncached_repo_offline_say_where_weights_go(tmp_path, monkeypatch):
    with pytest.raises(WeightsNotFoundError, match="does not exist"):
        InstructPix2PixModel(str(tmp_path / "nowhere"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(WeightsNotFoundError, match="not in the Hugging Face cache") as info:
        InstructPix2PixModel("medibench-tests/no-such-model")
    assert "hf download medibench-tests/no-such-model" in str(info.value)
    assert "ip2p:/path/to/weights" in str(info.value)


def test_unknown_option_lists_the_valid_ones(tiny_ip2p):
    with pytest.raises(ModelOptionError, match="no option 'guidance'") as info:
        parse_model_spec(f"ip2p:{tiny_ip2p}", ["guidance=3"]).load()
    assert "guidance_scale=7.5" in str(info.value) and "image_guidance_scale" in str(info.value)


def test_missing_torch_extra_says_what_to_install(tiny_ip2p, monkeypatch):
    monkeypatch.setitem(sys.modules, "diffusers", None)  # import diffusers -> ImportError
    with pytest.raises(ImportError, match=r"pip install 'medibench\[torch\]'"):
        InstructPix2PixModel(str(tiny_ip2p))


def test_yaml_spec_file_with_path_relative_to_it(tiny_ip2p, tmp_path):
    spec_file = tmp_path / "ip2p.yaml"
    rel = shutil.copytree(tiny_ip2p, tmp_path / "w")
    spec_file.write_text(
        f"model: ip2p\npath: {rel.name}\nname: tiny\noptions: {{steps: 2, resolution: null}}\n"
    )
    spec = parse_model_spec(str(spec_file))
    assert spec.options["path"] == str(tmp_path / "w") and spec.name == "tiny"
    m = spec.load()
    assert m.name == "tiny" and m.steps == 2 and m.resolution is None


def test_cli_run_with_samples_records_seeds_and_reruns_reproduce_bytes(tiny_ip2p, tmp_path):
    data = make_native(tmp_path / "data", n=2)
    runner = CliRunner()

    def run(dest, seed=0):
        args = ["run", "--dataset", f"native:{data}", "--model", f"ip2p:{tiny_ip2p}"]
        args += ["--k", "3", "--out", str(dest), "--seed", str(seed), "--no-progress"]
        args += ["--model-option", "steps=3", "--model-option", "resolution=null"]
        res = runner.invoke(app, args)
        assert res.exit_code == 0, res.output
        con = sqlite3.connect(dest / "run.sqlite")
        rows = con.execute("SELECT sample_id, k, seed, path, status FROM predictions").fetchall()
        config = json.loads(con.execute("SELECT value FROM meta WHERE key='config'").fetchone()[0])
        runtime = con.execute("SELECT value FROM meta WHERE key='model_runtime'").fetchone()
        con.close()
        # what dtype="auto" and device="auto" resolved to on this machine is in the run
        assert json.loads(runtime[0]) == {
            "ip2p": {"device": "cpu", "dtype": "float32", "batch_size": 1, "cpu_offload": False}
        }
        assert "ip2p: device cpu, dtype float32" in res.output
        return sorted(rows), config

    rows, config = run(tmp_path / "a")
    assert len(rows) == 6 and {r[4] for r in rows} == {"ok"}
    assert all(seed == seed_for(0, sid, k) for sid, k, seed, _, _ in rows)
    assert config["k"] == 3 and config["model_specs"][0]["model"] == "ip2p"
    again, _ = run(tmp_path / "b")
    other, _ = run(tmp_path / "c", seed=1)
    read = lambda root, rows: [(root / r[3]).read_bytes() for r in rows]  # noqa: E731
    assert read(tmp_path / "a", rows) == read(tmp_path / "b", again)
    assert read(tmp_path / "a", rows) != read(tmp_path / "c", other)
    # the k draws of one sample differ (their seeds differ)
    first = read(tmp_path / "a", rows)[:3]
    assert len(set(first)) == 3


class _FakeCuda:
    def __init__(self, bf16: bool) -> None:
        self.bf16 = bf16

    def is_bf16_supported(self) -> bool:
        return self.bf16


@pytest.mark.parametrize(
    ("device", "bf16", "cuda_dtype", "asked", "expected"),
    [
        ("cuda", True, "float16", "auto", torch.bfloat16),  # ip2p on an Ampere+ GPU: bf16
        ("cuda", False, "float16", "auto", torch.float16),  # on an older GPU: the official fp16
        ("cuda:1", True, "bfloat16", "auto", torch.bfloat16),
        ("cpu", True, "float16", "auto", torch.float32),
        ("mps", True, "bfloat16", "auto", torch.float32),
        ("cuda", True, "float16", "fp16", torch.float16),  # asked for: kept
    ],
)
def test_dtype_auto_is_bfloat16_on_gpus_that_support_it(device, bf16, cuda_dtype, asked, expected):
    from types import SimpleNamespace

    from medibench.models._pipeline import _pick_dtype

    dtypes = {n: getattr(torch, n) for n in ("float32", "float16", "bfloat16")}
    fake = SimpleNamespace(cuda=_FakeCuda(bf16), **dtypes)
    assert _pick_dtype(fake, asked, device, cuda_dtype) == expected


def test_runtime_says_what_auto_resolved_to(model):
    assert model.runtime() == {
        "device": "cpu", "dtype": "float32", "batch_size": 1, "cpu_offload": False,
    }  # fmt: skip
