"""One small generic registry: name -> factory, with lazy ``"module:attr"`` entries.

Heavy plug-ins (diffusers models, API clients) register as strings so that importing medibench
never imports them; they load on first use. Unknown names get an error that suggests the closest.
Third parties add entries through the ``medibench.<kind>`` entry-point group.
"""

from __future__ import annotations

import difflib
import importlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

__all__ = ["Registry", "UnknownNameError", "close_matches", "import_object", "lazy_attributes"]

T = TypeVar("T")


class UnknownNameError(KeyError):
    """A name that is not in a registry; the message lists close matches."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it readable.
        return str(self.args[0])

    @classmethod
    def of(cls, kind: str, name: str, known: Iterable[str], *, note: str = "") -> UnknownNameError:
        """``unknown KIND 'NAME'NOTE. Did you mean: ...? Known KINDs: ...`` (``known`` in the
        order given; ``note`` says more about the name, e.g. why a plug-in failed)."""
        known = list(known)
        listed = ", ".join(known) or "(none)"
        hint = close_matches(name, known)
        return cls(f"unknown {kind} '{name}'{note}.{hint} Known {kind}s: {listed}")


def import_object(target: str) -> Any:
    """The object named by ``"package.module:attr.sub"`` (the one ``module:attr`` importer).

    Raises ``ValueError`` for a string without ``:``, and ``ImportError`` / ``AttributeError``
    naming the target when the module or the attribute is not there.
    """
    module, sep, attr = target.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"expected 'module:attr', got {target!r}")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AttributeError(f"{target}: module '{module}' has no attribute '{attr}'") from None
    return obj


def lazy_attributes(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A package's module ``__getattr__`` for its heavy exports: ``name`` in ``modules`` is
    imported from the module ``modules[name]`` (relative to ``package`` when it starts with
    ``.``) on first use, so importing the package imports none of them."""

    def __getattr__(name: str) -> Any:
        if name not in modules:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(modules[name], package), name)

    return __getattr__


def close_matches(name: str, known: Iterable[str]) -> str:
    """`` Did you mean: a, b?`` for the names in ``known`` closest to ``name`` (or ``""``)."""
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.5)
    return f" Did you mean: {', '.join(close)}?" if close else ""


class Registry(Generic[T]):
    """Maps names to factories. ``kind`` is used in messages and for the entry-point group.

    ``populate``, when given, is called once before the first lookup to register entries that
    come from elsewhere (the protocols and judges that :class:`~medibench.benchmarks.Benchmark`
    objects declare).
    """

    def __init__(self, kind: str, *, populate: Callable[[Registry[T]], None] | None = None) -> None:
        self.kind = kind
        self._entries: dict[str, Callable[..., T] | str] = {}
        self._help: dict[str, str] = {}
        self._entry_points_loaded = False
        self._populate = populate
        self._populated: set[str] = set()
        # Filled once by the first lookup; a lookup on another thread meanwhile waits for it
        # (an RLock: ``populate`` may look names up itself).
        self._filling = threading.RLock()
        self._filled = False

    def register(
        self, name: str, factory: Callable[..., T] | str | None = None, *, help: str = ""
    ) -> Any:
        """Register ``factory`` (a callable or a lazy ``"module:attr"`` string) under ``name``.

        Without ``factory`` this is a decorator.
        """
        if factory is None:

            def deco(f: Callable[..., T]) -> Callable[..., T]:
                self.register(name, f, help=help)
                return f

            return deco
        if name in self._entries:
            raise ValueError(f"{self.kind} '{name}' is already registered")
        if isinstance(factory, str) and ":" not in factory:
            raise ValueError(f"lazy {self.kind} entry must be 'module:attr', got {factory!r}")
        self._entries[name] = factory
        self._help[name] = help
        return factory

    def get(self, name: str) -> Callable[..., T]:
        """The factory registered under ``name`` (imported now if it was lazy)."""
        self._load_entry_points()
        try:
            entry = self._entries[name]
        except KeyError:
            raise UnknownNameError.of(self.kind, name, sorted(self._entries)) from None
        if isinstance(entry, str):
            self._entries[name] = entry = import_object(entry)
        return entry

    def create(self, name: str, /, **kwargs: Any) -> T:
        """Call the factory registered under ``name`` with ``kwargs``."""
        return self.get(name)(**kwargs)

    def help(self, name: str) -> str:
        self._load_entry_points()
        return self._help.get(name, "")

    def names(self) -> list[str]:
        self._load_entry_points()
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        self._load_entry_points()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def refresh(self) -> None:
        """Forget what ``populate`` registered, so that the next lookup fills it again (after a
        benchmark was registered or removed in this process)."""
        with self._filling:
            for name in self._populated:
                self._entries.pop(name, None)
                self._help.pop(name, None)
            self._populated = set()
            self._entry_points_loaded = False
            self._filled = False

    def _load_entry_points(self) -> None:
        if self._filled:
            return
        with self._filling:
            if not self._entry_points_loaded:  # else: this thread is filling it (re-entered)
                self._fill()

    def _fill(self) -> None:
        self._entry_points_loaded = True
        if self._populate is not None:
            before = set(self._entries)
            try:
                self._populate(self)
            except BaseException:
                # All or nothing: a half-filled registry would hide names behind "unknown".
                for name in set(self._entries) - before:
                    del self._entries[name]
                    self._help.pop(name, None)
                self._entry_points_loaded = False
                raise
            self._populated = set(self._entries) - before
        for ep in entry_points(group=f"medibench.{self.kind}s"):
            if ep.name not in self._entries:
                self._entries[ep.name] = ep.value
        self._filled = True
