"""`qem mcp`: the memory served to an agent over the Model Context Protocol, on stdio.

Each tool is a thin shell over what the CLI calls: writes go through qem_edit.acts (the
same validation, the same events, the same auto-export), reads through the same answers
(qem_edit.answers, query, context), and a failure comes back as a tool error in the
CLI's words (`qem: error: ...`), never a traceback.  Arguments are checked against the
tool's schema before anything is opened, so bad arguments change nothing.

The server keeps no state of its own: every call opens the memory (which catches its
index up with the log), acts, and closes it, so several servers and CLI writers on one
memory take turns on its write lock and lose nothing.

Every write is an agent's (`agent=True`: a note of a protected kind, a directive by
default, cannot be taken out of force through it; see qem_edit.protect).  Forget,
promote, dispute rulings and rule are a person's acts and are not served; the
provenance `human` is never reachable here (a successor written through this server
carries its writer's provenance, not its predecessor's).  `user-stated` is given only
when the caller binds a quote of the user's words that qem finds verbatim in the note's
text and that makes up at least half of it; otherwise the note is the agent's.

The `mcp` package is an optional extra (`pip install 'qem-edit[mcp]'`), imported only
by `serve`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import errors, ids
from .model import KINDS, PRIORITIES, READING_ORDER, Move

INSTALL = "pip install 'qem-edit[mcp]'"
SERVER_NAME = "qem"


@dataclass
class Reply:
    """What a tool answers: text for the agent, the same as JSON, and notices."""

    text: str
    data: object
    notices: list[str] = field(default_factory=list)

    def content(self) -> str:
        return "\n".join([self.text] + [f"qem: {n}" for n in self.notices])

    def structured(self) -> dict[str, object]:
        return self.data if isinstance(self.data, dict) else {"result": self.data}


@dataclass(frozen=True)
class Tool:
    """One tool: its name, what an agent reads to choose it, its arguments (JSON schema
    properties), which are required, and what it runs."""

    name: str
    description: str
    properties: dict[str, dict[str, Any]]
    required: tuple[str, ...]
    run: Callable[["Memory", dict[str, Any], str], Reply]

    def schema(self) -> dict[str, object]:
        return {"type": "object", "properties": self.properties, "required": list(self.required),
                "additionalProperties": False}


_JSON_TYPES: dict[str, Callable[[object], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
}


def checked(tool: Tool, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """The arguments, checked against the tool's schema (names, required, types); the
    values themselves (a kind, an id, a reason) are checked by the act, in the CLI's words."""
    given = dict(arguments or {})
    for name in sorted(given):
        if name not in tool.properties:
            raise errors.BadInput(f"{tool.name}: unknown argument {name!r}; it takes: {', '.join(tool.properties)}")
    for name in tool.required:
        if name not in given:
            raise errors.BadInput(f"{tool.name}: argument {name!r} is required")
    for name, value in given.items():
        kind = tool.properties[name]["type"]
        if not _JSON_TYPES[kind](value):
            what = "an array of strings" if kind == "array" else f"a {kind}"
            raise errors.BadInput(f"{tool.name}: argument {name!r} must be {what}, not {json.dumps(value)}")
    return given


def provenance_of(text: str, quote: str | None) -> str:
    """`user-stated` when `quote` (the user's own words) is found verbatim in the note's
    text and makes up at least half of it; `agent` when no quote is bound.  A quote that
    does not bind is refused, never silently dropped."""
    from .acts import note_text

    if quote is None:
        return "agent"
    body, words = note_text(text), quote.strip()
    if not words:
        raise errors.BadInput("user_quote is empty; leave it out for provenance agent")
    if words not in body:
        raise errors.BadInput("user_quote is not in the text verbatim, so it cannot make the note user-stated;"
                              " quote the user's words exactly, or leave user_quote out (provenance agent)")
    if 2 * len(words) < len(body):
        raise errors.BadInput("user_quote makes up less than half of the text: a user-stated note transcribes"
                              " the user's words; write the quote alone, or leave user_quote out (provenance agent)")
    return "user-stated"


