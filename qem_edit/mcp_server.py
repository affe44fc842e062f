"""`qem mcp`: the memory served to an agent over the Model Context Protocol, on stdio.

Each tool is a thin shell over what the CLI calls: writes go through qem_edit.acts (the
same validation, the same events, the same auto-export), reads through the same answers
(qem_edit.answers, query, context), and a failure comes back as a tool error in the
CLI's words (`qem: error: ...`), never a traceback.  Arguments are checked against the
tool's schema before anything is opened, so bad arguments change nothing.  Each tool has
a title and hints for the client (read-only; destructive when it takes a note out of
force; idempotent when the same call made again changes nothing), a write's from
model.MOVES.

Beside the tools: resources (qem://context, qem://memory.md, qem://note/{id}: what `qem
context`, `qem export --stdout` and `qem show ID` print, read through the same calls) and
prompts (review-memory, with the notes that need a look read into it; record-memory).

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
by `serve` and the handlers it builds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

from . import errors, ids
from .model import KINDS, MOMENTS, MOVE_BY_VERB, PRIORITIES, READING_ORDER, Move

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
    """A write's hints, as model.MOVES says of the move it makes: destructive when it takes
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


QUOTED_AT_LEAST = 20  # characters of a text found whole in what the user typed, to make it user-stated unasked


def provenance_of(text: str, quote: str | None, typed: list[str] | None = None) -> str:
    """`user-stated` when `quote` (the user's own words) is found verbatim in the note's
    text, makes up at least half of it, and (where qem's prompt hook heard the user:
    `typed`) is in what the user typed; or, with no quote, when the whole text is in what
    the user typed.  `agent` otherwise.  A quote that does not bind is refused, never
    silently dropped."""
    from .acts import note_text
    from .ledger import RECENT_HOURS

    heard = [_spaced(p) for p in typed or ()]
    if quote is None:
        said = _spaced(note_text(text))
        return "user-stated" if len(said) >= QUOTED_AT_LEAST and any(said in p for p in heard) else "agent"
    body, words = note_text(text), quote.strip()
    if not words:
        raise errors.BadInput("user_quote is empty; leave it out for provenance agent")
    if words not in body:
        raise errors.BadInput("user_quote is not in the text verbatim, so it cannot make the note user-stated;"
                              " quote the user's words exactly, or leave user_quote out (provenance agent)")
    if 2 * len(words) < len(body):
        raise errors.BadInput("user_quote makes up less than half of the text: a user-stated note transcribes"
                              " the user's words; write the quote alone, or leave user_quote out (provenance agent)")
    if heard and not any(_spaced(words) in p for p in heard):
        raise errors.BadInput("user_quote is not in what the user typed in this project's sessions of the last"
                              f" {RECENT_HOURS} hours (as qem's prompt hook heard it): quote their words exactly,"
                              " or leave user_quote out (provenance agent)")
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

    def read(self, read: Callable[[Any, Any], T]) -> tuple[T, list[str]]:
        """Run a read on the store (and its workspace); what it returns, and the notices."""
        place, store, notices = self.open(write=False, create=False)
        with store:
            return read(store, place), notices

    def answer(self, read: Callable[[Any], Any]) -> Reply:
        """Run a read on the store; its answer (qem_edit.answers) as a reply."""
        answer, notices = self.read(lambda store, _: read(store))
        text = answer.text()
        remark = answer.remark()
        return Reply("\n".join(t for t in (text, remark) if t), answer.data(), notices)


# -- the tools -------------------------------------------------------------------------------------


def _add(memory: Memory, a: dict[str, Any], client: str | None) -> Reply:
    from . import acts

    written, notices = memory.act(lambda h, p, who: acts.add(
        h, p, a["text"], a["kind"], a.get("priority", "medium"), provenance_of(a["text"], a.get("user_quote"), _typed(p)),
        who, agent=True,
        anchors=a.get("anchors"), expires=a.get("expires"), ttl=a.get("ttl"), triggers=_triggers(a) or (),
        request=acts.Request(a.get("to"), a.get("due"), a.get("answers"))),
        client, create=True)
    n = written.note
    return Reply(f"#{n.shown} created ({n.kind} · {n.priority} · {n.provenance})", _repeated(written), notices)


