"""`qem mcp`: the memory served to an agent over the Model Context Protocol, on stdio.

Each tool is a thin shell over what the CLI calls: writes go through qem_edit.writes.acts (the
same validation, the same events, the same auto-export), reads through the same answers
(qem_edit.reads.answers, query, context, owed), and a failure comes back as a tool error in the
CLI's words (`qem: error: ...`), never a traceback.  Arguments are checked against the
tool's schema before anything is opened, so bad arguments change nothing.  Each tool has
a title and hints for the client (read-only; destructive when it takes a note out of
force; idempotent when the same call made again changes nothing), a write's from
vocabulary.MOVES.

Each tool declares the shape of its structured result (`outputSchema`, from `OUTPUTS`); a
result carries the agent's text, the structured result again as JSON text, and, for a
query, a resource link to each note it found.

A client that subscribes to a resource (resources/subscribe through 2025-11-25, a
subscriptions/listen stream from 2026-07-28) is told it was updated when the log moves
(another process's write, a pull: `LogWatch`, which looks every second): a whole memory's
resource at every move, a note's when an event on that note came.

Beside the tools: resources (qem://context, qem://memory.md, qem://note/{id}: what `qem
context`, `qem export --stdout` and `qem show ID` print, read through the same calls) and
prompts (review-memory, with the notes that need a look read into it; record-memory).

The server keeps no state of its own but who listens for what: every call opens the memory
(which catches its index up with the log), acts, and closes it, so several servers and CLI
writers on one memory take turns on its write lock and lose nothing.

Every write is an agent's (`agent=True`: a note of a protected kind, a directive by
default, cannot be taken out of force through it; see qem_edit.storage.protect), but for a
person's acts: forget, promote and rule are made only when the client asks its person
(elicitation, in form mode: by a request to the client through 2025-11-25, in the call's
result from 2026-07-28) and the person confirms and gives the reason, as the person
(QEM_ACTOR or the login name, never the client's), and are refused, naming the command the
person runs, by a client that cannot ask.  Otherwise the provenance `human` is never
reachable here (a successor written through this server carries its writer's provenance,
not its predecessor's).  `user-stated` is given only
when the caller binds a quote of the user's words that qem finds verbatim in the note's
text and that makes up at least half of it; otherwise the note is the agent's
(qem_edit.writes.provenance decides it).

The `mcp` package is an optional extra (`pip install 'qem-edit[mcp]'`), imported only
by `serve` and the handlers it builds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..base import errors
from ..base.vocabulary import KINDS, MOMENTS, MOVE_BY_VERB, PRIORITIES, READING_ORDER, SCOPES, Move

INSTALL = "pip install 'qem-edit[mcp]'"
SERVER_NAME = "qem"
T = TypeVar("T")


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
class Hints:
    """What a client may tell its user before a call (the protocol's tool annotations, hints
    a client trusts only from a server it trusts): whether the tool changes the memory,
    whether it takes a note out of force, and whether the same call made again changes
    nothing.  Every tool's world is closed: this memory, nothing beyond it."""

    read_only: bool
    destructive: bool
    idempotent: bool


# A read records nothing (opening the memory may catch the local index up, as every command
# does); destructive and idempotent are said too, for a client that reads them regardless.
READ = Hints(read_only=True, destructive=False, idempotent=True)


def written(move: Move) -> Hints:
    """A write's hints, as vocabulary.MOVES says of the move it makes: destructive when it takes
    a note out of force, idempotent when the same move made again is refused."""
    return Hints(read_only=False, destructive=move.out_of_force, idempotent=move.idempotent)


@dataclass(frozen=True)
class Tool:
    """One tool: its name, its title for a person, what an agent reads to choose it, its
    arguments (JSON schema properties), which are required, what it runs, and its hints."""

    name: str
    title: str
    description: str
    properties: dict[str, dict[str, Any]]
    required: tuple[str, ...]
    run: Callable[["Memory", dict[str, Any], str], Reply]
    hints: Hints = READ

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


# -- the memory, opened afresh for every call ---------------------------------------------------


@dataclass(frozen=True)
class Memory:
    """Where the served memory lives (as `--workspace`/`--store` name it) and who writes
    (`--actor`, else the client's name from its `clientInfo`, else QEM_ACTOR or the login)."""

    workspace_dir: Path | None = None
    store_dir: Path | None = None
    actor: str | None = None

    def writer(self, client: str | None) -> str:
        from ..system import workspace as ws

        return self.actor or (client.strip() if client and client.strip() else None) or ws.actor(None)

    def open(self, *, write: bool, create: bool) -> tuple[Any, Any, list[str]]:
        """The workspace, its store (caught up with the log) and what opening it did."""
        from .opening import open_memory

        return open_memory(self.workspace_dir, self.store_dir, write=write, create=create)

    def act(self, act: Callable[..., Any], client: str | None, *, create: bool = False) -> tuple[Any, list[str]]:
        """Run one of qem_edit.writes.acts as the writer; what it wrote and the notices."""
        from .opening import unmade

        place, store, notices = self.open(write=True, create=create)
        try:
            with store:
                written = act(store, place, self.writer(client))
        except BaseException:
            unmade(store)  # a refused first write leaves no memory behind
            raise
        return written, notices + written.notices

    def wrote(self, act: Callable[..., Any], client: str | None, *, create: bool = False) -> Reply:
        """Run a write that returns its answer (qem_edit.writes.replies); the answer as a reply."""
        answer, notices = self.act(act, client, create=create)
        return Reply(answer.agent_text(), answer.agent_data(), notices)

    def read(self, read: Callable[[Any, Any], T]) -> tuple[T, list[str]]:
        """Run a read on the store (and its workspace); what it returns, and the notices."""
        place, store, notices = self.open(write=False, create=False)
        with store:
            return read(store, place), notices

    def answer(self, read: Callable[[Any], Any]) -> Reply:
        """Run a read on the store; its answer (qem_edit.reads.answers) as a reply."""
        answer, notices = self.read(lambda store, _: read(store))
        text = answer.text()
        remark = answer.remark()
        return Reply("\n".join(t for t in (text, remark) if t), answer.data(), notices)


# -- the tools -------------------------------------------------------------------------------------


def _add(memory: Memory, a: dict[str, Any], client: str | None) -> Reply:
    from ..writes import acts, replies
    from ..writes.provenance import provenance_of

    return memory.wrote(lambda h, p, who: replies.added(acts.add(
        h, p, a["text"], a["kind"], a.get("priority", "medium"), provenance_of(a["text"], a.get("user_quote"), p),
        who, agent=True,
        anchors=a.get("anchors"), expires=a.get("expires"), ttl=a.get("ttl"), triggers=_triggers(a) or (),
        request=acts.Request(a.get("to"), a.get("due"), a.get("answers")), scope=a.get("scope"),
        session=a.get("session"), rests_on=a.get("rests_on"))),
        client, create=True)


