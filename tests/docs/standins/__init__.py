"""Stand-ins for what the documented commands name but a test cannot have: downloads, weights,
paid APIs, a cluster. Each module here is one area's stand-ins and declares:

- ``SUBSTITUTIONS``: ``{(file, text in a block): (replacement, why)}``, a marked substitution
  (``file`` is ``"*"`` for every file; a replacement of ``""`` drops the line);
- optionally ``standins(file, work, env, cache, blocks)``: a context manager entered before the
  blocks ``blocks`` (ordinals: one chain of tests/docs/test_docs_run.py) of ``file`` run in the
  folder ``work``; it builds what they need (tiny models, benchmark layouts, and what they read
  from blocks of other chains) and may start local fakes on 127.0.0.1, adding to ``env`` (the
  blocks' environment) what points at them. ``cache`` is a folder shared by the whole test
  session, for stand-ins worth building once (tiny models go to tests/_cache.py's cache);
- optionally ``check(file, blocks, work)``: called after those blocks ran, it asserts what they
  made (the outputs a test of its own would otherwise get by running the blocks a second time).

:func:`modules` lists them; tests/docs/test_docs_run.py applies them all.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

#: ``blocks`` when a stand-in is entered for every block of a file (no file has 100).
ALL: frozenset[int] = frozenset(range(1, 100))


def modules() -> list[ModuleType]:
    """Every stand-in module of this package: ``weights`` first (it sets ``DOCS_WEIGHTS``, which
    the others build into), then the others by name."""
    names = sorted(
        (m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")),
        key=lambda name: (name != "weights", name),
    )
    return [importlib.import_module(f"{__name__}.{name}") for name in names]


def substitutions() -> dict[tuple[str, str], tuple[str, str]]:
    """All modules' substitutions; the same key in two modules is an error."""
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for module in modules():
        for key, value in getattr(module, "SUBSTITUTIONS", {}).items():
            assert key not in out, f"{key} is substituted twice ({module.__name__})"
            out[key] = value
    return out