# -- the memory, opened afresh for every call ---------------------------------------------------


@dataclass(frozen=True)
class Memory:
    """Where the served memory lives (as `--workspace`/`--store` name it) and who writes
    (`--actor`, else the client's name from its `clientInfo`, else QEM_ACTOR or the login)."""

    workspace_dir: Path | None = None
    store_dir: Path | None = None
    actor: str | None = None

    def writer(self, client: str | None) -> str:
        from . import workspace as ws

        return self.actor or (client.strip() if client and client.strip() else None) or ws.actor(None)

    def open(self, *, write: bool, create: bool) -> tuple[Any, Any, list[str]]:
        """The workspace, its store (caught up with the log) and what opening it did."""
        from .opening import open_memory

        return open_memory(self.workspace_dir, self.store_dir, write=write, create=create)

    def act(self, act: Callable[..., Any], client: str | None, *, create: bool = False) -> tuple[Any, list[str]]:
        """Run one of qem_edit.acts as the writer; what it wrote and the notices."""
        place, store, notices = self.open(write=True, create=create)
        with store:
            written = act(store, place, self.writer(client))
        return written, notices + written.notices

    def answer(self, read: Callable[[Any], Any]) -> Reply:
        """Run a read on the store; its answer (qem_edit.answers) as a reply."""
        _, store, notices = self.open(write=False, create=False)
        with store:
            answer = read(store)
        text = answer.text()
        remark = answer.remark()
        return Reply("\n".join(t for t in (text, remark) if t), answer.data(), notices)


# -- the tools -------------------------------------------------------------------------------------


def _add(memory: Memory, a: dict[str, Any], client: str | None) -> Reply:
    from . import acts

    provenance = provenance_of(a["text"], a.get("user_quote"))
    written, notices = memory.act(lambda h, p, who: acts.add(
        h, p, a["text"], a["kind"], a.get("priority", "medium"), provenance, who, agent=True,
        anchors=a.get("anchors"), expires=a.get("expires"), ttl=a.get("ttl")), client, create=True)
    n = written.note
    return Reply(f"#{n.shown} created ({n.kind} · {n.priority} · {n.provenance})", _repeated(written), notices)


def _supersede(memory: Memory, a: dict[str, Any], client: str | None) -> Reply:
    from . import acts

    provenance = provenance_of(a["text"], a.get("user_quote"))
    old: dict[str, str] = {}

    def work(h: Any, p: Any, who: str) -> Any:
        written = acts.supersede(h, p, a["id"], a["text"], a.get("reason"), who, a.get("kind"), a.get("priority"),
                                 provenance, agent=True, anchors=a.get("anchors"), expires=a.get("expires"),
                                 ttl=a.get("ttl"))
        old["shown"] = h.note(written.note.supersedes).shown
        return written

    written, notices = memory.act(work, client)
    n = written.note
    return Reply(f"#{n.shown} created, superseding #{old['shown']} ({n.kind} · {n.priority} · {n.provenance})",
                 _repeated(written), notices)


def _repeated(written: Any) -> dict[str, object]:
    """The new note, and the notes in force it repeats (their ids beside its own, so the
    agent can revoke its repeat; the notice says so in words)."""
    return {**_note(written.note), "repeats": [{"id": n.id, "short": n.shown} for n in written.repeats]}


def _move(event_type: str) -> Callable[[Memory, dict[str, Any], str | None], Reply]:
    def run(memory: Memory, a: dict[str, Any], client: str | None) -> Reply:
        from . import acts

        written, notices = memory.act(
            lambda h, p, who: acts.move(h, p, event_type, a["id"], a.get("reason"), who, agent=True), client)
        n, e = written.note, written.event
        return Reply(f"#{n.shown} {event_type} (event {ids.shown(e.id)})", {**_note(n), "event": e.to_json()}, notices)

    return run