def _supersede(memory: Memory, a: dict[str, Any], client: str | None) -> Reply:
    from ..writes import acts, replies
    from ..writes.provenance import provenance_of

    def work(h: Any, p: Any, who: str) -> Any:
        provenance = provenance_of(a["text"], a.get("user_quote"), p)
        return replies.superseded(h, acts.supersede(
            h, p, a["id"], a["text"], a.get("reason"), who, a.get("kind"), a.get("priority"), provenance, agent=True,
            anchors=a.get("anchors"), expires=a.get("expires"), ttl=a.get("ttl"), triggers=_triggers(a),
            rests_on=a.get("rests_on")))

    return memory.wrote(work, client)


def _share(memory: Memory, a: dict[str, Any], client: str | None) -> Reply:
    """A private note made the team's, as `qem share` makes it (a killed share settled)."""
    from ..writes import replies

    return memory.wrote(lambda h, p, who: replies.shared(h, p, a["id"], a.get("reason"), who, agent=True), client)


def _triggers(a: dict[str, Any]) -> Any:
    """The triggers a tool call declares (None: none named, a successor keeps the old note's)."""
    from ..writes import acts

    if not any(key in a for key in ("on", "when_path", "when_run")):
        return None
    return acts.declared(a.get("on"), a.get("when_path"), a.get("when_run"))


def _spaced(text: str) -> str:
    return " ".join(text.split())


def _move(event_type: str) -> Callable[[Memory, dict[str, Any], str | None], Reply]:
    def run(memory: Memory, a: dict[str, Any], client: str | None) -> Reply:
        from ..writes import acts, replies

        return memory.wrote(
            lambda h, p, who: replies.moved(acts.move(h, p, event_type, a["id"], a.get("reason"), who, agent=True)),
            client)

    return run


def _show(memory: Memory, a: dict[str, Any], client: str | None) -> Reply:
    from ..reads import answers

    return memory.answer(lambda h: answers.show(h, a["id"], a.get("at")))


def _query(memory: Memory, a: dict[str, Any], client: str | None) -> Reply:
    from ..reads import query as q

    events = a.get("events", False)
    parsed = q.parse_filters(a.get("filters", []), events)
    return memory.answer(lambda h: q.answer(h, parsed, events))


def _status(memory: Memory, a: dict[str, Any], client: str | None) -> Reply:
    from ..reads import answers

    return memory.answer(lambda h: answers.status(h, a["id"]))


def _log(memory: Memory, a: dict[str, Any], client: str | None) -> Reply:
    from ..reads import answers

    return memory.answer(lambda h: answers.log(h, a["id"]))


def _context(memory: Memory, a: dict[str, Any], client: str | None) -> Reply:
    from ..reads.context import DEFAULT_BUDGET, build

    return memory.answer(lambda h: build(h, a.get("budget", DEFAULT_BUDGET), a.get("at"), a.get("skip", 0)))


def _owed(memory: Memory, a: dict[str, Any], client: str | None) -> Reply:
    from ..reads import owed

    return memory.answer(lambda h: owed.build(h, a.get("to"), a.get("late", False), a.get("at")))


_ID = {"type": "string", "description": "The note's short id as qem shows it ([#k3f9] is k3f9), or any unambiguous prefix of its id."}
_TEXT = {"type": "string", "description": "The note's text (markdown); its first line is its title. Never a credential (a key, token, private key or password): it is refused, since the memory is committed."}
_QUOTE = {"type": "string", "description": "The user's own words, verbatim, when the note transcribes them: qem checks the quote is in the text (at least half of it) and in what the user typed (as qem's prompt hook heard it), and records provenance user-stated. Leave out otherwise: a text the user typed whole is found by qem itself; any other is provenance agent."}
_KIND = {"type": "string", "enum": list(KINDS), "description": "directive: a standing rule; task; gotcha: a trap; finding; reference; decision; operational."}
_PRIORITY = {"type": "string", "enum": list(PRIORITIES), "description": "high, medium or low."}
_ANCHORS = {"type": "array", "items": {"type": "string"}, "description": "The files or folders the note is about, as paths from the top of the work tree (src/lock.py); qem records what each holds now, so a later change to it can be noticed."}
_ON = {"type": "array", "items": {"type": "string", "enum": list(MOMENTS)}, "description": "The moments the note is delivered to an agent at (replaces its kind's default: a directive at start and after compaction, a high task at start): start, compact, prompt, edit (before any file edit), read, shell."}
_WHEN_PATH = {"type": "array", "items": {"type": "string"}, "description": "Deliver the note before an agent edits a file matching one of these patterns: paths from the top of the work tree, * ? [..] within a part, ** for folders (src/index/**). Anchored files fire too."}
_WHEN_RUN = {"type": "array", "items": {"type": "string"}, "description": "Deliver the note before a shell command matching one of these patterns runs: * any characters (pytest*), matched against each command of a command line."}
_AT = {"type": "string", "description": "As the memory was at this UTC date or time, or as committed at this git revision."}
_EXPIRES = {"type": "string", "description": "The note's end: a date YYYY-MM-DD (its start, UTC) or a UTC time YYYY-MM-DDTHH:MM:SSZ; none: no end. Not with ttl. A successor keeps the old note's end unless given. An end already past is recorded and the note expired in the same write (its state says so)."}
_TO = {"type": "string", "description": "Who owes this note (it is a request): an actor, a person or an agent, one word. Listed by `qem owed` until a note answers it."}
_DUE = {"type": "string", "description": "The request's deadline: a date YYYY-MM-DD (the end of that UTC day) or a UTC time YYYY-MM-DDTHH:MM:SSZ; late after it. Not its end (expires)."}
_RESTS_ON = {"type": "array", "items": {"type": "string"}, "description": "The ids of the notes this one rests on (it holds only while they do): when one is superseded, revoked, expired, forgotten or flagged stale, this note is flagged stale with it."}
_ANSWERS = {"type": "string", "description": "The id of the request this note answers (the request itself is not changed)."}
_SCOPE_ARG = {"type": "string", "enum": list(SCOPES), "description": "Where the note holds: team (the default: committed with the code, every clone and session reads it), private (this clone only, never committed), session (this agent session only, ended when it ends; needs session)."}
_SESSION_ARG = {"type": "string", "description": "With scope session: this agent session's id (as qem's hooks tell it, or $QEM_SESSION where the server has it)."}
_TTL = {"type": "string", "description": "The note's end as a time to live from now: a whole number and h, d or w (12h, 30d, 2w). Not with expires. A new note without either gets its kind's default, if the workspace sets one."}


