"""The editing conformance matrix as data: one :class:`Cell` per (family, path).

The tests of ``tests/conformance/test_editing_*.py`` run every cell (a supported cell through
the path, asserting its output; an unsupported one asserting its error), and the
``<!-- conformance:editing -->`` block of docs/models.md is rendered from the same cells
(:func:`render`; ``python -m tests.conformance._editing_cells`` rewrites it; a test fails when
the doc is stale).

Paths: ``run`` (``medibench run --model SPEC``), ``build`` (``medibench build modification
--inpainter diffusers-inpaint:PATH``), ``attention`` (``medibench analyze attention``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CELLS", "FAMILY_PIPELINES", "Cell", "cells", "render", "write_doc"]

BEGIN, END = "<!-- conformance:editing -->", "<!-- /conformance:editing -->"
DOC = Path(__file__).resolve().parents[2] / "docs" / "models.md"

#: family -> (display name, diffusers pipeline class)
FAMILY_PIPELINES = {
    "ip2p": ("InstructPix2Pix", "StableDiffusionInstructPix2PixPipeline"),
    "sdxl-ip2p": ("SDXL InstructPix2Pix", "StableDiffusionXLInstructPix2PixPipeline"),
    "flux-kontext": ("FLUX.1 Kontext", "FluxKontextPipeline"),
    "qwen-image-edit": ("Qwen-Image-Edit", "QwenImageEditPipeline"),
    "omnigen": ("OmniGen", "OmniGenPipeline"),
    "sd-inpaint": ("SD inpainting", "StableDiffusionInpaintPipeline"),
    "sdxl-inpaint": ("SDXL inpainting", "StableDiffusionXLInpaintPipeline"),
    "flux-fill": ("FLUX.1 Fill", "FluxFillPipeline"),
    "sd": ("Stable Diffusion", "StableDiffusionPipeline"),
    "paint-by-inpaint": ("PaintByInpaint (Hub folders)", "StableDiffusionInstructPix2PixPipeline"),
    "instruct-diffusion": ("InstructDiffusion (its `.ckpt`)", "- (an LDM state dict)"),
}


@dataclass(frozen=True)
class Cell:
    """One (family, path): ``spec`` is the model or inpainter spec (``PATH``: the weights
    folder); ``supported`` cells state what the output is (``note``), the others why not
    (``note``) and a phrase of their error (``error``)."""

    family: str
    path: str
    spec: str
    supported: bool
    note: str
    error: str = ""

    @property
    def id(self) -> str:
        return f"{self.family}-{self.path}"


_JOINT = ("joint attention: text and image tokens in one sequence, no cross-attention layer "
          "to read")  # fmt: skip
_OMNIGEN = ("diffusers defines OmniGenPipeline's processor only with torchvision, which "
            "medibench's torch pin excludes (and its call takes `input_images`, not the "
            "`image` that `diffusers:` passes)")  # fmt: skip

CELLS: tuple[Cell, ...] = (
    Cell("ip2p", "run", "ip2p:PATH", True,
         "longer side `resolution` (512), sides multiples of 8; same aspect"),
    Cell("sdxl-ip2p", "run", "diffusers:PATH", True,
         "the pipeline's square sample size (1024 for SDXL); with `resolution` the input's "
         "aspect, longer side `resolution`"),
    Cell("flux-kontext", "run", "flux-kontext:PATH", True,
         "the preferred Kontext resolution nearest the input's aspect, scaled to `max_area`"),
    Cell("qwen-image-edit", "run", "qwen-image-edit:PATH", True,
         "about 1024x1024 px at the input's aspect, multiples of 32 (runs without torchvision)"),
    Cell("omnigen", "run", "diffusers:PATH", False, _OMNIGEN,
         error="cannot build OmniGenPipeline"),
    Cell("flux-fill", "run", "icedit:PATH", True,
         "ICEdit with `lora=` its LoRA: the right half of a diptych, `width` (512) wide, the "
         "input's aspect, height a multiple of 16"),
    Cell("sd", "run", "imagic:PATH", True,
         "Imagic, trained per image: longer side `resolution` (512), sides multiples of 8"),
    Cell("paint-by-inpaint", "run", "ip2p:PATH", True,
         "an InstructPix2Pix folder: as InstructPix2Pix"),
    Cell("instruct-diffusion", "run", "ip2p:PATH/v1-5-pruned-emaonly-adaption-task.ckpt", False,
         "one original-Stable-Diffusion `.ckpt`, not a diffusers folder: the error names its "
         "8-channel UNet and the diffusers script that converts it for `ip2p:`",
         error="single-file checkpoint in the original Stable Diffusion (LDM) layout"),
    Cell("ip2p", "build", "diffusers-inpaint:PATH", False,
         "not an inpainting pipeline (its call takes no `mask_image`)",
         error="not an inpainting pipeline"),
    Cell("sd-inpaint", "build", "diffusers-inpaint:PATH", True,
         "the input's size; safety checker dropped unless `safety_checker=true`"),
    Cell("sdxl-inpaint", "build", "diffusers-inpaint:PATH", True, "the input's size"),
    Cell("flux-fill", "build", "diffusers-inpaint:PATH", True, "the input's size"),
    Cell("ip2p", "attention", "ip2p:PATH", True,
         "maps on the latent of the working size (output / 8)"),
    Cell("sdxl-ip2p", "attention", "diffusers:PATH", True,
         "maps on the latent the pipeline runs at (its sample size unless `resolution`)"),
    Cell("flux-kontext", "attention", "flux-kontext:PATH", False, _JOINT,
         error="has no cross-attention layers"),
    Cell("qwen-image-edit", "attention", "qwen-image-edit:PATH", False, _JOINT,
         error="has no cross-attention layers"),
    Cell("omnigen", "attention", "diffusers:PATH", False, _OMNIGEN,
         error="cannot build OmniGenPipeline"),
)  # fmt: skip


def cells(path: str, *, supported: bool) -> list[Cell]:
    """The cells of ``path`` that are (or are not) supported."""
    return [c for c in CELLS if c.path == path and c.supported == supported]


def render() -> str:
    """The docs/models.md block: one row per family, one column per path."""
    paths = ("run", "build", "attention")
    lines = [
        BEGIN,
        "<!-- generated by `python -m tests.conformance._editing_cells` from the cells that "
        "tests/conformance/test_editing_*.py run; do not edit by hand -->",
        "",
        "| family | pipeline | " + " | ".join(f"`{p}`" for p in paths) + " |",
        "|---|---|" + "---|" * len(paths),
    ]
    for family, (name, pipeline) in FAMILY_PIPELINES.items():
        row = [name, f"`{pipeline}`"]
        for p in paths:
            cell = next((c for c in CELLS if c.family == family and c.path == p), None)
            if cell is None:
                row.append("-")
            elif cell.supported:
                row.append(f"yes, `{cell.spec}`: {cell.note}")
            else:
                row.append(f"no: {cell.note}")
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "`-`: not a path of that family (inpainting pipelines fill masks for `build`; "
              "editing pipelines are run).", END]  # fmt: skip
    return "\n".join(lines)


def doc_block(text: str) -> str | None:
    """The block between the markers in ``text`` (markers included), or None."""
    if BEGIN not in text or END not in text:
        return None
    return text[text.index(BEGIN) : text.index(END) + len(END)]


def write_doc(doc: Path = DOC) -> bool:
    """Rewrite the block in ``doc`` (appending it under a heading when missing); whether it
    changed."""
    text = doc.read_text(encoding="utf-8")
    old = doc_block(text)
    if old is None:
        new_text = text.rstrip("\n") + "\n\n## Conformance: editing, inpainting, attention\n\n"
        new_text += render() + "\n"
    else:
        new_text = text.replace(old, render())
    doc.write_text(new_text, encoding="utf-8")
    return new_text != text


if __name__ == "__main__":
    changed = write_doc()
    print(f"{DOC}: {'updated' if changed else 'up to date'}", file=sys.stderr)