def _supersede(memory: Memory, a: dict[str, Any], client: str | None) -> Reply:
    from . import acts

    old: dict[str, str] = {}

    def work(h: Any, p: Any, who: str) -> Any:
        provenance = provenance_of(a["text"], a.get("user_quote"), _typed(p))
        written = acts.supersede(h, p, a["id"], a["text"], a.get("reason"), who, a.get("kind"), a.get("priority"),
                                 provenance, agent=True, anchors=a.get("anchors"), expires=a.get("expires"),
                                 ttl=a.get("ttl"), triggers=_triggers(a))
        old["shown"] = h.note(written.note.supersedes).shown
        return written

    written, notices = memory.act(work, client)
    n = written.note
    return Reply(f"#{n.shown} created, superseding #{old['shown']} ({n.kind} · {n.priority} · {n.provenance})",
                 _repeated(written), notices)


def _triggers(a: dict[str, Any]) -> Any:
    """The triggers a tool call declares (None: none named, a successor keeps the old note's)."""
    from . import acts

    if not any(key in a for key in ("on", "when_path", "when_run")):
        return None
    return acts.declared(a.get("on"), a.get("when_path"), a.get("when_run"))


def _spaced(text: str) -> str:
    return " ".join(text.split())


def _typed(place: Any) -> list[str]:
    from .ledger import recent_prompts

    return recent_prompts(place.store_path)


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
_QUOTE = {"type": "string", "description": "The user's own words, verbatim, when the note transcribes them: qem checks the quote is in the text (at least half of it) and in what the user typed (as qem's prompt hook heard it), and records provenance user-stated. Leave out otherwise: a text the user typed whole is found by qem itself; any other is provenance agent."}
_KIND = {"type": "string", "enum": list(KINDS), "description": "directive: a standing rule; task; gotcha: a trap; finding; reference; decision; operational."}
_PRIORITY = {"type": "string", "enum": list(PRIORITIES), "description": "high, medium or low."}
_ANCHORS = {"type": "array", "items": {"type": "string"}, "description": "The files or folders the note is about, as paths from the top of the work tree (src/lock.py); qem records what each holds now, so a later change to it can be noticed."}
_ON = {"type": "array", "items": {"type": "string", "enum": list(MOMENTS)}, "description": "The moments the note is delivered to an agent at (replaces its kind's default: a directive at start and after compaction, a high task at start): start, compact, prompt, edit (before any file edit), read, shell."}
_WHEN_PATH = {"type": "array", "items": {"type": "string"}, "description": "Deliver the note before an agent edits a file matching one of these patterns: paths from the top of the work tree, * ? [..] within a part, ** for folders (src/index/**). Anchored files fire too."}
_WHEN_RUN = {"type": "array", "items": {"type": "string"}, "description": "Deliver the note before a shell command matching one of these patterns runs: * any characters (pytest*), matched against each command of a command line."}
_AT = {"type": "string", "description": "As the memory was at this UTC date or time, or as committed at this git revision."}
_EXPIRES = {"type": "string", "description": "The note's end, in the future: a date YYYY-MM-DD (its start, UTC) or a UTC time YYYY-MM-DDTHH:MM:SSZ; none: no end. Not with ttl. A successor keeps the old note's end unless given."}
_TO = {"type": "string", "description": "Who owes this note (it is a request): an actor, a person or an agent, one word. Listed by `qem owed` until a note answers it."}
_DUE = {"type": "string", "description": "The request's deadline: a date YYYY-MM-DD (the end of that UTC day) or a UTC time YYYY-MM-DDTHH:MM:SSZ; late after it. Not its end (expires)."}
_ANSWERS = {"type": "string", "description": "The id of the request this note answers (the request itself is not changed)."}
_TTL = {"type": "string", "description": "The note's end as a time to live from now: a whole number and h, d or w (12h, 30d, 2w). Not with expires. A new note without either gets its kind's default, if the workspace sets one."}


