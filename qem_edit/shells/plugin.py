"""`qem setup HARNESS --plugin DIR`: the hooks and MCP server as a harness's plugin.

`qem setup HARNESS --plugin DIR`: qem's hooks and MCP server as a harness's plugin (or
extension), for a person or a team to install once for every project instead of writing
each project's settings.

What the plugin holds is what `qem setup HARNESS` writes, from the same source:
qem_edit.shells.setup's `Wanted` (its hook groups, made from qem_edit.base.harness's table, and its MCP
server entry).  Only the files around them are the plugin's own:

- Claude Code: DIR is a marketplace (`.claude-plugin/marketplace.json`, qem's entry merged
  into the plugins listed there) holding the plugin in `plugins/qem/`
  (`.claude-plugin/plugin.json`, `hooks/hooks.json`, `.mcp.json`);
  `claude plugin marketplace add DIR`, then `claude plugin install qem@qem`.
- Codex: DIR is the plugin (`.codex-plugin/plugin.json`, `hooks/hooks.json`, `.mcp.json`).
- Gemini CLI: DIR is the extension (`gemini-extension.json` with `mcpServers`, and
  `hooks/hooks.json`); `gemini extensions install DIR`.

The hooks carry no `-w`: a plugin serves every project, and `qem hook` finds the memory
from the agent's working directory (as `qem mcp` does).  A file is written only when its
bytes change, so a second run changes nothing; `--check` names what differs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import __version__
from ..base import errors
from ..base.shown import show
from .setup import SERVER, Wanted, json_doc, wanted_for

NAME = "qem"
DESCRIPTION = ("Project memory from qem's event log: notes given to the agent at session start, at each prompt,"
               " before edits and commands and after a compaction, and the memory served over MCP")
AUTHOR = {"name": "qem maintainers"}
KEYWORDS = ["memory", "mcp", "hooks", "notes"]


def run(harness: str, directory: Path, *, check: bool = False, remove: bool = False, ask_to_record: bool = False,
        command: str = "qem") -> int:
    """Write (or, with `check`, compare) qem's plugin for `harness` in `directory`."""
    if remove:
        raise errors.BadInput("--remove does not go with --plugin: uninstall the plugin in the harness and delete"
                              f" {directory}; qem changed nothing")
    wanted = wanted_for(_harness(harness), command, ask_to_record, False)
    files = MAKERS[harness](wanted, directory)
    differing = [rel for rel, data in files.items() if _bytes(directory / rel) != data]
    if check:
        for rel in differing:
            show(f"{directory / rel}: {'missing' if _bytes(directory / rel) is None else 'differs from what qem writes'}")
        return errors.EXIT_DIFFERENT if differing else errors.EXIT_OK
    from ..system.files import write_atomic

    for rel in differing:
        (directory / rel).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(directory / rel, files[rel])
    show(f"{INSTALL[harness].format(dir=directory)}" if differing else f"{directory}: qem's plugin is up to date")
    return errors.EXIT_OK


def _harness(name: str):  # type: ignore[no-untyped-def]
    from ..base.harness import HARNESSES

    errors.choice(name, tuple(HARNESSES), "harness")
    return HARNESSES[name]


def hooks_of(wanted: Wanted) -> dict[str, list[dict[str, Any]]]:
    """qem's hooks, event by event, as `qem setup` writes them into a project's settings."""
    return {hook.event: [group] for hook in wanted.harness.hooks if (group := wanted.group(hook.event)) is not None}


def _json(value: object) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def claude(wanted: Wanted, directory: Path) -> dict[str, bytes]:
    """A marketplace holding the plugin: its entry merged into the marketplace's list."""
    root = "plugins/qem"
    return {
        ".claude-plugin/marketplace.json": _json(_marketplace(directory / ".claude-plugin/marketplace.json", f"./{root}")),
        f"{root}/.claude-plugin/plugin.json": _json({
            "name": NAME, "version": __version__, "description": DESCRIPTION, "author": AUTHOR,
            "license": "MIT", "keywords": KEYWORDS}),
        f"{root}/hooks/hooks.json": _json({"description": "qem's hooks, as `qem setup claude` writes them",
                                          "hooks": hooks_of(wanted)}),
        f"{root}/.mcp.json": _json({"mcpServers": {SERVER: wanted.server}}),
    }


def _marketplace(path: Path, source: str) -> dict[str, Any]:
    """The marketplace file with qem's entry, where it was (else last); the rest kept."""
    from ..system.files import read_regular

    raw = read_regular(path)
    doc, _ = json_doc(raw, str(path))
    plugins = doc.get("plugins", [])
    if not isinstance(plugins, list):
        raise errors.BadInput(f"{path}: \"plugins\" is not a list; qem changed nothing")
    entry = {"name": NAME, "source": source, "description": DESCRIPTION, "version": __version__, "author": AUTHOR}
    at = next((i for i, p in enumerate(plugins) if isinstance(p, dict) and p.get("name") == NAME), None)
    plugins = [*plugins, entry] if at is None else [*plugins[:at], entry, *plugins[at + 1:]]
    return {"name": NAME, "owner": AUTHOR, "metadata": {"description": "qem, an agent's memory kept in git"}} \
        | {k: v for k, v in doc.items() if k != "plugins"} | {"plugins": plugins}


def codex(wanted: Wanted, directory: Path) -> dict[str, bytes]:
    """A marketplace in Codex's own place for one (`.agents/plugins/`, read before Claude
    Code's) holding the plugin in its own folder, so one DIR can serve both harnesses."""
    root = "plugins/qem-codex"
    path = directory / ".agents/plugins/marketplace.json"
    marketplace = _marketplace(path, f"./{root}")
    marketplace.pop("owner", None), marketplace.pop("metadata", None)  # (not Codex's fields)
    marketplace["plugins"] = [{"name": NAME, "source": {"source": "local", "path": f"./{root}"}} if p.get("name") == NAME
                              else p for p in marketplace["plugins"]]
    return {
        ".agents/plugins/marketplace.json": _json({"interface": {"displayName": "qem"}} | marketplace),
        f"{root}/.codex-plugin/plugin.json": _json({
            "name": NAME, "version": __version__, "description": DESCRIPTION, "keywords": KEYWORDS,
            "hooks": "./hooks/hooks.json", "mcpServers": "./.mcp.json",
            "interface": {"displayName": "qem", "shortDescription": "Project memory kept in git, given at the moment",
                          "developerName": AUTHOR["name"], "category": "Productivity"}}),
        f"{root}/hooks/hooks.json": _json({"hooks": hooks_of(wanted)}),
        f"{root}/.mcp.json": _json({"mcpServers": {SERVER: wanted.server}}),
    }


def gemini(wanted: Wanted, directory: Path) -> dict[str, bytes]:
    """The extension is DIR itself: its manifest with the MCP server, and its hooks."""
    return {
        "gemini-extension.json": _json({"name": NAME, "version": __version__, "description": DESCRIPTION,
                                        "mcpServers": {SERVER: wanted.server}}),
        "hooks/hooks.json": _json({"hooks": hooks_of(wanted)}),
    }


MAKERS = {"claude": claude, "codex": codex, "gemini": gemini}
INSTALL = {
    "claude": "wrote qem's plugin and its marketplace in {dir}; install it with"
              " `claude plugin marketplace add {dir}` and `claude plugin install qem@qem`",
    "codex": "wrote qem's Codex plugin and its marketplace in {dir}; install it with"
             " `codex plugin marketplace add {dir}` and `codex plugin add qem@qem`",
    "gemini": "wrote qem's Gemini CLI extension in {dir}; install it with `gemini extensions install {dir}`",
}
