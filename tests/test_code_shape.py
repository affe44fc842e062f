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
IMPURE = {"sqlite3", "_sqlite3", "typer", "click", "time", "datetime", "subprocess", "filelock"}
PURE_CORES = ("renderer", "reconciler")
PURE_MODULES = tuple(f"qem_edit/base/{name}.py" for name in (
    "vocabulary", "stored_form", "triggers", "replay", "decisions", "resolver"))
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
            out.update("sqlite3" for a in node.names if a.name == "sqlite3")  # (SQLite as qem_edit.system.db names it)
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
# private method of Store (of any class it is made of) or of the write transaction, and
# writes no SQL text for storage to run.
STORAGE = ("qem_edit/storage/store.py", "qem_edit/storage/index.py", "qem_edit/storage/item_reads.py",
           "qem_edit/storage/staging.py", "qem_edit/storage/supersession.py", "qem_edit/storage/verify_reads.py",
           "qem_edit/storage/reading.py", "qem_edit/storage/write_reads.py", "qem_edit/storage/delivery_reads.py",
           "qem_edit/storage/path_reads.py", "qem_edit/storage/request_reads.py", "qem_edit/storage/dispute_reads.py",
           "qem_edit/storage/mirror_reads.py", "qem_edit/storage/transfer_reads.py", "qem_edit/storage/selection.py",
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
# SQL's words as a statement or a fragment of one spells them, and a bound parameter compared
_SQL_TEXT = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|WHERE|JOIN|PRAGMA)\b| IN \(|[<>=] \?(\Z|[ )])")


def _sql(tree: ast.AST) -> list[str]:
    found = [f"{node.func.attr}() at line {node.lineno}" for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _STATEMENTS]
    return found + (["imports sqlite3"] if {"sqlite3", "_sqlite3"} & _imports(tree) else [])


