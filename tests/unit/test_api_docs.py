"""The public API documents itself (issue 58 item 4).

Every name in a public module's ``__all__`` exists and has a docstring; each public function
and method says what it takes (``Args:``, every parameter), gives (``Returns:``) and raises
(``Raises:``, every exception its own body raises); each class names its constructor's fields
(``Args:`` or ``Attributes:``). The reference (docs/api/, ``make docs-api``) builds without a
pdoc warning and is the one checked in. No Spark session, no broker.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import importlib
import importlib.util
import inspect
import re
import sys
import textwrap
import types
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pdoc.doc
import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKED_IN = ROOT / "docs" / "api"


def _reference_builder() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("api_reference", ROOT / "docs/api_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


api = _reference_builder()

# Names in the reference whose documentation is still to come; a name whose docstring is
# complete must leave this set (the test says so).
PENDING: frozenset[str] = frozenset()

SECTION = re.compile(r"^(\s*)(Args|Attributes|Returns|Yields|Raises):\s*$")
ENTRY = re.compile(r"^\**([\w.]+)(?:\s*\([^)]*\))?:")
CROSS_REFERENCE = re.compile(r"`+(recovery_lib(?:\.\w+)+)`+")


def sections(doc: str) -> dict[str, list[str]]:
    """A Google-style docstring's sections: name -> the entries it lists (the word before
    ``:`` on each line at the section's first indentation)."""
    found: dict[str, list[str]] = {}
    current: str | None = None
    header = entries = 0
    for line in doc.splitlines():
        match = SECTION.match(line)
        indent = len(line) - len(line.lstrip())
        if match:
            current, header, entries = match.group(2), len(match.group(1)), 0
            found[current] = []
            continue
        if current is None or not line.strip():
            continue
        if indent <= header:
            current = None
            continue
        entries = entries or indent
        entry = ENTRY.match(line.strip())
        if indent == entries and entry:
            found[current].append(entry.group(1))
    return found


def _own_nodes(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's own body (not of functions or classes defined in it)."""
    nested = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef
    stack = [fn]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, nested))


def _tree(fn: Callable[..., Any]) -> ast.AST | None:
    try:
        source = textwrap.dedent(inspect.getsource(inspect.unwrap(fn)))
    except (OSError, TypeError):  # generated (a dataclass's __init__) or built in
        return None
    return ast.parse(source).body[0]


def raised(fn: Callable[..., Any]) -> set[str]:
    """The exceptions ``fn``'s own body raises by name (a bare re-raise is not one)."""
    tree = _tree(fn)
    names = set()
    for node in _own_nodes(tree) if tree is not None else ():
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = exc.attr if isinstance(exc, ast.Attribute) else getattr(exc, "id", "")
            if name[:1].isupper():
                names.add(name)
    return names


