"""Each harness's hook contract: which events qem hooks, what their input says, what replies.

Each agent harness's hook contract, as its own documentation and schemas give it
(docs/AGENTS.md cites them): which of its events qem hooks, what each event's input says,
and what its output must be.  Pure: a harness's input (parsed JSON) in, a moment or a
reply's bytes out; qem_edit.shells.hookrun does the reading and the writing.

- Claude Code: SessionStart (source startup, resume, clear, compact), UserPromptSubmit,
  PreToolUse (Edit, MultiEdit, Write, NotebookEdit: an edit; Read: a read; Bash,
  PowerShell: a command), SubagentStart, PreCompact, Stop, SessionEnd.  A hook fired
  inside a subagent carries its `agent_id` (Codex's too): a context window of its own.
  Context is `hookSpecificOutput.additionalContext` in one JSON object on stdout, exit 0;
  no context is no output.  At most 10,000 characters reach the model whole, counted as
  its JavaScript runtime counts them (UTF-16 code units: an emoji is two).  A
  PreToolUse's context reaches the model only after the tool ran; what must come before
  it is a deny (`permissionDecision: "deny"`, its `permissionDecisionReason` the model's
  error result).
- Codex: the same events and output shape (the deny too), every output checked by its
  published schema (`additionalProperties: false`); an edit is an `apply_patch` whose
  `tool_input.command` is the patch (`*** Update File: PATH` lines); it reads files, and
  may patch them, with its shell (`Bash`); stdout starting with `{` or `[` that is not
  valid JSON fails the hook; 2,500 tokens by its estimate reach the model whole, the
  estimate being UTF-8 bytes / 4 rounded up (`codex-rs/hooks/src/output_spill.rs`,
  `codex-rs/utils/string/src/truncate.rs`): 10,000 bytes, where a CJK character is three;
  a SessionEnd hook's timeout is at most 3 s.
- Gemini CLI: SessionStart, BeforeAgent (a prompt), BeforeTool (no context; a deny,
  `decision: "deny"` with its `reason`, is the model's tool error), AfterTool (its tools'
  context comes after the tool: a read of a file is where qem speaks before the edit that
  follows), AfterAgent (its Stop), SessionEnd; stdout is always JSON (`{}` for no
  context: plain text would be shown to the user).  No event fires after a compression,
  and PreCompress fires before Gemini CLI knows whether it compresses, so qem hooks
  neither: what must survive a compression belongs in GEMINI.md, which Gemini CLI keeps
  (docs/AGENTS.md).

A shell command names the files it reads (`cat`, `head`, `tail`, `sed -n`, `nl`, `less`,
`grep`/`rg` with their files: `shell_files`, the line read as the shell reads its words),
the files `sed -i` edits, and the files an `apply_patch` it runs patches.
"""

from __future__ import annotations

from . import cjson
from .patterns import Lazy
from .records import Record

TYPE_CHECKING = False  # typing's flag, without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from collections.abc import Mapping

START_WAITS = 12  # a session start's timeout, in the others' (120 s)
CODEX_END_SECONDS = 3  # the most Codex lets a SessionEnd hook take
# What a harness event asks of qem.
START, PROMPT, TOOL, COMPACTING, STOP, END = "start", "prompt", "tool", "compacting", "stop", "end"
HOLD = "hold"  # before a tool, where context cannot go (Gemini CLI's BeforeTool): a hold, or nothing
SUBAGENT = "subagent"  # a subagent starts: its own context window, given what a session's start gives


class Hook(Record):
    """One hook `qem setup` writes: the harness's event, its matcher (None: every
    occurrence), what it asks of qem, whether it is written only when asked for, and its
    own timeout where the harness allows less than its others (0: the harness's)."""

    event: str
    matcher: str | None
    does: str
    opt_in: bool = False
    timeout: int = 0
    holds: bool = False  # runs before the tool and may hold it (deny it, the notes as the reason)


def utf16_units(text: str) -> int:
    """A text's length as a JavaScript runtime counts it (`String.length`: UTF-16 code
    units, so a character past U+FFFF, an emoji, counts two; a lone surrogate one).
    Counted without the UTF-16 codec, a module of its own every reply would load, nor a
    regular expression (compiling one costs a reply 0.1 ms): a character past U+FFFF is the
    one UTF-8 writes with a lead byte from F0, which no other byte of UTF-8 is."""
    if text.isascii():
        return len(text)
    written = text.encode("utf-8", "surrogatepass")
    return len(text) + len(written) - len(written.translate(None, _ASTRAL_LEADS))


