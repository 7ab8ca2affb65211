"""Versioned prompt files, shipped beside the judges that use them (``benchmarks/<name>/``).

A prompt file is a header of ``key: value`` lines (at least ``name`` and ``version``), a line
``---``, then named sections, each opened by a line ``=== section ===``. Sections are
:class:`string.Template` texts: ``$change``, ``$instruction``, ``$scale_max``, ... are filled at
call time (``$$`` is a literal dollar). The sha256 of the file's bytes goes into every cache key
and judgement record, so any edit to a prompt is a new key (and should be a new ``version``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from string import Template

__all__ = ["PromptFile", "load_prompt"]


@dataclass(frozen=True)
class PromptFile:
    """One prompt file: its header, its sections and the sha256 of its bytes."""

    filename: str
    header: dict[str, str]
    sections: dict[str, str]
    sha256: str

    @property
    def name(self) -> str:
        return self.header["name"]

    @property
    def version(self) -> str:
        return self.header["version"]

    def render(self, section: str, **values: object) -> str:
        """Section ``section`` with ``$placeholders`` filled; a missing value is an error."""
        try:
            text = self.sections[section]
        except KeyError:
            raise KeyError(
                f"prompt {self.filename} has no section '{section}' "
                f"(it has {', '.join(self.sections)})"
            ) from None
        try:
            return Template(text).substitute({k: str(v) for k, v in values.items()}).strip()
        except KeyError as exc:
            raise KeyError(
                f"prompt {self.filename}, section '{section}': no value for {exc}"
            ) from None


def load_prompt(filename: str, *, package: str) -> PromptFile:
    """Read and parse the prompt file ``filename`` of ``package``
    (``load_prompt("miedb_rubric_v1.md", package="medibench.benchmarks.miedb")``)."""
    try:
        data = resources.files(package).joinpath(filename).read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"prompt file {filename} is not in package {package}") from None
    return parse_prompt(data, filename)


def parse_prompt(data: bytes, filename: str = "<prompt>") -> PromptFile:
    text = data.decode("utf-8")
    head, sep, body = text.partition("\n---\n")
    if not sep:
        raise ValueError(f"prompt {filename}: no '---' line after the header")
    header = {}
    for line in head.splitlines():
        if line.strip():
            key, _, value = line.partition(":")
            header[key.strip()] = value.strip()
    for required in ("name", "version"):
        if required not in header:
            raise ValueError(f"prompt {filename}: header has no '{required}:' line")
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in body.splitlines():
        s = line.strip()
        if s.startswith("===") and s.endswith("===") and len(s) > 6:
            current = sections.setdefault(s.strip("= ").strip(), [])
        elif current is not None:
            current.append(line)
    return PromptFile(
        filename=filename,
        header=header,
        sections={k: "\n".join(v).strip() + "\n" for k, v in sections.items()},
        sha256=hashlib.sha256(data).hexdigest(),
    )