def _successor_triggers() -> dict[str, dict[str, Any]]:
    said = " A successor keeps the old note's triggers unless on, when_path or when_run is given; then the ones given are all its triggers ([] for none)."
    return {name: {**schema, "description": schema["description"] + said}
            for name, schema in (("on", _ON), ("when_path", _WHEN_PATH), ("when_run", _WHEN_RUN))}


def _reason(required: bool) -> dict[str, str]:
    return {"type": "string", "description": "Why (required)." if required else "Why (optional)."}


def _move_tool(move: Move) -> Tool:
    """The tool of a move an agent may make by a note's id and a reason alone, as vocabulary.MOVES
    describes it (its title, what the agent reads, whether the reason is required, its hints)."""
    needs = move.needs_reason
    return Tool(move.verb, move.title, f"{move.tool}; a reason is required." if needs else f"{move.tool}.",
                {"id": _ID, "reason": _reason(needs)}, ("id", "reason") if needs else ("id",), _move(move.event),
                written(move))


TOOLS: tuple[Tool, ...] = (
    Tool("add", "Record a note", "Record a new note in the project's memory; returns its id, and in repeats the notes in force with the same text.",
         {"text": _TEXT, "kind": _KIND, "priority": _PRIORITY, "user_quote": _QUOTE, "anchors": _ANCHORS,
          "expires": _EXPIRES, "ttl": _TTL, "on": _ON, "when_path": _WHEN_PATH, "when_run": _WHEN_RUN,
          "to": _TO, "due": _DUE, "answers": _ANSWERS, "scope": _SCOPE_ARG, "session": _SESSION_ARG,
          "rests_on": _RESTS_ON},
         ("text", "kind"), _add, written(MOVE_BY_VERB["create"])),
    Tool("supersede", "Supersede a note", "Replace a note that is no longer right with a corrected one (the old text stays in the history); returns the new id.",
         {"id": _ID, "text": _TEXT, "reason": _reason(False), "kind": _KIND, "priority": _PRIORITY, "user_quote": _QUOTE,
          "anchors": {**_ANCHORS, "description": _ANCHORS["description"] + " Left out: the old note's; [] for none."},
          "expires": _EXPIRES, "ttl": _TTL, **_successor_triggers(),
          "rests_on": {**_RESTS_ON, "description": _RESTS_ON["description"] + " Left out: the old note's still in force."}},
         ("id", "text"), _supersede, written(MOVE_BY_VERB["supersede"])),
    *(_move_tool(m) for m in READING_ORDER if m.tool),
    Tool("share", "Share a private note", "Make a private note (this clone's only) a team note, committed with the code; the private one ends. Returns the team note.",
         {"id": _ID, "reason": _reason(False)}, ("id",), _share, written(MOVE_BY_VERB["supersede"])),
    Tool("show", "Show a note", "Read one note in full (expand an index line of the context).",
         {"id": _ID, "at": _AT}, ("id",), _show),
    Tool("query", "Query the memory", "Find notes (or, with events, log events) by exact filters such as kind=gotcha current=yes text~lock, anchor=src/db.py (the notes about a file); the answer starts with the scope scanned.",
         {"filters": {"type": "array", "items": {"type": "string"}, "description": "KEY=VALUE filters. Notes: kind state priority provenance actor since until supersedes current=yes|no|unknown disputed=yes|no text~SUBSTRING anchor=PATH anchor~FOLDER to=NAME due<DATE answered=yes|no|unknown|not-owed. Events: type note actor since until checkin."},
          "events": {"type": "boolean", "description": "Filter the event log instead of notes."}}, (), _query),
    Tool("status", "Is a note current?", "Is this note current? yes, no or unknown, with the reason.", {"id": _ID}, ("id",), _status),
    Tool("log", "A note's history", "The history of one note: every event, oldest first.", {"id": _ID}, ("id",), _log),
    Tool("context", "Session-start context", "Read at session start: directives in full, then a line per other note in force, in order within a token budget (the last line counts what was cut); expand a line with show.",
         {"budget": {"type": "integer", "minimum": 0, "description": "Tokens the whole answer may take, directives included (characters / 4); 0: no limit. Default 2000."},
          "skip": {"type": "integer", "minimum": 0, "description": "Leave out the first N notes of the order, directives first (to read what did not fit)."},
          "at": _AT}, (), _context),
    Tool("owed", "What is owed, and what is late", "What is owed, by whom and what is late: every request in force not answered, the late first; the answer starts with the scope read and whether it is complete.",
         {"to": {"type": "string", "description": "Only what this seat owes (an actor, a person or an agent, as a request's `to` names it)."},
          "late": {"type": "boolean", "description": "Only the requests past their deadline."},
          "at": _AT}, (), _owed),
)
# -- a person's acts, asked of the person through the client (elicitation) ---------------------


@dataclass(frozen=True)
class PersonAct:
    """An act the project reserves for a person (forget, promote, rule): served only where
    the client can ask its person (elicitation, in form mode), who confirms it and gives the
    reason; it is then the person's act (QEM_ACTOR or the login name, never the client's),
    made as the CLI makes it.  Elsewhere it is refused with the command the person runs."""

    verb: str
    does: str  # what the act does, in a person's words
    command: str  # what the person runs instead, with the arguments' names
    act: Callable[..., Any]  # (store, place, arguments, reason, actor) → acts.Written

    def asked(self, a: dict[str, Any], about: str) -> str:
        return (f"The agent asks you to {self.verb} {about}. {self.does}. Confirm it as yourself, and say why"
                f" (recorded on the event); it is as if you ran `{self.command}`.")


def _forget(store: Any, place: Any, a: dict[str, Any], reason: str, who: str) -> Any:
    from ..writes import acts

    return acts.forget(store, place, a["id"], reason, who, agent=False)


def _promote(store: Any, place: Any, a: dict[str, Any], reason: str, who: str) -> Any:
    from ..writes import acts

    return acts.move(store, place, "promoted", a["id"], reason, who, agent=False)


def _rule(store: Any, place: Any, a: dict[str, Any], reason: str, who: str) -> Any:
    from ..writes import acts

    return acts.rule(store, place, a["id"], a["keep"], reason, who, agent=False)


