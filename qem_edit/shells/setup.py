"""`qem setup HARNESS`: qem's hooks and MCP server in an agent harness's project settings.

What is written comes from one table, qem_edit.base.harness (each harness's hooks, their
matchers, and its timeout in the unit its settings take); where it goes is each
harness's own project file:

- Claude Code: `.claude/settings.json` (`hooks`) and `.mcp.json` (`mcpServers.qem`);
- Codex: `.codex/hooks.json` (`hooks`) and `.codex/config.toml` (`[mcp_servers.qem]`);
- Gemini CLI: `.gemini/settings.json` (`hooks` and `mcpServers.qem`).

Each file is merged into, never clobbered: qem's own hook handlers are known by their
command (`... qem hook HARNESS EVENT`), taken out wherever they are and written fresh, one
matcher group of qem's own per event, where qem's group was; every other key, event,
group and handler stays as it was, in its order.  A file already right is not touched (a
second run changes nothing), and every file of the harness is read and checked before any
is written, so a file qem cannot read as what it should be leaves everything as it was.
The TOML file is edited as text (there is no TOML writer in the standard library): only
the lines of qem's own table change, and the result is read back before it is written.

qem's MCP server entry is the user's too: qem owns its `command` and `args`, and every
other key (env, cwd, timeout, a Codex subtable `[mcp_servers.qem.env]`) stays where it is;
--check compares only those two, and --remove takes the entry out whole.  The Stop hook
(Gemini CLI's AfterAgent) is the user's choice: `--ask-to-record` writes it,
`--no-ask-to-record` takes it out, and a run with neither leaves that event as it is.

A file is refused, and nothing written, where writing it back would lose or change what
the user wrote: JSON qem reads only by guessing (NaN, a number no double holds, a key twice
in one object), a Gemini settings file with comments (Gemini CLI allows them; a file
already right is left alone, and --check reads it), a link, and a file that is read-only:
one this user may not write (os.access), or one whose mode lets no one write it (what
marks it read-only for root too, whom os.access lets write anything).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..base import errors
from ..base.harness import HARNESSES, Harness
from ..base.records import Record
from ..base.shown import say, show

SERVER = "qem"  # the MCP server's name, in every harness
# A hook handler qem wrote: its command runs `qem hook HARNESS ...`, qem named by any path.
QEM_HOOK = re.compile(r"(^|[/\\\s\"'])qem(_edit)?(\.exe)?[\"']? hook (claude|codex|gemini) ")
# Gemini CLI keeps a few settings, not events, under `hooks` (its HOOKS_CONFIG_FIELDS).
GEMINI_FIELDS = frozenset({"enabled", "disabled", "notifications"})
HOOKS, MCP_JSON, BOTH, MCP_TOML = "hooks", "mcp", "hooks+mcp", "toml"
FILES: dict[str, tuple[tuple[str, str], ...]] = {
    "claude": ((".claude/settings.json", HOOKS), (".mcp.json", MCP_JSON)),
    "codex": ((".codex/hooks.json", HOOKS), (".codex/config.toml", MCP_TOML)),
    "gemini": ((".gemini/settings.json", BOTH),),
}
TRUST = {  # Codex's is read from where Codex records it (qem_edit.system.codextrust)
    "gemini": "Gemini CLI reads .gemini/settings.json only in a trusted folder",
}


class Wanted(Record):
    """What `qem setup` is asked for."""

    harness: Harness
    command: str  # the shell words that run qem
    server: dict[str, Any]  # the MCP server's entry
    ask_to_record: bool
    remove: bool
    workspace: str = ""  # the memory's workspace from the project's top ("" : the top itself)
    no_ask_to_record: bool = False  # take the opt-in hooks (Stop) out

    def keeps(self, event: str) -> bool:
        """An opt-in event (Stop) left as it is: neither --ask-to-record nor
        --no-ask-to-record nor --remove was given."""
        hook = self.harness.hook(event)
        return (hook is not None and hook.opt_in
                and not (self.ask_to_record or self.no_ask_to_record or self.remove))

    def group(self, event: str) -> dict[str, Any] | None:
        """qem's matcher group for `event` (None: none is wanted there)."""
        hook = self.harness.hook(event)
        if self.remove or hook is None or (hook.opt_in and not self.ask_to_record):
            return None
        import shlex

        where = f" -w {shlex.quote(self.workspace)}" if self.workspace else ""
        handler: dict[str, Any] = {"type": "command",
                                   "command": f"{self.command} hook {self.harness.name} {event}{where}"}
        if self.harness.name == "gemini":
            handler["name"] = SERVER
        handler["timeout"] = self.harness.timeout_of(hook)
        group: dict[str, Any] = {} if hook.matcher is None else {"matcher": hook.matcher}
        group["hooks"] = [handler]
        return group

    def is_qem(self, handler: object) -> bool:
        command = handler.get("command") if isinstance(handler, dict) else None
        return isinstance(command, str) and (
            QEM_HOOK.search(command) is not None or command.startswith(f"{self.command} hook "))


