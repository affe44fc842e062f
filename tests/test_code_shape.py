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
PURE_MODULES = ("qem_edit/base/model.py", "qem_edit/base/resolver.py")
# The layers, lowest first, are folders (docs/ARCHITECTURE.md draws them, with a line for
# each module): qem_edit/base/, then the pure cores at the top of the repository, then each
# folder of qem_edit/ in this order.  A module imports (at its top or inside a function) only
# modules of its own folder, where that closes no cycle, or of a folder below it.  Modules
# are named by their folder: "storage.store" is qem_edit/storage/store.py, "renderer.format"
# renderer/format.py, "renderer" its __init__.py, "__init__" and "__main__" qem_edit's own.
FLOORS = ("base", "renderer", "reconciler", "system", "storage", "reads", "mirror", "writes", "transfer", "shells")
TOP_FILES = {"__init__": 0, "__main__": len(FLOORS)}  # qem_edit/__init__.py holds the version; __main__ starts a shell


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    parts = parts[1:] if parts[0] == "qem_edit" else parts
    if len(parts) > 1 and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _floor(module: str) -> int:
    return TOP_FILES[module] if module in TOP_FILES else FLOORS.index(module.split(".")[0])


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
# every other module reads and writes the index through Store's methods, never through a
# Store method named private.
STORAGE = ("qem_edit/storage/store.py", "qem_edit/storage/index.py", "qem_edit/storage/item_reads.py",
           "qem_edit/storage/staging.py", "qem_edit/storage/supersession.py", "qem_edit/storage/verify_reads.py",
           "qem_edit/system/db.py")
# Of storage's modules that run SQL, those a module outside storage may import: the store, and
# the SQLite files apart from the index (a fresh replay for verify, a dump staged for a load).
# Every other one is the index's own: outside storage it is asked through Store's methods,
# never imported to run its functions on a connection.
STORAGE_OPEN = ("qem_edit/storage/store.py", "qem_edit/storage/staging.py")
# Modules that read another program's SQLite file, not the index: its statements are theirs.
FOREIGN_SQL = {
    "qem_edit/storage/convert.py": "reads a store of an older qem (memory.db, one SQLite file) to convert it",
    "qem_edit/transfer/vectr.py": "reads vectr's own SQLite database (a copy of it) to import it",
}
_STATEMENTS = {"execute", "executemany", "executescript"}


def _sql(tree: ast.AST) -> list[str]:
    found = [f"{node.func.attr}() at line {node.lineno}" for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _STATEMENTS]
    return found + (["imports sqlite3"] if "sqlite3" in _imports(tree) else [])


def _store_privates() -> set[str]:
    tree = ast.parse((REPO / "qem_edit/storage/store.py").read_text("utf-8"))
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
    assert not found, f"SQL or Store's private methods outside storage's SQL modules and db.py: {found}"
    assert all(_sql(ast.parse((REPO / name).read_text("utf-8"))) for name in FOREIGN_SQL), "a stale FOREIGN_SQL entry"


def test_only_storage_imports_the_index() -> None:
    """Outside storage a module asks the index through Store's methods: it imports none of
    the modules that run the index's SQL (at its top, inside a function, or for types)."""
    graph = _import_graph()
    index = {_module_name(REPO / name) for name in STORAGE if name.startswith("qem_edit/storage/")}
    index -= {_module_name(REPO / name) for name in STORAGE_OPEN}
    assert "storage.index" in index and index <= set(graph), f"STORAGE names modules that are not there: {index}"
    found = [f"{module} imports {target}" for module in sorted(graph) if module.split(".")[0] != "storage"
             for target in sorted(graph[module] & index)]
    assert not found, f"modules outside storage importing the index's own modules (ask a Store method): {found}"


def test_one_write_transaction() -> None:
    """BEGIN IMMEDIATE is written once: db.transaction, which every write of the index is."""
    spelled = sorted(path.relative_to(REPO).as_posix() for path, _ in _trees(PRODUCT)
                     if "BEGIN IMMEDIATE" in path.read_text("utf-8"))
    assert spelled == ["qem_edit/system/db.py"], spelled


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


def _product_imports(name: str, path: Path, tree: ast.AST, known: set[str]) -> set[str]:
    """The product modules `name` imports, anywhere in it (a lazy import inside a function
    too); importing a module of a folder brings the folder's __init__ with it."""
    package = [] if path.stem == "__init__" and "." not in name else name.split(".")[:-1]
    if path.stem == "__init__" and "." not in name and name not in TOP_FILES:
        package = [name]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
            elif (node.module or "").split(".")[0] == "qem_edit":
                base = node.module.split(".")[1:]
            else:
                continue
            named = [".".join(base)] + [".".join(base + [alias.name]) for alias in node.names]
        elif isinstance(node, ast.Import):
            named = [".".join(alias.name.split(".")[1:]) for alias in node.names if alias.name.split(".")[0] == "qem_edit"]
        else:
            continue
        for module in named:
            if module in known:
                found.add(module)
                if "." in module:
                    found.add(module.split(".")[0])
    return found - {name, *(package[:1])}


def _import_graph() -> dict[str, set[str]]:
    trees = {_module_name(path): (path, tree) for path, tree in _trees(PRODUCT)}
    unplaced = sorted(m for m in trees if m not in TOP_FILES and m.split(".")[0] not in FLOORS)
    assert not unplaced, (f"modules outside the layer folders: {unplaced}; put each in the folder of its layer"
                          f" ({', '.join(FLOORS)}), above what it imports")
    return {name: _product_imports(name, path, tree, set(trees)) for name, (path, tree) in trees.items()}


def test_every_import_goes_down_the_layers() -> None:
    graph = _import_graph()
    upward = [f"{module} (folder {_floor(module)}) imports {target} (folder {_floor(target)})"
              for module in sorted(graph) for target in sorted(graph[module]) if _floor(target) > _floor(module)]
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


def _folder_of(module: str) -> str:
    top = module.split(".")[0]
    return f"{top}/" if top in ("renderer", "reconciler") else f"qem_edit/{top}/"


def test_the_architecture_doc_shows_every_module_in_its_folder() -> None:
    """docs/ARCHITECTURE.md has a section per layer folder, in FLOORS' order (its heading
    names the folder), holding one line per module of that folder: `name.py`: what it owns."""
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text("utf-8")
    sections = re.split(r"^### ", text, flags=re.M)[1:]
    shown: dict[str, set[str]] = {}
    for section in sections:
        heading = re.match(r".*?`([\w/]+/)`", section)
        if heading:
            shown[heading.group(1)] = set(re.findall(r"^- `(\w+)\.py`: \S", section, re.M))
    wanted = [_folder_of(folder) for folder in FLOORS]
    assert [f for f in shown if f in wanted] == wanted, f"sections for {wanted} in this order, found {list(shown)}"
    on_disk: dict[str, set[str]] = {}
    for path, _ in _trees(PRODUCT):
        name = _module_name(path)
        if name not in TOP_FILES and path.stem != "__init__":
            on_disk.setdefault(_folder_of(name), set()).add(path.stem)
    wrong = {f: {"missing": sorted(on_disk[f] - shown.get(f, set())), "not there": sorted(shown.get(f, set()) - on_disk[f])}
             for f in on_disk if on_disk[f] != shown.get(f, set())}
    assert not wrong, f"docs/ARCHITECTURE.md's module lines differ from the folders: {wrong}"
    long = [line for line in text.splitlines() if re.match(r"- `\w+\.py`: ", line) and len(line.split()) > 40]
    assert not long, f"a module's line says one thing (40 words at most): {long}"


