"""Running models (README's "Run models", docs/models.md): tiny random-weight pipelines of the
named families at the documented weight paths, the YAML specs the docs show written from the
docs' own text, a private Ray instance, and 1 sample, 2 denoising steps per command."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.docs._blocks import ROOT
from tests.docs.standins import ALL, weights

_FEW = "1 sample instead of all (the same code, less time)"
_SHARD = "the first 8 samples instead of all: 2 per shard of 4 (the same code, less time)"
_FAST = "1 sample, 2 denoising steps: a tiny random-weight model makes noise at any step count"
_SMALL = f"{_FAST}; 64 x 64 px instead of FLUX's 1 Mpx (max_area)"

_MINI = "the 66-sample frozen suite (made once, as for line 1) instead of making the 396-sample one"

SUBSTITUTIONS = {
    **{
        ("README.md", f"--dataset suite --model {model}"): (
            f"--dataset suite:medibench-suite@1-mini --model {model}",
            _MINI,
        )
        for model in ("openai-image", "configs/flux.yaml", "classical --shard", "gemini-image")
    },
    ("README.md", "--k 3 --out runs/miedb-ip2p"): (
        "--k 3 --limit 1 --model-option steps=2 --out runs/miedb-ip2p",
        _FAST,
    ),
    ("README.md", "--workers 16 --out runs/gpt"): ("--workers 16 --limit 1 --out runs/gpt", _FEW),
    ("README.md", "--ray-address auto"): (
        "--ray-address local",
        "`auto` joins the cluster `ray start --head` started; `local` starts a private Ray for "
        "the one command and stops it at exit (measured: 86 s against 124 s with start and stop, "
        "and `ray stop` would stop every Ray on the machine, other tests' too)",
    ),
    ("README.md", "--out runs/flux"): (
        "--limit 1 --model-option steps=2 --model-option max_area=4096 --out runs/flux",
        _SMALL,
    ),
    ("README.md", "--shard 0/4 --out"): ("--shard 0/4 --limit 8 --out", _SHARD),
    ("README.md", "--shard 1/4 --out"): ("--shard 1/4 --limit 8 --out", _SHARD),
    ("README.md", "--icl-k 2 --out runs/icl"): ("--icl-k 2 --limit 1 --out runs/icl", _FEW),
    ("docs/models.md", "--k 3 --out runs/ip2p"): (
        "--k 3 --limit 1 --model-option steps=2 --out runs/ip2p",
        _FAST,
    ),
    ("docs/models.md", "--out runs/kontext"): (
        "--limit 1 --model-option steps=2 --model-option max_area=4096 --out runs/kontext",
        _SMALL,
    ),
    ("docs/models.md", "--workers 32 --out runs/gpt"): (
        "--workers 32 --limit 1 --out runs/gpt",
        _FEW,
    ),
    ("docs/models.md", "--icl-k 2 --out runs/gpt-icl"): (
        "--icl-k 2 --limit 1 --out runs/gpt-icl",
        _FEW,
    ),
    ("docs/models.md", "--icl-select same-task --out runs/gemini-icl"): (
        "--icl-select same-task --limit 1 --out runs/gemini-icl",
        _FEW,
    ),
}

#: The weights each file's blocks name (under /weights/), built by :func:`_builder`.
_WEIGHTS = {
    "README.md": ("instruct-pix2pix", "FLUX.1-Kontext-dev"),
    "docs/models.md": ("instruct-pix2pix", "FLUX.1-Kontext-dev"),
}
#: The spec files a file's shell blocks use, written from its ```yaml block of that name
#: (configs/ip2p.yaml in docs/models.md is shown only).
_SPECS = {"README.md": ("flux.yaml",), "docs/models.md": ("kontext.yaml",)}


@contextmanager
def standins(
    file: str, work: Path, env: dict[str, str], cache: Path, blocks: frozenset[int] = ALL
) -> Iterator[None]:
    if file == "README.md" and 4 not in blocks:  # the README's "Run models" block
        yield
        return
    for name in _WEIGHTS.get(file, ()):
        weights.tiny(env, name, _builder(name))
    specs = yaml_specs(file)
    for name in _SPECS.get(file, ()):  # the spec files the doc shows, written as it shows them
        assert name in specs, f"{file} shows no ```yaml block opening with '# configs/{name}'"
        path, text = work / "configs" / name, specs[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("/weights/", env["DOCS_WEIGHTS"] + "/"), encoding="utf-8")
    yield


def yaml_specs(file: str) -> dict[str, str]:
    """The ```yaml blocks of ``file`` that open with ``# configs/NAME``: ``{NAME: text}``."""
    text = (ROOT / file).read_text(encoding="utf-8")
    blocks = re.findall(r"^```yaml\n# configs/([\w.-]+\.yaml)[^\n]*\n(.*?)^```", text, re.S | re.M)
    return dict(blocks)


def _builder(name: str):
    # imported here: torch and diffusers load only when a file needs the weights
    if name == "instruct-pix2pix":
        from tests.models.test_diffusers import build_tiny_ip2p

        return build_tiny_ip2p
    from tests.conformance._diffusers_models import FAMILIES

    return FAMILIES["flux-kontext"]
