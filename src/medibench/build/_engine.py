"""The build: source items -> triplets on disk, resumable, locally or as Ray tasks.

Layout of a build folder ``OUT``::

    OUT/build.json            what was built (perspective, source and its sha256, seed, plug-ins)
    OUT/.build/items/ID.json  one record per finished source item: its samples, filter counts,
                              attempts (written atomically after its images)
    OUT/images/               the images (a slice shared by several samples is written once)
    OUT/samples.jsonl         the native dataset (``medibench run --dataset native:OUT``)
    OUT/attempts.jsonl        every modification attempt (accepted, rejected and why, retries)
    OUT/report/               the quality report (Markdown, JSON, plots)
    OUT/exports/              miedb/, hf-parquet/, native/, omnigen2.jsonl

Re-running a build in the same folder (same source, perspective, seed and plug-ins; anything
else is refused) skips finished items, so a killed build finishes without redoing them. The
folder is locked while a build writes it (:func:`medibench.runs.run_folder_lock`).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2

from medibench.build._calls import CallFailed
from medibench.build._errors import BuildError
from medibench.build._exports import EXPORTS
from medibench.build._items import Slice, item_slices
from medibench.build._modification import MODIFICATION_DEFAULTS, modification
from medibench.build._perception import check_operators, perception, transformation
from medibench.build._post import assign_splits, near_duplicates, phash, split_groups
from medibench.build._records import BuildContext, Triplet
from medibench.build._source import ItemSpec, SourceSpec, read_source
from medibench.build._steps import add_counts, chat_steps
from medibench.io import atomic_write_text, encode_image, sha256_file
from medibench.io._write import DiskFullError, is_disk_full, remove_stale_temps
from medibench.samples import Sample

__all__ = ["BUILD_VERSION", "PERSPECTIVES", "BuildResult", "build", "finalize", "read_records"]

BUILD_VERSION = "1"
PERSPECTIVES: dict[str, Callable[..., Any]] = {
    "perception": perception,
    "transformation": transformation,
    "modification": modification,
}
CONFIG = "build.json"
ITEMS = Path(".build") / "items"
ATTEMPTS = "attempts.jsonl"
POST = Path(".build") / "post.json"
# Fast lossless PNG: zlib level 1 and the Up filter only (OpenCV >= 4.11; 2-4x faster to
# encode than the adaptive filters at about the same size).
_PNG = [cv2.IMWRITE_PNG_COMPRESSION, 1] + (
    [cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_UP]
    if hasattr(cv2, "IMWRITE_PNG_FILTER")
    else []
)


@dataclass
class BuildResult:
    """What a build did: the folder, samples kept, items built now and skipped (finished
    before), failed items with their errors, filter counts, and the chat-model steps' counts
    (``calls["rephrase"]``, ``calls["verify"]``: calls ``made`` now and answers ``cached``)."""

    out: Path
    samples: int
    built: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    filters: dict[str, int] = field(default_factory=dict)
    exports: dict[str, Path] = field(default_factory=dict)
    calls: dict[str, dict[str, int]] = field(default_factory=dict)


def build(
    perspective: str,
    source: str | os.PathLike,
    out: str | os.PathLike,
    *,
    seed: int = 0,
    inpainter: str | None = None,
    inpainter_options: dict[str, Any] | None = None,
    verifier: str | None = None,
    options: dict[str, Any] | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    exports: Sequence[str] = ("miedb", "omnigen2"),
    on_item: Callable[[str, dict[str, Any]], None] | None = None,
) -> BuildResult:
    """Build ``perspective`` triplets from ``source`` (SOURCE.yaml) into ``out``.

    ``inpainter``/``verifier`` are specs (modification only); ``options`` modification settings
    (``max_attempts``, ``dilation_px``, ``seam_px``). ``on_item(item_id, record)`` is called as
    each item finishes. Items that fail are reported in ``failures`` and not marked finished.

    Raises:
        BuildError: a bad source, another build's folder, options that do not apply.
    """
    from medibench.runs import run_folder_lock

    if executor not in ("local", "ray"):
        raise BuildError(f"unknown executor {executor!r}; choose local or ray")
    if perspective not in PERSPECTIVES:
        raise BuildError(f"unknown perspective {perspective!r}; choose {', '.join(PERSPECTIVES)}")
    spec = read_source(source)
    if perspective == "transformation":
        check_operators(spec)
    if perspective == "modification" and not spec.lesions:
        raise BuildError(f"{source}: modification needs 'lesions' (label names to remove)")
    if perspective != "modification" and (inpainter or verifier or inpainter_options):
        raise BuildError("--inpainter and --verifier apply to modification builds only")
    split_groups(spec)  # a missing patient field fails before anything is built
    unknown_exports = [f for f in exports if f not in EXPORTS]
    if unknown_exports:  # checked before building, not after every item is built
        raise BuildError(f"unknown export format(s) {unknown_exports}; choose from "
                         f"{', '.join(EXPORTS)}")  # fmt: skip
    if perspective == "modification":
        unknown = sorted(set(options or {}) - set(MODIFICATION_DEFAULTS))
        if unknown:
            raise BuildError(f"unknown modification option(s) {unknown}; known: "
                             f"{', '.join(MODIFICATION_DEFAULTS)}")  # fmt: skip
        options = {**MODIFICATION_DEFAULTS, **(options or {})}
    elif options:
        raise BuildError(f"{perspective} builds take no options, got {sorted(options)}")
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise BuildError(f"--out {folder} is a file; give a folder for the build")
    steps = chat_steps(spec, perspective, folder)
    for owner in steps.values():
        owner.step.check_key(str(source))  # a missing key fails before anything is built
    job = {
        "version": BUILD_VERSION, "perspective": perspective,
        "source": str(Path(source).resolve()), "source_sha256": sha256_file(source),
        "seed": int(seed), "inpainter": inpainter or ("classical" if perspective ==
                                                      "modification" else None),
        "inpainter_options": dict(inpainter_options or {}),
        "verifier": verifier or ("statistics" if perspective == "modification" else None),
        "options": dict(options or {}), "out": str(folder.resolve()),
        "steps": {k: owner.step.provenance()["prompt"] for k, owner in steps.items()} or None,
    }  # fmt: skip
    with run_folder_lock(folder):
        _check_config(folder, job)
        result = BuildResult(folder, 0)
        done = {p.stem for p in (folder / ITEMS).glob("*.json")}
        todo = [it.id for it in spec.items if it.id not in done]
        result.skipped = [it.id for it in spec.items if it.id in done]
        runner = _run_ray(job, todo, ray_address) if executor == "ray" else _run_local(job, todo)
        for item_id, record in runner:
            if record["status"] != "ok":
                result.failures[item_id] = record["error"]
                continue
            for kind, counts in record.get("calls", {}).items():
                add_counts(result.calls, kind, counts)
            atomic_write_text(folder / ITEMS / f"{item_id}.json", json.dumps(record))
            result.built.append(item_id)
            if on_item is not None:
                on_item(item_id, record)
        if executor == "ray":  # a worker lost with its node may have left a temp file
            remove_stale_temps(folder)
        if not result.failures:
            summary = finalize(folder, spec, exports=exports)
            result.samples, result.filters = summary["samples"], summary["filters"]
            result.exports = summary["exports"]
            for kind, counts in summary["calls"].items():
                add_counts(result.calls, kind, counts)
    return result


def finalize(
    folder: Path, source: SourceSpec, *, exports: Sequence[str] = ("miedb", "omnigen2")
) -> dict[str, Any]:
    """Dedupe, split, rephrase (``rephrase:`` of the source) and write ``samples.jsonl``, the
    attempt log, the report and the exports."""
    from medibench.build._exports import export_build
    from medibench.build._report import write_report
    from medibench.datasets import write_native

    records = read_records(folder, source)
    samples = [s for r in records for s in r["samples"]]
    dropped = near_duplicates(samples, source.dedupe_bits)
    groups = split_groups(source)
    splits = assign_splits(list(groups.values()), source.split)
    rows = [{**s, "split": splits[groups[s["metadata"]["item"]]]}
            for s in samples if s["sample_id"] not in dropped]  # fmt: skip
    calls = {}
    if source.rephrase is not None and rows:
        from medibench.build._rephrase import Rephraser

        rows = json.loads(json.dumps(rows))  # the items' records keep their templates
        calls["rephrase"] = Rephraser(source.rephrase, folder).apply(source.name, rows)
    kept = [Sample.parse(row) for row in rows]
    attempts = [a for r in records for a in r["attempts"]]
    atomic_write_text(folder / ATTEMPTS, "".join(json.dumps(a) + "\n" for a in attempts))
    filters: Counter = Counter()
    for r in records:
        filters.update(r["filters"])
    filters["near_duplicate"] = len(dropped)
    post = {"near_duplicate": sorted(dropped), "dedupe_bits": source.dedupe_bits,
            "splits": splits, "groups": groups}  # fmt: skip
    atomic_write_text(folder / POST, json.dumps(post, indent=1) + "\n")
    if not kept:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(filters.items()) if v) or "none"
        why = f"; every attempt is in {folder / ATTEMPTS}" if attempts else ""
        raise BuildError(f"{folder}: no sample survived the filters (filtered: {counts}){why}")
    dataset = list(write_native(folder, kept, overwrite=True))  # read back: absolute paths
    write_report(folder, samples=dataset)
    written = export_build(folder, dataset, formats=exports, name=source.name)
    return {"samples": len(kept), "filters": dict(filters), "exports": written, "calls": calls}


def read_records(folder: Path, source: SourceSpec) -> list[dict[str, Any]]:
    """The finished items' records, in source order."""
    out = []
    for item in source.items:
        path = folder / ITEMS / f"{item.id}.json"
        if path.is_file():
            out.append(json.loads(path.read_text(encoding="utf-8")))
    return out


