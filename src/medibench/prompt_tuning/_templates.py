"""Template sets: ``--teacher-templates imagenet60|template|FILE`` (PromptSRC's frozen teacher).

* ``imagenet60`` (the default for ``promptsrc``): the 60 ImageNet templates of PromptSRC's
  ``trainers/imagenet_templates.py`` (``IMAGENET_TEMPLATES``), shipped as ``imagenet60.txt``;
* ``template``: the one ``--template`` (medibench's teacher before the official set was the
  default);
* ``FILE``: a text file, one template per line with one ``{}``; blank lines and lines starting
  with ``#`` are skipped.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from medibench.prompt_tuning._prompts import check_template

__all__ = ["IMAGENET60", "read_templates", "teacher_templates"]


def read_templates(text: str, where: str) -> list[str]:
    """The templates of ``text`` (one a line; ``where`` names the source in errors)."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.count("{}") != 1:
            raise ValueError(f"{where} line {number}: {line!r} must contain exactly one '{{}}'")
        check_template(line)
        out.append(line)
    if not out:
        raise ValueError(f"{where}: no template (one a line, with one '{{}}' for the class)")
    return out


IMAGENET60: tuple[str, ...] = tuple(
    read_templates(
        resources.files("medibench.prompt_tuning").joinpath("imagenet60.txt").read_text("utf-8"),
        "imagenet60.txt",
    )
)


def teacher_templates(value: str, template: str) -> list[str]:
    """The templates ``value`` names (module doc); ``template`` is the run's ``--template``."""
    if value == "imagenet60":
        return list(IMAGENET60)
    if value == "template":
        return [template]
    path = Path(value)
    if not path.is_file():
        raise ValueError(
            f"--teacher-templates {value!r}: not imagenet60, template or a file of templates"
        )
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"--teacher-templates {path}: does not read as text ({exc})") from None
    return read_templates(text, str(path))