def returns_value(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` returns something other than None: by its annotation, else its body."""
    annotation = inspect.signature(fn).return_annotation
    if annotation is not inspect.Signature.empty:
        return annotation not in (None, "None", type(None))
    tree = _tree(fn)
    return tree is not None and any(
        isinstance(node, ast.Return)
        and node.value is not None
        and not (isinstance(node.value, ast.Constant) and node.value.value is None)
        for node in _own_nodes(tree)
    )


def function_problems(where: str, fn: Callable[..., Any], doc: str | None) -> list[str]:
    """What the docstring of function or method ``fn`` lacks."""
    if not doc:
        return [f"{where}: no docstring"]
    found = sections(doc)
    problems = []
    params = [n for n in inspect.signature(fn).parameters if n not in ("self", "cls")]
    if params and "Args" not in found:
        problems.append(f"{where}: no Args: section")
    elif params:
        missing = [n for n in params if n not in found["Args"]]
        if missing:
            problems.append(f"{where}: Args: does not name {', '.join(missing)}")
    if returns_value(fn) and not {"Returns", "Yields"} & set(found):
        problems.append(f"{where}: returns a value, no Returns: section")
    problems += raises_problems(where, raised(fn), found)
    return problems


def raises_problems(where: str, names: set[str], found: dict[str, list[str]]) -> list[str]:
    if not names:
        return []
    if "Raises" not in found:
        return [f"{where}: raises {', '.join(sorted(names))}, no Raises: section"]
    listed = {entry.rsplit(".", 1)[-1] for entry in found["Raises"]}
    missing = sorted(names - listed)
    return [f"{where}: Raises: does not name {', '.join(missing)}"] if missing else []


def constructor_fields(cls: type) -> list[str]:
    """The names a class's constructor takes (none for exceptions, enums and protocols)."""
    if issubclass(cls, BaseException | enum.Enum) or getattr(cls, "_is_protocol", False):
        return []
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls) if f.init and not f.name.startswith("_")]
    if "__init__" in vars(cls):
        return [n for n in inspect.signature(cls.__init__).parameters if n != "self"]
    return []


def class_problems(where: str, cls: type, doc: str) -> list[str]:
    """What the docstrings of class ``cls`` and of its own public methods lack."""
    if not doc:
        return [f"{where}: no docstring"]
    found = sections(doc)
    problems = []
    fields = constructor_fields(cls)
    listed = set(found.get("Args", [])) | set(found.get("Attributes", []))
    if fields and not {"Args", "Attributes"} & set(found):
        problems.append(f"{where}: no Args: or Attributes: section for its fields")
    elif fields and set(fields) - listed:
        missing = [f for f in fields if f not in listed]
        problems.append(f"{where}: Args:/Attributes: does not name {', '.join(missing)}")
    own = [vars(cls).get(part) for part in ("__init__", "__post_init__")]
    constructor = {
        name
        for fn in own
        if inspect.isfunction(fn) and fn.__qualname__.startswith(f"{cls.__qualname__}.")
        for name in raised(fn)
    }  # (a protocol's __init__ is typing's)
    problems += raises_problems(where, constructor, found)
    if issubclass(cls, enum.Enum):
        return problems
    field_names = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else ()
    for name, member in vars(cls).items():
        if name.startswith("_") or name in field_names:  # a field's default is no method
            continue
        if isinstance(member, property):
            if not inspect.getdoc(member):
                problems.append(f"{where}.{name}: no docstring")
            elif member.fget is not None:
                problems += raises_problems(
                    f"{where}.{name}", raised(member.fget), sections(inspect.getdoc(member) or "")
                )
            continue
        fn = member.__func__ if isinstance(member, classmethod | staticmethod) else member
        if inspect.isfunction(fn):
            problems += function_problems(f"{where}.{name}", fn, inspect.getdoc(fn))
    return problems


def module_problems(module_name: str) -> dict[str, list[str]]:
    """Per public name of ``module_name`` (``module.name``), what its documentation lacks."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        return {module_name: [f"{module_name}: no __all__"]}
    documented = pdoc.doc.Module(module)
    problems: dict[str, list[str]] = {}
    for name in names:
        where = f"{module_name}.{name}"
        if not hasattr(module, name):
            problems[where] = [f"{where}: in __all__ but not defined"]
            continue
        obj = getattr(module, name)
        with warnings.catch_warnings():  # pdoc's warnings: the build's test
            warnings.simplefilter("ignore")
            member = documented.get(name)
        doc = member.docstring if member is not None else ""
        if inspect.isclass(obj):
            problems[where] = class_problems(where, obj, doc)
        elif inspect.isfunction(obj):
            problems[where] = function_problems(where, obj, doc)
        else:
            problems[where] = [] if doc else [f"{where}: no docstring"]
        problems[where] += cross_reference_problems(where, obj, doc)
    return problems


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def cross_reference_problems(where: str, obj: Any, doc: str) -> list[str]:
    """Dotted ``recovery_lib.…`` names in the docstrings of ``obj`` and its members that name
    nothing."""
    docs = [doc]
    if inspect.isclass(obj):
        docs += [inspect.getdoc(m) or "" for n, m in vars(obj).items() if not n.startswith("_")]
    return [
        f"{where}: `{ref}` names nothing"
        for text in docs
        for ref in CROSS_REFERENCE.findall(text)
        if not _resolves(ref)
    ]


def all_problems(modules: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """The problems found, and the pending names that have none left."""
    problems, done = [], []
    for module in modules:
        for where, found in module_problems(module).items():
            if where in PENDING:
                if not found:
                    done.append(where)
            else:
                problems += found
    return problems, done


def test_every_public_name_is_documented():
    problems, done = all_problems(api.MODULES)
    assert not problems, "\n".join(problems)
    assert not done, f"documented now, take them out of PENDING: {done}"


def test_the_reference_builds_without_warnings(tmp_path):
    api.build(tmp_path)  # a pdoc warning is an error there
    assert (tmp_path / "recovery_lib" / "job.html").is_file()


def test_the_checked_in_reference_is_current(tmp_path):
    api.build(tmp_path)
    built = {p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()}
    kept = {p.relative_to(CHECKED_IN) for p in CHECKED_IN.rglob("*") if p.is_file()}
    stale = sorted(
        str(p) for p in built & kept if (tmp_path / p).read_bytes() != (CHECKED_IN / p).read_bytes()
    )
    assert built == kept and not stale, (
        f"docs/api/ is not what the docstrings give (missing {sorted(map(str, built - kept))}, "
        f"extra {sorted(map(str, kept - built))}, changed {stale}): run make docs-api"
    )


BROKEN = '''
"""A module whose API documents itself badly."""

__all__ = ["Good", "bare", "half", "missing"]


class Good:
    """A class.

    Args:
        size: How big.
    """

    def __init__(self, size: int) -> None:
        self.size = size

    def grow(self, by: int) -> int:
        """Grows; see `recovery_lib.nowhere.Thing`."""
        if by < 0:
            raise ValueError(by)
        return self.size + by


def bare(x):
    return x


def half(x: int, y: int) -> int:
    """Adds.

    Args:
        x: One.
    """
    return x + y
'''


def test_the_checks_can_fail(tmp_path, monkeypatch):
    path = tmp_path / "broken_api.py"
    path.write_text(BROKEN)
    spec = importlib.util.spec_from_file_location("broken_api", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "broken_api", module)  # gone again after the test
    spec.loader.exec_module(module)
    problems = [p for found in module_problems("broken_api").values() for p in found]
    assert problems == [
        "broken_api.Good.grow: no Args: section",
        "broken_api.Good.grow: returns a value, no Returns: section",
        "broken_api.Good.grow: raises ValueError, no Raises: section",
        "broken_api.Good: `recovery_lib.nowhere.Thing` names nothing",
        "broken_api.bare: no docstring",
        "broken_api.half: Args: does not name y",
        "broken_api.half: returns a value, no Returns: section",
        "broken_api.missing: in __all__ but not defined",
    ]
    with warnings.catch_warnings(), pytest.raises(Warning, match="missing"):
        warnings.simplefilter("error")
        pdoc.pdoc("broken_api")
