"""Whether Codex will run qem's hooks, read from Codex's own configuration.

Whether Codex will run qem's hooks: what Codex records of a person's trust, read from
its own configuration (`$CODEX_HOME/config.toml`, `~/.codex/config.toml` by default).

Codex reads a project's `.codex/` only in a trusted project (`[projects."PATH"]
trust_level = "trusted"`), and runs a project hook only when `[hooks.state."KEY"]` holds a
`trusted_hash` equal to the hook's own: KEY is `HOOKS_JSON:EVENT:GROUP:HANDLER` (the
hooks.json's absolute path, the event in snake case, the positions), the hash SHA-256 of
the handler as Codex normalises it (type, command, timeout, async, the group's matcher).
`/hooks` in Codex's terminal interface records it; `codex exec` runs an untrusted hook
never, and says nothing (only `--dangerously-bypass-hook-trust` runs it).  Checked
against Codex 0.171.0 (tests/test_harness_real.py: a hook trusted by these hashes runs, an
untrusted one does not).
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Codex's SessionEnd hook may take 1 to 3 s (Codex clamps it); its others at least 1 s.
END_LIMITS = (1, 3)
DEFAULT_TIMEOUT = {"session_end": 1}
HOW = ("trust the project (`codex exec --trust` in it, or when `codex` asks), then open `codex` there, type /hooks"
       " and trust qem's hooks; until then Codex runs none of them, and `codex exec` says nothing of a hook it skips")


def config_path() -> Path:
    home = os.environ.get("CODEX_HOME") or str(Path.home() / ".codex")
    return Path(home) / "config.toml"


def label(event: str) -> str:
    """Codex's snake-case name of an event: PreToolUse -> pre_tool_use."""
    return "".join("_" + c.lower() if c.isupper() else c for c in event).lstrip("_")


def handler_hash(event: str, matcher: object, handler: dict[str, Any]) -> str:
    """The `trusted_hash` Codex records for `handler` in a group of `event`."""
    name = label(event)
    timeout = handler.get("timeout")
    timeout = timeout if isinstance(timeout, int) and not isinstance(timeout, bool) else DEFAULT_TIMEOUT.get(name, 600)
    timeout = min(END_LIMITS[1], max(END_LIMITS[0], timeout)) if name == "session_end" else max(1, timeout)
    hook: dict[str, Any] = {"type": "command", "command": handler.get("command"), "timeout": timeout,
                            "async": bool(handler.get("async"))}
    if handler.get("statusMessage"):
        hook["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": name, "hooks": [hook]}
    if matcher is not None:
        identity["matcher"] = matcher
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def lines(top: Path, is_qem: Callable[[object], bool]) -> list[str]:
    """What to tell the person: whether Codex trusts the project and qem's hooks in its
    `.codex/hooks.json`, and how to trust them where it does not."""
    where = config_path()
    try:
        config = tomllib.loads(where.read_text("utf-8")) if where.is_file() else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return [f"Codex's trust of qem's hooks is unknown: {where} could not be read ({exc}); {HOW}"]
    hooks_json = (top / ".codex" / "hooks.json").resolve()
    untrusted, changed, count = _hooks_untrusted(hooks_json, config, is_qem)
    project = _project_trusted(top, config)
    if project and count and not untrusted:
        return [f"Codex trusts this project and qem's {count} hooks ({where})"]
    said = [] if project else [f"the project is not trusted ({where} has no trust_level = \"trusted\" for {top})"]
    if untrusted:
        said.append(f"{len(untrusted)} of qem's {count} hooks {'is' if len(untrusted) == 1 else 'are'} not trusted"
                    + (f" ({changed} of them changed since trusted)" if changed else "")
                    + f" ({where} [hooks.state])")
    return [f"Codex will not run qem's hooks yet: {'; '.join(said)}: {HOW}"] if said else []


def _hooks_untrusted(hooks_json: Path, config: dict[str, Any],
                     is_qem: Callable[[object], bool]) -> tuple[list[str], int, int]:
    """qem's hooks Codex has no matching trust for (their keys), how many of them it
    trusted as they were before, and how many hooks qem has there."""
    try:
        doc = json.loads(hooks_json.read_text("utf-8"))
    except (OSError, ValueError):
        return [], 0, 0
    state = ((config.get("hooks") or {}).get("state") or {}) if isinstance(config.get("hooks"), dict) else {}
    untrusted, changed, count = [], 0, 0
    groups_by_event = doc.get("hooks") if isinstance(doc, dict) else None
    for event, groups in (groups_by_event.items() if isinstance(groups_by_event, dict) else ()):
        for g, group in enumerate(groups if isinstance(groups, list) else ()):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for h, handler in enumerate(handlers if isinstance(handlers, list) else ()):
                if not is_qem(handler):
                    continue
                count += 1
                key = f"{hooks_json}:{label(event)}:{g}:{h}"
                recorded = state.get(key) if isinstance(state, dict) else None
                trusted = recorded.get("trusted_hash") if isinstance(recorded, dict) else None
                if trusted != handler_hash(event, group.get("matcher"), handler):
                    untrusted.append(key)
                    changed += trusted is not None
    return untrusted, changed, count


def _project_trusted(top: Path, config: dict[str, Any]) -> bool:
    """The project's top trusted by name (Codex 0.171 does not take a folder above it)."""
    projects = config.get("projects")
    entry = projects.get(str(top.resolve())) if isinstance(projects, dict) else None
    return isinstance(entry, dict) and entry.get("trust_level") == "trusted"