def _check_config(folder: Path, job: dict[str, Any]) -> None:
    path = folder / CONFIG
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        # the folder itself may have moved: its path is not part of what was built
        differ = [k for k in job if k != "out" and old.get(k) != job[k]]
        if differ:
            shown = "; ".join(f"{k}: {old.get(k)!r} then, {job[k]!r} now" for k in differ)
            raise BuildError(
                f"{folder} holds another build ({shown}); use another --out to build this one"
            )
        return
    if folder.is_dir() and any(p.name != ".lock" for p in folder.iterdir()):
        raise BuildError(f"{folder} is not empty and holds no build; use a new or empty --out")
    atomic_write_text(path, json.dumps(job, indent=1) + "\n")


def _run_local(job: dict[str, Any], todo: list[str]):
    for item_id in todo:
        yield item_id, build_item(job, item_id)


def _run_ray(job: dict[str, Any], todo: list[str], address: str | None):
    """Each item a Ray task; one lost with its node is built again elsewhere (a bounded number
    of times, then :class:`~medibench._ray.LostWorkError` stops the build: re-run resumes)."""
    from medibench._ray import join_cluster, run_tasks

    try:
        join_cluster(address)
    except ImportError as exc:
        raise BuildError(str(exc)) from None
    try:
        yield from run_tasks(build_item, ((i, (job, i)) for i in todo), kind="build item")
    except Exception as exc:  # a worker's call to the chat endpoint failed: the endpoint is down
        if isinstance(getattr(exc, "cause", None), CallFailed):
            raise exc.cause from None  # type: ignore[attr-defined]
        raise