PERSON_ACTS = {
    "forget": PersonAct("forget", "Erase the note's text from the log and from every file qem wrote",
                        "qem forget ID -m REASON", _forget),
    "promote": PersonAct("promote", MOVE_BY_VERB["promote"].says, "qem promote ID -m REASON", _promote),
    "rule": PersonAct("rule", "Settle a dispute (or a note's concurrent changes): the note or side kept stands",
                      "qem rule ID KEEP -m REASON", _rule),
}


def _refused(verb: str) -> Callable[[Memory, dict[str, Any], str | None], Reply]:
    """A person's act asked of a client that cannot ask its person: refused, naming the command."""
    def run(memory: Memory, a: dict[str, Any], client: str | None) -> Reply:
        raise errors.Refused(f"{verb} is a person's act, and this client cannot ask its person (no elicitation"
                             f" in this session); nothing was written",
                             hint=f"ask the person to run `{PERSON_ACTS[verb].command}`")

    return run


def _person_tool(verb: str, title: str, properties: dict[str, Any], required: tuple[str, ...]) -> Tool:
    move = MOVE_BY_VERB[verb]
    return Tool(verb, title, f"{PERSON_ACTS[verb].does}. A person's act: the client asks its person to confirm"
                             " it (refused where it cannot ask).", properties, required, _refused(verb), written(move))


PERSON_TOOLS: tuple[Tool, ...] = (
    _person_tool("forget", "Forget a note (the person confirms)", {"id": _ID}, ("id",)),
    _person_tool("promote", "Promote a note (the person confirms)", {"id": _ID}, ("id",)),
    _person_tool("rule", "Rule on a dispute (the person confirms)",
                 {"id": {"type": "string", "description": "The dispute's id, or a disputed or forked note's id."},
                  "keep": {"type": "string", "description": "The note (or side) that stands."}}, ("id", "keep")),
)
TOOLS = TOOLS + PERSON_TOOLS
TOOL_BY_NAME = {t.name: t for t in TOOLS}
_CONFIRM = {"type": "object", "properties": {
    "confirm": {"type": "boolean", "title": "Confirm", "description": "Yes: make this act, as yourself."},
    "reason": {"type": "string", "title": "Reason", "description": "Why (recorded on the event)."}},
    "required": ["confirm", "reason"]}


async def ask_person(ctx: Any, memory: Memory, name: str, arguments: dict[str, Any] | None) -> tuple[str, object, bool]:
    """A person's act, asked of the person by a request to the client (elicitation/create,
    through 2025-11-25); (text, structured, failed)."""
    try:
        a = checked(TOOL_BY_NAME[name], arguments)
        about = _about(memory, a)
        answer = await ctx.session.elicit_form(PERSON_ACTS[name].asked(a, about), _CONFIRM,
                                               related_request_id=ctx.request_id)
    except Exception as exc:
        return error_text(exc), None, True
    return decided(memory, name, a, about, answer)


ASKED = "qem: the person was asked"  # the request state of a call that asked (sealed by the SDK: see sealed_state)
QUESTION = "confirm"  # the key of the question in the call's input requests and in the answers


async def ask_in_result(ctx: Any, memory: Memory, params: Any) -> Any:
    """A person's act, asked of the person through the call's result (from 2026-07-28):
    the first call is answered with the question (an input-required result holding an
    elicitation form, and a request state); the client asks its person and calls again
    with the same arguments, the answer and that state, and the act is then decided as
    through 2025-11-25.  An answer the server did not ask for (no state of its own
    beside it) is not taken: the question is put again."""
    import mcp.types as types

    name = params.name
    try:
        a = checked(TOOL_BY_NAME[name], params.arguments)
        about = _about(memory, a)
    except Exception as exc:
        return error_text(exc), None, True
    answer = (params.input_responses or {}).get(QUESTION)
    if params.request_state == ASKED and isinstance(answer, types.ElicitResult):
        return decided(memory, name, a, about, answer)
    form = types.ElicitRequestFormParams(message=PERSON_ACTS[name].asked(a, about), requested_schema=_CONFIRM)
    return types.InputRequiredResult(input_requests={QUESTION: types.ElicitRequest(params=form)}, request_state=ASKED)


def decided(memory: Memory, name: str, a: dict[str, Any], about: str, answer: Any) -> tuple[str, object, bool]:
    """The person's answer acted on: made as theirs when they confirmed and gave a reason,
    otherwise nothing written; (text, structured, failed)."""
    act = PERSON_ACTS[name]
    try:
        content = answer.content or {}
        reason = str(content.get("reason") or "").strip()
        if answer.action != "accept" or content.get("confirm") is not True:
            raise errors.Refused(f"the person did not confirm ({answer.action}); nothing was written")
        if not reason:
            raise errors.BadInput(f"the person confirmed without a reason, which {name} needs; nothing was written")
        from ..system import workspace as ws

        from ..writes.replies import confirmed

        person = memory.actor or ws.actor(None)
        reply = memory.wrote(lambda h, p, _: confirmed(act.act(h, p, a, reason, person), name, a["id"], about, person,
                                                       reason), None)
    except Exception as exc:
        return error_text(exc), None, True
    return reply.content(), reply.structured(), False


def sealed_state() -> Any:
    """The SDK's guard of the request state a result carries to the client and back:
    sealed under a key this server makes at start and holds alone, bound to the tool and
    its arguments and good for ten minutes, so a state the client made, altered, carried
    to another call or kept from an earlier server is refused before any tool runs."""
    from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

    return RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=SERVER_NAME)


def _about(memory: Memory, a: dict[str, Any]) -> str:
    """The note the act is about, in a line the person reads before confirming."""
    def line(store: Any, _: Any) -> str:
        note = store.note(store.resolve(a["id"]))
        return f"note #{note.shown} ({note.kind}): {_spaced(note.text or '')[:200]}"

    return memory.read(line)[0]


def by_result(ctx: Any) -> bool:
    """Whether this session's revision asks through the call's result (2026-07-28 on),
    not by a request to the client."""
    from mcp.types.version import is_version_at_least

    return is_version_at_least(ctx.protocol_version, "2026-07-28")


def can_ask(ctx: Any) -> bool:
    """Whether the client can ask its person a question in a form (elicitation): as it
    declared in its initialize request (through 2025-11-25), or in this request's own
    capabilities (from 2026-07-28, where each request carries them)."""
    import mcp.types as types

    try:
        return bool(ctx.session.check_client_capability(types.ClientCapabilities(elicitation=types.ElicitationCapability())))
    except Exception:  # (a session that records no capabilities)
        return False

