"""MedEBench (arXiv 2506.01921; data repo mliuby/MedEBench): the adapter (docs/protocols.md).

Layout, paths in the metadata relative to the repository root::

    <root>/
      editing/editing_metadata.json      {"samples": [{id, Organ, Task, prompt, ...}, ...]}
      editing/previous/<id>.png          input
      editing/changed/<id>.png           ground truth
      editing/previous_mask/<id>.png     ROI mask (missing for some samples)
      generated_images/<model>/<id>_<k>.png   model outputs; only k = 0 is scored officially

Each metadata record becomes a :class:`~medibench.samples.Sample`:

=================  ==============================================================================
Sample field       from
=================  ==============================================================================
sample_id          ``str(id)``
input / target     ``previous_image`` / ``changed_image`` (absolute paths)
mask               ``previous_mask``; ``None`` (and a problem line) when the file is missing
instruction        ``prompt``
paraphrases        ``(rephrased_prompt,)``; ``()`` when it is the prompt itself (see below)
description        ``detailed_prompt`` (the text the EA/VQ judge reads)
region             ``Organ``, normalised to one of :data:`REGIONS` (original in
                   ``metadata["organ"]``)
task               ``Task`` as given
modality           keyword match in ``detailed_prompt`` (see :func:`infer_modality`), else ``""``
perspective        rule on ``Task`` (see :func:`task_perspective`)
source             ``{"dataset": "MedEBench", "licence": "CC BY-NC 4.0", "url": url}``
=================  ==============================================================================

Rephrasings. The official rewrite script (``src/dataset_construction/rewrite_prompt.py``) asked
GPT-4o for three rewrites within ``max_tokens=30``, split the answer into lines and stripped
``"0123456789. "`` from both ends of each line, then kept one at random; with fewer than three
lines it kept the prompt itself. So a missing full stop says nothing (it was stripped from every
generated line), and the third rewrite is often cut by the token budget ("Conduct a", "Renew the",
"Conduct lipos"). ``metadata["rephrased_truncated"]`` is a heuristic flag, True when the
rephrasing

* ends with a function word (article, preposition, conjunction, determiner, possessive:
  "Get rid of the mole on the"; not auxiliaries, which end complete rewrites: "as it is"), or
* is a single word, or has fewer than half as many words as the prompt ("Conduct lipos" for
  "Perform liposuction to remove excess fat.").

It misses cuts that end on a content word ("Erase the black", "Reshape the nose to give") and
may flag a terse but complete rewrite of a long prompt. ``metadata["rephrased_is_prompt"]`` is
True when the rephrasing is the prompt itself (the script's fallback); it is then not listed in
``paraphrases``.

Bad input: metadata that is not JSON or not ``{"samples": [...]}``, or that gives no sample,
raises :class:`DatasetError` naming the file. Per-sample problems never stop the reading; each
is one line in ``Dataset.problems``: a record without a required field, with a bad or duplicate
id, with a path that leaves the root (refused), or whose input image is missing is skipped; a
missing mask or ground-truth file leaves that field ``None`` (the sample is scored where it can
be); an unknown ``Organ`` is kept as given.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from medibench.benchmarks.medebench._fields import (
    REGIONS,
    infer_modality,
    normalize_region,
    rephrasing_looks_truncated,
    task_perspective,
)
from medibench.benchmarks.medebench._records import LICENCE, MedEBenchDataset, _to_sample
from medibench.benchmarks.medebench.parquet import is_medebench_parquet, read_medebench_parquet
from medibench.datasets._base import DatasetError, collect_samples

__all__ = [
    "LICENCE",
    "METADATA",
    "REGIONS",
    "MedEBenchDataset",
    "detect",
    "infer_modality",
    "normalize_region",
    "read_medebench",
    "rephrasing_looks_truncated",
    "task_perspective",
]

#: Metadata file, relative to the repository root.
METADATA = "editing/editing_metadata.json"


def read_medebench(
    path: str | os.PathLike | None = None, *, name: str = "medebench"
) -> MedEBenchDataset:
    """Read MedEBench from its repository root (or its ``editing/`` folder), or from a Parquet
    conversion of it (a ``.parquet`` file or a folder of shards: :mod:`.parquet`).

    Returns:
        A :class:`MedEBenchDataset`; skipped or incomplete samples are listed in ``problems``.

    Raises:
        DatasetError: no path, no folder, no ``editing_metadata.json``, a metadata file that is
            not JSON or not an object with a ``"samples"`` list, no sample left (an empty list,
            or every record skipped: the first problems are named).
    """
    if path is None or str(path) == "":
        raise DatasetError("MedEBench needs its folder: use 'medebench:/path/to/MedEBench'")
    if not detect_folder(Path(path)) and _parquet(Path(path)):
        return read_medebench_parquet(path, name=name)
    root, metadata = _locate(Path(path))
    records = _load_records(metadata)
    problems: list[str] = []
    samples = collect_samples(
        ((f"{metadata} samples[{n}]", str(n), record) for n, record in enumerate(records)),
        lambda record, where: _to_sample(record, where, root, problems),
        problems,
        source=metadata,
        duplicate=lambda s, first: f"duplicate id {s.sample_id!r} (first at samples[{first}])",
    )
    return MedEBenchDataset(name, root, samples, problems=problems)


def detect(root: Path) -> bool:
    """Whether ``root`` is a MedEBench repository root, its ``editing/`` folder, or a Parquet
    conversion (shards with the metadata's columns)."""
    return detect_folder(Path(root)) or is_medebench_parquet(Path(root))


def detect_folder(root: Path) -> bool:
    """Whether ``root`` is a MedEBench repository root or its ``editing/`` folder."""
    return (root / METADATA).is_file() or (root / "editing_metadata.json").is_file()


def _parquet(path: Path) -> bool:
    """A ``.parquet`` file, or a folder that holds some (and no metadata JSON)."""
    if path.is_file():
        return path.suffix.lower() == ".parquet"
    return path.is_dir() and any(path.rglob("*.parquet"))


# --- helpers ---------------------------------------------------------------------------------


def _locate(path: Path) -> tuple[Path, Path]:
    """The repository root and the metadata file for a root or ``editing/`` folder."""
    if not path.is_dir():
        raise DatasetError(f"MedEBench folder {path} does not exist or is not a folder")
    if (path / METADATA).is_file():
        root = path.resolve()
        return root, root / METADATA
    if (path / "editing_metadata.json").is_file():
        # The editing/ folder itself: the metadata's paths are relative to its parent.
        metadata = (path / "editing_metadata.json").resolve()
        return metadata.parent.parent, metadata
    raise DatasetError(
        f"{path} is not MedEBench: it has no {METADATA} (pass the repository root or its "
        "editing/ folder)"
    )


def _load_records(metadata: Path) -> list[Any]:
    try:
        data = json.loads(metadata.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{metadata}: not valid JSON ({exc})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{metadata}: cannot be read ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("samples"), list):
        got = type(data).__name__ if not isinstance(data, dict) else "an object without it"
        raise DatasetError(
            f'{metadata}: expected an object {{"samples": [...]}} with a list of samples, got {got}'
        )
    return data["samples"]