def build_item(job: dict[str, Any], item_id: str) -> dict[str, Any]:
    """Build one source item: write its images, return its record (``status`` ok or error)."""
    t0 = time.perf_counter()
    source = _source(job["source"], job["source_sha256"])
    item = next(it for it in source.items if it.id == item_id)
    vlm = None
    try:
        ctx = BuildContext(job["seed"], options=job["options"])
        if job["perspective"] == "modification":
            ctx.inpainter, ctx.verifier, vlm = _plugins(job, source)
            ctx.vlm = vlm
        before = (vlm.step.made, vlm.step.cached) if vlm is not None else (0, 0)
        make = PERSPECTIVES[job["perspective"]]
        filters: Counter = Counter()
        samples: list[dict[str, Any]] = []
        attempts: list[dict[str, Any]] = []
        n_slices = 0
        for sl in item_slices(source, item):
            n_slices += 1
            made = make(source, sl, ctx)
            filters.update(made.filters)
            attempts += made.attempts
            samples += _write(Path(job["out"]), source, job, sl, made.triplets)
    except CallFailed:
        raise  # the endpoint cannot answer: the build stops; finished items are kept
    except BuildError as exc:
        return {"status": "error", "error": str(exc)}
    except DiskFullError:
        raise  # the build stops with the run's clean message; finished items are kept
    except OSError as exc:
        if is_disk_full(exc):
            raise DiskFullError(exc.errno, exc.strerror, exc.filename) from None
        return {"status": "error", "error": f"item '{item_id}': {exc}"}
    except (ValueError, ArithmeticError, IndexError, KeyError, TypeError) as exc:
        # an item that cannot be built fails alone: the other items still are
        return {"status": "error", "error": f"item '{item_id}': {type(exc).__name__}: {exc}"}
    calls = {}
    if vlm is not None:
        calls["verify"] = {"made": vlm.step.made - before[0], "cached": vlm.step.cached - before[1]}
    return {
        "status": "ok", "item": item.id, "patient": item.patient, "slices": n_slices,
        "samples": samples, "filters": dict(filters), "attempts": attempts, "calls": calls,
        "elapsed_s": round(time.perf_counter() - t0, 3),
    }  # fmt: skip


