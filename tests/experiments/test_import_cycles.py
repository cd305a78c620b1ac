"""The import graph of synbench's modules has no cycle, and only the CLI imports ``experiments.commands``.

Read from the source (``ast``), so function-local imports count as well as top-level ones: a cycle hidden by
importing inside a function is still a cycle. An edge goes to the module an import names (``from pkg import
mod`` names ``pkg.mod`` when that is a module, else ``pkg``); imports by a string (``importlib``) are not edges,
which is how a registry loads its plug-ins without depending on them.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("experiments", "analysis", "lightning_modules")


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The synbench modules that module ``name`` (file ``path``) imports, anywhere in the file."""

    def resolve(target: str) -> str | None:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        return target or None

    targets: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's own package
                package = name if path.name == "__init__.py" else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}" if base else package
            targets += [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
    return {m for m in map(resolve, targets) if m is not None and m != name}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a path back to its start) per strongly connected component of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for root in sorted(graph):  # Tarjan's algorithm, iteratively
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(component)
    return [_cycle_in(graph, component) for component in components]


def _cycle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest path from the component's first module back to itself, inside the component."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & component):
                if nxt == start:
                    return [*paths[node], start]
                if nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # a strongly connected component always has one


def test_the_cycle_finder_finds_cycles_hidden_in_functions(tmp_path):
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    module = tmp_path / "m.py"
    module.write_text("import os\n\n\ndef f():\n    from experiments.evaluate import tasks\n"
                      "    import lightning_modules.x\n")
    modules = {"m": module, "experiments.evaluate": module, "experiments.evaluate.tasks": module,
               "lightning_modules": module}
    assert _imported("m", module, modules) == {"experiments.evaluate.tasks", "lightning_modules"}


def test_no_import_cycle_among_synbench_modules():
    graph = import_graph()
    assert len(graph) > 100
    found = [" -> ".join(cycle) for cycle in cycles(graph)]
    assert found == [], "import cycles:\n" + "\n".join(found)


def test_only_the_cli_imports_the_commands():
    """Evaluators, families and the analysis never import ``experiments.commands``: the options they share with
    the CLI live in ``experiments.cli_options``."""
    graph = import_graph()
    found = sorted(name for name, imported in graph.items()
                   if not (name == "experiments.cli" or name.startswith("experiments.commands"))
                   and any(m == "experiments.commands" or m.startswith("experiments.commands.") for m in imported))
    assert found == []