# What each tool's structured result holds (its `outputSchema`): the JSON the CLI's `--json`
# prints for the same read or write.  The fields every answer has are required; the rest
# are open, so a field added to an answer later does not break a client that validates.
_NULLABLE_TEXT = {"type": ["string", "null"]}
_NOTE_FIELDS = {"id": {"type": "string"}, "short": {"type": "string"}, "kind": {"type": "string", "enum": list(KINDS)},
                "priority": {"type": "string"}, "text": _NULLABLE_TEXT, "provenance": {"type": "string"},
                "state": {"type": "string"}, "created_at": {"type": "string"}, "actor": {"type": "string"},
                "supersedes": _NULLABLE_TEXT, "superseded_by": _NULLABLE_TEXT, "anchors": {"type": "array"},
                "triggers": {"type": "object"}, "to": _NULLABLE_TEXT, "due": _NULLABLE_TEXT, "answers": _NULLABLE_TEXT,
                "rests_on": {"type": "array"},
                # every read's standing of the note (qem_edit.reads.standing): past its end, in open dispute
                "past_end": {"type": "boolean"}, "open_disputes": {"type": "array", "items": {"type": "object"}}}


def _object(properties: dict[str, Any], required: tuple[str, ...]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required)}


NOTE_OUTPUT = _object(_NOTE_FIELDS, ("id", "short", "kind", "priority", "text", "provenance", "state", "created_at"))
_WRITTEN = _object({**_NOTE_FIELDS, "repeats": {"type": "array", "items": {"type": "object"}}},
                   ("id", "short", "kind", "state", "repeats"))
_SHARED = _object({**_NOTE_FIELDS, "private": _object({"id": {"type": "string"}, "short": {"type": "string"}},
                                                       ("id", "short"))}, ("id", "short", "kind", "state", "private"))
_MOVED = _object({**_NOTE_FIELDS, "event": {"type": "object"}}, ("id", "short", "kind", "state", "event"))
_SCOPE = {"type": "object", "properties": {"complete": {"type": "boolean"}}, "required": ["complete"]}
OUTPUTS: dict[str, dict[str, Any]] = {
    "add": _WRITTEN, "supersede": _WRITTEN, "share": _SHARED, "show": NOTE_OUTPUT,
    "query": _object({"scope": _SCOPE, "filters": {"type": "array", "items": {"type": "string"}},
                      "count": {"type": "integer"}, "notes": {"type": "array", "items": NOTE_OUTPUT},
                      "events": {"type": "array", "items": {"type": "object"}}}, ("scope", "filters", "count")),
    "status": _object({"id": {"type": "string"}, "short": {"type": "string"},
                       "current": {"type": "string", "enum": ["yes", "no", "unknown"]}, "reason": {"type": "string"},
                       "expires": {"type": ["string", "null"]}, "past_end": {"type": "boolean"},
                       "open_disputes": {"type": "array", "items": {"type": "object"}},
                       "answered": _object({"answered": {"type": "string", "enum": ["yes", "no", "unknown", "not owed"]},
                                            "why": {"type": "string"}, "late_seconds": {"type": ["integer", "null"]},
                                            "by": {"type": "array", "items": {"type": "object"}},
                                            "request": _NULLABLE_TEXT}, ("answered", "why"))},
                      ("id", "current", "reason")),
    "log": _object({"result": {"type": "array", "items": _object(
        {"id": {"type": "string"}, "note": {"type": "string"}, "type": {"type": "string"}, "at": {"type": "string"}},
        ("id", "note", "type", "at"))}}, ("result",)),
    "owed": _object({"scope": _object({"store": {"type": "string"}, "at": _NULLABLE_TEXT, "now": {"type": "string"},
                                       "requests_in_force": {"type": "integer"}, "notes_read": {"type": "integer"},
                                       "complete": {"type": "boolean"},
                                       "incomplete_because": {"type": "array", "items": {"type": "string"}}},
                                      ("store", "now", "complete", "incomplete_because")),
                     "filters": {"type": "array", "items": {"type": "string"}}, "count": {"type": "integer"},
                     "owed": {"type": "array", "items": _object(
                         {"id": {"type": "string"}, "short": {"type": "string"}, "kind": {"type": "string"},
                          "to": _NULLABLE_TEXT, "due": _NULLABLE_TEXT, "late": {"type": "boolean"},
                          "late_seconds": {"type": ["integer", "null"]},
                          "answered": {"type": "string", "enum": ["no", "unknown"]}, "why": {"type": "string"}},
                         ("id", "short", "to", "due", "late", "answered", "why"))},
                     "answers_to_requests_not_here": {"type": "array", "items": {"type": "string"}}},
                    ("scope", "filters", "count", "owed")),
    "context": _object({"memory": {"type": "string"}, "budget": {"type": "integer"}, "tokens": {"type": "integer"},
                        "directives": {"type": "array", "items": {"type": "object"}},
                        "index": {"type": "array"}, "omitted": {"type": "object"}},
                       ("memory", "budget", "directives", "index")),
}


_PERSON_OUTPUT = _object({"act": {"type": "string"}, "id": {"type": "string"}, "actor": {"type": "string"},
                          "reason": {"type": "string"}, "event": {"type": ["object", "null"]}},
                         ("act", "id", "actor", "reason"))


def output_schema(tool: Tool) -> dict[str, Any]:
    """A tool's outputSchema: its own, a person's act's, or a move's (the note after the
    move, and the event)."""
    return _PERSON_OUTPUT if tool.name in PERSON_ACTS else OUTPUTS.get(tool.name, _MOVED)


# -- the resources: what a client reads into the context, read as the CLI reads it ----------------


class UnknownResource(errors.QemError):
    """A URI that names none of the server's resources."""


@dataclass(frozen=True)
class Resource:
    """One resource, or a template of many (`{id}` in its URI, RFC 6570's simplest form):
    its URI, its name, its title for a person, what it holds, its MIME type, and its read
    (the store, the workspace and the template's value → the text the CLI prints)."""

    uri: str
    name: str
    title: str
    description: str
    mime_type: str
    read: Callable[[Any, Any, str], str]

    def value_in(self, uri: str) -> str | None:
        """The template's value in `uri` ("" for the resource itself), or None when `uri`
        is not one of its own."""
        if "{" not in self.uri:
            return "" if uri == self.uri else None
        from urllib.parse import unquote

        head = self.uri.split("{")[0]
        value = unquote(uri[len(head):]) if uri.startswith(head) else ""
        return value if value and "/" not in value else None


def _context_text(store: Any, place: Any, _: str) -> str:
    from ..reads.context import DEFAULT_BUDGET, build

    return build(store, DEFAULT_BUDGET, None, 0).text()


def _memory_md(store: Any, place: Any, _: str) -> str:
    from ..mirror.export import render_store

    return render_store(store)[1].decode("utf-8")


