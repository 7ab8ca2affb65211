"""Sources for build tests: the package-shipped demo sources (a slab of the MNI152 volume, the
pydicom-data liver SEG) and small PNG sources made from MNI152 slices, one patient each."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from medibench.io import write_image

pytest.importorskip("nilearn")
pytest.importorskip("pydicom.data")


@pytest.fixture(scope="session")
def demo_sources(tmp_path_factory) -> dict[str, Path]:
    from medibench.build.demo import write_demo_sources

    # axial slices 40..45 hold grey and white matter and the ventricles (CSF, the lesion)
    return write_demo_sources(tmp_path_factory.mktemp("demo"), mni_slices=(40, 46))


def mni_png_source(
    folder: Path, *, patients: int = 4, per_patient: int = 2, extra: str = ""
) -> Path:
    """PNG image + label-map pairs from MNI152 axial slices; ``patients`` patients."""
    from medibench.synth._sources import mni_mask, mni_slice

    lines = []
    for p in range(patients):
        for j in range(per_patient):
            index = 36 + 2 * (p * per_patient + j)
            image = mni_slice(index)
            label = np.zeros(image.shape, np.uint8)
            label[mni_mask("white matter", index)] = 2
            label[mni_mask("grey matter", index)] = 1
            name = f"p{p}_{j}"
            write_image(folder / "img" / f"{name}.png", image)
            write_image(folder / "lab" / f"{name}.png", label)
            lines.append(
                f"  - {{image: img/{name}.png, label: lab/{name}.png, patient: patient{p}}}"
            )
    (folder / "SOURCE.yaml").write_text(
        "name: mni-png\nmodality: MRI\nlicence: ICBM 2009\nitems:\n"
        + "\n".join(lines)
        + "\nlabels: {1: grey matter, 2: white matter}\n"
        "split: {by: patient, test: 0.25, val: 0.25, seed: 3}\n" + extra,
        encoding="utf-8",
    )
    return folder / "SOURCE.yaml"


@pytest.fixture
def png_source(tmp_path) -> Path:
    return mni_png_source(tmp_path / "src")
