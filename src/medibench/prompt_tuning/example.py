"""An offline few-shot task with a domain shift, from what medibench and its packages ship.

Three classes by imaging modality, ``abdominal ct``, ``brain mri`` and ``chest x-ray``:

* ``OUT/source/``: procedural scenes of medibench's suite (:mod:`medibench.synth.scenes`,
  modalities ``xray``, ``mri``, ``ct``), laid out as MVC-Bench lays out a dataset (class
  folders, ``classnames.txt`` and a split file ``split_example.json`` whose ``train`` and
  ``test`` halves are ``source@train`` and ``source@test``);
* ``OUT/shifted.parquet``: the same classes on real backgrounds (``xray-real``: pydicom-data's
  chest radiograph, ``mri-real``: nilearn's MNI152 brain, ``ct-real``: pydicom's CT slice),
  as Parquet with ``image``, ``label`` and ``id`` columns: the shifted domain;
* ``OUT/tiny-clip/``: a random-weight ``CLIPModel`` from its real config class
  (:func:`medibench.prompt_tuning._tiny.save_tiny_backbone`);
* ``OUT/grid.yaml``: a grid over it (:data:`GRID`) for ``medibench calibration grid``.

Run ``python -m medibench.prompt_tuning.example OUT [--per-class N]``.
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import numpy as np

__all__ = ["CLASSES", "build_example"]

#: (folder, class name, in-domain modality, shifted modality), in folder order (the labels)
CLASSES = (
    ("ct", "abdominal ct", "ct", "ct-real"),
    ("mri", "brain mri", "mri", "mri-real"),
    ("xray", "chest x-ray", "xray", "xray-real"),
)


def build_example(
    out: str | Path, *, per_class: int = 24, shifted_per_class: int = 12, size: int = 64
) -> Path:
    """Write the example (module doc) into ``out``; returns ``out``."""
    from medibench.io import atomic_write_bytes
    from medibench.prompt_tuning._tiny import save_tiny_backbone
    from medibench.synth.scenes import make_scene, render

    out = Path(out)
    source = out / "source"
    lines: list[str] = []
    split: dict[str, list[list[object]]] = {"train": [], "test": []}
    for label, (folder, name, modality, _) in enumerate(CLASSES):
        lines.append(f"{folder} {name}")
        for seed in range(per_class):
            image = render(make_scene(modality, seed=seed, size=size)).image
            rel = f"{folder}/{folder}_{seed:03d}.png"
            atomic_write_bytes(source / rel, _png(image))
            split["train" if seed < per_class // 2 else "test"].append([rel, label, name])
    (source / "classnames.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (source / "split_example.json").write_text(json.dumps(split), encoding="utf-8")
    rows: dict[str, list] = {"image": [], "label": [], "id": []}
    for label, (folder, _, _, modality) in enumerate(CLASSES):
        for seed in range(shifted_per_class):
            image = render(make_scene(modality, seed=1000 + seed, size=size)).image
            rows["image"].append({"bytes": _png(image), "path": f"{folder}_{seed:03d}.png"})
            rows["label"].append(label)
            rows["id"].append(f"{folder}-real_{seed:03d}")
    _write_parquet(out / "shifted.parquet", rows)
    (out / "classnames.txt").write_text("\n".join(c[1] for c in CLASSES) + "\n", encoding="utf-8")
    save_tiny_backbone(out / "tiny-clip", "clip")
    (out / "grid.yaml").write_text(GRID, encoding="utf-8")
    return out


#: The example's grid (paths relative to the YAML's folder).
GRID = """\
out: grid
dataset: source@train
shots: 8
evals: {in-domain: source@test, shifted: shifted.parquet}
reference: in-domain
methods: [zero-shot, linear-probe, coop]
losses: [ce, "mcm:alpha=0.1,beta=0.01"]
seeds: [1, 2]
templates: ["a photo of a {}.", "an image of {}."]
backbones: ["clip:tiny-clip"]
epochs: 5
batch_size: 8
options: {coop: {n_ctx: 4}}
bins: 10
"""


def _png(image: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG")
    return buf.getvalue()


def _write_parquet(path: Path, rows: dict[str, list]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(rows), path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--per-class", type=int, default=24)
    args = parser.parse_args(argv)
    build_example(args.out, per_class=args.per_class)
    print(f"example -> {args.out} (source/, shifted.parquet, tiny-clip/, grid.yaml)")


if __name__ == "__main__":
    main()