class Change(Record):
    """One file: what it holds, what it is to hold, and what differs."""

    rel: str  # from the project's top
    path: Path
    new: bytes | None  # None: the file stays as it is
    done: tuple[str, ...] = ()  # what the write changes ("hooks SessionStart, ...")
    differences: tuple[str, ...] = ()  # what --check names
    empty: bool = False  # the file is left holding nothing
    refusal: str = ""  # why qem may not write the file (said only when it would write it)


def run(harness: str, place, *, check: bool = False, remove: bool = False,  # type: ignore[no-untyped-def]
        ask_to_record: bool = False, command: str = "qem", no_ask_to_record: bool = False,
        hold: bool | None = None) -> int:
    """Write (or check, or take out) qem's hooks and MCP server for `harness` in the
    project holding `place`'s memory; `hold` (not None) also sets whether the hooks hold a
    call (`[delivery] hold` in the memory's config.toml); the exit code."""
    errors.choice(harness, tuple(HARNESSES), "harness")
    if check and remove:
        raise errors.BadInput("--check and --remove do not go together: --check says whether `qem setup "
                              f"{harness}` would change anything")
    if hold is not None and (check or remove):
        raise errors.BadInput(f"--{'' if hold else 'no-'}hold sets the project's holding; it does not go with"
                              f" --{'check' if check else 'remove'}")
    if ask_to_record and no_ask_to_record:
        raise errors.BadInput("--ask-to-record and --no-ask-to-record do not go together: the first writes the"
                              " Stop hook, the second takes it out")
    from ..system.workspace import work_top

    top = Path(work_top(place.store_path))
    inside = place.root.resolve().relative_to(top).as_posix() if place.root.resolve() != top else ""
    wanted = wanted_for(HARNESSES[harness], command, ask_to_record, remove)._replace(
        workspace=inside, no_ask_to_record=no_ask_to_record)
    if inside:
        wanted = wanted._replace(server={**wanted.server, "args": [*wanted.server["args"], "-w", inside]})
    changes = [_plan(top, rel, kind, wanted) for rel, kind in FILES[harness]]  # all read before any is written
    if not remove:
        _warn_path(wanted)
    if check:
        code = _report_check(changes, wanted)
        _say_trust(top, wanted)
        return code
    _refuse_unwritable(changes)  # before any file is written
    holding = _hold_plan(place.store_path, hold) if hold is not None else None
    from ..system.files import write_atomic

    for change in changes:
        if change.new is not None:
            change.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(change.path, change.new)
    if holding is not None and holding[1] is not None:
        write_atomic(holding[0], holding[1])
    _report(changes, wanted, top, holding[2] if holding else "" if remove else _hold_line(place.store_path))
    return errors.EXIT_OK


def _say_trust(top: Path, wanted: Wanted) -> None:
    """Codex: whether it will run the hooks, as it records the person's trust."""
    if wanted.harness.name == "codex" and not wanted.remove:
        from ..system import codextrust

        for line in codextrust.lines(top, wanted.is_qem):
            show(line)


def wanted_for(harness: Harness, command: str, ask_to_record: bool, remove: bool) -> Wanted:
    """What qem wants in a harness's settings for `command`: its hooks and MCP server, the
    one source `qem setup` and a plugin (qem_edit.shells.plugin) are both written from."""
    import shlex

    command = command.strip()
    if not command or any(c in command for c in "\n\r\0"):
        raise errors.BadInput(f"--command {command!r}: give the command that runs qem, on one line")
    try:
        words = [command] if _one_program(command) else shlex.split(command)
    except ValueError as exc:
        raise errors.BadInput(f"--command {command!r}: {exc}") from None
    if not words:
        raise errors.BadInput(f"--command {command!r}: give the command that runs qem")
    # the hooks run through a shell, so their words are quoted for it; the MCP entry is an
    # argument vector, each word whole
    return Wanted(harness, shlex.join(words), {"command": words[0], "args": [*words[1:], "mcp"]}, ask_to_record,
                  remove)


def _one_program(command: str) -> bool:
    """Whether `command`, unquoted and holding a space, is the path of one program
    (`/opt/my tools/bin/qem`): a file by that whole name exists.  Else it is shell words
    (`uvx qem`, `'/opt/my tools/bin/qem' --flag`)."""
    import os

    return " " in command and not any(c in command for c in "'\"\\") and os.path.isfile(os.path.expanduser(command))