def _note(note: Any) -> dict[str, object]:
    return note.to_json()


def _show(memory: Memory, a: dict[str, Any], client: str | None) -> Reply:
    from . import answers

    return memory.answer(lambda h: answers.show(h, a["id"], a.get("at")))


def _query(memory: Memory, a: dict[str, Any], client: str | None) -> Reply:
    from . import query as q

    events = a.get("events", False)
    parsed = q.parse_filters(a.get("filters", []), events)
    return memory.answer(lambda h: q.answer(h, parsed, events))


def _status(memory: Memory, a: dict[str, Any], client: str | None) -> Reply:
    from . import answers

    return memory.answer(lambda h: answers.status(h, a["id"]))


def _log(memory: Memory, a: dict[str, Any], client: str | None) -> Reply:
    from . import answers

    return memory.answer(lambda h: answers.log(h, a["id"]))


def _context(memory: Memory, a: dict[str, Any], client: str | None) -> Reply:
    from .context import DEFAULT_BUDGET, build

    return memory.answer(lambda h: build(h, a.get("budget", DEFAULT_BUDGET), a.get("at"), a.get("skip", 0)))


_ID = {"type": "string", "description": "The note's short id as qem shows it ([#k3f9] is k3f9), or any unambiguous prefix of its id."}
_TEXT = {"type": "string", "description": "The note's text (markdown); its first line is its title. Never a credential (a key, token, private key or password): it is refused, since the memory is committed."}
_QUOTE = {"type": "string", "description": "The user's own words, verbatim, when the note transcribes them: qem checks the quote is in the text (at least half of it) and records provenance user-stated. Leave out otherwise (provenance agent)."}
_KIND = {"type": "string", "enum": list(KINDS), "description": "directive: a standing rule; task; gotcha: a trap; finding; reference; decision; operational."}
_PRIORITY = {"type": "string", "enum": list(PRIORITIES), "description": "high, medium or low."}
_ANCHORS = {"type": "array", "items": {"type": "string"}, "description": "The files or folders the note is about, as paths from the top of the work tree (src/lock.py); qem records what each holds now, so a later change to it can be noticed."}
_AT = {"type": "string", "description": "As the memory was at this UTC date or time, or as committed at this git revision."}
_EXPIRES = {"type": "string", "description": "The note's end, in the future: a date YYYY-MM-DD (its start, UTC) or a UTC time YYYY-MM-DDTHH:MM:SSZ; none: no end. Not with ttl. A successor keeps the old note's end unless given."}
_TTL = {"type": "string", "description": "The note's end as a time to live from now: a whole number and h, d or w (12h, 30d, 2w). Not with expires. A new note without either gets its kind's default, if the workspace sets one."}


def _reason(required: bool) -> dict[str, str]:
    return {"type": "string", "description": "Why (required)." if required else "Why (optional)."}


def _move_tool(move: Move) -> Tool:
    """The tool of a move an agent may make by a note's id and a reason alone, as model.MOVES
    describes it (what the agent reads, and whether the reason is required)."""
    needs = move.needs_reason
    return Tool(move.verb, f"{move.tool}; a reason is required." if needs else f"{move.tool}.",
                {"id": _ID, "reason": _reason(needs)}, ("id", "reason") if needs else ("id",), _move(move.event))