def _sql_text(tree: ast.AST) -> list[str]:
    """The strings (an f-string's parts too) that are SQL or a piece of it."""
    return [f"SQL text {node.value[:60]!r} at line {node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _SQL_TEXT.search(node.value)]


def _privates(cls: type) -> set[str]:
    """The private methods of `cls` and of every class it is made of (its bases, theirs...)."""
    return {name for klass in cls.__mro__ if klass is not object for name in vars(klass)
            if name.startswith("_") and not name.startswith("__")}


def _store_privates() -> set[str]:
    from qem_edit.storage.store import Store
    from qem_edit.storage.transaction import Transaction

    return _privates(Store) | _privates(Transaction)


def test_the_storage_layer_owns_every_statement() -> None:
    privates = _store_privates()
    assert {"_read", "_seen", "_write_once", "_flag_levels"} <= privates, "the check no longer sees Store's classes"
    found = {}
    for path, tree in _trees(PRODUCT):
        name = path.relative_to(REPO).as_posix()
        if name in STORAGE:
            continue
        bad = [] if name in FOREIGN_SQL else _sql(tree) + _sql_text(tree)
        bad += [f"Store.{node.attr} at line {node.lineno}" for node in ast.walk(tree)
                if isinstance(node, ast.Attribute) and node.attr in privates
                and not (isinstance(node.value, ast.Name) and node.value.id == "self")]
        if bad:
            found[name] = bad
    assert not found, f"SQL, SQL text or Store's private methods outside storage's SQL modules and db.py: {found}"
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


def test_every_module_opens_with_one_line_saying_what_it_owns() -> None:
    """A product module's docstring opens with one sentence on one line, short enough to
    read at a glance (what it owns); the lines after a blank line may say more."""
    wrong = []
    for path, tree in _trees(PRODUCT):
        if path.stem == "__init__" and not tree.body:
            continue  # a layer folder's empty __init__.py
        doc = ast.get_docstring(tree, clean=False) or ""
        lines = doc.split("\n")
        first = lines[0]
        one_sentence = first.endswith(".") and not re.search(r"[.!?]\s+[A-Z`(]", first[:-1])
        if not first or len(first) > 100 or not one_sentence or (len(lines) > 1 and lines[1].strip()):
            wrong.append(f"{path.relative_to(REPO)}: {first[:60]!r}")
    assert not wrong, f"modules not opening with one line (at most 100 characters) saying what they own: {wrong}"


# -- what a module keeps to itself ----------------------------------------------------------
# A name with a leading `_` is its module's own: another module never calls it, imports it or
# reaches it on an object (a product class's private method or attribute, as Store's above).
# What two modules truly share gets a public name in the module that owns the idea.  Where a
# crossing must stay, it is named here, "module: name" → why; today none does.
PRIVATE_CROSSINGS: dict[str, str] = {}


# A NamedTuple's public methods, named with an underscore only so that no field can take
# the name (every record has them: qem_edit.base.records).
NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_make", "_fields", "_field_defaults"})


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in NAMEDTUPLE_API


def _package_of(name: str, path: Path) -> list[str]:
    """The package a module's relative imports start from (as _product_imports reads it)."""
    if path.stem == "__init__" and "." not in name:
        return [] if name in TOP_FILES else [name]
    return name.split(".")[:-1]


def _imported_from(name: str, path: Path, node: ast.ImportFrom) -> str | None:
    """The product module a `from ... import` reads from (None: another package)."""
    if node.level:
        package = _package_of(name, path)
        return ".".join(package[: len(package) - (node.level - 1)] + (node.module.split(".") if node.module else []))
    if (node.module or "").split(".")[0] == "qem_edit":
        return ".".join(node.module.split(".")[1:])
    return node.module if (node.module or "").split(".")[0] in PURE_CORES else None


def _module_bindings(name: str, path: Path, tree: ast.AST, known: set[str]) -> tuple[dict[str, str], list[str]]:
    """(the local names bound to product modules → the module; the private names imported
    from another product module, each as `name from module at line N`)."""
    bound: dict[str, str] = {}
    crossings = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (source := _imported_from(name, path, node)) is not None:
            for alias in node.names:
                full = f"{source}.{alias.name}" if source else alias.name
                if full in known:
                    bound[alias.asname or alias.name] = full
                elif _private(alias.name) and source != name:
                    crossings.append(f"{alias.name} from {source} at line {node.lineno}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                module = ".".join(parts[1:]) if parts[0] == "qem_edit" else alias.name
                if alias.asname and module in known:
                    bound[alias.asname] = module
                elif parts[0] == "qem_edit" or parts[0] in PURE_CORES:
                    bound[parts[0]] = "" if parts[0] == "qem_edit" else parts[0]
    return bound, crossings


def _dotted(node: ast.AST, bound: dict[str, str]) -> str | None:
    """The product module an expression names (`gitrepo`, `qem_edit.system.gitrepo`), if any."""
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    if isinstance(node, ast.Attribute) and (outer := _dotted(node.value, bound)) is not None:
        return f"{outer}.{node.attr}" if outer else node.attr
    return None


def _class_privates(trees: dict[str, tuple[Path, ast.AST]]) -> dict[str, set[str]]:
    """Each private method or attribute of a product class → the modules whose classes have it."""
    out: dict[str, set[str]] = {}
    for module, (_, tree) in trees.items():
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for node in ast.walk(cls):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(node.name):
                    out.setdefault(node.name, set()).add(module)
                elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _private(node.attr)
                      and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    out.setdefault(node.attr, set()).add(module)
    return out


def _private_crossings() -> dict[str, list[str]]:
    trees = {_module_name(path): (path, tree) for path, tree in _trees(PRODUCT)}
    members = _class_privates(trees)
    found: dict[str, list[str]] = {}
    for module, (path, tree) in trees.items():
        bound, crossings = _module_bindings(module, path, tree, set(trees))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not _private(node.attr):
                continue
            owner = _dotted(node.value, bound)
            if owner is not None and owner != module:
                crossings.append(f"{owner}.{node.attr} at line {node.lineno}")
            elif (owner is None and node.attr in members and module not in members[node.attr]
                  and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                crossings.append(f"{'/'.join(sorted(members[node.attr]))}'s ….{node.attr} at line {node.lineno}")
        if crossings:
            found[path.relative_to(REPO).as_posix()] = crossings
    return found


def test_no_module_calls_a_private_helper_of_another() -> None:
    def key(path: str, crossing: str) -> str:  # as PRIVATE_CROSSINGS names one: no line number
        return f"{path}: {crossing.rsplit(' at line ', 1)[0]}"

    found = _private_crossings()
    wrong = {path: [c for c in crossings if key(path, c) not in PRIVATE_CROSSINGS] for path, crossings in found.items()}
    wrong = {path: crossings for path, crossings in wrong.items() if crossings}
    assert not wrong, ("private names of another module used (give what is shared a public name in the module"
                       f" that owns the idea, or move it there): {wrong}")
    named = {key(path, c) for path, crossings in found.items() for c in crossings}
    assert set(PRIVATE_CROSSINGS) <= named, f"stale PRIVATE_CROSSINGS entries: {set(PRIVATE_CROSSINGS) - named}"


# git is named by one module: every git command qem runs is a function of gitrepo.py, named
# for what it answers, so its environment (GIT_* dropped, the hook's own index kept), its
# timeout and what a missing git means are decided once; gitspawn.py starts each of them with
# nothing but `os` (gitrepo falls back on subprocess only without posix_spawn), and the two a
# kept commit answer asks, in the same environment.
GIT_MODULE = "qem_edit/system/gitrepo.py"
SPAWN_MODULE = "qem_edit/system/gitspawn.py"
_STARTS = {"subprocess": None, "os": ("system", "popen", "exec", "spawn", "posix_spawn")}


def _names_git(node: ast.AST, shell: bool = False) -> bool:
    """Whether a program named here is git: `"git"` or a path to it (`shell`: or a shell
    line running it)."""
    return (isinstance(node, ast.Constant) and isinstance(node.value, str)
            and (node.value == "git" or node.value.endswith("/git") or (shell and node.value.startswith("git "))))


def _git_started(tree: ast.AST) -> list[str]:
    """Where a module starts git: an argument list headed by git, or a process started
    (subprocess, os.system, os.exec*, os.spawn*) with git among its arguments."""
    found = [f"a command line headed by git at line {node.lineno}" for node in ast.walk(tree)
             if isinstance(node, (ast.List, ast.Tuple)) and node.elts and _names_git(node.elts[0])]
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                and node.func.value.id in _STARTS
                and (_STARTS[node.func.value.id] is None or node.func.attr.startswith(_STARTS[node.func.value.id]))
                and any(_names_git(inner, shell=True) for arg in [*node.args, *(k.value for k in node.keywords)]
                        for inner in ast.walk(arg))):
            found.append(f"{node.func.value.id}.{node.func.attr} running git at line {node.lineno}")
    return found


def test_only_gitrepo_starts_git() -> None:
    found = {path.relative_to(REPO).as_posix(): _git_started(tree) for path, tree in _trees(PRODUCT)}
    assert found.pop(GIT_MODULE), f"{GIT_MODULE} no longer starts git: point GIT_MODULE at the module that does"
    assert found.pop(SPAWN_MODULE), f"{SPAWN_MODULE} no longer starts git: point SPAWN_MODULE at the module that does"
    elsewhere = {path: where for path, where in found.items() if where}
    assert not elsewhere, f"git started outside {GIT_MODULE} (add a function there, named for what it answers): {elsewhere}"
