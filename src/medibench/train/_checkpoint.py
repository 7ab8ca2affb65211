"""Checkpoints: ``DIR/checkpoint-N/``, written whole or not at all, each with a model card.

A checkpoint holds the weights (the pipeline in the diffusers layout for ``full``, the
``pytorch_lora_weights.safetensors`` of ``load_lora_weights`` for ``lora``), ``README.md`` (the
model card) and ``training_state.pt`` (step, samples seen, the optimizer's state and, for LoRA,
the adapter's float32 weights): what resuming needs to continue as if never stopped. It is
written into ``checkpoint-N.tmp`` and renamed, so a kill leaves no half checkpoint behind.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path
from typing import Any

__all__ = ["latest_checkpoint", "model_card", "save_checkpoint", "weights_hash"]

STATE_FILE = "training_state.pt"
_NAME = re.compile(r"^checkpoint-(\d+)$")


def save_checkpoint(
    out: Path, step: int, family: Any, denoiser: Any, state: dict[str, Any], card: str
) -> Path:
    """Write ``out/checkpoint-{step}``; ``state`` is the training state (optimizer, counters)."""
    import torch

    final = out / f"checkpoint-{step}"
    tmp = out / f"checkpoint-{step}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    family.save(tmp, denoiser)
    if family.config.method == "lora":
        state = {**state, "trainable": family.trainable_state()}
    torch.save(state, tmp / STATE_FILE)
    (tmp / "README.md").write_text(card, encoding="utf-8")
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    return final


def latest_checkpoint(out: Path) -> tuple[int, Path] | None:
    """The complete checkpoint with the highest step, or ``None``."""
    found = []
    for p in out.glob("checkpoint-*"):
        m = _NAME.match(p.name)
        if m and p.is_dir() and (p / STATE_FILE).is_file():
            found.append((int(m.group(1)), p))
    return max(found) if found else None


def load_state(folder: Path) -> dict[str, Any]:
    import torch

    return torch.load(folder / STATE_FILE, map_location="cpu", weights_only=False)


def load_full_weights(folder: Path, family: Any) -> None:
    """Copy a full checkpoint's denoiser weights into the family's denoiser."""
    cls = type(family.denoiser)
    saved = cls.from_pretrained(str(folder / family.denoiser_name))
    family.load_trainable_state(
        {
            k: v
            for k, v in saved.state_dict().items()
            if k in dict(family.denoiser.named_parameters())
        }
    )


def weights_hash(folder: Path | str) -> str:
    """sha256 over a weights folder's files (relative path and content, in path order); a
    repo id that is no folder hashes as its name."""
    root = Path(folder)
    if not root.is_dir():
        return "sha256:" + hashlib.sha256(str(folder).encode()).hexdigest()
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def model_card(
    *,
    step: int,
    config: dict[str, Any],
    objective: dict[str, Any],
    base_hash: str,
    dataset_hash: str,
    samples: int,
    version: str,
) -> str:
    """The checkpoint's ``README.md``: YAML front matter the Hub reads, then what made it."""
    family, _, base = config["model"].partition(":")
    lora = config["method"] == "lora"
    usage = (
        f"--model {family}:{base} --model-option lora=checkpoint-{step}"
        if lora
        else f"--model ip2p:checkpoint-{step}"
    )
    rows = "\n".join(f"| {k} | {_cell(v)} |" for k, v in {**config, **objective}.items())
    return f"""---
base_model: {base}
library_name: diffusers
tags: [medibench, medical-image-editing, {"lora" if lora else "full-fine-tune"}, {family}]
---

# {family} {"LoRA" if lora else "fine-tune"}, step {step}

Trained with `medibench train` (medibench {version}) on {samples} samples.

- base model: `{base}` ({base_hash})
- dataset: `{config["dataset"]}` (sha256:{dataset_hash}, over the training samples' records)
- seed: {config["seed"]}
- use: `medibench run ... {usage}`

| setting | value |
|---|---|
{rows}
"""


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|")
