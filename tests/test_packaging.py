"""What installing qem puts on a machine: one name on the import path, and only the
runtime dependencies the package really uses."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from importlib.metadata import packages_distributions
from pathlib import Path

import anyio
import pytest

REPO = Path(__file__).resolve().parent.parent
SOURCES = ("qem_edit", "renderer", "reconciler")


def copy_sources(tmp_path: Path) -> Path:
    """A copy of what the project ships: a build/ folder left in the checkout would be packed as well."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    for name in SOURCES:
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    return source


def build_wheel(tmp_path: Path) -> Path:
    """The wheel of the checkout, built offline: --no-build-isolation takes the build backend
    the test extra installed."""
    source = copy_sources(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(source)],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    [wheel] = tmp_path.glob("qem_edit-*.whl")
    return wheel


def test_the_wheel_holds_exactly_one_top_level_package(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"qem_edit"}, tops
    assert "qem_edit/renderer/render.py" in names and "qem_edit/reconciler/plan.py" in names
    # the log in the working tree and its local index: the reader of untrusted log files ships
    assert "qem_edit/storage/logtree.py" in names and "qem_edit/storage/index.py" in names
    top_level = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
    assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["qem_edit"]
    # the license travels with the wheel, and its metadata names both the license and its file
    licence = next(n for n in names if n.endswith(".dist-info/licenses/LICENSE"))
    assert zipfile.ZipFile(wheel).read(licence) == (REPO / "LICENSE").read_bytes()
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: MIT" in metadata.splitlines()
    assert "License-File: LICENSE" in metadata.splitlines()


def test_the_license_is_mit_and_ships_in_the_sdist(tmp_path: Path) -> None:
    text = (REPO / "LICENSE").read_text("utf-8")
    assert text.startswith("MIT License\n") and "Copyright (c) 2026 qem maintainers" in text
    declared = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]
    assert declared["license"] == "MIT" and declared["license-files"] == ["LICENSE"]
    source = copy_sources(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))", str(tmp_path)],
        cwd=source, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    with tarfile.open(tmp_path / done.stdout.split()[-1]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
        assert "LICENSE" in names
        info = sdist.extractfile(next(m for m in sdist.getmembers() if m.name.endswith("/PKG-INFO") and m.name.count("/") == 1))
        assert "License-File: LICENSE" in info.read().decode().splitlines()


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


# -- installed as a tool: pipx and uv, from the wheel of this checkout ------------------------


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def tool_env(root: Path) -> dict[str, str]:
    """Every place an installer keeps things, inside `root`: the real home is never touched."""
    env = dict(os.environ, HOME=str(root / "home"), XDG_CACHE_HOME=str(root / "cache"),
               XDG_DATA_HOME=str(root / "data"), XDG_CONFIG_HOME=str(root / "config"),
               XDG_STATE_HOME=str(root / "state"))
    env.update(PIPX_HOME=str(root / "pipx"), PIPX_BIN_DIR=str(root / "bin"), PIPX_MAN_DIR=str(root / "man"),
               UV_TOOL_DIR=str(root / "uv-tools"), UV_TOOL_BIN_DIR=str(root / "bin"), UV_CACHE_DIR=str(root / "cache/uv"))
    return env


def installed_qem_works(qem: Path, ws: Path) -> None:
    """The installed `qem` writes and reads a memory, and its `qem mcp` serves it to the
    real MCP client (the extra came with it)."""
    from mcp import ClientSession, StdioServerParameters, stdio_client  # the test extra installs it

    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    added = subprocess.run([str(qem), "add", "-k", "gotcha", "the lock file is per clone"], cwd=ws,
                           capture_output=True, text=True, timeout=60)
    assert added.returncode == 0, added.stderr

    async def served() -> tuple[list[str], str]:
        params = StdioServerParameters(command=str(qem), args=["mcp", "-w", str(ws)], cwd=str(ws))
        with open(os.devnull, "w") as quiet:
            async with stdio_client(params, errlog=quiet) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    tools = [t.name for t in (await s.list_tools()).tools]
                    found = await s.call_tool("query", {"filters": ["kind=gotcha"]})
                    return tools, found.content[0].text

    tools, found = anyio.run(served)
    assert "add" in tools and "query" in tools
    assert "the lock file is per clone" in found


@pytest.mark.slow
def test_pipx_installs_a_working_qem_with_its_mcp_server(wheel: Path, tmp_path: Path) -> None:
    env = tool_env(tmp_path)
    # the pip backend: what a pipx without uv beside it uses
    done = subprocess.run([sys.executable, "-m", "pipx", "install", "--backend", "pip", f"{wheel}[mcp]"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    installed_qem_works(tmp_path / "bin" / "qem", tmp_path / "ws")


@pytest.mark.slow
def test_uv_tool_installs_a_working_qem_with_its_mcp_server(wheel: Path, tmp_path: Path) -> None:
    from uv import find_uv_bin  # the test extra installs uv

    done = subprocess.run([find_uv_bin(), "tool", "install", f"{wheel}[mcp]"],
                          env=tool_env(tmp_path), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    installed_qem_works(tmp_path / "bin" / "qem", tmp_path / "ws")