_ASTRAL_LEADS = bytes(range(0xF0, 0xF5))  # the lead bytes of UTF-8's four-byte characters: U+10000 to U+10FFFF


def utf8_bytes(text: str) -> int:
    """A text's length in UTF-8 bytes (Codex's unit: its token estimate is bytes / 4)."""
    return len(text.encode("utf-8", "surrogatepass"))


class Harness(Record):
    name: str  # as `qem hook NAME EVENT` and `qem setup NAME` take it
    title: str
    budget: int  # what a reply's context may hold, in the harness's own unit (`measure`)
    hooks: tuple[Hook, ...]
    edit_tools: frozenset[str]
    read_tools: frozenset[str]
    shell_tools: frozenset[str]
    no_context: str  # what stdout holds when qem has nothing to say
    stop_decision: str  # the decision word that makes the agent go on instead of stopping
    timeout: int  # the hook's timeout, in the unit the settings take
    unit: str = "UTF-16 code units"  # what `budget` counts, as `measure` counts it
    deny_shape: str = "hook"  # "hook": hookSpecificOutput.permissionDecision; "decision": a top-level decision

    def measure(self, text: str) -> int:
        """A text's size as the harness counts it against its cap (`unit`)."""
        return utf8_bytes(text) if self.unit == "UTF-8 bytes" else utf16_units(text)

    def hook(self, event: str) -> Hook | None:
        return next((h for h in self.hooks if h.event == event), None)

    def timeout_of(self, hook: Hook) -> int:
        """A hook's timeout: a session's start may be a fresh clone's first command, which
        builds the local index (seconds at tens of thousands of notes), so it waits longer."""
        if hook.timeout:
            return hook.timeout
        return self.timeout * START_WAITS if hook.does == START else self.timeout

    def reply(self, event: str, context: str, guest: str = "") -> str:
        """The stdout that gives `context` to the model at `event` (no_context for none);
        for Cursor, its own field beside the one its Claude Code compatibility reads."""
        if not context:
            return self.no_context
        reply: dict[str, object] = {"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}}
        if guest == "cursor":
            reply["additional_context"] = context
        return cjson.dumps(reply, ensure_ascii=False)

    def deny(self, event: str, reason: str) -> str:
        """The stdout that holds a tool call: the harness does not run it and gives the
        model `reason` as the call's result."""
        if self.deny_shape == "decision":
            return cjson.dumps({"decision": "deny", "reason": reason}, ensure_ascii=False)
        return cjson.dumps({"hookSpecificOutput": {"hookEventName": event, "permissionDecision": "deny",
                                                   "permissionDecisionReason": reason}}, ensure_ascii=False)

    def stop_reply(self, reason: str) -> str:
        return cjson.dumps({"decision": self.stop_decision, "reason": reason}, ensure_ascii=False)


CLAUDE = Harness(
    "claude", "Claude Code", 10_000,
    (Hook("SessionStart", "startup|resume|clear|compact|fork", START),
     Hook("UserPromptSubmit", None, PROMPT),
     Hook("PreToolUse", "Edit|MultiEdit|Write|NotebookEdit|Read|Bash|PowerShell", TOOL, holds=True),
     Hook("SubagentStart", None, SUBAGENT),
     Hook("PreCompact", None, COMPACTING),
     Hook("SessionEnd", None, END),
     Hook("Stop", None, STOP, opt_in=True)),
    frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"}), frozenset({"Read"}), frozenset({"Bash", "PowerShell"}),
    "", "block", 10,
)
CODEX = Harness(
    "codex", "Codex", 10_000,  # 2,500 tokens (DEFAULT_HOOK_OUTPUT_TOKEN_LIMIT) of 4 bytes (APPROX_BYTES_PER_TOKEN)
    (Hook("SessionStart", "startup|resume|clear|compact", START),
     Hook("UserPromptSubmit", None, PROMPT),
     Hook("PreToolUse", "apply_patch|Bash", TOOL, holds=True),
     Hook("SubagentStart", None, SUBAGENT),
     Hook("PreCompact", None, COMPACTING),
     # Codex clamps a SessionEnd hook's timeout to 3 s and warns on every run when it is
     # longer; a session's end only closes its ledger, well within it.
     Hook("SessionEnd", None, END, timeout=CODEX_END_SECONDS),
     Hook("Stop", None, STOP, opt_in=True)),
    frozenset({"apply_patch", "Edit", "Write"}), frozenset(), frozenset({"Bash"}),
    "", "block", 10, unit="UTF-8 bytes",
)
GEMINI = Harness(
    "gemini", "Gemini CLI", 10_000,
    (Hook("SessionStart", None, START),
     Hook("BeforeAgent", None, PROMPT),
     Hook("BeforeTool", "^(write_file|replace|run_shell_command)$", HOLD, holds=True),
     Hook("AfterTool", "^(read_file|read_many_files|write_file|replace|run_shell_command)$", TOOL),
     Hook("SessionEnd", None, END),
     Hook("AfterAgent", None, STOP, opt_in=True)),
    frozenset({"write_file", "replace"}), frozenset({"read_file", "read_many_files"}),
    frozenset({"run_shell_command"}), "{}", "deny", 10_000, deny_shape="decision",
)
HARNESSES: dict[str, Harness] = {h.name: h for h in (CLAUDE, CODEX, GEMINI)}

# The patterns here are compiled at their first use: a hook that meets no patch and no shell
# command loads no regular expression engine.
_PATCH_FILE = Lazy(r"(?m)^\*\*\* (?:Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$")


class Asked(Record):
    """What a harness's hook input asks: `does` (START, PROMPT, TOOL, ...), the moment's
    event for a tool (edit, read, shell), and its data."""

    does: str
    session: str
    cwd: str
    agent: str = ""  # the subagent the hook fired in (`agent_id`): a context window of its own
    source: str = ""  # a session start's: startup, resume, clear, compact
    prompt: str = ""
    moment: str = ""  # a tool's: edit, read, shell ("" for a tool qem says nothing about)
    paths: tuple[str, ...] = ()  # as the harness gives them (absolute, or from the cwd)
    command: str = ""
    stop_hook_active: bool = False
    guest: str = ""  # another harness running these hooks (GUESTS), "" for this one
    holds: bool = False  # the hook runs before the tool and may hold it
    also: tuple[tuple[str, tuple[str, ...]], ...] = ()  # a command's own moments: (edit or read, the paths)


class Guest(Record):
    """Another harness that runs the hooks `qem setup claude` writes (it loads
    `.claude/settings.json`), sending its own input: where its contract is documented, and
    which of qem's hooks it reads context from (at the others qem gives nothing, and says so)."""

    title: str
    page: str
    takes: frozenset[str]


# VS Code: common input `sessionId`, `hookEventName`, `cwd`, `timestamp`; tools named as its
# agent names them (`replace_string_in_file`, `read_file`, `run_in_terminal`: vscode-copilot-chat
# src/extension/tools/common/toolNames.ts), their inputs in camelCase (`filePath`); context as
# `hookSpecificOutput.additionalContext` at SessionStart, PreToolUse and SubagentStart, none at
# UserPromptSubmit (common output only).  Cursor: `conversation_id`, `workspace_roots`,
# `cursor_version`; context as `additional_context` at its session start only.
GUESTS = {
    "vscode": Guest("VS Code", "https://code.visualstudio.com/docs/agents/reference/hooks-reference",
                    frozenset({START, TOOL, SUBAGENT, COMPACTING, END})),
    "cursor": Guest("Cursor", "https://cursor.com/docs/reference/third-party-hooks",
                    frozenset({START, COMPACTING, END})),
}
VSCODE_EDITS = frozenset({"create_file", "replace_string_in_file", "multi_replace_string_in_file",
                          "insert_edit_into_file", "edit_notebook_file", "apply_patch"})


def guest_of(data: Mapping[str, object]) -> str:
    """Which guest harness sent this input ("" for the harness the hooks were written for)."""
    if any(key in data for key in ("cursor_version", "workspace_roots", "conversation_id")):
        return "cursor"
    return "vscode" if "sessionId" in data or "hookEventName" in data else ""  # Claude Code's are snake_case


def session_key(harness: Harness, ask: Asked) -> str:
    """The ledger key of a session of one harness (qem_edit.system.ledger)."""
    return f"{harness.name}:{ask.session}"


def window_key(harness: Harness, ask: Asked) -> str:
    """The ledger key of the context window a hook fired in: a subagent's by its own id
    (`agent_id` marks a hook fired inside one), else its session's."""
    return f"{harness.name}:agent:{ask.agent}" if ask.agent else session_key(harness, ask)


def asked(harness: Harness, event: str, data: Mapping[str, object]) -> Asked:
    """The hook input read by the harness's contract (or a guest's: VS Code's camelCase
    fields, Cursor's conversation and workspace roots); ValueError when it is not one."""
    hook = harness.hook(event)
    if hook is None:
        raise ValueError(f"{harness.title} has no {event} hook qem answers; use one of "
                         + ", ".join(h.event for h in harness.hooks))
    guest = guest_of(data)
    roots = data.get("workspace_roots")
    root = roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) else ""
    session = _text(data, "session_id", "sessionId", "conversation_id")
    base = Asked(hook.does, session, _text(data, "cwd") or root, _text(data, "agent_id", "agentId"), guest=guest)
    if hook.does == START:
        source = _text(data, "source") or "startup"
        return base._replace(source="startup" if source == "new" else source)  # VS Code's "new"
    if hook.does == PROMPT:
        return base._replace(prompt=_text(data, "prompt"))
    if hook.does == STOP:
        return base._replace(stop_hook_active=data.get("stop_hook_active") is True)
    if hook.does not in (TOOL, HOLD):
        return base
    base = base._replace(holds=hook.holds)
    tool = _text(data, "tool_name", "toolName")
    given = data.get("tool_input", data.get("toolInput"))
    given = given if isinstance(given, dict) else {}
    if tool in harness.shell_tools or (guest and tool == "run_in_terminal"):
        command = _command(given.get("command"))
        reads, edits = shell_files(command)
        also = tuple((event, paths) for event, paths in (("edit", edits), ("read", reads)) if paths)
        return base._replace(moment="shell", command=command, also=also)
    edit = tool in harness.edit_tools or (guest == "vscode" and tool in VSCODE_EDITS)
    if edit or tool in harness.read_tools or (guest == "vscode" and tool == "read_file"):
        return base._replace(moment="edit" if edit else "read", paths=_tool_paths(tool, given))
    return base


