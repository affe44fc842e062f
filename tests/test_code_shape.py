"""The shape of the house, checked: short functions, pure cores, and layers.

docs/ARCHITECTURE.md describes the layering; these tests keep it true as the code grows.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PRODUCT = ("qem_edit", "renderer", "reconciler")
MAX_LINES = 50
# The pure cores read no database, clock, terminal or command-line framework.
IMPURE = {"sqlite3", "typer", "click", "time", "datetime", "subprocess", "filelock"}
PURE_CORES = ("renderer", "reconciler")
PURE_MODULES = ("qem_edit/model.py", "qem_edit/resolver.py")
# The layers, lowest first (docs/ARCHITECTURE.md shows them, with what each module owns).
# A module imports (at its top or inside a function) only modules on a lower floor, or on
# its own floor where that closes no cycle.  Modules are named as qem_edit imports them:
# "store" is qem_edit/store.py, "renderer.format" renderer/format.py, "renderer" its
# __init__.py, "__init__" qem_edit's own.
LAYERS = {
    0: ("__init__", "errors", "faults", "ids", "times", "model", "resolver", "owing", "resting", "shown", "gitconflict",  # pure base
        "triggers", "harness",
        "renderer.version", "renderer.format", "renderer.render", "renderer.patch", "renderer",
        "reconciler.parse", "reconciler.blocks", "reconciler.plan", "reconciler.rebase", "reconciler"),
    1: ("files", "db", "cores", "gitrepo", "workspace", "anchors", "ledger", "codextrust", "unstaged"),  # the platform: files, SQLite, git, where things live
    2: ("logtree", "convert"),  # the log
    3: ("index",),  # the index
    4: ("protect", "secrets", "starting"),  # what a write enforces, and starting a memory
    5: ("store",),  # one memory: opening, the write transaction
    6: ("removals", "diff", "diffview", "incomplete", "history", "standing", "query", "context", "answers",  # reads
        "drift", "anchorlist", "delivery", "tiers", "owed"),
    7: ("gitstage", "gitsettle", "textconv", "export", "proposal", "checkouts", "forgetting", "dump", "vectr", "mdimport",
        "migrate", "checks", "staged"),  # the mirror, and work over the whole memory
    8: ("opening", "expiry", "acts", "checkin", "hookrun", "setup", "plugin"),  # a command's way in: the memory opened, the writes
    9: ("terminal", "mcp_server", "shell", "cli", "quick", "__main__"),  # the shells
}
LAYER = {module: floor for floor, modules in LAYERS.items() for module in modules}


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


def _module_name(path: Path) -> str:
    folder, stem = path.relative_to(REPO).parts[0], path.stem
    if folder == "qem_edit":
        return stem
    return folder if stem == "__init__" else f"{folder}.{stem}"


def _product_imports(name: str, tree: ast.AST, known: set[str]) -> set[str]:
    """The product modules `name` imports, anywhere in it (a lazy import inside a function
    too); a submodule of a pure core brings its package's __init__ with it."""
    package = name.split(".")[0] if name.split(".")[0] in PURE_CORES else ""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(part for part in (package if node.level == 1 else "", node.module or "") if part)
            elif (node.module or "").split(".")[0] == "qem_edit":
                base = node.module.removeprefix("qem_edit").lstrip(".")
            else:
                continue
            named = [base] + [f"{base}.{alias.name}" if base else alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            named = [alias.name.removeprefix("qem_edit").lstrip(".") for alias in node.names
                     if alias.name.split(".")[0] == "qem_edit"]
        else:
            continue
        for module in named:
            if module in known:
                found.add(module)
                if "." in module and module.split(".")[0] != package:
                    found.add(module.split(".")[0])
    return found - {name, package}


def _import_graph() -> dict[str, set[str]]:
    trees = {_module_name(path): tree for path, tree in _trees(PRODUCT)}
    unplaced = sorted(set(trees) - set(LAYER))
    assert not unplaced, (f"modules the layer table does not place: {unplaced}; add each to LAYERS in"
                          " tests/test_code_shape.py, on the floor above what it imports (and to docs/ARCHITECTURE.md)")
    gone = sorted(set(LAYER) - set(trees))
    assert not gone, f"LAYERS in tests/test_code_shape.py names modules that are not there: {gone}; take them out"
    return {name: _product_imports(name, tree, set(trees)) for name, tree in trees.items()}


def test_every_import_goes_down_the_layers() -> None:
    graph = _import_graph()
    upward = [f"{module} (layer {LAYER[module]}) imports {target} (layer {LAYER[target]})"
              for module in sorted(graph) for target in sorted(graph[module]) if LAYER[target] > LAYER[module]]
    assert not upward, ("imports from a lower layer to a higher one (move what both need down, or the importer up):"
                        f" {upward}")


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    state: dict[str, str] = {}

    def visit(path: list[str]) -> list[str]:
        state[path[-1]] = "open"
        for target in sorted(graph[path[-1]]):
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state and (found := visit(path + [target])):
                return found
        state[path[-1]] = "done"
        return []

    for module in sorted(graph):
        if module not in state and (found := visit([module])):
            return found
    return []


def test_no_import_cycle() -> None:
    cycle = _cycle(_import_graph())
    assert not cycle, f"an import cycle (one of these must not import the next): {' -> '.join(cycle)}"


def test_the_architecture_doc_shows_the_same_layers() -> None:
    """docs/ARCHITECTURE.md's table (module, layer, what it owns) places every module
    where LAYERS does (a folder row, `renderer/`, speaks for the modules in it)."""
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text("utf-8")
    shown: dict[str, int] = {}
    for cells in re.findall(r"^\| (.+?) \| (\d+) \| ", text, re.M):
        for named in re.findall(r"`([\w/]+?)(?:\.py)?`", cells[0]):
            folder, _, stem = named.rstrip("/").partition("/")
            modules = [m for m in LAYER if m.split(".")[0] == folder] if folder in PURE_CORES else [stem]
            shown.update((module, int(cells[1])) for module in modules)
    wrong = [f"{m}: layer {shown.get(m, 'missing')} there, {LAYER[m]} in LAYERS" for m in sorted(LAYER)
             if m not in ("__init__", "__main__") and shown.get(m) != LAYER[m]]
    assert not wrong, f"docs/ARCHITECTURE.md's layer table differs from LAYERS in tests/test_code_shape.py: {wrong}"
