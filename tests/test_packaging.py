"""What installing qem puts on a machine: one name on the import path, and only the
runtime dependencies the package really uses."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import packages_distributions
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCES = ("qem_edit", "renderer", "reconciler")


def test_the_wheel_holds_exactly_one_top_level_package(tmp_path: Path) -> None:
    # A copy of the sources: a build/ folder left in the checkout would be packed as well.
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for name in SOURCES:
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    # --no-build-isolation: the build backend is the one the test extra installed, offline
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(source)],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    [wheel] = tmp_path.glob("qem_edit-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"qem_edit"}, tops
    assert "qem_edit/renderer/render.py" in names and "qem_edit/reconciler/plan.py" in names
    # the log in the working tree and its local index: the reader of untrusted log files ships
    assert "qem_edit/logtree.py" in names and "qem_edit/index.py" in names
    top_level = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
    assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["qem_edit"]


def imported_modules() -> set[str]:
    """The top-level names the package's own source imports."""
    found: set[str] = set()
    for folder in SOURCES:
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                if isinstance(node, ast.Import):
                    found.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.add(node.module.split(".")[0])
    return found


def test_every_runtime_dependency_is_imported_by_the_package() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]["dependencies"]
    names = {re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].lower() for requirement in declared}
    providers = packages_distributions()  # import name → the distributions providing it
    used = {dist.lower() for module in imported_modules() for dist in providers.get(module, ())}
    unused = sorted(names - used)
    assert not unused, f"declared runtime dependencies the package never imports: {unused}"