def _note_text(store: Any, place: Any, note_id: str) -> str:
    from ..reads import answers

    return answers.show(store, note_id).text()


RESOURCES: tuple[Resource, ...] = (
    Resource("qem://context", "context", "Session-start context",
             "What `qem context` prints: the directives in force in full, then a line per other note in force,"
             " within 2,000 tokens; the last line counts what was cut.", "text/markdown", _context_text),
    Resource("qem://memory.md", "memory.md", "MEMORY.md",
             "The whole memory rendered, as `qem export --stdout` prints it.", "text/markdown", _memory_md),
)
TEMPLATES: tuple[Resource, ...] = (
    Resource("qem://note/{id}", "note", "A note by id",
             "One note in full, as `qem show ID` prints it; the id as qem shows it (k3f9) or any unambiguous"
             " prefix.", "text/plain", _note_text),
)
# what a read that names no note (or no memory) is: the resource is not found
NOT_FOUND = (UnknownResource, errors.NoSuchNote, errors.StoreMissing)


def read_resource(memory: Memory, uri: str) -> tuple[Resource, str]:
    """The resource `uri` names and its text, the memory opened afresh."""
    for resource in RESOURCES + TEMPLATES:
        value = resource.value_in(uri)
        if value is not None:
            text, _ = memory.read(lambda store, place: resource.read(store, place, value))
            return resource, text
    named = ", ".join(r.uri for r in RESOURCES + TEMPLATES)
    raise UnknownResource(f"no resource {uri!r}; resources: {named}")


# -- the prompts: what a person asks the model for, with the memory's worklist in it --------------


_REVIEW = """Review the notes in force in this project's memory (qem) and bring them up to date; \
change nothing you have not checked against the code.

For each note listed below, read it whole with the show tool (its history with log) and check it:
- still right: if it is flagged stale, reinstate it, saying why (its anchors then record what \
their files hold now); if it is active but its anchored file changed, flag_stale it and then \
reinstate it;
- right in part, or out of date: supersede it with the corrected text (anchors left out are \
the old note's, read anew);
- wrong: revoke it, saying why;
- unsure: flag_stale it, saying what to check.
A directive is the user's: flag it stale and tell the user, who revokes or supersedes it. A \
note past its end is expired by the user (`qem expire --due`): tell them, or supersede it with \
a new end. To find more, use query (state=stale, current=unknown, disputed=yes, anchor=PATH, \
anchor~FOLDER).

## Flagged stale

{stale}

## Anchored notes whose files changed (not yet flagged)

{drifted}

## Past their end, still in force

{due}
"""

_RECORD = """Before this session ends, record in the project's memory (qem) what a future session \
needs and could not learn from the code: with the add tool, one note each, its first line a \
title; kind directive (a standing rule the user gave), gotcha (a trap), decision (and why), \
finding, task, reference or operational; anchors: the files or folders it is about. A note \
that transcribes the user's own words takes them in user_quote, verbatim. Read the context \
tool first and record nothing it already holds; correct a note that is wrong with supersede \
or revoke. Never record a credential."""


def _review(memory: Memory) -> str:
    """The review's request, with its worklist read now: the notes flagged stale (as `qem
    query state=stale` answers), the anchors that drifted (as `qem anchors check` does) and
    the notes past their end (as `qem expire --due` would find them)."""
    from ..base import times
    from ..reads import answers, drift, query

    def worklist(store: Any, place: Any) -> dict[str, str]:
        stale = query.answer(store, query.parse_filters(["state=stale"], False)).text()
        drifted = drift.check(store, drift.tree_of(place)).text()
        due = answers.NoteList(store.due(times.utc_now())).text() or "(none)"
        return {"stale": stale, "drifted": drifted, "due": due}

    found, _ = memory.read(worklist)
    return _REVIEW.format(**found)


@dataclass(frozen=True)
class Prompt:
    """One prompt: its name, its title for a person, what it is for, and its message."""

    name: str
    title: str
    description: str
    text: Callable[[Memory], str]


PROMPTS: tuple[Prompt, ...] = (
    Prompt("review-memory", "Review the memory",
           "Review the notes in force: those flagged stale, those whose anchored files changed, those past their"
           " end; confirm, correct or withdraw each with the tools.", _review),
    Prompt("record-memory", "Record what this session learned",
           "Record, before the session ends, what a future session needs: the kinds, anchors and tools to use.",
           lambda memory: _RECORD),
)
PROMPT_BY_NAME = {p.name: p for p in PROMPTS}


# -- calls and the server ------------------------------------------------------------------------


def error_text(exc: BaseException) -> str:
    """A failure in the CLI's words (errors.words, which qem_edit.shells.cli.main says too)."""
    from ..storage.secrets import withheld  # what the agent gave may be echoed: its secrets are not

    return "\n".join(f"qem: {withheld(line)}" for line in errors.words(exc))


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


INSTRUCTIONS = ("The project's memory. Call context at the start of a session (or read qem://context); record"
                " what future sessions need with add; correct with supersede, revoke or flag_stale; the"
                " review-memory prompt lists what needs a look.")


def serve(memory: Memory) -> int:
    """Serve the memory on stdin/stdout until the client closes them."""
    try:
        import anyio
        from mcp.server.lowlevel import Server
        from mcp.server.stdio import stdio_server
    except ImportError as exc:
        raise errors.QemError(f"`qem mcp` needs the mcp package, which is not installed ({exc})",
                              hint=f"install it with: {INSTALL}") from None
    from .. import __version__
    from ..system import workspace as ws

    place = ws.resolve(memory.workspace_dir, memory.store_dir)  # a bad --workspace fails now, not at the first call
    watch = LogWatch(memory, place.store_path)
    server = Server(SERVER_NAME, version=__version__, instructions=INSTRUCTIONS, **_tool_handlers(memory),
                    **_resource_handlers(memory), **_prompt_handlers(memory),
                    on_subscribe_resource=watch.subscribe, on_unsubscribe_resource=watch.unsubscribe,
                    on_subscriptions_listen=watch.listen)
    server.middleware.append(sealed_state())

    async def run() -> None:
        async with stdio_server() as (read, write), anyio.create_task_group() as tasks:
            tasks.start_soon(watch.run)
            await server.run(read, write, server.create_initialization_options())
            tasks.cancel_scope.cancel()

    anyio.run(run)
    return 0


WATCH_SECONDS = 1.0  # how often the server looks whether the log moved


