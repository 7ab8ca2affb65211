"""The package-level import graph of ``src/medibench``: who imports whom, read with ``ast``
(module-level and function-level imports alike; ``if TYPE_CHECKING:`` blocks left out).

The layers DESIGN.md draws: ``calls`` (every remote call, the one chat client) imports nothing
of medibench above ``io``; ``models`` imports neither ``judges`` nor ``runs``; and no package is
in an import cycle but the two listed in :data:`KNOWN_CYCLES` (the benchmark registry,
:mod:`medibench._benchmark`, sits below the datasets, protocols and judges that look benchmarks
up; the benchmark packages above them are imported by name when a lookup needs one).
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


def _imported(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
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


def test_the_graph_reader_finds_a_cycle_it_is_shown():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set()}) == []
    tree = ast.parse(
        "from medibench.runs import x\nif TYPE_CHECKING:\n    import medibench.judges\n"
        "def f():\n    from medibench import models\n"
    )
    assert _imported(tree) == {"runs", "models"}


def test_models_imports_neither_judges_nor_runs_and_calls_nothing_above_io():
    graph = package_graph()
    assert not graph["models"] & {"judges", "runs"}, graph["models"]
    assert graph["calls"] <= {"io"}, graph["calls"]


def test_no_package_is_in_an_import_cycle_but_the_known_ones():
    found = cycles(package_graph())
    new = [sorted(c) for c in found if c not in KNOWN_CYCLES]
    assert new == [], f"import cycles between packages: {new}"
    inside = set().union(*found) if found else set()
    assert not inside & {"calls", "models", "judges", "benchmarks", "datasets", "protocols",
                         "sources", "report", "samples", "io"}  # fmt: skip


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