def _command(value: object) -> str:
    """A shell tool's command: a line, or its words (`["bash", "-lc", "LINE"]`: the line)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(w, str) for w in value):
        if len(value) == 3 and value[1] in ("-c", "-lc") and value[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh"):
            return value[2]
        import shlex

        return shlex.join(value)
    return ""


def _tool_paths(tool: str, given: Mapping[str, object]) -> tuple[str, ...]:
    if tool == "apply_patch":
        patch = _text(given, "command", "input", "patch")
        return tuple(dict.fromkeys(a or b for a, b in _PATCH_FILE.findall(patch)))
    replacements, files = given.get("replacements"), given.get("files")  # VS Code's, each naming a file
    many = [r.get("filePath") for r in replacements if isinstance(r, dict)] if isinstance(replacements, list) else []
    many += files if isinstance(files, list) else []
    found = [p for p in many if isinstance(p, str) and p]
    if found:
        return tuple(dict.fromkeys(found))
    value = _text(given, "file_path", "notebook_path", "path", "absolute_path", "filePath")
    if value:
        return (value,)
    for key in ("include", "paths"):  # Gemini CLI's read_many_files: paths, or globs (not followed)
        listed = given.get(key)
        if isinstance(listed, list):
            return tuple(p for p in listed if isinstance(p, str) and p and not _GLOB.intersection(p))
    return ()


# -- what a shell command reads and edits --------------------------------------------------------

_GLOB = frozenset("*?[{$`~")
_APPLY_PATCH = Lazy(r"(?:^|[\s;&|(])(?:apply_patch|applypatch)\b")
_HEREDOC = Lazy(r"<<-?[ \t]*(['\"]?)([A-Za-z0-9_.-]+)\1")
_ASSIGNMENT = Lazy(r"[A-Za-z_][A-Za-z0-9_]*=")  # `NAME=value` before a command
_SED_IN_PLACE = Lazy(r"-[a-zA-Z]*i.*")
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", ";;", "|&"})
_REDIRECTS = frozenset({">", ">>", "<", "<<", "<<<", ">&", "<&", ">|", "&>", "&>>"})
_FD = Lazy(r"(^|[\s;&|(])\d+(?=[<>])")
_WRAPPERS = frozenset({"sudo", "command", "builtin", "time", "nohup", "env", "exec"})
# A reading command: how many operands before its files are not files (sed's script, grep's
# pattern, unless given by -e or -f), and its options that take the next word as their value.
_READERS: dict[str, tuple[int, frozenset[str]]] = {
    "cat": (0, frozenset()), "nl": (0, frozenset({"-b", "-d", "-f", "-h", "-i", "-l", "-n", "-s", "-v", "-w"})),
    "less": (0, frozenset({"-b", "-h", "-j", "-k", "-o", "-O", "-p", "-P", "-t", "-T", "-x", "-y", "-z"})),
    "more": (0, frozenset({"-n"})),
    "head": (0, frozenset({"-n", "-c", "--lines", "--bytes"})),
    "tail": (0, frozenset({"-n", "-c", "-s", "--lines", "--bytes", "--pid", "--sleep-interval"})),
    "sed": (1, frozenset({"-e", "-f", "-l", "--expression", "--file", "--line-length"})),
    "grep": (1, frozenset({"-e", "-f", "-m", "-A", "-B", "-C", "-d", "-D", "--regexp", "--file", "--max-count",
                           "--after-context", "--before-context", "--context", "--include", "--exclude",
                           "--exclude-dir", "--label", "--directories", "--devices"})),
    "rg": (1, frozenset({"-e", "-f", "-g", "-t", "-T", "-m", "-A", "-B", "-C", "-E", "-j", "-M", "-r", "--regexp",
                         "--file", "--glob", "--iglob", "--type", "--type-not", "--max-count", "--after-context",
                         "--before-context", "--context", "--encoding", "--threads", "--max-columns", "--replace",
                         "--max-depth", "--sort", "--sortr", "--type-add"})),
}
_READERS["egrep"] = _READERS["fgrep"] = _READERS["grep"]


def shell_files(command: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The files a shell command line reads (a reading command's file operands), and the
    files it edits (`sed -i`'s, and each an `apply_patch` in it names), as it names them
    (from its working directory, a `cd DIR` before them followed).  Nothing for a line the
    shell's quoting cannot read; a glob, a variable or `~` is not followed."""
    patched: list[str] = []
    if "*** Begin Patch" in command and _APPLY_PATCH.search(command):
        patched = [a or b for a, b in _PATCH_FILE.findall(command)]
    reads: list[str] = []
    edits: list[str] = []
    base = ""
    for words in _simple_commands(_without_heredocs(command)):
        while words and (words[0] in _WRAPPERS or _ASSIGNMENT.match(words[0])):
            words = words[1:]
        if not words:
            continue
        name = words[0].rsplit("/", 1)[-1]
        if name == "cd" and len(words) == 2 and not _GLOB.intersection(words[1]):
            base = words[1] if words[1].startswith("/") else _joined(base, words[1])
        elif name in _READERS:
            files, edited = _operands(name, words[1:])
            (edits if edited else reads).extend(_joined(base, f) for f in files)
    return tuple(dict.fromkeys(reads)), tuple(dict.fromkeys(patched + edits))


