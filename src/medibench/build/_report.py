"""The quality report of a build folder: ``report/quality.json``, ``quality.md`` and plots.

It audits the files as written: for every perception sample the mask is recovered from the
target overlay (:func:`~medibench.metrics.overlay_to_mask`) and compared with the stored mask
(Dice), with means for grayscale and RGB sources (MieDB-100k reports 0.999 and 0.970). It also
gives the filter counts, near-duplicates removed, the acceptance rates of modification per
modality (from ``attempts.jsonl``), the VLM verifier's verdicts with every rejection's reason
(``verify:``), how many instructions were rephrased (``rephrase:``), counts per modality, task,
perspective and split, and the leakage check (patients found in more than one split; must be
none).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from medibench.io import atomic_write_text, read_image, read_mask
from medibench.metrics import dice, overlay_to_mask

__all__ = ["leaking_patients", "quality", "vlm_verdicts", "write_report"]

REPORT = "report"


def quality(folder: str | Path, *, samples: list[Any] | None = None) -> dict[str, Any]:
    """The report's numbers for the build in ``folder`` (see the module docstring);
    ``samples``: its dataset as already read (else ``samples.jsonl`` is read)."""
    from medibench.datasets import read_native

    root = Path(folder)
    if samples is None:
        samples = list(read_native(root))
    dice_rows: list[dict[str, Any]] = []
    for s in samples:
        if s.perspective.value != "perception" or s.mask is None or s.target is None:
            continue
        image = read_image(s.input, mode="rgb")
        recovered = overlay_to_mask(read_image(s.target, mode="rgb"), image, list(s.overlay_color))
        dice_rows.append({"sample_id": s.sample_id, "grayscale": bool(s.metadata.get("grayscale")),
                          "dice": dice(recovered, read_mask(s.mask))})  # fmt: skip
    filters: Counter = Counter()
    for path in sorted((root / ".build" / "items").glob("*.json")):
        filters.update(json.loads(path.read_text(encoding="utf-8"))["filters"])
    post_path = root / ".build" / "post.json"
    post = json.loads(post_path.read_text(encoding="utf-8")) if post_path.is_file() else {}
    filters["near_duplicate"] = len(post.get("near_duplicate", []))
    return {
        "folder": str(root),
        "samples": len(samples),
        "counts": {
            key: dict(Counter(_field(s, key) for s in samples))
            for key in ("perspective", "task", "modality", "split")
        },
        "filters": dict(filters),
        "overlay_dice": {
            "per_sample": dice_rows,
            "grayscale_mean": _mean([r["dice"] for r in dice_rows if r["grayscale"]]),
            "rgb_mean": _mean([r["dice"] for r in dice_rows if not r["grayscale"]]),
            "n_grayscale": sum(r["grayscale"] for r in dice_rows),
            "n_rgb": sum(not r["grayscale"] for r in dice_rows),
        },
        "acceptance": _acceptance(root / "attempts.jsonl"),
        "vlm_verifier": vlm_verdicts(root / "attempts.jsonl"),
        "rephrased": sum("rephrase" in s.metadata for s in samples),
        "leaking_patients": leaking_patients(samples),
    }


def vlm_verdicts(path: Path) -> dict[str, Any] | None:
    """The VLM verifier's verdicts (``verify:``) in an attempt log: fills asked about,
    accepted, rejected, and every rejection with the VLM's reason and full answer; None when
    no attempt was shown to a VLM."""
    asked = [a for a in _attempt_log(path) if a.get("vlm")]
    if not asked:
        return None
    rejected = [a for a in asked if not a["accepted"]]
    return {
        "models": sorted({a["vlm"]["model"] for a in asked}),
        "asked": len(asked),
        "accepted": len(asked) - len(rejected),
        "rejected": len(rejected),
        "rejections": [
            {
                "item": a["item"],
                "slice": a["slice"],
                "lesion": a["lesion"],
                "attempt": a["attempt"],
                "reason": a["vlm"]["reason"],
                "answer": a["vlm"]["answer"],
            }
            for a in rejected
        ],  # fmt: skip
    }


def leaking_patients(samples: list[Any]) -> dict[str, list[str]]:
    """``{patient: [splits]}`` for every patient whose samples are in more than one split."""
    splits: dict[str, set[str]] = defaultdict(set)
    for s in samples:
        patient = s.metadata.get("patient")
        if patient is not None:
            splits[str(patient)].add(s.split)
    return {p: sorted(v) for p, v in splits.items() if len(v) > 1}


def write_report(folder: str | Path, *, samples: list[Any] | None = None) -> Path:
    """Write ``report/quality.json``, ``quality.md`` and the plots; return the report folder."""
    root = Path(folder)
    numbers = quality(root, samples=samples)
    out = root / REPORT
    out.mkdir(exist_ok=True)
    atomic_write_text(out / "quality.json", json.dumps(numbers, indent=1) + "\n")
    plots = _plots(numbers, out)
    atomic_write_text(out / "quality.md", _markdown(numbers, plots))
    return out


def _field(sample: Any, key: str) -> str:
    value = getattr(sample, key)
    return getattr(value, "value", value) or "(none)"


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _attempt_log(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _acceptance(path: Path) -> dict[str, Any]:
    attempts = _attempt_log(path)
    by_modality: dict[str, dict[str, Any]] = {}
    for modality in sorted({a["modality"] for a in attempts}):
        mine = [a for a in attempts if a["modality"] == modality]
        lesions = {(a["slice"], a["lesion"]) for a in mine}
        accepted = {(a["slice"], a["lesion"]) for a in mine if a["accepted"]}
        reasons = Counter(a["reason"].split(":")[0] for a in mine if not a["accepted"])
        by_modality[modality] = {
            "attempts": len(mine),
            "accepted_attempts": sum(a["accepted"] for a in mine),
            "retries": sum(a["retry"] for a in mine),
            "lesions": len(lesions),
            "lesions_accepted": len(accepted),
            "acceptance_rate": len(accepted) / len(lesions) if lesions else None,
            "attempt_acceptance_rate": sum(a["accepted"] for a in mine) / len(mine),
            "rejection_reasons": dict(reasons),
        }
    return by_modality


def _vlm_markdown(v: dict[str, Any] | None) -> list[str]:
    if v is None:
        return []
    lines = ["## VLM verifier", "", f"{v['asked']} fills shown to {', '.join(v['models'])}: "
             f"{v['accepted']} accepted, {v['rejected']} rejected.", ""]  # fmt: skip
    if v["rejections"]:
        lines += ["| item | slice | lesion | attempt | the VLM's reason |", "|---|---|---|---|---|"]
        lines += [f"| {r['item']} | {r['slice']} | {r['lesion']} | {r['attempt']} | "
                  f"{r['reason'].replace('|', '/')} |" for r in v["rejections"]] + [""]  # fmt: skip
    return lines


def _plots(numbers: dict[str, Any], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    tasks = numbers["counts"]["task"]
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(tasks) + 1.5))
    ax.barh(list(tasks), list(tasks.values()), color="#4c72b0")
    ax.set_xlabel("samples")
    ax.set_title("samples per task")
    fig.tight_layout()
    fig.savefig(out / "counts.png", dpi=80)
    plt.close(fig)
    names.append("counts.png")
    rows = numbers["overlay_dice"]["per_sample"]
    if rows:
        fig, ax = plt.subplots(figsize=(6, 3))
        ax.hist([r["dice"] for r in rows], bins=20, range=(0.9, 1.0), color="#55a868")
        ax.set_xlabel("overlay-to-mask Dice")
        ax.set_title("reconstruction of the stored mask from the target overlay")
        fig.tight_layout()
        fig.savefig(out / "dice.png", dpi=80)
        plt.close(fig)
        names.append("dice.png")
    acceptance = numbers["acceptance"]
    if acceptance:
        fig, ax = plt.subplots(figsize=(6, 3))
        ax.bar(list(acceptance), [v["acceptance_rate"] or 0 for v in acceptance.values()])
        ax.set_ylim(0, 1)
        ax.set_ylabel("lesions accepted")
        ax.set_title("modification acceptance rate per modality")
        fig.tight_layout()
        fig.savefig(out / "acceptance.png", dpi=80)
        plt.close(fig)
        names.append("acceptance.png")
    return names


def _markdown(n: dict[str, Any], plots: list[str]) -> str:
    d = n["overlay_dice"]
    lines = [f"# Build quality report: {n['folder']}", "", f"{n['samples']} samples.", ""]
    for key, counts in n["counts"].items():
        lines += [f"## Samples per {key}", "", f"| {key} | samples |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in sorted(counts.items())] + [""]
    lines += ["## Filters", "", "| filter | dropped |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(n["filters"].items())] + [""]
    lines += ["## Overlay-to-mask reconstruction Dice", ""]
    for kind in ("grayscale", "rgb"):
        mean = d[f"{kind}_mean"]
        shown = "no samples" if mean is None else f"mean {mean:.4f} over {d[f'n_{kind}']} samples"
        lines.append(f"- {kind} sources: {shown}")
    lines += ["", "(MieDB-100k reports 0.999 on grayscale and 0.970 on RGB sources.)", ""]
    if n["acceptance"]:
        lines += ["## Modification acceptance", "",
                  "| modality | lesions | accepted | rate | attempts | retries | rejections |",
                  "|---|---|---|---|---|---|---|"]  # fmt: skip
        for m, a in n["acceptance"].items():
            rate = "-" if a["acceptance_rate"] is None else f"{a['acceptance_rate']:.2f}"
            why = ", ".join(f"{k}: {v}" for k, v in a["rejection_reasons"].items()) or "-"
            lines.append(f"| {m} | {a['lesions']} | {a['lesions_accepted']} | {rate} | "
                         f"{a['attempts']} | {a['retries']} | {why} |")  # fmt: skip
        lines.append("")
    lines += _vlm_markdown(n["vlm_verifier"])
    if n["rephrased"]:
        lines += ["## Rephrasing", "", f"{n['rephrased']} instructions rephrased by a chat model "
                  "(each sample's `metadata.rephrase` keeps its template).", ""]  # fmt: skip
    leaks = n["leaking_patients"]
    lines += ["## Leakage", "", "No patient is in more than one split." if not leaks else
              f"Patients in more than one split: {leaks}", ""]  # fmt: skip
    lines += [f"![{p}]({p})" for p in plots]
    return "\n".join(lines) + "\n"