def note_marks(memory: Memory, values: list[str]) -> dict[str, tuple[str, ...] | None]:
    """For each note a `qem://note/{id}` resource names (its id as given): the ids of the
    events on that note, in order (None: it names no note, or no memory is there yet).
    A note's resource changed when these did: an event of its own, written here, by
    another process or brought by a pull; a move of another note leaves them as they were."""
    def marks(store: Any, _: Any) -> dict[str, tuple[str, ...] | None]:
        out: dict[str, tuple[str, ...] | None] = {}
        for value in values:
            try:
                out[value] = tuple(e.id for e in store.events(store.resolve(value)))
            except errors.QemError:  # no such note, or a prefix two notes share
                out[value] = None
        return out

    if not values:
        return {}
    try:
        return memory.read(marks)[0]
    except errors.QemError:  # no memory yet, or one that cannot be opened now
        return dict.fromkeys(values)


class LogWatch:
    """Who is to be told when a resource changes, and a look every WATCH_SECONDS at
    whether the log moved: a file in its folders came or went (a write by any process,
    this one too, a pull, a checkout of another branch; log files are never changed in
    place, so a folder's listing is its state).

    Two revisions subscribe differently.  Through 2025-11-25 a client subscribes to a URI
    (resources/subscribe) and is sent notifications/resources/updated on its session.  From
    2026-07-28 a client opens a stream (subscriptions/listen, served by the SDK's
    ListenHandler) naming the URIs it wants; the server acknowledges those that name one
    of its resources and publishes each change on the SDK's bus, which carries it to the
    streams that asked for that URI.

    When the log moved, a whole memory's resource (qem://context, qem://memory.md) is said
    to be updated every time; a note's resource only when an event on that note came
    (`note_marks`), so a subscriber to one note hears nothing of the others' moves."""

    FOLDERS = ("events", "texts", "packs")

    def __init__(self, memory: Memory, store_path: Path) -> None:
        from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler

        self.memory, self.store_path, self.session = memory, store_path, None
        self.subscribed: set[str] = set()  # through resources/subscribe
        self.listening: dict[str, int] = {}  # through open subscriptions/listen streams: how many name each URI
        self.marks: dict[str, tuple[str, ...] | None] = {}  # a watched note's events, as last seen
        self.bus = InMemorySubscriptionBus()
        self.streams = ListenHandler(self.bus)

    def state(self) -> tuple:  # type: ignore[type-arg]
        import os

        out = []
        for folder in self.FOLDERS:
            try:
                out.append((folder, frozenset(os.listdir(self.store_path / folder))))
            except OSError:
                out.append((folder, None))
        return tuple(out)

    def watched(self) -> set[str]:
        return self.subscribed | set(self.listening)

    def mark(self, uris: list[str]) -> None:
        """Note the events, as they are now, of the notes newly watched among `uris`."""
        fresh = [u for u in uris if _note_value(u) is not None and u not in self.marks]
        try:
            found = note_marks(self.memory, [_note_value(u) for u in fresh])  # type: ignore[misc]
        except Exception:  # a subscription is kept all the same: its first move tells it
            found = dict.fromkeys((_note_value(u) for u in fresh), ())  # type: ignore[arg-type]
        self.marks.update({u: found[_note_value(u)] for u in fresh})  # type: ignore[index]

    def forget(self) -> None:
        for uri in set(self.marks) - self.watched():
            del self.marks[uri]

    async def subscribe(self, ctx: Any, params: Any) -> Any:
        import mcp.types as types
        from mcp import MCPError

        uri = str(params.uri)
        if not is_resource(uri):
            raise MCPError(types.INVALID_PARAMS, f"qem: error: no resource {uri}", {"uri": uri})
        self.session = ctx.session
        self.mark([uri])
        self.subscribed.add(uri)
        return types.EmptyResult()

    async def unsubscribe(self, ctx: Any, params: Any) -> Any:
        import mcp.types as types

        self.subscribed.discard(str(params.uri))
        self.forget()
        return types.EmptyResult()

    async def listen(self, ctx: Any, params: Any) -> Any:
        """One subscriptions/listen stream, open until the client ends it: the URIs it
        names that are none of the server's resources are left out of what is
        acknowledged (so never said); the rest are watched while it is open."""
        wanted = params.notifications
        kept = [u for u in wanted.resource_subscriptions or () if is_resource(u)]
        params = params.model_copy(update={"notifications": wanted.model_copy(
            update={"resource_subscriptions": kept or None})})
        self.mark(kept)
        for uri in kept:
            self.listening[uri] = self.listening.get(uri, 0) + 1
        try:
            return await self.streams(ctx, params)
        finally:
            for uri in kept:
                self.listening[uri] -= 1
                if not self.listening[uri]:
                    del self.listening[uri]
            self.forget()

    def updated(self) -> list[str]:
        """The watched URIs the log's move changed: every whole memory's, and each note's
        whose events are not as they were (those seen now kept for the next move).  When
        the memory cannot be read now, every watched URI: told once too often rather than
        a change missed (the next move compares with nothing, and tells them again)."""
        watched = sorted(self.watched())
        notes = [u for u in watched if _note_value(u) is not None]
        try:
            found = note_marks(self.memory, [_note_value(u) for u in notes])  # type: ignore[misc]
        except Exception:  # (note_marks answers a memory that is missing; this is any other failure)
            self.marks.update(dict.fromkeys(notes, ()))
            return watched
        moved = [u for u in notes if found[_note_value(u)] != self.marks.get(u)]  # type: ignore[index]
        self.marks.update({u: found[_note_value(u)] for u in notes})  # type: ignore[index]
        return [u for u in watched if _note_value(u) is None or u in moved]

    async def tell(self, uris: list[str]) -> None:
        from mcp.server.subscriptions import ResourceUpdated

        for uri in uris:
            if uri in self.subscribed and self.session is not None:
                await self.session.send_resource_updated(uri)
            if uri in self.listening:
                await self.bus.publish(ResourceUpdated(uri=uri))

    async def run(self) -> None:
        import anyio

        last = self.state()
        while True:
            await anyio.sleep(WATCH_SECONDS)
            now = self.state()
            if now != last and self.watched():
                # read in this thread, as every call is: the memory is opened by one call at a time
                await self.tell(self.updated())
            last = now


def is_resource(uri: str) -> bool:
    """Whether `uri` names one of the server's resources (a note's by its template)."""
    return any(r.value_in(uri) is not None for r in RESOURCES + TEMPLATES)


def _note_value(uri: str) -> str | None:
    """The note id a `qem://note/{id}` URI names (None: not a note's URI)."""
    return TEMPLATES[0].value_in(uri)


