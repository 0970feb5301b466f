"""Measures of the package tree as the architecture (tests/unit/test_layers.py asserts them;
``python -m tests.unit.architecture [root]`` prints them for a closing note)."""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from recovery_lib.modes.registry import mode_names

ROOT = Path(__file__).resolve().parents[2] / "recovery_lib"

# The floors, lowest first: a module imports only from lower floors (or its own package).
FLOORS: tuple[tuple[str, ...], ...] = (
    ("errors",),  # the root exception imports nothing; every floor may raise it
    ("settings", "files", "charts", "processes"),
    ("kafka",),
    ("io", "chaos"),
    ("spark", "metrics"),
    ("verify", "runtime"),
    ("causal", "protocols"),
    ("ha",),
    ("job",),
    ("cec", "nexmark"),
    ("pipeline",),
    ("modes",),
    ("experiment",),
    ("ops",),
    ("reproduce", "bench", "demo"),
    ("advisor",),
    ("cli",),
)
# The registered modes' names: a comparison with one outside the registry is a mode's
# behaviour leaking out of its module.
MODE_NAMES = frozenset(mode_names())


def modules(root: Path = ROOT) -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(root.rglob("*.py")):
        yield str(path.relative_to(root)), ast.parse(path.read_text())


def package_of(module: str) -> str:
    first = module.split("/")[0]
    return first.removesuffix(".py")


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.ImportFrom) and node.module:
        return [node.module]
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    return []


def up_imports(root: Path = ROOT) -> list[str]:
    """Imports of a package on the same or a higher floor (``module:line -> target``)."""
    floor = {p: i for i, group in enumerate(FLOORS) for p in group}
    found = []
    for module, tree in modules(root):
        pkg = package_of(module)
        for node in ast.walk(tree):
            for name in _imported(node):
                if not name.startswith("recovery_lib."):
                    continue
                target = name.split(".")[1]
                if pkg == "__init__" or target == pkg:
                    continue
                if target not in floor or pkg not in floor or floor[target] >= floor[pkg]:
                    found.append(f"{module}:{node.lineno} -> {name}")
    return found


def file_circles(root: Path = ROOT) -> list[tuple[str, ...]]:
    """Cycles among module files (any import, function-local ones too)."""
    graph: dict[str, set[str]] = {}
    for module, tree in modules(root):
        name = "recovery_lib." + module.removesuffix(".py").replace("/", ".")
        name = name.removesuffix(".__init__")
        graph[name] = {t for node in ast.walk(tree) for t in _imported(node) if t != name}
    own = set(graph)
    edges = {m: {t for t in targets if t in own} for m, targets in graph.items()}
    circles: set[tuple[str, ...]] = set()

    def visit(start: str, node: str, path: list[str]) -> None:
        for nxt in edges[node]:
            if nxt == start:
                i = path.index(min(path))
                circles.add(tuple(path[i:] + path[:i]))
            elif nxt not in path and nxt > start:
                visit(start, nxt, [*path, nxt])

    for start in sorted(edges):
        visit(start, start, [start])
    return sorted(circles)


def local_imports(root: Path = ROOT) -> tuple[int, int]:
    """Imports inside functions: all of them, and those of the project's own modules."""
    total = own = 0
    for _, tree in modules(root):
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                for node in ast.walk(fn):
                    for name in _imported(node):
                        total += 1
                        own += name.startswith("recovery_lib")
    return total, own


def mode_comparisons(root: Path = ROOT) -> list[str]:
    """Comparisons with a recovery mode's name (``x == "kazoo"``, ``m in ("native", ...)``)
    outside the mode registry."""
    found = []
    for module, tree in modules(root):
        if package_of(module) == "modes":
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            names = {
                c.value
                for o in operands
                for c in ast.walk(o)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            }
            if names & MODE_NAMES:
                found.append(f"{module}:{node.lineno}")
    return found


def prints(root: Path = ROOT) -> list[str]:
    """``print()`` calls in library code (the CLI prints, and a module run as a program may
    print under ``if __name__ == "__main__"``; everything else logs)."""
    found = []
    for module, tree in modules(root):
        if package_of(module) == "cli":
            continue
        mains = [
            node
            for node in tree.body
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
        ]
        program = {id(n) for main in mains for n in ast.walk(main)}
        found += [
            f"{module}:{node.lineno}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "print"
            and id(node) not in program
        ]
    return found


def measure(root: Path = ROOT) -> dict[str, object]:
    total, own = local_imports(root)
    return {
        "mode_comparisons": len(mode_comparisons(root)),
        "up_imports": up_imports(root),
        "file_circles": [" <-> ".join(c) for c in file_circles(root)],
        "local_imports": total,
        "local_imports_own": own,
        "prints": len(prints(root)),
    }


if __name__ == "__main__":
    print(json.dumps(measure(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT), indent=1))