def _refuse_unwritable(changes: list[Change]) -> None:
    """Refuse when a file to be written may not be: its own refusal, or it is read-only
    (a write is a rename, which would replace a read-only file all the same)."""
    for change in changes:
        if change.new is None:
            continue
        if change.refusal:
            raise errors.BadInput(change.refusal)
        if _read_only(change.path):
            raise errors.BadInput(f"{change.rel} is read-only; qem does not replace a file the user may not"
                                  f" write: make it writable (chmod u+w {change.rel}) and run qem setup again;"
                                  " qem changed nothing")


def _read_only(path: Path) -> bool:
    """`path` exists and this user may not write it, or its mode lets no one write it."""
    import os
    import stat

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return False
    return not os.access(path, os.W_OK) or not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)


def _warn_path(wanted: Wanted) -> None:
    import shutil

    program = wanted.server["command"]
    if shutil.which(program) is None:
        spaced = " (a path holding a space is read as shell words: quote it, `--command \"'/opt/my tools/qem'\"`)"
        say(f"{program} is not on this PATH: {wanted.harness.title} will not find it either; give the whole path,"
            " `--command /abs/path/to/qem`" + (spaced if wanted.server["args"][:-1] else ""))


def _plan(top: Path, rel: str, kind: str, wanted: Wanted) -> Change:
    from ..system.files import read_regular

    path = top / rel
    if path.is_symlink():
        import os

        raise errors.BadInput(f"{rel} is a symbolic link (to {os.readlink(path)}); qem writes only regular files:"
                              " replace the link with the file it points to, or run qem setup where the real"
                              " file is; qem changed nothing")
    from ..system.files import leads_out

    if leads_out(top, rel):  # a committed link among its folders (`.claude` -> elsewhere)
        import os

        raise errors.BadInput(f"{rel} leads outside the work tree ({top}, to {os.path.realpath(path)}) through a"
                              " symbolic link; qem writes its settings only inside the project: replace the link"
                              " with a folder of its own; qem changed nothing")
    raw = read_regular(path)
    if kind == MCP_TOML:
        return _plan_toml(path, rel, raw, wanted)
    doc, commented = json_doc(raw, rel, comments=wanted.harness.name == "gemini")
    new = json.loads(json.dumps(doc))  # a copy to change
    done: list[str] = []
    differences: list[str] = []
    if kind in (HOOKS, BOTH):
        _check_hooks(doc, rel, wanted.harness)
        _merge_hooks(doc, new, wanted, done, differences)
    if kind in (MCP_JSON, BOTH):
        servers = doc.get("mcpServers")
        if servers is not None and not isinstance(servers, dict):
            raise errors.BadInput(f"{rel}: \"mcpServers\" is {_json_type(servers)}, not an object; qem changed nothing")
        _merge_server(new, "mcpServers", wanted, done, differences)
    if new == doc and (raw is not None or wanted.remove):
        return Change(rel, path, None)
    data = (json.dumps(new, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    return Change(rel, path, data, tuple(done), tuple(differences), empty=not new,
                  refusal=_commented(rel, wanted) if commented else "")


class _Unkept(Exception):
    """JSON qem would not write back as it was read."""


def json_doc(raw: bytes | None, rel: str, comments: bool = False) -> tuple[dict[str, Any], bool]:
    """The file's JSON object ({} for no file, or an empty one), and whether it has
    comments (taken out first when `comments`: Gemini CLI reads its settings so)."""
    try:
        text = "" if raw is None else raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise errors.BadInput(f"{rel} is not UTF-8 (byte {exc.start}); qem changed nothing") from None
    bare = _without_comments(text) if comments else text
    if not bare.strip():
        return {}, bare != text
    try:
        doc = json.loads(bare, parse_constant=_no_constant, parse_float=_finite, object_pairs_hook=_keys_once)
    except json.JSONDecodeError as exc:
        raise errors.BadInput(f"{rel} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno};"
                              " qem changed nothing") from None
    except _Unkept as exc:
        raise errors.BadInput(f"{rel} {exc}; qem changed nothing") from None
    except RecursionError:  # nesting deeper than the parser's stack
        raise errors.BadInput(f"{rel} is not valid JSON: nested too deeply; qem changed nothing") from None
    if not isinstance(doc, dict):
        raise errors.BadInput(f"{rel} holds {_json_type(doc)}, not an object; qem changed nothing")
    return doc, bare != text


def _no_constant(name: str) -> Any:
    raise _Unkept(f"is not valid JSON: it holds {name}, a number JSON does not have")


def _finite(text: str) -> float:
    number = float(text)
    if number in (float("inf"), float("-inf")):
        raise _Unkept(f"holds the number {text}, too large for qem to write back as it is")
    return number


def _keys_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _Unkept(f"holds the key {json.dumps(key, ensure_ascii=False)} twice in one object; written back,"
                          " one of the two would be lost: keep one and run qem setup again")
        seen[key] = value
    return seen


# A JSON string (kept), or a comment: `// ...` to the end of its line, `/* ... */`.
_STRING_OR_COMMENT = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*|/\*.*?\*/', re.S)


def _without_comments(text: str) -> str:
    """`text` with each comment made spaces (its newlines kept, so a line and column stay)."""
    return _STRING_OR_COMMENT.sub(lambda m: m[0] if m[0].startswith('"') else re.sub(r"[^\n]", " ", m[0]), text)


def _commented(rel: str, wanted: Wanted) -> str:
    """Why qem does not write a Gemini settings file with comments, and what to do."""
    said = (f"{rel} has comments (// or /* */), which Gemini CLI allows and qem cannot keep: writing the file"
            " would drop them. Take them out and run qem setup again, or ")
    if wanted.remove:
        return said + (f"take qem's entries out by hand (hooks whose command runs `{wanted.command} hook gemini`,"
                       f" and mcpServers.{SERVER}); qem changed nothing")
    hooks = {h.event: [group] for h in wanted.harness.hooks if (group := wanted.group(h.event)) is not None}
    entries = json.dumps({"hooks": hooks, "mcpServers": {SERVER: wanted.server}}, ensure_ascii=False)
    return said + (f"add qem's entries by hand (each hook group into its event's list) and check them with"
                   f" `{_setup_line(wanted)} --check`: {entries}; qem changed nothing")


def _json_type(value: object) -> str:
    """What a JSON value is, as a person says it ("an array")."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _check_hooks(doc: dict[str, Any], rel: str, harness: Harness) -> None:
    """Refuse a `hooks` that is not events of matcher groups (what qem would have to guess at)."""
    hooks = doc.get("hooks")
    if hooks is None:
        return
    if not isinstance(hooks, dict):
        raise errors.BadInput(f"{rel}: \"hooks\" is {_json_type(hooks)}, not an object; qem changed nothing")
    for event, groups in hooks.items():
        if harness.name == "gemini" and event in GEMINI_FIELDS:
            continue
        if not isinstance(groups, list):
            raise errors.BadInput(f"{rel}: hooks.{event} is {_json_type(groups)}, not a list of matcher groups;"
                                  " qem changed nothing")
        for i, group in enumerate(groups):
            if not isinstance(group, dict):
                raise errors.BadInput(f"{rel}: hooks.{event}[{i}] is {_json_type(group)}, not a matcher group"
                                      " (an object); qem changed nothing")


def _merge_hooks(doc: dict[str, Any], new: dict[str, Any], wanted: Wanted,
                 done: list[str], differences: list[str]) -> None:
    """Put qem's hooks (none, for --remove) into `new`'s `hooks`, saying what changed."""
    old: dict[str, Any] = doc.get("hooks") or {}
    hooks: dict[str, Any] = {}
    for event, groups in old.items():
        if not isinstance(groups, list) or wanted.keeps(event):  # one of Gemini CLI's settings, or Stop as it is
            hooks[event] = groups
            continue
        merged = _merge_event(groups, wanted.group(event), wanted.is_qem)
        if merged or not groups:  # an event qem's removal leaves empty goes
            hooks[event] = merged
    for hook in wanted.harness.hooks:
        group = wanted.group(hook.event)
        if hook.event not in hooks and group is not None:
            hooks[hook.event] = [group]
    if hooks or (doc.get("hooks") is not None and not old):
        new["hooks"] = hooks
    else:
        new.pop("hooks", None)
    changed = [e for e in dict.fromkeys([*hooks, *old]) if old.get(e) != hooks.get(e)]
    written = [e for e in changed if _holds_qem(hooks.get(e), wanted)]
    taken = [e for e in changed if e not in written]
    done.extend(f"{what} {', '.join(events)}" for what, events in (("hooks", written), ("removed hooks", taken))
                if events)
    differences.extend(_hook_differences(old, hooks, wanted))


def _merge_event(groups: list[Any], fresh: dict[str, Any] | None, is_qem) -> list[Any]:  # type: ignore[no-untyped-def]
    """An event's matcher groups without qem's handlers (a group they leave empty goes),
    and with `fresh`, qem's own group, where qem's first one was (else last)."""
    kept: list[Any] = []
    at = None
    for group in groups:
        handlers = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(handlers, list) or not any(is_qem(h) for h in handlers):
            kept.append(group)
            continue
        others = [h for h in handlers if not is_qem(h)]
        if others:
            kept.append({**group, "hooks": others})
        if at is None:
            at = len(kept)
    if fresh is not None:
        kept.insert(len(kept) if at is None else at, fresh)
    return kept


def _hook_differences(old: dict[str, Any], new: dict[str, Any], wanted: Wanted) -> list[str]:
    """What --check names: each event whose groups are not what qem would write."""
    out = []
    for event in dict.fromkeys([*new, *old]):
        before, after = old.get(event), new.get(event)
        if before == after:
            continue
        if not _holds_qem(before, wanted):
            out.append(f"no qem hook for {event}")
        elif not _holds_qem(after, wanted):
            flag = " (--no-ask-to-record takes it out)" if getattr(wanted.harness.hook(event), "opt_in", False) else ""
            out.append(f"a qem hook for {event} not asked for{flag}")
        else:
            out.append(f"qem's hook for {event} differs from what qem writes: {json.dumps(wanted.group(event))}")
    return out


def _holds_qem(groups: object, wanted: Wanted) -> bool:
    return isinstance(groups, list) and any(
        isinstance(g, dict) and isinstance(g.get("hooks"), list) and any(wanted.is_qem(h) for h in g["hooks"])
        for g in groups)


def _merge_server(new: dict[str, Any], key: str, wanted: Wanted, done: list[str], differences: list[str]) -> None:
    """Put qem's MCP server (none, for --remove) into `new[key]`, saying what changed."""
    servers = new.get(key)
    old = servers.get(SERVER) if isinstance(servers, dict) else None
    if wanted.remove:
        if old is None:
            return
        del servers[SERVER]
        if not servers:
            del new[key]
        done.append(f"removed MCP server {SERVER}" + _whole(old))
        return
    if _runs(old, wanted.server):
        return
    new.setdefault(key, {})[SERVER] = _entry(old, wanted.server)
    done.append(f"MCP server {SERVER}" + _kept(old))
    differences.append(_server_difference(old, wanted))


def _runs(old: object, server: dict[str, Any]) -> bool:
    """Whether the entry `old` runs qem as `server` does: its command and args (qem's own keys)."""
    return isinstance(old, dict) and all(old.get(k) == v for k, v in server.items())


def _entry(old: object, server: dict[str, Any]) -> dict[str, Any]:
    """`old` (the user's keys, in their order) with qem's command and args."""
    return {**old, **server} if isinstance(old, dict) else dict(server)


def _others(old: object) -> list[str]:
    return [k for k in old if k not in ("command", "args")] if isinstance(old, dict) else []


def _kept(old: object) -> str:
    others = _others(old)
    return f" (its command and args; {', '.join(others)} kept)" if others else ""


def _whole(old: object) -> str:
    others = _others(old)
    return f" (the whole entry, {', '.join(others)} too)" if others else ""


def _server_difference(old: object, wanted: Wanted) -> str:
    if old is None:
        return f"no MCP server {SERVER}"
    runs = {k: old[k] for k in wanted.server if k in old} if isinstance(old, dict) else old
    return f"MCP server {SERVER} is {json.dumps(runs)}, not {json.dumps(wanted.server)}"


# -- Codex's config.toml, edited as text ----------------------------------------------------------

_KEY = r"""\s*(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')\s*"""
_HEADER = re.compile(r"^\s*(\[\[?)(" + _KEY + r"(?:\." + _KEY + r")*)(\]\]?)\s*(?:#.*)?$")
_KEY_PART = re.compile(r"""\s*([A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')\s*(?:\.|$)""")


def _plan_toml(path: Path, rel: str, raw: bytes | None, wanted: Wanted) -> Change:
    text, data = _toml_doc(raw, rel)
    servers = data.get("mcp_servers")
    if servers is not None and not isinstance(servers, dict):
        raise errors.BadInput(f"{rel}: mcp_servers is not a table; qem changed nothing")
    old = servers.get(SERVER) if servers else None
    if old is not None and not isinstance(old, dict):
        raise errors.BadInput(f"{rel}: mcp_servers.{SERVER} is not a table; qem changed nothing")
    if (old is None) if wanted.remove else _runs(old, wanted.server):
        return Change(rel, path, None)
    want = None if wanted.remove else _entry(old, wanted.server)
    new_text, subtables = _toml_edit(text, None if want is None else wanted.server, rel, old is not None)
    _toml_verify(new_text, data, want, rel, wanted.server)
    others = _others(old)
    if want is None:
        tables = f": [mcp_servers.{SERVER}], {', '.join(subtables)}" if subtables else ""
        done = f"removed MCP server {SERVER}" + (f" (the whole entry, {', '.join(others)} too{tables})"
                                                 if others else "")
    else:
        done = f"MCP server {SERVER} ([mcp_servers.{SERVER}]" + (f"; {', '.join(others)} kept)" if others else ")")
    differences = () if want is None else (_server_difference(old, wanted),)
    return Change(rel, path, new_text.encode("utf-8"), (done,), differences, empty=not new_text.strip())


def _toml_doc(raw: bytes | None, rel: str) -> tuple[str, dict[str, Any]]:
    import tomllib

    try:
        text = "" if raw is None else raw.decode("utf-8")
        return text, tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise errors.BadInput(f"{rel} is not UTF-8 (byte {exc.start}); qem changed nothing") from None
    except tomllib.TOMLDecodeError as exc:
        raise errors.BadInput(f"{rel} is not valid TOML: {exc}; qem changed nothing") from None


def _toml_edit(text: str, server: dict[str, Any] | None, rel: str, present: bool) -> tuple[str, list[str]]:
    """`text` with `server`'s command and args in qem's table (its other keys and its
    subtables kept), the table added if there is none, or, `server` None, the table and
    its subtables taken out; no other line changes.  Also the subtables' headers."""
    nl = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    ours = [(start, end, key) for start, end, key in _toml_blocks(lines) if key[:2] == ("mcp_servers", SERVER)]
    subtables = ["[" + ".".join(key) + "]" for _, _, key in ours if len(key) > 2]
    if present and not ours:
        raise errors.BadInput(f"{rel}: mcp_servers.{SERVER} is not written as a [mcp_servers.{SERVER}] table,"
                              " the one form qem edits; change it by hand or take it out; qem changed nothing")
    if server is None:
        out = lines[:ours[0][0]]
        for (_, end, _), (start, _, _) in zip(ours, ours[1:] + [(len(lines), 0, ())]):
            while end < start and not lines[end].strip():  # the blank lines after qem's table go with it
                end += 1
            out += lines[end:start]
        return "".join(out), subtables
    table = [(start, end) for start, end, key in ours if len(key) == 2]
    if table:
        start, end = table[0]
        return "".join(lines[:start + 1] + _toml_keys(lines[start + 1:end], server, nl, rel) + lines[end:]), subtables
    if ours:  # only subtables: qem's table goes before the first of them
        return "".join(lines[:ours[0][0]] + _toml_table(server, nl) + [nl] + lines[ours[0][0]:]), subtables
    head = text if not text or text.endswith(("\n", "\r")) else text + nl
    gap = nl if head.strip() and not head.endswith(nl + nl) else ""
    return head + gap + "".join(_toml_table(server, nl)), subtables


_ASSIGNED = re.compile(r"^(\s*)(" + _KEY + r"(?:\." + _KEY + r")*)=")


def _toml_keys(body: list[str], server: dict[str, Any], nl: str, rel: str) -> list[str]:
    """The lines of qem's table after its header, with its `command` and `args` lines
    (each key's whole value, over however many lines) written fresh, or added after
    its last key; every other line as it was."""
    fresh = {key: value + nl for key, value in _toml_values(server).items()}
    out: list[str] = []
    i = 0
    while i < len(body):
        match = _ASSIGNED.match(body[i])
        if match is None:  # a blank line or a comment
            out.append(body[i])
            i += 1
            continue
        end = _statement_end(body, i, rel)
        key = tuple(_key_part(m[1]) for m in _KEY_PART.finditer(match[2]))
        out += [f"{match[1]}{key[0]} = {fresh.pop(key[0])}"] if key[0] in fresh and len(key) == 1 else body[i:end]
        i = end
    if fresh and out and not out[-1].endswith(("\n", "\r")):
        out[-1] += nl
    return out + [f"{key} = {value}" for key, value in fresh.items()]


def _statement_end(lines: list[str], at: int, rel: str) -> int:
    """Where the key/value statement starting at `lines[at]` ends: after the first line
    that closes it (an array or a multi-line string goes on over lines)."""
    import tomllib

    for end in range(at + 1, len(lines) + 1):
        try:
            tomllib.loads("".join(lines[at:end]))
            return end
        except tomllib.TOMLDecodeError:
            continue
    raise errors.BadInput(f"{rel}: qem cannot read where the value at line {at + 1} of its [mcp_servers.{SERVER}]"
                          " table ends; change the table by hand; qem changed nothing")


def _toml_blocks(lines: list[str]) -> list[tuple[int, int, tuple[str, ...]]]:
    """Each table header's lines: from the header to its last key (the blank lines and
    comments before the next header are that header's), and the table's key."""
    heads = [(i, key) for i, line in enumerate(lines) if (key := _header_key(line)) is not None]
    out = []
    for n, (start, key) in enumerate(heads):
        end = heads[n + 1][0] if n + 1 < len(heads) else len(lines)
        while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
            end -= 1
        out.append((start, end, key))
    return out


def _header_key(line: str) -> tuple[str, ...] | None:
    match = _HEADER.match(line.rstrip("\r\n"))
    if match is None or len(match[1]) != len(match[3]):
        return None
    return tuple(_key_part(m[1]) for m in _KEY_PART.finditer(match[2]))


def _key_part(part: str) -> str:
    if part.startswith("'"):
        return part[1:-1]
    if part.startswith('"'):
        try:
            return json.loads(part)
        except ValueError:
            return part[1:-1]
    return part


def _toml_values(server: dict[str, Any]) -> dict[str, str]:
    """qem's keys, as TOML writes their values."""
    args = ", ".join(_toml_string(a) for a in server["args"])
    return {"command": _toml_string(server["command"]), "args": f"[{args}]"}


def _toml_table(server: dict[str, Any], nl: str) -> list[str]:
    return [f"[mcp_servers.{SERVER}]{nl}", *(f"{key} = {value}{nl}" for key, value in _toml_values(server).items())]


def _toml_string(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's; DEL too must be escaped)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_verify(text: str, data: dict[str, Any], want: dict[str, Any] | None, rel: str,
                 server: dict[str, Any]) -> None:
    """Read the edited text back: it must hold what it held, with only qem's server changed."""
    import tomllib

    expected = json.loads(json.dumps(data, default=str))
    servers = expected.setdefault("mcp_servers", {})
    servers.pop(SERVER, None)
    if want is not None:
        servers[SERVER] = json.loads(json.dumps(want, default=str))  # as `data` is read: a date as text
    try:
        got = json.loads(json.dumps(tomllib.loads(text), default=str))
    except tomllib.TOMLDecodeError as exc:
        got = {"unreadable": str(exc)}
    for doc in (expected, got):
        if doc.get("mcp_servers") == {}:
            del doc["mcp_servers"]
    if got != expected:
        inline = f"{SERVER} = {{ " + ", ".join(f"{k} = {v}" for k, v in _toml_values(server).items()) + " }"
        by_hand = (f"add qem to it by hand ({inline})" if want is not None else f"take {SERVER} out of it by hand")
        raise errors.BadInput(f"{rel}: qem cannot edit its [mcp_servers.{SERVER}] table in this file as it is:"
                              " mcp_servers is written as an inline table (mcp_servers = {...}) or as dotted keys,"
                              f" next to which no [mcp_servers.{SERVER}] table may go. Turn it into"
                              " [mcp_servers.NAME] tables, one a server, and run qem setup codex again, or"
                              f" {by_hand}; qem changed nothing")


# -- holding: `[delivery] hold` in the memory's config.toml ---------------------------------------

HOLD_SAID = {
    True: "an edit or a command whose notes the agent was not given yet is held once, the notes as the reason,"
          " and passes when made again",
    False: "no call is held: the notes due before an edit or a command come as context, which the model reads"
           " after the call ran",
}


def _hold_plan(store: Path, hold: bool) -> tuple[Path, bytes | None, str]:
    """`[delivery] hold` in the memory's config.toml (committed: the project's setting,
    for every clone and harness), every other line as it was: the file, its new bytes
    (None: it says so already), and what to say; refused, before anything is written,
    where there is no memory or its [delivery] table cannot be edited."""
    path = store / "config.toml"
    rel = ".qem/config.toml" if store.name == ".qem" else str(path)
    if not path.is_file():
        raise errors.BadInput(f"no memory at {store}: holding is its setting (`qem init` starts one); qem changed"
                              " nothing")
    text, data = _toml_doc(path.read_bytes(), rel)
    delivery = data.get("delivery", {})
    if not isinstance(delivery, dict):
        raise errors.BadInput(f"{rel}: delivery is not a table; make it [delivery] and run qem setup again;"
                              " qem changed nothing")
    setting = f"[delivery] hold = {str(hold).lower()} ({HOLD_SAID[hold]})"
    if delivery.get("hold", True) is hold and ("hold" in delivery or hold):
        return path, None, f"unchanged {rel}: {setting}"
    new = _hold_edit(text, hold)
    try:
        edited = _toml_doc(new.encode("utf-8"), rel)[1]
    except errors.BadInput:
        edited = None  # the edit is not TOML: the table is written another way (inline, dotted keys)
    if edited != {**data, "delivery": {**delivery, "hold": hold}}:
        raise errors.BadInput(f"{rel}: qem cannot edit its [delivery] table as it is written; set"
                              f" `hold = {str(hold).lower()}` under [delivery] by hand; qem changed nothing")
    return path, new.encode("utf-8"), f"wrote {rel}: {setting}; commit it to share it"


def _hold_line(store: Path) -> str:
    """What the hooks do before an edit or a command, as the memory's setting says."""
    import tomllib

    try:
        hold = tomllib.loads((store / "config.toml").read_text("utf-8")).get("delivery", {}).get("hold", True)
    except (OSError, ValueError, AttributeError):
        return ""  # no memory yet, or a setting a command names when it reads it
    if not isinstance(hold, bool):
        return ""
    flag = "--no-hold" if hold else "--hold"
    return f"holding is {'on' if hold else 'off'}: {HOLD_SAID[hold]} (`qem setup HARNESS {flag}` turns it" \
           f" {'off' if hold else 'on'})"


def _hold_edit(text: str, hold: bool) -> str:
    """`text` with `hold = true|false` in its [delivery] table (the line replaced, or
    added after the table's last key), or a [delivery] table added at the end."""
    nl = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    line = f"hold = {str(hold).lower()}{nl}"
    table = [(start, end) for start, end, key in _toml_blocks(lines) if key == ("delivery",)]
    if not table:
        head = text if not text or text.endswith(("\n", "\r")) else text + nl
        return head + (nl if head.strip() and not head.endswith(nl + nl) else "") + f"[delivery]{nl}" + line
    start, end = table[0]
    body = lines[start + 1:end]
    for i, old in enumerate(body):
        match = _ASSIGNED.match(old)
        if match and tuple(_key_part(m[1]) for m in _KEY_PART.finditer(match[2])) == ("hold",):
            body[i] = match[1] + line
            break
    else:
        if body and not body[-1].endswith(("\n", "\r")):
            body[-1] += nl
        body.append(line)
    return "".join(lines[:start + 1] + body + lines[end:])


# -- what is said ---------------------------------------------------------------------------------


def _report_check(changes: list[Change], wanted: Wanted) -> int:
    """--check: each file and what differs; 1 when anything does."""
    different = [c for c in changes if c.new is not None]
    if not different:
        show(f"in place: qem's hooks and MCP server for {wanted.harness.title} ("
             + ", ".join(c.rel for c in changes) + ")")
        return errors.EXIT_OK
    for change in different:
        for difference in change.differences or ("differs from what qem writes",):
            show(f"{change.rel}: {difference}")
    show(f"`{_setup_line(wanted)}` writes them")
    return errors.EXIT_DIFFERENT


def _setup_line(wanted: Wanted) -> str:
    import shlex

    line = f"qem setup {wanted.harness.name}"
    if wanted.ask_to_record:
        line += " --ask-to-record"
    if wanted.no_ask_to_record:
        line += " --no-ask-to-record"
    if wanted.command != "qem":
        line += f" --command {shlex.quote(wanted.command)}"
    return line


def _mcp_installed() -> bool:
    """Whether `qem mcp` can start here (README's first command installs qem without it)."""
    import importlib.util

    try:
        return importlib.util.find_spec("mcp") is not None
    except (ImportError, ValueError):
        return False


def _report(changes: list[Change], wanted: Wanted, top: Path, holding: str = "") -> None:
    for change in changes:
        if change.new is None:
            show(f"unchanged {change.rel}")
            continue
        held = "nothing" if change.rel.endswith(".toml") else "{}"
        left = f" (it is left holding {held}; delete it if nothing else needs it)" if change.empty else ""
        show(f"wrote {change.rel}: {'; '.join(change.done)}{left}")
    name = wanted.harness.name
    if all(c.new is None for c in changes):
        show("nothing was changed: " + (f"no qem hooks or MCP server are in {wanted.harness.title}'s settings"
                                        if wanted.remove else "everything is in place"))
    if wanted.remove:
        return
    if name in TRUST and any(c.new is not None for c in changes):
        show(TRUST[name])
    _say_trust(top, wanted)
    if holding:
        show(holding)
    if not _mcp_installed():
        show("the MCP server entry runs `qem mcp`, which needs the mcp package, not installed beside the qem that"
             " ran this: pip install 'qem-edit[mcp]' (pipx or uv tool install '.[mcp]'); the hooks need nothing more")
    sample = '{"session_id": "try-setup", "cwd": ".", "source": "startup"}'
    show(f"the hooks run `{wanted.command} hook {name} EVENT`; check one with:"
         f" echo '{sample}' | {wanted.command} hook {name} SessionStart")
