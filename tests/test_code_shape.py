"""The shape of the house, checked: short functions, and pure cores.

docs/ARCHITECTURE.md describes the layering; these tests keep it true as the code grows.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PRODUCT = ("qem_edit", "renderer", "reconciler")
MAX_LINES = 50
# The pure cores read no database, clock, terminal or command-line framework.
IMPURE = {"sqlite3", "typer", "click", "time", "datetime", "subprocess", "filelock"}
PURE_CORES = ("renderer", "reconciler")
PURE_MODULES = ("qem_edit/model.py", "qem_edit/resolver.py")


def _trees(folders):  # type: ignore[no-untyped-def]
    for folder in folders:
        for path in sorted((REPO / folder).rglob("*.py")):
            yield path, ast.parse(path.read_text("utf-8"))


def test_no_product_function_is_longer_than_a_screen() -> None:
    long = [
        f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path, tree in _trees(PRODUCT)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > MAX_LINES
    ]
    assert not long, f"functions over {MAX_LINES} lines (split them where the idea splits): {long}"


def _imports(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                out.add(node.module.split(".")[0])
            elif node.module:
                out.add("." + node.module.split(".")[-1] if node.level else node.module)
    return out


def test_the_renderer_and_the_reconciler_are_pure() -> None:
    found = {}
    for path, tree in _trees(PURE_CORES):
        bad = _imports(tree) & IMPURE
        bad |= {m for m in _imports(tree) if m in (".store", ".cli", ".terminal", ".export", ".checkin")}
        if bad:
            found[str(path.relative_to(REPO))] = sorted(bad)
    for name in PURE_MODULES:
        bad = _imports(ast.parse((REPO / name).read_text("utf-8"))) & IMPURE
        if bad:
            found[name] = sorted(bad)
    assert not found, f"pure modules importing a database, clock, terminal or CLI: {found}"


# The storage layer owns every SQL statement and every transaction (docs/ARCHITECTURE.md):
# every other module reads and writes the index through Store's methods and qem_edit.index's
# functions, and never through a Store method named private.
STORAGE = ("qem_edit/store.py", "qem_edit/index.py", "qem_edit/db.py")
# Modules that read another program's SQLite file, not the index: its statements are theirs.
FOREIGN_SQL = {
    "qem_edit/convert.py": "reads a store of an older qem (memory.db, one SQLite file) to convert it",
    "qem_edit/vectr.py": "reads vectr's own SQLite database (a copy of it) to import it",
}
_STATEMENTS = {"execute", "executemany", "executescript"}


def _sql(tree: ast.AST) -> list[str]:
    found = [f"{node.func.attr}() at line {node.lineno}" for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _STATEMENTS]
    return found + (["imports sqlite3"] if "sqlite3" in _imports(tree) else [])


def _store_privates() -> set[str]:
    tree = ast.parse((REPO / "qem_edit/store.py").read_text("utf-8"))
    [store] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Store"]
    return {n.name for n in store.body if isinstance(n, ast.FunctionDef)
            and n.name.startswith("_") and not n.name.startswith("__")}


def test_the_storage_layer_owns_every_statement() -> None:
    privates = _store_privates()
    found = {}
    for path, tree in _trees(PRODUCT):
        name = path.relative_to(REPO).as_posix()
        if name in STORAGE:
            continue
        bad = [] if name in FOREIGN_SQL else _sql(tree)
        bad += [f"Store.{node.attr} at line {node.lineno}" for node in ast.walk(tree)
                if isinstance(node, ast.Attribute) and node.attr in privates
                and not (isinstance(node.value, ast.Name) and node.value.id == "self")]
        if bad:
            found[name] = bad
    assert not found, f"SQL or Store's private methods outside store.py/index.py/db.py: {found}"
    assert all(_sql(ast.parse((REPO / name).read_text("utf-8"))) for name in FOREIGN_SQL), "a stale FOREIGN_SQL entry"


def test_one_write_transaction() -> None:
    """BEGIN IMMEDIATE is written once: db.transaction, which every write of the index is."""
    spelled = sorted(path.relative_to(REPO).as_posix() for path, _ in _trees(PRODUCT)
                     if "BEGIN IMMEDIATE" in path.read_text("utf-8"))
    assert spelled == ["qem_edit/db.py"], spelled


def test_a_message_names_an_id_by_the_one_rule_in_ids() -> None:
    """An id cut short for a message (`x[:8]`, a dispute's `x[:6]`) is ids.shown or
    ids.side_shown: one length, one fallback to the short id, in one place."""
    cut = [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for path, tree in _trees(PRODUCT) if path.name != "ids.py"
        for node in ast.walk(tree)
        if isinstance(node, ast.Slice) and node.lower is None and node.step is None
        and isinstance(node.upper, ast.Constant) and node.upper.value in (6, 8)
    ]
    assert not cut, f"ids cut by hand (call ids.shown or ids.side_shown): {cut}"
