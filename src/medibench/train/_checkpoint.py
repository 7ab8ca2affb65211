"""Checkpoints: ``DIR/checkpoint-N/``, written whole or not at all, each with a model card.

A checkpoint holds the weights (the pipeline in the diffusers layout for ``full``, the
``pytorch_lora_weights.safetensors`` of ``load_lora_weights`` for ``lora``), ``README.md`` (the
model card) and ``training_state.pt`` (step, samples seen, the optimizer's and the learning-rate
schedule's states and, for LoRA, the adapter's float32 weights; with EMA the folder's weights
are the EMA ones and the state holds the raw learning weights and the ``EMAModel``'s state):
what resuming needs to continue as if never stopped. It is
written into ``checkpoint-N.tmp`` and renamed, so a kill leaves no half checkpoint behind.
"""

from __future__ import annotations

import errno
import hashlib
import re
import shutil
from pathlib import Path
from typing import Any

__all__ = [
    "CheckpointDamaged",
    "complete_checkpoints",
    "latest_checkpoint",
    "model_card",
    "read_checkpoint",
    "save_checkpoint",
    "weights_hash",
]

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
    try:
        family.save(tmp, denoiser)
        if family.config.method == "lora" and "trainable" not in state:
            state = {**state, "trainable": family.trainable_state()}
        torch.save(state, tmp / STATE_FILE)
        (tmp / "README.md").write_text(card, encoding="utf-8")
    except (OSError, RuntimeError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _write_failed(out, tmp, exc) from None
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    return final


def _write_failed(out: Path, tmp: Path, exc: BaseException) -> Exception:
    """The one-line error of a checkpoint that could not be written (its half removed): a
    :class:`~medibench.io.DiskFullError` for a full disk (an ``OSError`` ENOSPC or EDQUOT, or
    torch's "unexpected pos" of a write that came up short), naming the last whole checkpoint."""
    from medibench.io._write import DiskFullError
    from medibench.train._config import TrainError

    last = latest_checkpoint(out)
    kept = f"{last[1]} is the last complete checkpoint" if last else "no checkpoint written yet"
    full = getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT)
    if full or "unexpected pos" in str(exc):
        return DiskFullError(errno.ENOSPC, f"No space left on device; {kept}", str(tmp))
    why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return TrainError(f"could not write the checkpoint {tmp} ({why}); {kept}")


def load_state(folder: Path) -> dict[str, Any]:
    """The training state a checkpoint holds (``training_state.pt``)."""
    import torch

    return torch.load(folder / STATE_FILE, map_location="cpu", weights_only=False)


class CheckpointDamaged(ValueError):
    """A checkpoint folder that does not read back whole; the message names the file."""


def complete_checkpoints(out: Path) -> list[tuple[int, Path]]:
    """``(step, folder)`` of every renamed checkpoint with its training state, by step."""
    found = []
    for p in out.glob("checkpoint-*"):
        m = _NAME.match(p.name)
        if m and p.is_dir() and (p / STATE_FILE).is_file():
            found.append((int(m.group(1)), p))
    return sorted(found)


def latest_checkpoint(out: Path) -> tuple[int, Path] | None:
    """The complete checkpoint with the highest step, or ``None``."""
    found = complete_checkpoints(out)
    return found[-1] if found else None


def read_checkpoint(folder: Path, family: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The training state and the trainable weights of a checkpoint, every file of it read
    before anything is loaded into the model; :class:`CheckpointDamaged` names a file that
    does not read back (cut short, empty, not what it should hold)."""
    import pickle

    where = folder / STATE_FILE
    try:
        state = load_state(folder)
        if not isinstance(state, dict) or not {"optimizer", "samples_seen"} <= state.keys():
            raise ValueError("not a training state")
        check_weights_files(folder)
        if "trainable" in state:  # LoRA, and any training with EMA (its folder: the EMA)
            weights = state["trainable"]
        else:
            where = folder / family.denoiser_name
            weights = _full_weights(folder, family)
    except DamagedFile as exc:
        raise CheckpointDamaged(str(exc)) from None
    except (OSError, EOFError, RuntimeError, ValueError, KeyError,
            pickle.UnpicklingError) as exc:  # fmt: skip
        raise CheckpointDamaged(f"{where} is damaged ({_first_line(exc)})") from None
    return state, weights


class DamagedFile(ValueError):
    """A weights file that does not read back; the message names it."""


def check_weights_files(folder: Path | str) -> None:
    """Open every ``*.safetensors`` file under ``folder`` (their headers against their sizes:
    a file cut short fails); :class:`DamagedFile` names the first that does not open."""
    from safetensors import SafetensorError, safe_open

    for path in sorted(Path(folder).rglob("*.safetensors")):
        try:
            with safe_open(str(path), framework="pt") as fh:
                fh.keys()
        except (SafetensorError, OSError) as exc:
            raise DamagedFile(f"{path} is damaged ({_first_line(exc)})") from None


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _full_weights(folder: Path, family: Any) -> dict[str, Any]:
    """A full checkpoint's denoiser weights, those the family trains."""
    cls = type(family.denoiser)
    saved = cls.from_pretrained(str(folder / family.denoiser_name))
    trained = dict(family.denoiser.named_parameters())
    return {k: v for k, v in saved.state_dict().items() if k in trained}


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