_PLUGINS: dict[str, tuple[Any, Any, Any]] = {}
_SOURCES: dict[tuple[str, str], SourceSpec] = {}


def _source(path: str, sha256: str) -> SourceSpec:
    """The source, read once per process (and again if its file changed)."""
    key = (path, sha256)
    if key not in _SOURCES:
        _SOURCES[key] = read_source(path)
    return _SOURCES[key]


def _plugins(job: dict[str, Any], source: SourceSpec) -> tuple[Any, Any, Any]:
    """The inpainter, verifier and VLM verifier (or None) of ``job``, made once per process
    (a diffusers pipeline loads once for all items a worker builds)."""
    from medibench.build._inpaint import load_inpainter
    from medibench.build._verify import load_verifier

    key = json.dumps([job["inpainter"], job["inpainter_options"], job["verifier"], job["out"],
                      job["source_sha256"]], default=str)  # fmt: skip
    if key not in _PLUGINS:
        vlm = chat_steps(source, "modification", Path(job["out"])).get("verify")
        _PLUGINS[key] = (
            load_inpainter(job["inpainter"], options=job["inpainter_options"]),
            load_verifier(job["verifier"]),
            vlm,
        )
    return _PLUGINS[key]


def _write(
    root: Path, source: SourceSpec, job: dict[str, Any], sl: Slice, triplets: list[Triplet]
) -> list[dict[str, Any]]:
    out = []
    shared = f"images/{sl.key}.png"
    if triplets:
        _png(root / shared, sl.image)
    item: ItemSpec = sl.item
    hashes: dict[int, str] = {}

    def hashed(image: Any) -> str:
        if id(image) not in hashes:
            hashes[id(image)] = f"{phash(image):016x}"
        return hashes[id(image)]

    for t in triplets:
        sid = f"{source.name}-{job['perspective']}-{sl.key}-{t.name}"
        paths = {}
        for role, image in (("input", t.input), ("target", t.target)):
            if image is sl.image:
                paths[role] = shared
            else:
                paths[role] = f"images/{sid}_{role}.png"
                _png(root / paths[role], image)
        if t.mask is not None:
            paths["mask"] = f"images/{sid}_mask.png"
            _png(root / paths["mask"], t.mask)
        out.append({
            "sample_id": sid, "benchmark": source.name, "instruction": t.instruction,
            "split": "train", "task": t.task, "region": item.region or source.region,
            "modality": source.modality, "perspective": t.perspective.value,
            "description": t.description, "paraphrases": list(t.paraphrases),
            "overlay_color": list(t.overlay_color),
            "source": {"dataset": source.name, "licence": source.licence,
                       "image": str(item.image), "label": str(item.label or
                       ", ".join(str(p) for p in item.labels.values())),
                       "built_by": f"medibench build {job['perspective']}"},
            "metadata": {**t.metadata, "item": item.id, "patient": item.patient,
                         "slice": sl.index, "axis": source.axis if sl.index is not None
                         else None, "bin": sl.bin, "original_size": list(sl.original_shape),
                         "size": list(sl.image.shape[:2]), "grayscale": sl.grayscale,
                         "build_seed": job["seed"], "phash_input": hashed(t.input),
                         "phash_target": hashed(t.target)},
            **paths,
        })  # fmt: skip
    return out


def _grey(image: Any) -> bool:
    return bool(
        (image[:, :, 0] == image[:, :, 1]).all() and (image[:, :, 0] == image[:, :, 2]).all()
    )


def _png(path: Path, image: Any) -> None:
    # Plain writes: an item's record is written atomically only after all its images, and an
    # unfinished item is rebuilt (its files overwritten) on the next run.
    path.parent.mkdir(parents=True, exist_ok=True)
    if image.ndim == 3 and _grey(image):  # one channel: a third of the bytes, same pixels read
        image = image[:, :, 0]
    path.write_bytes(encode_image(image, ".png", params=_PNG, where=str(path)))