def _joined(base: str, path: str) -> str:
    return path if not base or path.startswith("/") else f"{base.rstrip('/')}/{path}"


def _without_heredocs(command: str) -> str:
    """The line with each here-document's body taken out (a patch is not a command)."""
    import re  # (its closing line's pattern is made of its word)

    out, at = [], 0
    while (found := _HEREDOC.search(command, at)) is not None:
        line_end = command.find("\n", found.end())
        if line_end < 0:
            break
        close = re.compile(r"^\t*" + re.escape(found[2]) + r"[ \t]*$", re.M).search(command, line_end + 1)
        out.append(command[at:line_end] + "\n")
        at = close.end() if close else len(command)
    return "".join(out) + command[at:]


def _simple_commands(line: str) -> list[list[str]]:
    """The line's simple commands, each its words (the shell's quoting read), redirections
    and their targets left out; none when the quoting cannot be read."""
    import shlex

    line = _FD.sub(r"\1", line.replace("\n", " ; "))  # `2>file`: the 2 is the redirection's, not a word
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    out: list[list[str]] = [[]]
    try:
        tokens = list(lexer)
    except ValueError:
        return []
    skip = False
    for token in tokens:
        if skip:
            skip = False
        elif token in _SEPARATORS:
            out.append([])
        elif token in _REDIRECTS:
            skip = True
        else:
            out[-1].append(token)
    return [words for words in out if words]


def _operands(name: str, args: list[str]) -> tuple[list[str], bool]:
    """A reading command's file operands, and whether it edits them (`sed -i`)."""
    leading, valued = _READERS[name]
    operands: list[str] = []
    edits, i, options = False, 0, True
    while i < len(args):
        word = args[i]
        i += 1
        if options and word == "--":
            options = False
        elif options and word.startswith("-") and len(word) > 1:
            key = word.split("=", 1)[0]
            if key in ("-e", "-f", "--expression", "--file", "--regexp"):
                leading = 0  # the script or the pattern is given by the option
            if name == "sed" and (key.startswith("--in-place") or _SED_IN_PLACE.fullmatch(key)):
                edits = True
            if key in valued and "=" not in word:
                i += 1
        else:
            operands.append(word)
    files = [w for w in operands[leading:] if w != "-" and not _GLOB.intersection(w)]
    return files, edits


def _text(data: Mapping[str, object], *keys: str) -> str:
    """The first of `keys` whose value is a non-empty string ("" when none is)."""
    for key in keys:
        value = data.get(key)
        if isinstance(value, str) and value:
            return value
    return ""
