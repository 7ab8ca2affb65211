"""Tiny random-weight CLIP and SigLIP (real config classes, saved with save_pretrained) and a
small labelled dataset in MVC-Bench's layout, all built here, nothing downloaded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests._cache import cached

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

#: The OpenCLIP stand-ins' generator runs only where OpenCLIP installs (not collected here).
collect_ignore = ["openclip/make_fixtures.py"]

CLASSES = (
    ("benign", "benign lesion"),
    ("malignant", "malignant lesion"),
    ("normal", "normal skin"),
)


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def _tiny_backbone(family: str) -> Path:
    """The tiny ``family`` backbone, built once per builder source (tests/_cache.py), shared by
    workers and sessions: read-only."""
    from medibench.prompt_tuning._tiny import save_tiny_backbone

    def build(folder: Path) -> None:
        save_tiny_backbone(folder, family)

    return cached(f"tiny-{family}", build, sources=("medibench.prompt_tuning._tiny",))


@pytest.fixture(scope="session")
def tiny_clip():
    return _tiny_backbone("clip")


@pytest.fixture(scope="session")
def tiny_siglip():
    return _tiny_backbone("siglip")


def write_folder_dataset(root, per_class=6, seed=0):
    """MVC-Bench's layout: class folders, classnames.txt; images whose mean colour depends on
    the class (so training has something to learn)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    lines = []
    for label, (folder, name) in enumerate(CLASSES):
        lines.append(f"{folder} {name}")
        (root / folder).mkdir(parents=True)
        for k in range(per_class):
            base = np.zeros((40, 36, 3)) + 60 + 70 * label
            img = np.clip(base + rng.normal(0, 25, base.shape), 0, 255).astype(np.uint8)
            Image.fromarray(img).save(root / folder / f"{folder}_{k:02d}.png")
    (root / "classnames.txt").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture(scope="session")
def folder_dataset(tmp_path_factory):
    return write_folder_dataset(tmp_path_factory.mktemp("data") / "skin")


@pytest.fixture
def backbone(tiny_clip):
    from medibench.prompt_tuning._backbone import load_backbone

    return load_backbone(f"clip:{tiny_clip}")


def pixels(backbone, n=4, seed=0):
    rng = np.random.default_rng(seed)
    return backbone.image.preprocess(
        [rng.integers(0, 256, (40, 36, 3), dtype=np.uint8) for _ in range(n)]
    )


#: The tiny OpenCLIP stand-ins in tests/prompt_tuning/openclip/ (made by OpenCLIP itself,
#: make_fixtures.py there) and the --backbone spec of each.
OPENCLIP = Path(__file__).parent / "openclip"
OPENCLIP_SPECS = {
    "rn50": f"open_clip:{OPENCLIP / 'rn50' / 'model.pt'}",
    "rn101": f"open_clip:{OPENCLIP / 'rn101' / 'model.pt'}",
    "vit-b-16": f"open_clip:{OPENCLIP / 'vit-b-16' / 'model.pt'}",
    "vit-b-32": f"open_clip:{OPENCLIP / 'vit-b-32' / 'model.pt'}",
    "quiltnet": f"open_clip:{OPENCLIP / 'quiltnet'}",
    "biomedclip": f"open_clip:{OPENCLIP / 'biomedclip'}",
}
