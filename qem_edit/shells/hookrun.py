"""`qem hook HARNESS EVENT`: one harness hook, answered by the harness's contract.

It reads the hook's JSON input on stdin, finds the memory from the input's working
directory, works out the moment (qem_edit.base.harness), and prints exactly what the
harness reads: what the session's delivery gives (qem_edit.reads.session: the notes the
moment triggers that the session was not given yet, a call held until they are read).
A hook never blocks the agent: on any failure (no memory, an unreadable one, a merge in
progress, bad input) it prints what the harness reads as "no context", exits 0, and says why in `.qem/sessions/hooks.log` (and on stderr, which the
harnesses keep out of the model's context).  Started without the command-line framework:
it runs before every file edit, so its start-up is the floor's.
"""

from __future__ import annotations

import os
import sys
import time

from ..base import cjson
from ..base.harness import (END, GUESTS, HARNESSES, HOLD, PROMPT, START, SUBAGENT, TOOL, Asked, Harness, asked,
                            session_key, window_key)

MAX_INPUT = 16 << 20  # bytes of hook input read (a prompt, a patch)
LOG_NAME = "hooks.log"
LOG_LIMIT = 256 << 10
_SHELL_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-")
USAGE = ("usage: qem hook HARNESS EVENT [-w WORKSPACE]  (reads the harness's hook input on stdin)\n"
         "  HARNESS: " + ", ".join(HARNESSES) + "; EVENT: the harness's own event name (SessionStart, PreToolUse, ...).\n"
         "  `qem setup HARNESS` writes these hooks into the project's settings.")
def main(argv: list[str]) -> int:
    workspace = None
    if len(argv) == 4 and argv[2] in ("-w", "--workspace"):
        argv, workspace = argv[:2], argv[3]
    if len(argv) != 2 or argv[0] not in HARNESSES:
        if argv[:1] in (["-h"], ["--help"]):
            print(USAGE)
            return 0
        print(f"qem: error: {' '.join(argv) or 'nothing'}: not a hook qem answers\n{USAGE}", file=sys.stderr)
        return 2
    harness, event = HARNESSES[argv[0]], argv[1]
    try:
        raw = sys.stdin.buffer.read(MAX_INPUT + 1) if sys.stdin is not None else b""
    except (OSError, ValueError):
        raw = b""  # no input to read: what bad input gets
    out, code = run(harness, event, raw, workspace)
    if out:  # JSON is UTF-8 to its reader, whatever this process's locale says
        sys.stdout.buffer.write((out + "\n").encode("utf-8", "surrogateescape"))
        sys.stdout.flush()
    return code


def run(harness: Harness, event: str, raw: bytes, workspace: str | None = None) -> tuple[str, int]:
    """The hook's stdout and exit code; never an exception.  `workspace`: the memory's
    workspace (`-w`, a folder from the top of the work tree) where it is not found from
    the hook's working directory."""
    where: str | None = None
    try:
        ask = asked(harness, event, _input(raw))
        where = _state_dir(ask, workspace)
        guest = GUESTS.get(ask.guest)
        if guest is not None and ask.does not in guest.takes:
            raise Said(f"{guest.title} reads no context at {event} ({guest.page}): nothing given", where)
        return _answer(harness, event, ask, where), 0
    except Said as exc:
        _log(exc.near, harness, event, exc)
        return harness.no_context, 0
    except Exception as exc:  # noqa: BLE001 - a hook that fails must not stop the agent
        _log(where, harness, event, exc)
        return harness.no_context, 0


def _input(raw: bytes) -> dict:
    """The harness's input, a JSON object; Said naming what is wrong with it otherwise."""
    if len(raw) > MAX_INPUT:
        raise Said(f"the hook's input is over {MAX_INPUT >> 20} MiB: nothing given")
    try:
        data = cjson.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise Said(f"the hook's input is not UTF-8 (byte {exc.start}): nothing given") from None
    except cjson.JSONDecodeError as exc:
        raise Said(f"the hook's input is not JSON ({exc.msg}: line {exc.lineno}, column {exc.colno}):"
                   " nothing given") from None
    except RecursionError:  # nesting deeper than the parser's stack
        raise Said("the hook's input is not JSON (nested too deeply): nothing given") from None
    if not isinstance(data, dict):
        raise Said(f"the hook's input is JSON but not an object (a {type(data).__name__}): nothing given")
    return data



