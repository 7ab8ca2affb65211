"""The :class:`Benchmark` object: one registration that makes a benchmark known everywhere.

It lives below every package that looks benchmarks up (datasets, protocols, judges) and above
none of them: a benchmark package is imported only when a lookup needs it (:data:`BENCHMARKS`'
entries are ``"module:attr"`` strings), so the lookups make no import cycle. Public names:
:mod:`medibench.benchmarks`.

A benchmark package (``medibench.benchmarks.miedb``, or a third party's ``toy_pkg``) exposes one
``BENCHMARK = Benchmark(...)``. Registering it makes its dataset kind (``miedb:DIR``), its
scoring protocols (``miedb@paper``, ``miedb@1``, and the bare ``miedb`` for the latest), its
judge protocols and its layout detection known to ``load_dataset``, ``load_protocol``,
``load_judge``, the CLI listings, ``score``, ``run``, ``judge`` and the reports.

Built-in benchmarks are the sub-packages of ``medibench.benchmarks`` (:data:`BUILTIN`); third
parties register the same object through the entry-point group ``medibench.benchmarks``::

    [project.entry-points."medibench.benchmarks"]
    toybench = "toy_pkg:BENCHMARK"

Plug-ins load lazily (on the first lookup), and a broken one is a warning naming it, never a
crash of ``medibench``. See docs/benchmarks.md for a worked example.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from medibench.registry import Registry, UnknownNameError, import_object

if TYPE_CHECKING:
    from medibench.sources._hub import HubSource

__all__ = [
    "BENCHMARKS",
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "Benchmark",
    "BenchmarkRegistry",
    "declared_entries",
    "registry_from_benchmarks",
]

T = TypeVar("T")

ENTRY_POINT_GROUP = "medibench.benchmarks"


def _builtin() -> dict[str, str]:
    """Every sub-package of ``medibench.benchmarks`` is a built-in benchmark (name order)."""
    here = Path(__file__).parent / "benchmarks"
    names = sorted(
        p.name for p in here.iterdir() if (p / "__init__.py").is_file() and p.name[0] != "_"
    )
    return {name: f"medibench.benchmarks.{name}:BENCHMARK" for name in names}


#: The built-in benchmarks, in the order plain folders are tested for their layout.
BUILTIN: dict[str, str] = _builtin()


@dataclass(frozen=True)
class Benchmark:
    """Everything medibench needs to know about one benchmark.

    Attributes:
        name: the dataset kind (``miedb`` in ``miedb:DIR``); letters, digits, ``_`` and ``-``.
        load: ``(path: str, **options) -> Dataset`` (or its ``"module:attr"``); called with
            ``path`` when the spec has one (``miedb:/data/MieDB-100k``), without it otherwise.
        detect: ``(Path) -> bool`` (or ``"module:attr"``): whether a plain folder has this
            benchmark's layout, for ``--dataset DIR`` autodetection. ``None``: never detected.
        layout: what ``detect`` looks for, in a few words (used in the "no known layout" error).
        protocols: its scoring protocols: objects with ``name`` and ``version``, classes or
            factories that make one, or ``"module:attr"`` strings naming either.
        default_protocols: the specs (``name@version``) that score it when none is given;
            empty: every protocol in ``protocols`` (:meth:`default_specs`).
        latest: the spec a bare protocol name resolves to (``{"miedb": "miedb@1"}``); by
            default the last protocol listed under each name.
        judges: its judge protocols (objects, factories or ``"module:attr"`` strings).
        default_judge: the judge protocol used for its judged metrics when none is named.
        help: one line for ``medibench datasets``.
        hub: where its official files are on the Hugging Face Hub
            (:class:`medibench.sources.HubSource`: repo, pinned revision, file patterns,
            licence), for ``medibench download``; ``None``: not on the Hub.
        write: ``(folder, samples, result) -> None`` (or its ``"module:attr"``): writes samples
            in this benchmark's layout for ``export-dataset --format NAME``; ``None``: none.
        properties: its own sample properties for ``--by-bins`` (docs/cli.md): a mapping of
            name to :class:`medibench.datasets.SampleProperty` (or its ``"module:attr"``); one
            named as a generic property (``mask_fraction``) replaces it for this benchmark's
            samples. ``None``: the generic ones only.
    """

    name: str
    load: Callable[..., Any] | str
    detect: Callable[[Path], bool] | str | None = None
    layout: str = ""
    protocols: Sequence[Any] = ()
    default_protocols: Sequence[str] = ()
    latest: dict[str, str] = field(default_factory=dict)
    judges: Sequence[Any] = ()
    default_judge: str | None = None
    help: str = ""
    hub: HubSource | None = None
    write: Callable[..., Any] | str | None = None
    properties: Any = None

    def __post_init__(self) -> None:
        if not self.name or not all(c.isalnum() or c in "_-" for c in self.name):
            raise ValueError(
                f"benchmark name {self.name!r} must be letters, digits, '_' or '-' "
                "(it is the dataset kind in 'NAME:DIR')"
            )
        object.__setattr__(self, "default_protocols", tuple(self.default_protocols))

    def loader(self) -> Callable[..., Any]:
        """The ``load`` callable (imported now if it was a string)."""
        return _resolve(self.load)

    def writer(self) -> Callable[..., Any] | None:
        """The ``write`` callable, or ``None``."""
        return None if self.write is None else _resolve(self.write)

    def sample_properties(self) -> dict[str, Any]:
        """``properties`` as a dict (imported now if it was a string); ``{}`` without any."""
        return {} if self.properties is None else dict(_resolve(self.properties))

    def detector(self) -> Callable[[Path], bool] | None:
        """The ``detect`` callable, or ``None``."""
        return None if self.detect is None else _resolve(self.detect)

    def protocol_objects(self) -> list[Any]:
        """The scoring protocols as objects (strings imported, classes instantiated)."""
        return [_instance(p) for p in self.protocols]

    def default_specs(self) -> tuple[str, ...]:
        """``default_protocols``, or ``name@version`` of every declared protocol when it is
        empty (the protocols are imported then)."""
        if self.default_protocols:
            return tuple(self.default_protocols)
        return tuple(f"{p.name}@{p.version}" for p in self.protocol_objects())

    def judge_objects(self) -> list[Any]:
        """The judge protocols as objects."""
        return [_instance(j) for j in self.judges]


def _resolve(obj: Any) -> Any:
    return import_object(obj) if isinstance(obj, str) else obj


def _instance(obj: Any) -> Any:
    """A protocol object from an object, a class or factory, or a ``"module:attr"`` string."""
    return _made(_resolve(obj))[0]


def declared_entries(declared: Sequence[Any]) -> Iterator[tuple[Any, Callable[[], Any]]]:
    """``(object, factory)`` for each protocol or judge a benchmark declares (an object, a class
    or factory, or a ``"module:attr"`` string naming either): what a registry entry needs."""
    for item in declared:
        yield _made(_resolve(item))


def registry_from_benchmarks(
    kind: str, entries: Callable[[Benchmark], Iterable[tuple[str, Callable[..., T], str]]]
) -> Registry[T]:
    """A registry of ``kind`` (datasets, protocols, judges) filled before its first lookup, and
    again after a benchmark is registered or removed, with the ``(name, factory, help)``
    entries that ``entries(benchmark)`` gives for every benchmark of :data:`BENCHMARKS`."""

    def populate(registry: Registry[T]) -> None:
        for bench in BENCHMARKS:
            for name, factory, help in entries(bench):
                registry.register(name, factory, help=help)

    return Registry(kind, populate=populate)


def _made(target: Any) -> tuple[Any, Callable[[], Any]]:
    if isinstance(target, type) or (callable(target) and not hasattr(target, "name")):
        return target(), target
    return target, lambda: target


class BenchmarkRegistry:
    """Benchmarks by name: the built-ins, then the ``medibench.benchmarks`` entry points.

    Lookups import a benchmark package only when it is first needed. A plug-in that fails to
    import, or whose entry point is not a :class:`Benchmark`, is skipped with a warning that
    names it and the error.
    """

    def __init__(self, builtin: dict[str, str]) -> None:
        self._entries: dict[str, Benchmark | str] = dict(builtin)
        self._plugins_loaded = False
        self._broken: dict[str, str] = {}

    def register(self, benchmark: Benchmark, *, replace: bool = False) -> Benchmark:
        """Register ``benchmark`` in this process (tests, notebooks)."""
        if not isinstance(benchmark, Benchmark):
            raise TypeError(f"expected a medibench Benchmark, got {type(benchmark).__name__}")
        self._load_plugins()
        if benchmark.name in self._entries and not replace:
            raise ValueError(f"benchmark '{benchmark.name}' is already registered")
        self._entries[benchmark.name] = benchmark
        _refresh_registries()
        return benchmark

    def unregister(self, name: str) -> None:
        """Remove ``name`` (a benchmark registered in this process, for instance)."""
        self._entries.pop(name, None)
        _refresh_registries()

    def names(self) -> list[str]:
        """Every registered name, built-ins first (detection order), then plug-ins."""
        self._load_plugins()
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self.names()

    def __iter__(self) -> Iterator[Benchmark]:
        for name in self.names():
            bench = self._try_get(name)
            if bench is not None:
                yield bench

    def get(self, name: str) -> Benchmark:
        """The benchmark ``name``; ``UnknownNameError`` with the closest names otherwise."""
        self._load_plugins()
        if name not in self._entries:
            failed = self._broken.get(name)
            note = f" (plug-in '{name}' failed to load: {failed})" if failed is not None else ""
            raise UnknownNameError.of("dataset kind", name, self._entries, note=note)
        entry = self._entries[name]
        if isinstance(entry, str):
            bench = import_object(entry)
            if not isinstance(bench, Benchmark):
                raise TypeError(f"{entry} is a {type(bench).__name__}, not a medibench Benchmark")
            self._entries[name] = entry = bench
        return entry

    def _try_get(self, name: str) -> Benchmark | None:
        """``get``, but a broken plug-in is a warning and ``None`` (listings go on)."""
        try:
            return self.get(name)
        except Exception as exc:  # a plug-in's import error must not break medibench
            if name in BUILTIN:
                raise
            self._warn(name, str(self._entries.get(name, "")), exc)
            self._entries.pop(name, None)
            return None

    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in self._entries:
                warnings.warn(
                    f"medibench benchmark plug-in '{ep.name}' ({ep.value}) is ignored: "
                    "a benchmark of that name is already registered",
                    stacklevel=3,
                )
                continue
            self._entries[ep.name] = ep.value

    def _warn(self, name: str, target: str, exc: Exception) -> None:
        self._broken[name] = f"{type(exc).__name__}: {exc}"
        warnings.warn(
            f"medibench benchmark plug-in '{name}' ({target}) could not be loaded and is "
            f"skipped: {type(exc).__name__}: {exc}",
            stacklevel=3,
        )


def _refresh_registries() -> None:
    """The dataset, protocol and judge registries are filled from the benchmarks once; after a
    change in this process, those already filled are filled again on their next lookup."""
    for module, name in (
        ("medibench.datasets", "DATASETS"),
        ("medibench.protocols", "PROTOCOLS"),
        ("medibench.judges._protocols", "JUDGES"),
    ):
        loaded = sys.modules.get(module)
        if loaded is not None and hasattr(loaded, name):
            getattr(loaded, name).refresh()


#: Every benchmark medibench knows in this process.
BENCHMARKS = BenchmarkRegistry(BUILTIN)
