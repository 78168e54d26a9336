"""No import cycle between the parts of ``sagc`` (its subpackages and top-level modules),
and none between its files.

Every ``import`` statement counts, wherever it is (module level, inside a function, under
``TYPE_CHECKING``): a function-local import only defers a cycle to the first call. A part
is a subpackage (``sagc.controller``), a top-level module (``sagc.lengths``) or the root
package's ``__init__`` (``sagc``). A file is a module, a package being its ``__init__``;
``from sagc.a.b import f`` is an edge to ``sagc.a.b`` alone (a package's ``__init__``
importing its own modules, which then import each other, is how packages work).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def part_of(module: str) -> str:
    """``sagc.controller.registry`` -> ``sagc.controller``; ``sagc.lengths`` and ``sagc`` stay."""
    return ".".join(module.split(".")[:2])


def module_name(path: Path, root: Path = SRC) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST, module: str, is_package: bool, root: Path = SRC) -> set[str]:
    """The ``sagc`` modules a module's source imports, anywhere in it. ``from sagc import x``
    imports the module ``sagc.x`` when there is one, else a name of the root package."""
    package = module if is_package else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package, one level up per extra dot
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for a in node.names:
                sub = root / Path(*base.split("."), a.name)
                out.add(f"{base}.{a.name}" if sub.is_dir() or sub.with_suffix(".py").is_file() else base)
    return {m for m in out if m == "sagc" or m.startswith("sagc.")}


def import_graph(root: Path = SRC, node=part_of) -> dict[str, dict[str, set[str]]]:
    """``{node: {imported node: {importing modules}}}`` over every module under ``root/sagc``;
    a node is a part (``part_of``) or, with ``node=str``, the module itself."""
    graph: dict[str, dict[str, set[str]]] = {}
    for path in sorted((root / "sagc").rglob("*.py")):
        module = module_name(path, root)
        tree = ast.parse(path.read_text(), filename=str(path))
        src = node(module)
        for target in imported(tree, module, path.name == "__init__.py", root):
            dst = node(target)
            if dst != src:
                graph.setdefault(src, {}).setdefault(dst, set()).add(module)
    return graph


def cycles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """The strongly connected components of more than one part (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def cycle_report(graph: dict[str, dict[str, set[str]]]) -> str:
    """Each cycle with its edges and the modules that import along them ("" when none)."""
    problems = []
    for component in cycles(graph):
        edges = [
            f"  {a} -> {b}" + ("" if graph[a][b] == {a} else f" (imported in {', '.join(sorted(graph[a][b]))})")
            for a in component
            for b in component
            if b in graph.get(a, {})
        ]
        problems.append(f"cycle between {', '.join(component)}:\n" + "\n".join(edges))
    return "\n".join(problems)


def test_no_import_cycle_between_the_parts_of_sagc():
    report = cycle_report(import_graph())
    assert not report, report


def test_no_import_cycle_between_the_files_of_sagc():
    report = cycle_report(import_graph(node=str))
    assert not report, report


def test_every_import_counts_function_local_and_relative_ones_too(tmp_path):
    pkg = tmp_path / "sagc"
    for sub in ("a", "b", "c"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from sagc.a import thing\n")
    (pkg / "lengths.py").write_text("")
    (pkg / "a" / "x.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import y\n"  # within the part: not an edge
        "from sagc import lengths\n"  # a top-level module, not the root package
        "def f():\n    from sagc.b.z import g\n"
        "if TYPE_CHECKING:\n    import sagc.c\n"
    )
    (pkg / "a" / "y.py").write_text("")
    (pkg / "b" / "z.py").write_text("from ..a import x\nfrom sagc import thing\n")
    graph = import_graph(tmp_path)
    assert {k: set(v) for k, v in graph.items()} == {
        "sagc": {"sagc.a"},
        "sagc.a": {"sagc.lengths", "sagc.b", "sagc.c"},
        "sagc.b": {"sagc.a", "sagc"},
    }
    assert cycles(graph) == [["sagc", "sagc.a", "sagc.b"]]
    assert graph["sagc.a"]["sagc.b"] == {"sagc.a.x"}


def test_a_file_cycle_within_one_part_is_found_through_any_import(tmp_path):
    pkg = tmp_path / "sagc"
    (pkg / "a").mkdir(parents=True)
    for name in ("__init__.py", "a/__init__.py"):
        (pkg / name).write_text("")
    (pkg / "a" / "x.py").write_text("def f():\n    from sagc.a import y\n")  # function-local
    (pkg / "a" / "y.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .x import f\n")
    (pkg / "a" / "z.py").write_text("from sagc.a import y\n")  # imports into the circle, not part of it
    assert cycles(import_graph(tmp_path)) == []  # one part
    assert cycles(import_graph(tmp_path, node=str)) == [["sagc.a.x", "sagc.a.y"]]