def shell_word(text: str) -> bool:
    """Whether a shell reads `text` as itself, unquoted: 1 to 200 of ASCII's letters, digits and `._:-`."""
    return 0 < len(text) <= 200 and _SHELL_WORD.issuperset(text)

class Said(Exception):
    """Why a hook gives nothing, said as it is (on stderr, and in the hooks log of the
    memory `near`, where there is one), never an error for the harness."""

    def __init__(self, message: str, near: str | None = None) -> None:
        super().__init__(message)
        self.near = near


class NoMemory(Said):
    """No memory where the hook looked."""


def _state_dir(ask: Asked, workspace: str | None = None) -> str:
    """The memory's folder.  `-w` (what `qem setup` writes for a memory in a subfolder)
    is a folder from the top of the git work tree holding the hook's working directory,
    so a hook fired from anywhere in the tree finds it; without it, the memory is found
    from the working directory up.  Where the input's working directory holds none (the
    agent went outside the tree), the project's is tried (`CLAUDE_PROJECT_DIR`, which
    Claude Code sets for its hooks).  NoMemory when there is none.  (Folders are strings
    here: a hook loads no pathlib, qem_edit.system.workspace.)"""
    from ..system.workspace import CONFIG_NAME, STATE_DIR, find_workspace

    cwd = ask.cwd or os.getcwd()  # (as given: a `LINK/..` is resolved as the kernel resolves it, not as text)
    project = os.environ.get("CLAUDE_PROJECT_DIR")
    for start in dict.fromkeys([cwd, *([project] if project else [])]):
        store = _memory_from(start, workspace)
        if os.path.isfile(os.path.join(store, CONFIG_NAME)):
            return store
    near = os.path.join(find_workspace(cwd), STATE_DIR)
    named = f" (-w {workspace} from the work tree's top {_tree_top(cwd)})" if workspace else ""
    raise NoMemory(f"no memory at {_memory_from(cwd, workspace)}{named}; hook's working directory {cwd}:"
                   " nothing given", near if os.path.isfile(os.path.join(near, CONFIG_NAME)) else None)


def _memory_from(start: str, workspace: str | None) -> str:
    """Where the memory is, found from `start` (it may not be there)."""
    from ..system.workspace import find_workspace, places

    if workspace:
        root = os.path.join(_tree_top(start), workspace)  # an absolute `-w` stays itself
    else:
        env = os.environ.get("QEM_WORKSPACE")
        root = os.path.join(start, env) if env else find_workspace(start)
    return places(root, None)[1]


def _tree_top(cwd: str) -> str:
    """The top of the git work tree holding `cwd` (its nearest ancestor holding `.git`),
    else `cwd` itself, resolved."""
    from ..system.workspace import git_top

    return git_top(cwd) or os.path.realpath(cwd)


def _answer(harness: Harness, event: str, ask: Asked, state: str) -> str:
    """The reply: a session's end ends its session notes; a start sets its shell's
    environment; what the moment gives is the session's delivery (qem_edit.reads.session)."""
    from ..system import ledger

    if ask.does == END:
        if ask.session:
            ledger.end(state, session_key(harness, ask))
            _end_session_notes(state, lambda session: session == ask.session)
        return harness.no_context
    if ask.does in (TOOL, HOLD) and not ask.moment:
        return harness.no_context
    if not ask.session:
        raise ValueError("hook input without a session id"
                         " (session_id, VS Code's sessionId, Cursor's conversation_id)")
    if ask.does in (TOOL, HOLD) and _nothing_due(harness, ask, state):
        return harness.no_context
    if ask.does == PROMPT and _prompt_heard(harness, ask, state):
        return harness.reply(event, "", ask.guest)
    if ask.does == START:
        _started(state, ask, harness, event)
    if ask.does in (START, SUBAGENT):
        from ..reads import starts

        kept = starts.answer(harness, event, ask, state)  # a new window's start, as the last one read it
        if kept is not None:
            return kept
    from ..reads import session

    return session.reply(harness, event, ask, state, lambda exc: _log(state, harness, event, exc))