TOOLS: tuple[Tool, ...] = (
    Tool("add", "Record a new note in the project's memory; returns its id, and in repeats the notes in force with the same text.",
         {"text": _TEXT, "kind": _KIND, "priority": _PRIORITY, "user_quote": _QUOTE, "anchors": _ANCHORS,
          "expires": _EXPIRES, "ttl": _TTL},
         ("text", "kind"), _add),
    Tool("supersede", "Replace a note that is no longer right with a corrected one (the old text stays in the history); returns the new id.",
         {"id": _ID, "text": _TEXT, "reason": _reason(False), "kind": _KIND, "priority": _PRIORITY, "user_quote": _QUOTE,
          "anchors": {**_ANCHORS, "description": _ANCHORS["description"] + " Left out: the old note's; [] for none."},
          "expires": _EXPIRES, "ttl": _TTL},
         ("id", "text"), _supersede),
    *(_move_tool(m) for m in READING_ORDER if m.tool),
    Tool("show", "Read one note in full (expand an index line of the context).",
         {"id": _ID, "at": _AT}, ("id",), _show),
    Tool("query", "Find notes (or, with events, log events) by exact filters such as kind=gotcha current=yes text~lock; the answer starts with the scope scanned.",
         {"filters": {"type": "array", "items": {"type": "string"}, "description": "KEY=VALUE filters. Notes: kind state priority provenance actor since until supersedes current=yes|no|unknown disputed=yes|no text~SUBSTRING anchor=PATH anchor~FOLDER. Events: type note actor since until checkin."},
          "events": {"type": "boolean", "description": "Filter the event log instead of notes."}}, (), _query),
    Tool("status", "Is this note current? yes, no or unknown, with the reason.", {"id": _ID}, ("id",), _status),
    Tool("log", "The history of one note: every event, oldest first.", {"id": _ID}, ("id",), _log),
    Tool("context", "Read at session start: directives in full, then a line per other note in force, in order within a token budget (the last line counts what was cut); expand a line with show.",
         {"budget": {"type": "integer", "minimum": 0, "description": "Tokens the whole answer may take, directives included (characters / 4); 0: no limit. Default 2000."},
          "skip": {"type": "integer", "minimum": 0, "description": "Leave out the first N notes of the order, directives first (to read what did not fit)."},
          "at": _AT}, (), _context),
)
TOOL_BY_NAME = {t.name: t for t in TOOLS}


# -- calls and the server ------------------------------------------------------------------------


def error_text(exc: BaseException) -> str:
    """A failure in the CLI's words (errors.words, which qem_edit.cli.main says too)."""
    return "\n".join(f"qem: {line}" for line in errors.words(exc))


def call(memory: Memory, name: str, arguments: dict[str, Any] | None, client: str | None) -> tuple[str, object, bool]:
    """One tool call: (the text for the agent, the structured answer, whether it failed)."""
    tool = TOOL_BY_NAME.get(name)
    try:
        if tool is None:
            raise errors.BadInput(f"unknown tool {name!r}; tools: {', '.join(TOOL_BY_NAME)}")
        reply = tool.run(memory, checked(tool, arguments), client)
    except Exception as exc:  # every failure is the agent's to read; the server goes on
        return error_text(exc), None, True
    return reply.content(), reply.structured(), False


def _client_name(ctx: Any) -> str | None:
    """The client's own name (`clientInfo.name` of its initialize request)."""
    try:
        return ctx.session.client_params.client_info.name
    except AttributeError:
        return None


def serve(memory: Memory) -> int:
    """Serve the memory on stdin/stdout until the client closes them."""
    try:
        import anyio
        import mcp.types as types
        from mcp.server.lowlevel import Server
        from mcp.server.stdio import stdio_server
    except ImportError as exc:
        raise errors.QemError(f"`qem mcp` needs the mcp package, which is not installed ({exc})",
                              hint=f"install it with: {INSTALL}") from None
    from . import __version__
    from . import workspace as ws

    ws.resolve(memory.workspace_dir, memory.store_dir)  # a bad --workspace fails now, not at the first call

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=[
            types.Tool(name=t.name, description=t.description, input_schema=t.schema()) for t in TOOLS])

    async def call_tool(ctx: Any, params: Any) -> Any:
        text, data, failed = call(memory, params.name, params.arguments, _client_name(ctx))
        return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=data, is_error=failed)

    server = Server(SERVER_NAME, version=__version__, on_list_tools=list_tools, on_call_tool=call_tool,
                    instructions="The project's memory. Call context at the start of a session; record what"
                                 " future sessions need with add; correct with supersede, revoke or flag_stale.")

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)
    return 0