def _successor_triggers() -> dict[str, dict[str, Any]]:
    said = " A successor keeps the old note's triggers unless on, when_path or when_run is given; then the ones given are all its triggers ([] for none)."
    return {name: {**schema, "description": schema["description"] + said}
            for name, schema in (("on", _ON), ("when_path", _WHEN_PATH), ("when_run", _WHEN_RUN))}


def _reason(required: bool) -> dict[str, str]:
    return {"type": "string", "description": "Why (required)." if required else "Why (optional)."}


def _move_tool(move: Move) -> Tool:
    """The tool of a move an agent may make by a note's id and a reason alone, as model.MOVES
    describes it (its title, what the agent reads, whether the reason is required, its hints)."""
    needs = move.needs_reason
    return Tool(move.verb, move.title, f"{move.tool}; a reason is required." if needs else f"{move.tool}.",
                {"id": _ID, "reason": _reason(needs)}, ("id", "reason") if needs else ("id",), _move(move.event),
                written(move))


TOOLS: tuple[Tool, ...] = (
    Tool("add", "Record a note", "Record a new note in the project's memory; returns its id, and in repeats the notes in force with the same text.",
         {"text": _TEXT, "kind": _KIND, "priority": _PRIORITY, "user_quote": _QUOTE, "anchors": _ANCHORS,
          "expires": _EXPIRES, "ttl": _TTL, "on": _ON, "when_path": _WHEN_PATH, "when_run": _WHEN_RUN,
          "to": _TO, "due": _DUE, "answers": _ANSWERS},
         ("text", "kind"), _add, written(MOVE_BY_VERB["create"])),
    Tool("supersede", "Supersede a note", "Replace a note that is no longer right with a corrected one (the old text stays in the history); returns the new id.",
         {"id": _ID, "text": _TEXT, "reason": _reason(False), "kind": _KIND, "priority": _PRIORITY, "user_quote": _QUOTE,
          "anchors": {**_ANCHORS, "description": _ANCHORS["description"] + " Left out: the old note's; [] for none."},
          "expires": _EXPIRES, "ttl": _TTL, **_successor_triggers()},
         ("id", "text"), _supersede, written(MOVE_BY_VERB["supersede"])),
    *(_move_tool(m) for m in READING_ORDER if m.tool),
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
)
TOOL_BY_NAME = {t.name: t for t in TOOLS}


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
    from .context import DEFAULT_BUDGET, build

    return build(store, DEFAULT_BUDGET, None, 0).text()


def _memory_md(store: Any, place: Any, _: str) -> str:
    from .export import render_store

    return render_store(store)[1].decode("utf-8")


def _note_text(store: Any, place: Any, note_id: str) -> str:
    from . import answers

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
    from . import answers, drift, query, times

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
    from . import __version__
    from . import workspace as ws

    ws.resolve(memory.workspace_dir, memory.store_dir)  # a bad --workspace fails now, not at the first call
    server = Server(SERVER_NAME, version=__version__, instructions=INSTRUCTIONS, **_tool_handlers(memory),
                    **_resource_handlers(memory), **_prompt_handlers(memory))

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)
    return 0


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
                       annotations=annotations(t)) for t in TOOLS])

    async def call_tool(ctx: Any, params: Any) -> Any:
        text, data, failed = call(memory, params.name, params.arguments, _client_name(ctx))
        return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=data, is_error=failed)

    return {"on_list_tools": list_tools, "on_call_tool": call_tool}


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

    return {"on_list_resources": list_resources, "on_list_resource_templates": list_templates,
            "on_read_resource": read}


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
