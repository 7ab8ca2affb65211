"""The package-level import graph of ``src/medibench``: who imports whom, read with ``ast``
(module-level and function-level imports alike; ``if TYPE_CHECKING:`` blocks left out).

The layers DESIGN.md draws: ``calls`` (every remote call, the one chat client) imports nothing
of medibench above ``io``; ``models`` imports neither ``judges`` nor ``runs``; and no package is
in an import cycle but the two listed in :data:`KNOWN_CYCLES` (the benchmark registry,
:mod:`medibench._benchmark`, sits below the datasets, protocols and judges that look benchmarks
up; the benchmark packages above them are imported by name when a lookup needs one).

Inside each package (any folder with ``__init__.py``) the same holds one level down: no two of
its direct modules and subpackages import each other, through ``__init__`` or otherwise
(:func:`module_graphs`).
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "medibench"

#: Elementary import cycles between packages before this test (for the record): 53, over
#: analysis, benchmarks, datasets, judges, models, protocols, report, runs and sources.
CYCLES_BEFORE = 53
#: Cycles allowed (none: the two that came with newer work, analysis <-> runs and
#: cli <-> prompt_tuning, were untangled through medibench._identity and medibench._console).
KNOWN_CYCLES: list[set[str]] = []
#: Cycles between the modules of one package before the module graph was tested: 11, in
#: benchmarks.medgen, benchmarks.medebench, calibration, judges, knowledge_edit, metrics, models,
#: prompt_tuning, runs, sources and train (each broken by moving the shared piece into a leaf).
MODULE_CYCLES_BEFORE = 11

@functools.cache
def package_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """``{package: packages it imports}`` over the top-level names of ``root`` (a module
    ``x.py`` is package ``x``; ``__init__.py`` is ``__init__``)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        source = parts[0].removesuffix(".py")
        graph.setdefault(source, set())
        for target in _imported(ast.parse(path.read_text(encoding="utf-8"))):
            if target != source:
                graph[source].add(target)
    return graph


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """The import statements of a file, at any depth, but those under ``if TYPE_CHECKING:``."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    return [
        node for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skip
    ]  # fmt: skip


def _imported(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in _imports(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
            if node.module == "medibench":
                names = [f"medibench.{a.name}" for a in node.names]
        found.update(n.split(".")[1] for n in names if n.startswith("medibench."))
    return found


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected sets of more than one package (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def module_graphs(root: Path = ROOT) -> dict[str, dict[str, set[str]]]:
    """``{package: {module: modules of the same package it imports}}`` for every package under
    ``root`` (any folder with ``__init__.py``, at any depth), between its direct modules and
    subpackages (a subpackage is one node; ``__init__.py`` is ``__init__``).

    Relative and absolute imports both count, function-level ones too (a lazy import that hides
    a loop is still a loop). ``from . import name`` (or ``from medibench.pkg import name``) where
    ``name`` is no module of the package is an edge to ``__init__``: a module that imports its
    package while ``__init__`` re-exports from it is in a real cycle. The parents that Python
    imports on the way to a module are no edges (every module would import ``__init__``).
    """
    files = {_dotted(path.relative_to(root.parent)): path for path in sorted(root.rglob("*.py"))}
    packages = {name for name, path in files.items() if path.name == "__init__.py"}
    graphs: dict[str, dict[str, set[str]]] = {pkg: {} for pkg in packages}
    for name, path in files.items():
        here = name if name in packages else name.rpartition(".")[0]
        targets = _imported_modules(ast.parse(path.read_text(encoding="utf-8")), here, set(files))
        parts = name.split(".")
        owners = [".".join(parts[:i]) for i in range(1, len(parts))]
        if name in packages:
            owners.append(name)
        for package in owners:
            source = _node(package, name)
            graph = graphs[package].setdefault(source, set())
            graph.update(n for n in (_node(package, t) for t in targets) if n not in (None, source))
    return graphs


def _dotted(relative: Path) -> str:
    parts = list(relative.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _node(package: str, target: str) -> str | None:
    """The direct member of ``package`` that ``target`` (a dotted module name) is or is in:
    ``__init__`` for the package itself, None outside it."""
    if target == package:
        return "__init__"
    if target.startswith(package + "."):
        return target[len(package) + 1 :].split(".")[0]
    return None


def _imported_modules(tree: ast.AST, here: str, modules: set[str]) -> set[str]:
    """The dotted names of the medibench modules a file imports; ``here`` is the package a
    relative import starts from, ``modules`` every module and package name."""
    found: set[str] = set()
    for node in _imports(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        else:
            start = here.split(".")
            if node.level:
                start = start[: len(start) - node.level + 1]
            else:
                start = []
            module = ".".join(start + ([node.module] if node.module else []))
            for alias in node.names:
                member = f"{module}.{alias.name}"
                found.add(member if member in modules else module)
    return {name for name in found if name.split(".")[0] == "medibench"}


def test_the_graph_reader_finds_a_cycle_it_is_shown():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set()}) == []
    tree = ast.parse(
        "from medibench.runs import x\nif TYPE_CHECKING:\n    import medibench.judges\n"
        "def f():\n    from medibench import models\n"
    )
    assert _imported(tree) == {"runs", "models"}


def test_the_module_graph_reader_reads_relative_absolute_lazy_and_init_imports(tmp_path):
    files = {
        "__init__.py": "",
        "pkg/__init__.py": "from .a import A\nHELPER = 1\n",
        "pkg/a.py": "from . import HELPER\nA = HELPER\n",
        "pkg/b.py": "def f():\n    from medibench.pkg.c import x\n",
        "pkg/c.py": "from .b import f\nfrom . import sub\nx = 1\n",
        "pkg/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n",
        "pkg/sub/__init__.py": "from .e import E\n",
        "pkg/sub/e.py": "from .. import c\nfrom medibench.pkg.sub import E\nimport medibench.pkg\n",
    }
    for name, text in files.items():
        (tmp_path / "medibench" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "medibench" / name).write_text(text, encoding="utf-8")
    graphs = module_graphs(tmp_path / "medibench")
    assert graphs["medibench.pkg"] == {
        "__init__": {"a"}, "a": {"__init__"}, "b": {"c"}, "c": {"b", "sub"}, "d": set(),
        "sub": {"c", "__init__"},
    }  # fmt: skip
    assert graphs["medibench.pkg.sub"] == {"__init__": {"e"}, "e": {"__init__"}}
    assert graphs["medibench"] == {"__init__": set(), "pkg": set()}
    found = sorted(sorted(c) for c in cycles(graphs["medibench.pkg"]))
    assert found == [["__init__", "a"], ["b", "c", "sub"]]


def test_models_imports_neither_judges_nor_runs_and_calls_nothing_above_io():
    graph = package_graph()
    assert not graph["models"] & {"judges", "runs"}, graph["models"]
    # registry imports no medibench module (a leaf): its lazy_attributes serves every package
    assert not graph["registry"], graph["registry"]
    assert graph["calls"] <= {"io", "registry"}, graph["calls"]


def test_no_package_is_in_an_import_cycle_but_the_known_ones():
    found = cycles(package_graph())
    new = [sorted(c) for c in found if c not in KNOWN_CYCLES]
    assert new == [], f"import cycles between packages: {new}"
    inside = set().union(*found) if found else set()
    assert not inside & {"calls", "models", "judges", "benchmarks", "datasets", "protocols",
                         "sources", "report", "samples", "io"}  # fmt: skip


def test_no_module_is_in_an_import_cycle_inside_its_package():
    found = {
        package: sorted(sorted(c) for c in cycles(graph))
        for package, graph in sorted(module_graphs().items())
        if cycles(graph)
    }
    shown = "\n".join(f"  {package}: {c}" for package, cs in found.items() for c in cs)
    assert not found, f"import cycles between modules of one package:\n{shown}"


def test_each_package_imports_on_its_own():
    """Each top-level package imported first, in a fresh set of medibench modules (what a
    user's first ``import`` does): a cycle that breaks at import time fails here."""
    packages = sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file())
    script = (
        "import importlib, sys\n"
        f"for name in {packages!r}:\n"
        "    for m in [m for m in sys.modules if m == 'medibench' or m.startswith('medibench.')]:\n"
        "        del sys.modules[m]\n"
        "    importlib.import_module('medibench.' + name)\n"
        "print('ok', len(sys.argv))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("ok")