def _nothing_due(harness: Harness, ask: Asked, state: str) -> bool:
    """Whether the digest beside the index says a tool call fires nothing new for its
    context window (qem_edit.reads.quiet): then neither SQLite nor the store is loaded."""
    from ..reads import quiet

    return quiet.nothing_due(ask, state, window_key(harness, ask))


def _prompt_heard(harness: Harness, ask: Asked, state: str) -> bool:
    """Whether the digest says a prompt fires nothing new for its context window (the
    prompt is then recorded as heard): neither SQLite nor the store is loaded."""
    from ..reads import quiet

    return quiet.prompt_heard(ask, state, window_key(harness, ask))


def _started(state: str, ask: Asked, harness: Harness, event: str) -> None:
    """A session starts: where the harness lets a hook set its shell's environment
    (Claude Code's CLAUDE_ENV_FILE), QEM_SESSION is set to the session's id, so a `qem add
    --scope session` the agent runs knows its session; on a fresh start, the session notes
    of sessions whose ledgers are gone (ended, or swept as stale) are ended.  Either
    failing is logged and the start's context given all the same."""
    from ..system import ledger

    env_file = os.environ.get("CLAUDE_ENV_FILE")
    try:
        if env_file and shell_word(ask.session):  # (written unquoted)
            with open(env_file, "a", encoding="utf-8") as handle:
                handle.write(f"export QEM_SESSION={ask.session}\n")
        if ask.source == "startup":
            ledger.sweep(state)
            _end_session_notes(state, lambda session: session != ask.session and not any(
                ledger.exists(state, f"{name}:{session}") for name in HARNESSES))
    except Exception as exc:  # noqa: BLE001 - a start gives its notes whatever else fails
        _log(state, harness, event, exc)


def _end_session_notes(state: str, ended) -> None:  # type: ignore[no-untyped-def]
    """The session notes in force whose session `ended` says is over, ended
    (qem_edit.writes.expiry); nothing opened where this clone holds no private folder."""
    from ..storage.stamp import LOCAL  # (not the log's reader: a start with no private folder loads none of it)

    if not os.path.isdir(os.path.join(state, LOCAL)):
        return
    from ..writes.expiry import end_sessions_in

    end_sessions_in(state, ended)


def _withheld(said: str) -> str:
    """What the failure says, its secrets withheld (a hook's input may hold one, and the
    log outlives the session); if that check itself fails, the failure's name alone."""
    try:
        from ..storage.secrets import withheld

        return withheld(said)
    except Exception:  # noqa: BLE001 - a hook never fails for its log
        return said.partition(":")[0]


def _log(state: str | None, harness: Harness, event: str, exc: BaseException) -> None:
    """Why a hook said nothing: a line on stderr, and in `.qem/sessions/hooks.log`."""
    from ..base.errors import QemError, words

    said = "; ".join(words(exc)) if isinstance(exc, (QemError, OSError)) else (
        str(exc) if isinstance(exc, Said) else f"{type(exc).__name__}: {exc}")
    said = _withheld(said)
    line = _withheld(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {harness.name} {event}: {said}")
    try:
        print(f"qem hook: {said}", file=sys.stderr)
    except OSError:
        pass
    if state is None:
        return
    try:
        from ..system.ledger import prepared

        log = os.path.join(prepared(state), LOG_NAME)  # the ledgers' own folder (never a link's), ignored by git
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        if os.path.exists(log) and os.stat(log).st_size > LOG_LIMIT:
            flags |= os.O_TRUNC  # the log starts again past its limit
        fd = os.open(log, flags, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(line.replace("\n", " ") + "\n")
    except (OSError, QemError):
        pass