def _tool_handlers(memory: Memory) -> dict[str, Any]:
    """tools/list (each tool with its title and hints) and tools/call."""
    import mcp.types as types

    def annotations(t: Tool) -> Any:
        return types.ToolAnnotations(title=t.title, read_only_hint=t.hints.read_only,
                                     destructive_hint=t.hints.destructive, idempotent_hint=t.hints.idempotent,
                                     open_world_hint=False)

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=[
            types.Tool(name=t.name, title=t.title, description=t.description, input_schema=t.schema(),
                       output_schema=output_schema(t), annotations=annotations(t)) for t in TOOLS])

    async def call_tool(ctx: Any, params: Any) -> Any:
        if params.name in PERSON_ACTS and can_ask(ctx):
            asked = await (ask_in_result(ctx, memory, params) if by_result(ctx) else
                           ask_person(ctx, memory, params.name, params.arguments))
            if not isinstance(asked, tuple):
                return asked  # the question, for the client to put to its person and call again
            text, data, failed = asked
        else:
            text, data, failed = call(memory, params.name, params.arguments, _client_name(ctx))
        return types.CallToolResult(content=_content(text, data), structured_content=data, is_error=failed)

    return {"on_list_tools": list_tools, "on_call_tool": call_tool}


def _content(text: str, data: object) -> list[Any]:
    """A result's content blocks: the text an agent reads; the structured result again as
    JSON text (for a client that reads no structuredContent, as the protocol asks of a tool
    that returns one); and a link to each note a query found (`qem://note/{id}`, readable
    as a resource)."""
    import mcp.types as types

    if data is None:  # a failure: its words alone
        return [types.TextContent(text=text)]
    blocks: list[Any] = [types.TextContent(text=text), types.TextContent(text=json.dumps(data, ensure_ascii=False))]
    notes = data.get("notes") if isinstance(data, dict) else None
    for note in notes if isinstance(notes, list) else []:
        blocks.append(types.ResourceLink(uri=f"qem://note/{note['id']}", name=f"note #{note['short']}",
                                         title=_spaced(note.get("text") or "")[:80] or None, mime_type="text/plain"))
    return blocks


def not_found_code(protocol_version: str) -> int:
    """The error code of a resource not found: -32002 through protocol revision 2025-11-25
    (its server/resources, Error Handling), Invalid params (-32602, JSON-RPC's own) from
    2026-07-28 on (SEP-2164)."""
    from mcp.types import INVALID_PARAMS
    from mcp.types.version import is_version_at_least

    return INVALID_PARAMS if is_version_at_least(protocol_version, "2026-07-28") else -32002


def _resource_handlers(memory: Memory) -> dict[str, Any]:
    """resources/list, resources/templates/list and resources/read: a URI that names no
    resource, no note or no memory is not found, any other failure an internal error, each
    in the CLI's words and naming the URI."""
    import mcp.types as types
    from mcp import MCPError

    async def list_resources(ctx: Any, params: Any) -> Any:
        return types.ListResourcesResult(resources=[
            types.Resource(uri=r.uri, name=r.name, title=r.title, description=r.description, mime_type=r.mime_type)
            for r in RESOURCES])

    async def list_templates(ctx: Any, params: Any) -> Any:
        return types.ListResourceTemplatesResult(resource_templates=[
            types.ResourceTemplate(uri_template=r.uri, name=r.name, title=r.title, description=r.description,
                                   mime_type=r.mime_type) for r in TEMPLATES])

    async def read(ctx: Any, params: Any) -> Any:
        try:
            resource, text = read_resource(memory, params.uri)
        except Exception as exc:
            code = not_found_code(ctx.protocol_version) if isinstance(exc, NOT_FOUND) else types.INTERNAL_ERROR
            raise MCPError(code, error_text(exc), {"uri": params.uri}) from None
        return types.ReadResourceResult(contents=[
            types.TextResourceContents(uri=params.uri, mime_type=resource.mime_type, text=text)])

    async def complete(ctx: Any, params: Any) -> Any:
        template = getattr(params.ref, "uri", None)
        wanted = template in {t.uri for t in TEMPLATES} and params.argument.name == "id"
        values, total = complete_note_ids(memory, params.argument.value) if wanted else ([], 0)
        return types.CompleteResult(completion=types.Completion(values=values, total=total,
                                                                has_more=total > len(values)))

    return {"on_list_resources": list_resources, "on_list_resource_templates": list_templates,
            "on_read_resource": read, "on_completion": complete}


COMPLETIONS_MAX = 100  # the most values one completion may hold (the protocol's cap)


def complete_note_ids(memory: Memory, typed: str) -> tuple[list[str], int]:
    """The ids a client offers for `qem://note/{id}` as a person types one: the short id of
    each note whose id starts with what was typed (a `#` before it allowed), in id order, at
    most COMPLETIONS_MAX, and how many notes match.  A memory that cannot be read offers none."""
    prefix = typed.strip().lstrip("#").lower()

    def found(store: Any, _: Any) -> tuple[list[str], int]:
        ids = store.notes_by_prefix(prefix)
        shown = store.shorts(ids[:COMPLETIONS_MAX])
        return [shown.get(i, i) for i in ids[:COMPLETIONS_MAX]], len(ids)

    try:
        return memory.read(found)[0]
    except Exception:  # no memory yet, or one that cannot be opened: nothing to offer
        return [], 0


def _prompt_handlers(memory: Memory) -> dict[str, Any]:
    """prompts/list and prompts/get: an unknown prompt, or an argument none takes, is
    invalid params; a failure reading the memory an internal error in the CLI's words."""
    import mcp.types as types
    from mcp import MCPError

    async def list_prompts(ctx: Any, params: Any) -> Any:
        return types.ListPromptsResult(prompts=[
            types.Prompt(name=p.name, title=p.title, description=p.description, arguments=[]) for p in PROMPTS])

    async def get_prompt(ctx: Any, params: Any) -> Any:
        prompt = PROMPT_BY_NAME.get(params.name)
        if prompt is None:
            raise MCPError(types.INVALID_PARAMS, f"qem: error: unknown prompt {params.name!r};"
                                                 f" prompts: {', '.join(PROMPT_BY_NAME)}")
        if params.arguments:
            raise MCPError(types.INVALID_PARAMS, f"qem: error: {prompt.name} takes no arguments,"
                                                 f" not {', '.join(sorted(params.arguments))}")
        try:
            text = prompt.text(memory)
        except Exception as exc:
            raise MCPError(types.INTERNAL_ERROR, error_text(exc)) from None
        return types.GetPromptResult(description=prompt.description, messages=[
            types.PromptMessage(role="user", content=types.TextContent(text=text))])

    return {"on_list_prompts": list_prompts, "on_get_prompt": get_prompt}
