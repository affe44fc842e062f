"""The note domain: kinds, states, events, and the replay that turns a log into notes.

Pure: no database, no clock, no terminal. The store, the renderer and the reconciler all
speak these types, and the transition table here is the one place that decides which
lifecycle moves make sense.

A note's events form a small graph: each event names the events of that note its writer
had seen (`prev`), so two writers on two branches who change the same note make two
branches of it.  Replay folds each branch from where it left the other; where the
branches reach the same end (both revoked the note) they agree, where they do not (one
revoked it, the other superseded it) the note is in dispute: it stays as it was where
they parted, and each side is listed, until a ruling or an edit settles it.  The order
in which events arrived never matters: the same set gives the same notes on every clone.
"""

from __future__ import annotations

import re
import unicodedata
from types import MappingProxyType
from typing import Iterable, Mapping, NamedTuple

from . import ids

KINDS: tuple[str, ...] = (
    "directive",
    "task",
    "gotcha",
    "finding",
    "reference",
    "decision",
    "operational",
)
KIND_RANK: dict[str, int] = {k: i for i, k in enumerate(KINDS)}
PRIORITIES: tuple[str, ...] = ("high", "medium", "low")
PROVENANCES: tuple[str, ...] = ("auto", "agent", "user-stated", "human")
# Provenances a writer may claim on `add`; `human` takes a person's act.
CLAIMABLE_PROVENANCES: tuple[str, ...] = ("auto", "agent", "user-stated")
STATES: tuple[str, ...] = ("active", "stale", "superseded", "revoked", "expired", "forgotten")
LIVE_STATES = frozenset({"active", "stale"})
# Where a note holds (its created event's `scope`; absent: the team's, committed with the
# code).  `private`: this clone only; `session`: one agent session (`session`, the
# harness's id), kept where private notes are.  Neither is ever in a committed file.
SCOPES: tuple[str, ...] = ("team", "private", "session")
LOCAL_SCOPES = frozenset({"private", "session"})
SESSION_LIMIT = 200  # characters of a session id as stored
# The states that put a base's dependents in doubt (every one but `active`): a note resting
# on a base in one of them is flagged stale.
OUT_OF_PLAIN_FORCE = ("stale", "superseded", "revoked", "expired", "forgotten")
_ANY = frozenset(STATES) - {"forgotten"}


class Move(NamedTuple):
    """One lifecycle move: the verb a person or a plan uses, the event it appends, the
    states it may leave from and the state it reaches (None: the state stays), how a plan
    shows it, how a refusal words it ("cannot flag as stale note #3: it is revoked"), and
    how `qem diff` heads the changes it makes.  (A NamedTuple, as every record here: every
    command imports this module, and a dataclass's generated methods are compiled at
    import, about a millisecond a class, after `dataclasses` itself, which imports
    `inspect`: some 20 ms of a `qem add` that does not start the command-line framework.)"""

    verb: str
    event: str
    sources: frozenset[str]
    target: str | None
    sign: str
    refusal: str
    label: str
    marker: bool = False  # asked for in MEMORY.md by writing or removing a state marker
    needs_reason: bool = False  # a writer must say why (-m)
    # takes a note out of force, or erases it: on a protected kind a person's act alone
    # (qem_edit.storage.protect refuses an agent's), and what a check-in's mass-change rule counts
    out_of_force: bool = False
    how: str = ""  # the command a person runs for it, which a protected kind's refusal names
    # The moves made by a note's id and a reason alone (acts.move) each have a command made
    # from here (cli.py): `says`, what the move does in a person's words, and `example`; and,
    # where an agent may make one, an MCP tool (mcp_server.py): `tool`, what the agent reads
    # to choose it ("": a person's act, not served), and `title`, the tool's name for a person
    # (a client shows it beside a call it asks them to allow).
    says: str = ""
    example: str = ""
    tool: str = ""
    title: str = ""

    @property
    def shown(self) -> str:
        """The verb as a plan prints it: "flag stale"."""
        return self.verb.replace("_", " ")

    @property
    def command(self) -> str:
        """The verb as the command line spells it: "flag-stale"."""
        return self.verb.replace("_", "-")

    @property
    def idempotent(self) -> bool:
        """Whether making the move again on the same note changes nothing: a move on a note
        that leaves every state it starts from finds the note moved already and is refused
        (a creation makes a new note each time; a move that keeps the state, a promotion,
        appends another event)."""
        return bool(self.sources) and self.target is not None and self.target not in self.sources


# The lifecycle, written once.  Checks, plans, plan displays, refusals, the protected kinds,
# a diff's headings, the move commands and tools and the store's SQL constraint are all
# derived from this table; a stale note is still in force (flagged for review), so it can
# be revoked, expired or superseded too.  Its order is the order in which a plan counts its
# operations (and the log's event types are listed).
MOVES: tuple[Move, ...] = (
    Move("create", "created", frozenset(), "active", "+", "create", "created"),
    Move("supersede", "superseded", LIVE_STATES, "superseded", "~", "supersede", "superseded", out_of_force=True,
         how="qem supersede {id} TEXT -m WHY"),
    Move("revoke", "revoked", LIVE_STATES, "revoked", "-", "revoke", "revoked", marker=True, needs_reason=True,
         out_of_force=True, how="qem revoke {id} -m WHY", says="Revoke a note: it no longer holds",
         example='qem revoke 412 -m "wrong lock order"', tool="Withdraw a note that is wrong and has no replacement", title="Revoke a note"),
    Move("flag_stale", "stale_flagged", frozenset({"active"}), "stale", "!", "flag as stale", "flagged stale",
         marker=True, needs_reason=True, says="Flag a note as possibly out of date",
         example='qem flag-stale 398 -m "the cache was rewritten in v2"',
         tool="Flag a note as possibly out of date (it stays in force, marked for review)",
         title="Flag a note as stale"),
    Move("reinstate", "reinstated", frozenset({"revoked", "stale", "expired"}), "active", "^", "reinstate",
         "reinstated", marker=True, says="Put a revoked, stale or expired note back in force",
         example='qem reinstate 412 -m "the order was right after all"',
         tool="Put a revoked, stale or expired note back in force", title="Reinstate a note"),
    Move("expire", "expired", LIVE_STATES, "expired", "x", "expire", "expired", marker=True, out_of_force=True,
         how="qem expire {id} -m WHY", example='qem expire 77 -m "sprint over"',
         says="Mark a note expired (expiry is an event; reading never consults the clock)"),
    Move("promote", "promoted", _ANY, None, "*", "promote", "promoted", example='qem promote 4 -m "I said this"',
         says="Raise a note's provenance to human: a person stands behind it"),
    # a note's anchored file or folder moved, its content the same: the note follows it
    # (`qem anchors check --flag`); no command of its own, no state change
    Move("anchor", "anchored", LIVE_STATES, None, "@", "re-anchor", "re-anchored"),
    Move("forget", "forgotten", _ANY, "forgotten", "#", "forget", "forgotten", needs_reason=True, out_of_force=True,
         how="qem forget {id} -m WHY --yes"),
    Move("dispute", "disputed", LIVE_STATES, None, "?", "dispute", "disputes opened", needs_reason=True),
    Move("rule", "ruled", _ANY, None, "=", "rule on", "disputes ruled", needs_reason=True),
)
MOVE_BY_VERB: dict[str, Move] = {m.verb: m for m in MOVES}
MOVE_BY_EVENT: dict[str, Move] = {m.event: m for m in MOVES}
MOVE_BY_TARGET: dict[str, Move] = {m.target: m for m in MOVES if m.target and m.verb != "create"}
EVENT_TYPES: tuple[str, ...] = tuple(m.event for m in MOVES)
# The order a reader meets the moves in, where a diff groups its changes and the shells list
# the move commands and tools: MOVES' order, but for a promotion, read before an expiry.
READING_ORDER: tuple[Move, ...] = tuple(MOVE_BY_VERB[verb] for verb in (
    "create", "supersede", "revoke", "flag_stale", "reinstate", "anchor", "promote", "expire", "forget", "dispute",
    "rule"))


def marker_move(before: str, after: str) -> Move | None:
    """The move a person asks for by changing a note's state marker from `before` to
    `after` (None: no single move does that)."""
    for move in MOVES:
        if move.marker and move.target == after and before in move.sources:
            return move
    return None


_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z\Z")


class TextError(ValueError):
    """A note text that cannot be stored (empty, or holding a NUL)."""


class TransitionError(ValueError):
    """A lifecycle move that makes no sense for the note's current state."""


class LogError(ValueError):
    """An event that cannot be replayed (unknown type, unknown note, malformed data)."""


def normalize_text(text: str) -> str:
    """Normalize a note text once and for all, the way every write does.

    CRLF and CR become LF, trailing whitespace is stripped from each line, and leading and
    trailing blank lines are dropped.  Empty results and NUL characters are refused.
    """
    if "\x00" in text:
        raise TextError("note text contains a NUL character")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines = [line.rstrip() for line in lines]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    if not lines:
        raise TextError("note text is empty")
    return "\n".join(lines)


def actor_problem(actor: object) -> str | None:
    """What keeps `actor` from being a writer's name (None: nothing), on write and on read
    alike: one non-empty line with no control characters (a name is printed to terminals
    and into MEMORY.md) and no spaces at its ends."""
    if not isinstance(actor, str) or not actor or actor != actor.strip():
        return "actor must be a non-empty name with no spaces at its ends"
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in actor):
        return "actor must be one line with no control characters"
    return None


SEAT_LIMIT = 100  # characters of a seat's name


def seat_problem(seat: object) -> str | None:
    """What keeps `seat` from being who a request is owed by (None: nothing), on write and
    on read alike: an actor's, a person's or an agent's name, one word (MEMORY.md shows it
    as `to NAME` among the fields a ` · ` separates), no control character."""
    if not isinstance(seat, str) or not seat:
        return "a seat (to) must be a non-empty name"
    if len(seat) > SEAT_LIMIT or any(c.isspace() or c == "·" or unicodedata.category(c)[0] in "CZ" for c in seat):
        return f"a seat (to) is one word of at most {SEAT_LIMIT} characters, no space, `·` or control character"
    if seat.startswith(("#", "\\")):
        return "a seat (to) does not start with # or a backslash"
    return None


def request_problem(data: Mapping[str, object], own_id: str | None = None) -> str | None:
    """What is wrong with a created event's `to`, `due` and `answers` (None: nothing), as a
    write makes them and the log's reader checks another clone's."""
    if "to" in data and seat_problem(data["to"]):
        return str(seat_problem(data["to"]))
    if "due" in data and not is_timestamp(data["due"]):
        return f"due {data['due']!r} is not a UTC time like 2026-07-27T10:00:00Z"
    if "answers" in data and (not ids.is_id(data["answers"]) or data["answers"] == own_id):
        return f"answers {data['answers']!r} is not another note's id"
    return rests_on_problem(data, own_id)


REST_LIMIT = 64  # the notes one note may rest on


def rests_on_problem(data: Mapping[str, object], own_id: str | None = None) -> str | None:
    """What is wrong with a created event's `rests_on` (None: nothing), as a write makes it
    and the log's reader checks another clone's: a non-empty list of other notes' ids,
    each once, in id order (so the same bases make the same bytes)."""
    if "rests_on" not in data:
        return None
    value = data["rests_on"]
    if not isinstance(value, list) or not value or len(value) > REST_LIMIT:
        return f"rests_on must be a list of 1 to {REST_LIMIT} note ids"
    if not all(ids.is_id(v) and v != own_id for v in value) or value != sorted(set(value)):
        return f"rests_on {value!r} is not other notes' ids, each once, in order"
    return None


def base_change_problem(type_: str, data: Mapping[str, object]) -> str | None:
    """What is wrong with a stale flag's `rests_on` (None: nothing): the note it rests on
    that changed (`base`), the event that changed it (`event`), and where the change began
    (`root`, the note whose own change it was, and its `change`, the state it reached)."""
    if "rests_on" not in data or type_ == "created":
        return None
    cause = data["rests_on"]
    if type_ != "stale_flagged" or not isinstance(cause, dict) or set(cause) != {"base", "event", "root", "change"}:
        return "only a stale flag carries rests_on: exactly {base, event, root, change}"
    if not (ids.is_id(cause["base"]) and ids.is_id(cause["event"]) and ids.is_id(cause["root"])):
        return "a stale flag's rests_on names notes and an event by their ids"
    if cause["change"] not in OUT_OF_PLAIN_FORCE:
        return f"rests_on change {cause['change']!r} is not a state a base leaves force by"
    return None


def reason_problem(reason: object) -> str | None:
    """What keeps `reason` from being an event's reason (None: nothing): a string with no
    NUL (which would make MEMORY.md a binary file), or none."""
    if reason is not None and not (isinstance(reason, str) and "\x00" not in reason):
        return "reason must be a string with no NUL, or null"
    return None


def is_timestamp(value: object) -> bool:
    return isinstance(value, str) and bool(_TIMESTAMP.match(value))


# -- anchors: the files a note is about ----------------------------------------------------------
#
# An event's `anchors` (docs/DUMP.md) is a list of {"path", "oid"}: a path from the top of
# the work tree, `/`-separated, that stays inside it, and the git object id (SHA-1, or
# SHA-256 in such a repository) of what it held.  The writer's rules and the reader's are
# these same functions, so an anchor from another clone is checked as a write checks it.

OID_LENGTHS = (40, 64)  # hex digits of a SHA-1 and of a SHA-256 object id
_OID = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64})\Z")
UNANCHORABLE = (".git", ".qem")  # git's own files, and the memory's log
ANCHORING = ("created", "anchored", "reinstated")  # the events that may carry `anchors`


def anchor_path_problem(path: object) -> str | None:
    """What keeps `path` from being an anchor's path (None: nothing): relative, `/`-separated,
    no `.` or `..` or empty part, no backslash, one line with no control characters (MEMORY.md
    shows it on a line), no spaces at its ends, nothing inside .git/ or .qem/."""
    if not isinstance(path, str) or not path:
        return "an anchor's path must be a non-empty string"
    if path.startswith("/") or re.match(r"[A-Za-z]:(?:/|\\|\Z)", path):
        return "an absolute path; name it from the top of the work tree"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return "a path that is not UTF-8"
    if "\\" in path:
        return "a backslash in a path; separate its parts with /"
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in path) or path != path.strip():
        return "a path holding a control character, or spaces at its ends"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "a path with an empty, `.` or `..` part; name it from the top of the work tree"
    inside = next((part for part in parts if part in UNANCHORABLE), None)
    if inside is not None:
        return f"a path inside {inside}/ ({'git' if inside == '.git' else 'the memory'}'s own files), which no note is about"
    return None


def anchors_problem(value: object) -> str | None:
    """What is wrong with an event's `anchors` (None: nothing): a list of distinct paths,
    each {"path": PATH, "oid": HEX} and nothing else."""
    if not isinstance(value, list):
        return "anchors must be a list of {path, oid}"
    seen: set[str] = set()
    for anchor in value:
        if not isinstance(anchor, dict) or set(anchor) != {"path", "oid"}:
            return "each anchor is exactly {path, oid}"
        problem = anchor_path_problem(anchor["path"])
        if problem:
            return f"anchor {anchor['path']!r}: {problem}"
        if not isinstance(anchor["oid"], str) or not _OID.match(anchor["oid"]):
            return f"anchor {anchor['path']!r}: its oid is not a git object id (40 or 64 lowercase hex digits)"
        if anchor["path"] in seen:
            return f"anchor {anchor['path']!r} is named twice"
        seen.add(anchor["path"])
    return None


def anchors_of(data: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    """An event's anchors as (path, oid) pairs in path order; none where it has none (or,
    never reached past the log's checks, malformed ones)."""
    value = data.get("anchors")
    if value is None or anchors_problem(value) is not None:
        return ()
    return tuple(sorted((str(a["path"]), str(a["oid"])) for a in value))  # type: ignore[index, union-attr]


# When a note is delivered to an agent (qem_edit.base.triggers reads these): its own
# declared moments (`on`), path patterns (`path`: the note fires before an agent edits a
# matching file) and command patterns (`run`: before a matching shell command runs).
# Stored in its created event's data as {"on": [...], "path": [...], "run": [...]}, each
# list sorted and without repeats, only the names it declares.  MEMORY.md shows each as an
# attribute line: `@on: start`, `@when-path: src/index/**`, `@when-run: pytest*`.
MOMENTS = ("start", "compact", "prompt", "edit", "read", "shell")
TRIGGER_NAMES = ("on", "path", "run")
TRIGGER_ATTRIBUTES = {"on": "on", "path": "when-path", "run": "when-run"}  # name → MEMORY.md's
TRIGGER_LIMIT = 20  # of each name, per note
PATTERN_LIMIT = 200  # characters of a pattern
Trigger = tuple[str, str]  # (name, value)


def trigger_problem(name: str, value: object) -> str | None:
    """What keeps `value` from being a trigger of that name (None: nothing)."""
    if not isinstance(value, str) or not value:
        return f"an @{TRIGGER_ATTRIBUTES.get(name, name)}: value must be a non-empty string"
    if name == "on":
        return None if value in MOMENTS else f"unknown moment {value!r}; use " + ", ".join(MOMENTS)
    if len(value) > PATTERN_LIMIT:
        return f"a pattern of {len(value)} characters; keep it under {PATTERN_LIMIT}"
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in value) or value != value.strip():
        return "a pattern holding a control character, or spaces at its ends"
    if name == "path":
        problem = anchor_path_problem(value)
        if problem:
            return f"path pattern {value!r}: {problem.replace('an anchor', 'a pattern')}"
        if any("**" in part and part != "**" for part in value.split("/")):
            return f"path pattern {value!r}: `**` stands for whole folders, a part of its own (src/**/x.py)"
        return None
    if name == "run":
        return None
    return f"unknown trigger {name!r}; use " + ", ".join(TRIGGER_NAMES)


def triggers_problem(value: object) -> str | None:
    """What is wrong with an event's `triggers` (None: nothing): {name: [value, ...]},
    names from TRIGGER_NAMES, each list non-empty, sorted, without repeats, each value valid."""
    if not isinstance(value, dict) or not value:
        return "triggers must be a non-empty {on, path, run} of lists"
    for name, values in value.items():
        if name not in TRIGGER_NAMES:
            return f"unknown trigger {name!r}; use " + ", ".join(TRIGGER_NAMES)
        if not isinstance(values, list) or not values or len(values) > TRIGGER_LIMIT:
            return f"triggers {name!r} must be a list of 1 to {TRIGGER_LIMIT} values"
        for item in values:
            problem = trigger_problem(name, item)
            if problem:
                return problem
        if values != sorted(set(values)):
            return f"triggers {name!r} must be sorted, each value once"
    return None


def triggers_of(data: Mapping[str, object]) -> tuple[Trigger, ...]:
    """An event's triggers as (name, value) pairs in order; none where it declares none."""
    value = data.get("triggers")
    if value is None or triggers_problem(value) is not None:
        return ()
    return tuple(sorted((name, item) for name, values in value.items() for item in values))  # type: ignore[union-attr]


def trigger_data(triggers: Iterable[Trigger]) -> dict[str, list[str]]:
    """The stored form of (name, value) pairs."""
    out: dict[str, list[str]] = {}
    for name, value in sorted(set(triggers)):
        out.setdefault(name, []).append(value)
    return out


# A stale flag a code change caused (`qem anchors check --flag`) says so in its data's
# `drift`: a list of {"path", "was", "now"}, an anchored path, the object id its anchor
# recorded and the one it holds now (null: the path was deleted).
Drift = tuple[str, str, str | None]  # (path, was, now)


def drift_of(data: Mapping[str, object]) -> tuple[Drift, ...]:
    """A stale flag's drift, in the order given; none where it has none (the log's reader
    sets a malformed one aside: drift_problem; one that reaches here anyway reads as a
    plain flag)."""
    if "drift" not in data or drift_problem("stale_flagged", data) is not None:
        return ()
    return tuple((str(d["path"]), str(d["was"]), d["now"]) for d in data["drift"])  # type: ignore[index, union-attr]


class Event(NamedTuple):
    id: str
    note: str
    type: str
    at: str
    actor: str
    reason: str | None = None
    checkin: str | None = None
    data: Mapping[str, object] = MappingProxyType({})
    clock: int = 1
    prev: tuple[str, ...] = ()

    @property
    def order(self) -> tuple[int, str]:
        """The total order every clone agrees on: Lamport clock, then id."""
        return (self.clock, self.id)

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "note": self.note,
            "type": self.type,
            "at": self.at,
            "actor": self.actor,
            "reason": self.reason,
            "checkin": self.checkin,
            "clock": self.clock,
            "prev": list(self.prev),
            "data": dict(self.data),
        }


class Rival(NamedTuple):
    """One side of a dispute over a note's state: the branch's last event (`tip`, what a
    ruling keeps) and the event that set the state it reached."""

    tip: str
    event: str
    type: str
    actor: str
    at: str
    reason: str | None
    state: str
    superseded_by: str | None = None


TEXT_MISSING = "(text missing from this commit)"  # how a note without its text file is shown


class Note(NamedTuple):
    id: str
    kind: str
    priority: str
    text: str | None  # None once forgotten (or while its text is missing from the log)
    provenance: str
    created_at: str
    actor: str
    supersedes: str | None = None
    superseded_by: str | None = None
    state: str = "active"
    # the event that put the note in its state (None while it was never changed)
    state_at: str | None = None
    state_reason: str | None = None
    state_actor: str | None = None
    state_event: str | None = None
    # a `supersedes` value in the log that is not a note id, kept as given
    bad_pointer: str | None = None
    # open disputes with other notes: (dispute id, the other note's id)
    disputes: tuple[tuple[str, str], ...] = ()
    # concurrent changes of this note's state that disagree (an open dispute)
    rivals: tuple[Rival, ...] = ()
    short: str = ""  # the id MEMORY.md shows (set by the store, which knows every id)
    alias: int | None = None  # the note's number in a store converted from numeric ids
    short_len: int = 4  # the short-id length the note was created with
    text_hash: str | None = None
    erased_since: bool = False  # shown as it was (`--at`), its text erased by a later forget
    # the files and folders the note is about: (path from the work tree's top, the git
    # object id its content had when the note was written), in path order
    anchors: tuple[tuple[str, str], ...] = ()
    expires: str | None = None  # the note's end (a UTC time, its created event's `expires`): due for expiry then
    triggers: tuple[Trigger, ...] = ()  # when it is delivered to an agent, as it declares (TRIGGER_NAMES)
    # a request: the seat that owes it (`to`) and its deadline (`due`, a UTC time); an answer:
    # the request it answers (`answers`, a note id: a pointer like `supersedes`, never an
    # edit of the request), all from its created event's data
    to: str | None = None
    due: str | None = None
    answers: str | None = None
    scope: str = "team"  # SCOPES: where the note holds
    session: str | None = None  # a session note's session (the harness's id)
    # the notes it rests on (ids, in order, from its created event): when one of them
    # leaves plain force (superseded, revoked, expired, forgotten, flagged stale), this
    # note is flagged stale in the same write (`decide_dependents`)
    rests_on: tuple[str, ...] = ()

    @property
    def local(self) -> bool:
        """Kept in this clone alone (private or session): never in a committed file."""
        return self.scope in LOCAL_SCOPES

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    @property
    def text_missing(self) -> bool:
        """No text, and no forget took it: its text file did not come with the commit."""
        return self.text is None and self.state != "forgotten" and not self.erased_since

    def first_line(self) -> str:
        """The text's first line, or what stands for a text there is none of."""
        if self.text is None:
            return TEXT_MISSING if self.text_missing else "(forgotten)"
        return self.text.split("\n", 1)[0]

    @property
    def shown(self) -> str:
        return self.short or self.id

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "short": self.shown,
            "alias": self.alias,
            "kind": self.kind,
            "priority": self.priority,
            "text": self.text,
            "provenance": self.provenance,
            "state": self.state,
            "created_at": self.created_at,
            "actor": self.actor,
            "supersedes": self.supersedes,
            "superseded_by": self.superseded_by,
            "state_at": self.state_at,
            "state_reason": self.state_reason,
            "disputes": [{"dispute": d, "with": other} for d, other in self.disputes],
            "rivals": [r._asdict() for r in self.rivals],
            "bad_pointer": self.bad_pointer,
            "anchors": [{"path": path, "oid": oid} for path, oid in self.anchors],
            "expires": self.expires,
            "triggers": trigger_data(self.triggers),
            "to": self.to,
            "due": self.due,
            "answers": self.answers,
            "scope": self.scope,
            "session": self.session,
            "rests_on": list(self.rests_on),
        }


SCOPE_MARKS = {"private": "private", "session": "this session"}  # by scope: a note not the team's


def scope_mark(note: Note) -> str:
    """How every read marks a note that is not the team's ("" for a team note)."""
    return SCOPE_MARKS.get(note.scope, "")


def scoped_prefix(scope: object) -> str:
    """A line's mark before a note's text (`(private) `, `(this session) `; "" for a team
    note), as `qem list`, `query` and `owed` print it."""
    return f"({SCOPE_MARKS[scope]}) " if isinstance(scope, str) and scope in SCOPE_MARKS else ""


SCOPE_WORDS = {"private": "private: this clone only, never committed (`qem share ID` makes it a team note)",
               "session": "session {session}: this agent session only, ended when it ends"}


def sort_key(note: Note) -> tuple[int, str]:
    """The projection's total order: kind rank, then note id."""
    return (KIND_RANK[note.kind], note.id)


def check_transition(note: Note, event_type: str) -> None:
    """Raise TransitionError when `event_type` makes no sense for `note` now."""
    move = MOVE_BY_EVENT[event_type]
    if note.state not in move.sources:
        raise TransitionError(f"cannot {move.refusal} note #{note.shown}: it is {note.state}")
    if move.verb == "promote" and note.provenance == "human":
        raise TransitionError(f"note #{note.shown} is already provenance human")


def after_event(note: Note, event: Event) -> Note:
    """The note once `event` (on it, not its creation) is folded in.  Raises
    TransitionError (a move that makes no sense here) or LogError (malformed data)."""
    move = MOVE_BY_EVENT.get(event.type)
    if move is None:
        raise LogError(f"event {event.id}: unknown event type {event.type!r}")
    check_transition(note, event.type)
    if "anchors" in event.data:  # a re-anchoring, or a reinstatement that read the content anew
        note = note._replace(anchors=_anchors_after(note, event))
    if event.type == "stale_flagged" and "drift" in event.data:
        _check_drift(note, event)
    if move.verb == "anchor":
        return note
    if move.verb == "promote":
        return note._replace(provenance="human")
    if move.verb in ("dispute", "rule"):
        return note._replace(disputes=_disputes_after(note, event))
    return note._replace(**_state_change(move, event))


def _anchors_after(note: Note, event: Event) -> tuple[tuple[str, str], ...]:
    """The anchors an event gives its note, held to what a writer makes (LogError where a
    hand-written event asks more): a re-anchoring moves exactly the paths it names, to
    paths the note did not hold, keeping each content's id; a reinstatement reads the
    note's own paths anew, and may only drop those that went."""
    given = anchors_of(event.data)
    if event.type == "anchored":
        moved = {str(m["from"]): str(m["to"]) for m in event.data.get("moved", [])}  # type: ignore[union-attr]
        held = dict(note.anchors)
        expected = tuple(sorted((moved.get(path, path), oid) for path, oid in note.anchors))
        if not set(moved) <= set(held) or set(moved.values()) & set(held) or given != expected:
            raise LogError(f"event {event.id}: a re-anchoring that moves other anchors than the note holds")
    elif not {path for path, _ in given} <= {path for path, _ in note.anchors}:
        raise LogError(f"event {event.id}: a reinstatement that anchors paths the note is not anchored to")
    return given


def _check_drift(note: Note, event: Event) -> None:
    """A drift flag names the note's own anchors, each with the id the note recorded
    (LogError otherwise: no check of qem's writes such a flag)."""
    held = dict(note.anchors)
    for entry in event.data["drift"]:  # type: ignore[union-attr]
        if held.get(entry["path"]) != entry["was"]:
            raise LogError(f"event {event.id}: a drift flag on {entry['path']!r}, which the note does not hold"
                           " with that content")


def _state_change(move: Move, event: Event) -> dict[str, object]:
    """The fields a state-changing event sets on its note."""
    changes: dict[str, object] = {
        "state": move.target,
        "state_at": event.at,
        "state_reason": event.reason,
        "state_actor": event.actor,
        "state_event": event.id,
    }
    if move.verb == "supersede":
        by = event.data.get("by")
        if not isinstance(by, str) or not by:
            raise LogError(f"event {event.id}: superseded event without a note id 'by'")
        changes["superseded_by"] = by
    elif move.verb == "forget":
        changes["text"] = None
    return changes


def _disputes_after(note: Note, event: Event) -> tuple[tuple[str, str], ...]:
    """The note's open disputes once a `disputed` (opens one) or `ruled` (closes one)
    event is folded in.  A ruling on the note's own concurrent changes names no dispute."""
    dispute, other = event.data.get("dispute"), event.data.get("with")
    if event.type == "ruled" and dispute is None:
        return note.disputes
    if not isinstance(dispute, str) or (event.type == "disputed" and not isinstance(other, str)):
        raise LogError(f"event {event.id}: {event.type} event without string 'dispute'/'with'")
    kept = tuple(d for d in note.disputes if d[0] != dispute)
    if event.type == "disputed":
        kept += ((dispute, str(other)),)
    return kept


def note_from_created(event: Event, text: str | None) -> Note:
    """A note as its `created` event makes it; `text` from the log's text record (None
    where there is none: forgotten, or missing)."""
    data = event.data
    kind, priority, provenance = data.get("kind"), data.get("priority"), data.get("provenance")
    if kind not in KIND_RANK:
        raise LogError(f"event {event.id}: unknown kind {kind!r}")
    if priority not in PRIORITIES:
        raise LogError(f"event {event.id}: unknown priority {priority!r}")
    if provenance not in PROVENANCES:
        raise LogError(f"event {event.id}: unknown provenance {provenance!r}")
    supersedes = data.get("supersedes")
    bad_pointer = None
    if supersedes is not None and not (isinstance(supersedes, str) and supersedes and supersedes != event.id):
        bad_pointer = repr(supersedes)  # recorded as given; the resolver names it
        supersedes = None
    alias, short_len = data.get("alias"), data.get("short", 4)
    return Note(
        id=event.id,
        kind=str(kind),
        priority=str(priority),
        text=text,
        provenance=str(provenance),
        created_at=event.at,
        actor=event.actor,
        supersedes=supersedes,
        bad_pointer=bad_pointer,
        alias=alias if isinstance(alias, int) and not isinstance(alias, bool) and 0 < alias < 2**62 else None,
        short_len=short_len if isinstance(short_len, int) and 1 <= short_len <= 26 else 4,
        text_hash=data.get("text") if isinstance(data.get("text"), str) else None,
        anchors=anchors_of(data),
        expires=_end(event),
        triggers=triggers_of(data),
        to=data.get("to") if seat_problem(data.get("to")) is None else None,
        due=str(data["due"]) if is_timestamp(data.get("due")) else None,
        answers=str(data["answers"]) if ids.is_id(data.get("answers")) and data["answers"] != event.id else None,
        scope=str(data["scope"]) if data.get("scope") in LOCAL_SCOPES else "team",
        session=str(data["session"]) if data.get("scope") == "session" and isinstance(data.get("session"), str) else None,
        rests_on=tuple(data["rests_on"]) if rests_on_problem(data, event.id) is None and "rests_on" in data else (),  # type: ignore[arg-type]
    )


def _end(event: Event) -> str | None:
    """A created event's `expires` (absent: the note has no end); LogError when it is not
    a UTC time (the log's reader sets such a file aside before it gets here)."""
    end = event.data.get("expires")
    if end is None and "expires" not in event.data:
        return None
    if not is_timestamp(end):
        raise LogError(f"event {event.id}: expires {end!r} is not a UTC time like 2026-07-27T10:00:00Z")
    return str(end)


def past_end(note: Note, now: str) -> bool:
    """Whether a note in force is past its end at `now` (a UTC time): due for `qem expire
    --due`.  Reading never expires it; only the sweep's event does.  The one test every
    read makes (qem_edit.reads.standing), with the words every read says it in:"""
    return note.live and note.expires is not None and note.expires <= now


PAST_MARK = "PAST ITS END"  # a note in force past its end, not swept yet
PAST_WHY = "not in force; `qem expire --due` expires it"


def past_end_words(note: Note) -> str:
    """`PAST ITS END 2026-02-01T00:00:00Z (not in force; ...)`: how a read that gives the
    note says it (a status's reason and `qem show` say the same, after a colon)."""
    return f"{PAST_MARK} {note.expires} ({PAST_WHY})"


# -- replay: a note from the graph of its events -------------------------------------------------


class Folded(NamedTuple):
    """A note after its events, with what could not be folded in (named, not fatal)."""

    note: Note
    problems: list[str]


def fold(events: Iterable[Event], text: str | None = None) -> Folded:
    """One note from all its events (any order; one `created` among them)."""
    ordered = sorted(events, key=lambda e: e.order)
    created = [e for e in ordered if e.type == "created"]
    if len(created) != 1:
        raise LogError(f"note {ordered[0].note if ordered else '?'}: {len(created)} created events")
    first = note_from_created(created[0], text)
    after: dict[str, Note] = {first.id: first}
    parents: dict[str, tuple[str, ...]] = {first.id: ()}
    problems: list[str] = []
    tips = {first.id}
    for event in ordered:
        if event.type == "created":
            continue
        seen = tuple(p for p in event.prev if p in after) or (first.id,)
        if len(seen) < len(event.prev):
            problems.append(f"event {event.id} follows events of #{first.id} that are not in the log")
        start = after[seen[0]] if len(seen) == 1 else _settled(seen, after, parents, event)
        after[event.id] = _folded_in(start, event, problems)
        parents[event.id] = seen
        tips = (tips - set(seen)) | {event.id}
    return Folded(_resolved(sorted(tips, key=lambda t: _order(t, ordered)), after, parents), problems)


def _order(event_id: str, ordered: list[Event]) -> int:
    return next(i for i, e in enumerate(ordered) if e.id == event_id)


def _folded_in(start: Note, event: Event, problems: list[str]) -> Note:
    try:
        return after_event(start, event)
    except (TransitionError, LogError) as exc:
        problems.append(f"event {event.id} ({event.type}) does not apply: {exc}")
        return start


def _settled(seen: tuple[str, ...], after: dict[str, Note], parents: dict, event: Event) -> Note:
    """Where an event that saw several branches of a note starts: a ruling keeps the side
    it names; any other event (an edit made while the note was in dispute) starts from
    the note as the branches left it, and settles them."""
    if event.type == "ruled" and event.data.get("keep") in after:
        return after[str(event.data["keep"])]._replace(rivals=())
    return _resolved(list(seen), after, parents)._replace(rivals=())


def _resolved(tips: list[str], after: dict[str, Note], parents: dict[str, tuple[str, ...]]) -> Note:
    """The note where its branches end: one branch, or branches that agree on its state;
    otherwise the state where they parted, with each branch's end as a rival."""
    if len(tips) == 1:
        return after[tips[0]]
    ends = [after[t] for t in tips]
    forgotten = [n for n in ends if n.state == "forgotten"]
    if forgotten:
        return forgotten[-1]  # forget is the one hard delete: no branch brings the text back
    base = after[_last_common(tips, parents, after)]
    changed = [(t, after[t]) for t in tips if after[t].state != base.state]
    anchored = [n.anchors for n in ends if n.anchors != base.anchors]  # the latest branch that re-anchored it
    merged = (changed[-1][1] if changed else base)._replace(
        provenance="human" if any(n.provenance == "human" for n in ends) else base.provenance,
        disputes=_merged_disputes(base, ends),
        anchors=anchored[-1] if anchored else base.anchors,
    )
    if len({n.state for _, n in changed}) <= 1:
        return merged
    rivals = tuple(_rival(tip, n) for tip, n in changed)
    return merged._replace(**{f: getattr(base, f) for f in _STATE_FIELDS}, rivals=rivals)


_STATE_FIELDS = ("state", "superseded_by", "state_at", "state_reason", "state_actor", "state_event")


def _rival(tip: str, note: Note) -> Rival:
    move = MOVE_BY_TARGET.get(note.state, MOVE_BY_VERB["reinstate"])
    return Rival(tip, note.state_event or tip, move.event, note.state_actor or note.actor,
                 note.state_at or note.created_at, note.state_reason, note.state, note.superseded_by)


def _merged_disputes(base: Note, ends: list[Note]) -> tuple[tuple[str, str], ...]:
    opened = {d for n in ends for d in n.disputes} - set(base.disputes)
    closed = {d for n in ends for d in base.disputes if d not in n.disputes}
    return tuple(sorted((set(base.disputes) | opened) - closed))


def _last_common(tips: list[str], parents: dict[str, tuple[str, ...]], after: dict[str, Note]) -> str:
    """The latest event every tip descends from (the note's creation at the least)."""
    common: set[str] | None = None
    for tip in tips:
        seen, stack = set(), [tip]
        while stack:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                stack.extend(parents.get(node, ()))
        common = seen if common is None else common & seen
    order = list(after)  # events were folded in (clock, id) order
    return max(common or {order[0]}, key=order.index)


def replay(events: Iterable[Event], texts: Mapping[str, str] | None = None) -> dict[str, Note]:
    """Every note of `events` (any order), its text from `texts` (note id → text)."""
    by_note: dict[str, list[Event]] = {}
    for event in events:
        by_note.setdefault(event.note, []).append(event)
    texts = texts or {}
    return {note_id: fold(group, texts.get(note_id)).note for note_id, group in by_note.items()}


# -- decisions: notes in, events out ---------------------------------------------------------
#
# Each act of a writer is decided here, in pure code, from the notes it concerns; the store
# only gives the drafts their time, actor, clock, place in the note's history and id,
# writes them, and saves.


class NewNote(NamedTuple):
    """The content of a note about to be created."""

    kind: str
    priority: str
    provenance: str
    text: str
    supersedes: str | None = None
    anchors: tuple[tuple[str, str], ...] = ()  # (path, object id), as anchors_of gives them
    expires: str | None = None  # its end, a UTC time (None: none)
    triggers: tuple[Trigger, ...] = ()  # (name, value), as triggers_of gives them
    to: str | None = None  # who owes it (a request)
    due: str | None = None  # its deadline, a UTC time
    answers: str | None = None  # the request it answers, a note id
    scope: str = "team"  # SCOPES
    session: str | None = None  # a session note's session
    rests_on: tuple[str, ...] = ()  # the notes it rests on, ids


class Draft(NamedTuple):
    """An event decided but not yet written: the store gives it its time, actor, clock,
    the events it follows, and its id (`note` None: a note created by this draft)."""

    note: str | None
    type: str
    reason: str | None = None
    data: Mapping[str, object] = MappingProxyType({})
    text: str | None = None  # a created note's text, stored apart from its event


NEW_NOTE = "@created"  # in a draft's data, or as its note: the id of the note its batch creates


def decide_move(note: Note, event_type: str, reason: str | None = None,
                anchors: tuple[tuple[str, str], ...] | None = None) -> Draft:
    """A lifecycle move on one note (revoke, flag stale, reinstate, expire, promote).
    `anchors`: on a reinstatement, the note's anchored paths as they are now (a person
    confirms the note over the content now, so the same change never flags it again);
    recorded where they differ from what the note holds."""
    check_transition(note, event_type)
    data: dict[str, object] = {"from": note.provenance} if event_type == "promoted" else {}
    if event_type == "reinstated" and anchors is not None and tuple(sorted(anchors)) != note.anchors:
        data["anchors"] = _anchor_list(anchors)
    return Draft(note.id, event_type, reason, data)


def _anchor_list(anchors: Iterable[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"path": path, "oid": oid} for path, oid in sorted(anchors)]


class Drifted(NamedTuple):
    """One anchor whose content is not what its note recorded: `now` the object id the
    path holds (None: gone), `moved_to` where the same content is now (a move)."""

    path: str
    was: str
    now: str | None
    moved_to: str | None = None

    @property
    def what(self) -> str:
        if self.moved_to is not None:
            return "moved"
        return "deleted" if self.now is None else "changed"

    def words(self) -> str:
        """What happened, in a stale flag's reason and the check's report."""
        if self.moved_to is not None:
            return f"anchor {self.path} moved to {self.moved_to} (the same content, {self.was[:12]})"
        if self.now is None:
            return f"anchor {self.path} was deleted (it held {self.was[:12]})"
        return f"anchor {self.path} changed ({self.was[:12]} → {self.now[:12]})"


def decide_drift(note: Note, drifted: list[Drifted]) -> list[Draft]:
    """A note whose anchored content drifted: the moved anchors follow their content (an
    `anchored` event, no flag), and a change or a deletion flags the note stale, its
    reason and `data.drift` naming each path and what it held and holds."""
    drafts = []
    moved = [d for d in drifted if d.moved_to is not None]
    if moved:
        check_transition(note, "anchored")
        where = {d.path: d.moved_to for d in moved}
        anchors = [(where.get(path, path), oid) for path, oid in note.anchors]
        data = {"anchors": _anchor_list(anchors), "moved": [{"from": d.path, "to": d.moved_to} for d in moved]}
        drafts.append(Draft(note.id, "anchored", "; ".join(d.words() for d in moved), data))
    lost = [d for d in drifted if d.moved_to is None]
    if lost:
        check_transition(note, "stale_flagged")
        data = {"drift": [{"path": d.path, "was": d.was, "now": d.now} for d in lost]}
        drafts.append(Draft(note.id, "stale_flagged", "; ".join(d.words() for d in lost), data))
    return drafts


def drift_problem(type_: str, data: Mapping[str, object]) -> str | None:
    """What is wrong with a stale flag's `drift` or a re-anchoring's `moved` (None:
    nothing), as the log's reader checks another clone's event."""
    if type_ == "anchored" and not ("anchors" in data and _pairs_problem(data.get("moved"), ("from", "to")) is None):
        return "a re-anchoring holds its anchors and what moved ({from, to} paths)"
    if type_ == "stale_flagged" and "drift" in data:
        value = data["drift"]
        if not isinstance(value, list) or not value:
            return "drift must be a non-empty list of {path, was, now}"
        for entry in value:
            if not isinstance(entry, dict) or set(entry) != {"path", "was", "now"}:
                return "each drift is exactly {path, was, now}"
            if anchor_path_problem(entry["path"]) or not _is_oid(entry["was"]):
                return f"drift {entry['path']!r}: not an anchor's path and object id"
            if entry["now"] is not None and not _is_oid(entry["now"]):
                return f"drift {entry['path']!r}: now is neither an object id nor null"
            if entry["now"] == entry["was"]:
                return f"drift {entry['path']!r}: now is what it was, which is no drift"
        if len({str(entry["path"]) for entry in value}) != len(value):
            return "drift names a path twice"
    return None


def _is_oid(value: object) -> bool:
    return isinstance(value, str) and bool(_OID.match(value))


def _pairs_problem(value: object, keys: tuple[str, str]) -> str | None:
    if not isinstance(value, list) or not value:
        return "not a non-empty list"
    for entry in value:
        if not isinstance(entry, dict) or set(entry) != set(keys) or any(anchor_path_problem(entry[k]) for k in keys):
            return "not a pair of anchor paths"
    return None


def decide_create(new: NewNote, old: Note | None, reason: str | None = None,
                  answered: Note | None = None, bases: tuple[Note, ...] = (), at: str | None = None) -> list[Draft]:
    """A new note (its text normalized, as every way in stores it), and, when it replaces
    `old`, the supersession of `old`; `answered`: the note its `answers` names, where the
    log holds it; `bases`: the notes it rests on that the log holds; when its end is at or
    before `at` (the write's time), its expiry too, in the same write: a fact already past
    its end keeps it, recorded, and is never in force.  Raises TextError or TransitionError."""
    text = normalize_text(new.text)
    if old is not None:
        check_transition(old, "superseded")
        _check_scopes(new, old)
    _check_bases(new, bases)
    _check_answered(new, answered)
    refusal = request_refusal(new, old, answered)
    if refusal:
        raise TransitionError(refusal)
    data = {"kind": new.kind, "priority": new.priority, "provenance": new.provenance,
            "supersedes": old.id if old is not None else None}
    if new.anchors:
        data["anchors"] = _anchor_list(new.anchors)
    if new.expires is not None:  # only then: every other created event keeps its bytes
        data["expires"] = new.expires
    if new.triggers:
        data["triggers"] = trigger_data(new.triggers)
    for name in ("to", "due", "answers"):  # only when given: every other created event keeps its bytes
        if getattr(new, name) is not None:
            data[name] = getattr(new, name)
    if new.scope != "team":  # only then, as above
        data["scope"] = new.scope
        if new.scope == "session":
            data["session"] = new.session
    if new.rests_on:
        data["rests_on"] = sorted(set(new.rests_on))
    drafts = [Draft(None, "created", reason, data, text)]
    if old is not None:
        drafts.append(Draft(old.id, "superseded", reason, {"by": NEW_NOTE}))
    if new.expires is not None and at is not None and new.expires <= at:
        drafts.append(Draft(NEW_NOTE, "expired", ENDED_WHEN_WRITTEN))
    return drafts


ENDED_WHEN_WRITTEN = "past its end when written"  # the reason of the expiry a write of such a note adds


def scope_problem(scope: object, session: object) -> str | None:
    """What is wrong with a created event's `scope` and `session` (None: nothing): the
    log's reader sets such a file aside, and every writer refuses it."""
    if scope is None and session is None:
        return None
    if scope not in LOCAL_SCOPES:
        return f"scope {scope!r} is not one of {', '.join(sorted(LOCAL_SCOPES))} (a team note has none)"
    if scope == "private":
        return None if session is None else "a private note names no session"
    if not isinstance(session, str) or not session or len(session) > SESSION_LIMIT \
            or any(unicodedata.category(c)[0] in "CZ" for c in session):
        return (f"a session note's session must be the harness's session id, 1 to {SESSION_LIMIT} printable"
                " characters with no spaces")
    return None


def _check_scopes(new: NewNote, old: Note) -> None:
    """A successor holds where its note held: a team note's successor in one clone would
    leave every other clone a team note superseded by a note it never sees (`qem share`
    makes a private note a team one)."""
    if (new.scope, new.session) != (old.scope, old.session):
        where = old.scope if old.scope != "session" else f"session {old.session}"
        raise TransitionError(f"note #{old.shown} is a {where} note: its successor must be one too"
                              f" ({_LOCAL_WAY.get(old.scope, _LOCAL_WAY['private']).format(shown='ID' if old.scope == 'team' else old.shown)})")


def _check_bases(new: NewNote, bases: tuple[Note, ...]) -> None:
    """A team note rests on team notes only (`team_base_refusal`)."""
    for base in bases if new.scope == "team" else ():
        refusal = team_base_refusal(base)
        if refusal:
            raise TransitionError(refusal)


def team_base_refusal(base: Note, name: str | None = None) -> str | None:
    """Why a team note cannot rest on `base` (None: it can): a private or session note,
    which every other clone lacks, would be named by a committed event.  `name`: how the
    message names it (`note #ID`)."""
    if not base.local:
        return None
    return (f"{name or f'note #{base.shown}'} is a {base.scope} note: a team note cannot rest on it"
            f" ({_LOCAL_WAY[base.scope].format(shown=base.shown)})")


_LOCAL_WAY = {"private": "`qem share {shown}` makes a private note a team note",
              "session": "a session note cannot be shared: it holds for its agent session only"}


def _check_answered(new: NewNote, answered: Note | None) -> None:
    """A team note answers team requests only, as it rests on team notes only: its
    committed `answers` would name a note every other clone lacks."""
    if new.scope == "team" and answered is not None and answered.local:
        where = "private" if answered.scope == "private" else f"session {answered.session}"
        raise TransitionError(f"cannot answer note #{answered.shown}: it is a {where} note, and a team note's answer"
                              " is committed where every other clone lacks it; answer it with a note of its scope"
                              f" (`qem add TEXT -k KIND --answers {answered.shown} --scope {answered.scope}`)"
                              f"{_SHARE_HINT.get(answered.scope, '')}; nothing was written")


_SHARE_HINT = {"private": ", or `qem share` the request first"}


def decide_share(note: Note, provenance: str, reason: str, twin: Note | None = None,
                 local: frozenset[str] = frozenset(), successor: Note | None = None) -> list[Draft]:
    """A private note made a team note: a team note of the same content (its anchors as
    recorded), created without a pointer to the private one (every other clone would read
    a pointer to a note it never sees), and the private one superseded by it here.
    `local`: the notes it answers or rests on that are private or session notes: the team
    note keeps its other pointers and drops these (a committed pointer to a note only this
    clone holds).  `successor`: the note that superseded it, when it did.
    `twin`: a team note in force with the private one's text already (the one a share
    killed between its two writes made: the team note is in the log, the private one's
    end is not); the private one is then superseded by it, and no second team note made."""
    if note.scope != "private":
        raise TransitionError(f"note #{note.shown} is a {note.scope} note; only a private note is shared"
                              + (" (it is the team's already)" if note.scope == "team" else
                                 " (a session note holds for its agent session only: add its text anew as a team"
                                 " note)" if note.scope == "session" else ""))
    if note.state == "superseded" and successor is not None and successor.scope == "team":
        raise TransitionError(f"note #{note.shown} was shared already: team note #{successor.shown} holds it")
    check_transition(note, "superseded")
    if twin is not None:
        return [Draft(note.id, "superseded", reason, {"by": twin.id})]
    new = NewNote(note.kind, note.priority, provenance, note.text or "", anchors=note.anchors, expires=note.expires,
                  triggers=note.triggers, to=note.to, due=note.due,
                  answers=note.answers if note.answers not in local else None,
                  rests_on=tuple(b for b in note.rests_on if b not in local))
    [created] = decide_create(new, None, reason)
    return [created, Draft(note.id, "superseded", reason, {"by": NEW_NOTE})]


def request_refusal(new: NewNote, old: Note | None, answered: Note | None) -> str | None:
    """What a writer refuses in a new note's request fields (None: nothing), judged only
    where the note sets them anew (a successor keeping its predecessor's is not judged
    again): a deadline after the note's end (expired, it is no longer owed, so the deadline
    would never come), and an answer to a note that is not a request (names no `to` or
    `due`: nothing is owed there to answer).  A write's decision, as a move's from-states
    are: a log file or a load, history already written, is read as it is."""
    what = f"the successor of #{old.shown}" if old is not None else "the new note"
    refusal = deadline_refusal(what, new.due, new.expires, old)
    if refusal:
        return refusal + "; nothing was written"
    if answered is not None and (old is None or old.answers != answered.id):
        refusal = answer_refusal(answered)
        return refusal and refusal + "; nothing was written"
    return None


def answer_refusal(answered: Note) -> str | None:
    """Why a new answer to `answered` is refused (None: it is a request, which may be)."""
    if answered.to is not None or answered.due is not None:
        return None
    return (f"cannot answer note #{answered.shown}: it is not a request (it names no `to` or `due`), so nothing is"
            f" owed there to answer; make it one (in MEMORY.md, `to NAME · ` or `due DATE · ` before its text, then"
            " `qem checkin`) or answer nothing")


def deadline_refusal(what: str, due: str | None, end: str | None, old: Note | None) -> str | None:
    """A deadline after the note's end, set anew (None: not so): expired, a request is no
    longer owed, so its deadline would never come.  A check-in's plan says it on the item's
    line; `decide_create` for every write."""
    if due is None or end is None or due <= end or (old is not None and (old.due, old.expires) == (due, end)):
        return None
    return (f"{what} is due {due} but ends (expires) {end}, before its deadline: once expired it is no longer owed;"
            " give an end after the deadline (`--expires DATE` or `--expires none`; in MEMORY.md, its `expires`"
            " marker) or an earlier deadline")


def decide_forget(note: Note, reason: str) -> Draft:
    """The tombstone; the store then deletes the note's text from the log."""
    check_transition(note, "forgotten")
    return Draft(note.id, "forgotten", reason)


def decide_dispute(a: Note, b: Note, dispute_id: str, reason: str) -> list[Draft]:
    """A dispute between two live notes: an event on each, neither note edited."""
    if a.id == b.id:
        raise TransitionError("a note cannot dispute itself")
    for note, other in ((a, b), (b, a)):
        check_transition(note, "disputed")
        if any(with_ == other.id for _, with_ in note.disputes):
            raise TransitionError(f"notes #{a.shown} and #{b.shown} already have an open dispute")
    return [
        Draft(a.id, "disputed", reason, {"dispute": dispute_id, "with": b.id}),
        Draft(b.id, "disputed", reason, {"dispute": dispute_id, "with": a.id}),
    ]


def decide_rule(dispute_id: str, sides: tuple[Note, Note], keep: str, reason: str) -> list[Draft]:
    """Close a dispute between two notes: `keep` stands, the other side is revoked in its
    favour.  `sides` are the two notes the dispute was opened between."""
    first, second = sides
    shown = ids.side_shown(dispute_id)
    if keep not in (first.id, second.id):
        raise TransitionError(f"dispute {shown} is between #{first.shown} and #{second.shown}; --keep one of them")
    kept, other = (first, second) if keep == first.id else (second, first)
    if not any(d == dispute_id for d, _ in kept.disputes):
        raise TransitionError(f"dispute {shown} is already closed")
    if not (kept.live and other.live):
        raise TransitionError(f"dispute {shown} is already settled: one side is no longer in force")
    data = {"dispute": dispute_id, "kept": keep}
    return [
        Draft(kept.id, "ruled", reason, data),
        Draft(other.id, "ruled", reason, data),
        Draft(other.id, "revoked", f"ruling on dispute {shown}, #{kept.shown} stands: {reason}"),
    ]


def decide_settle(note: Note, keep: str, reason: str) -> Draft:
    """Settle a note's concurrent changes: the side whose last event is `keep` (a tip,
    as its rival lists it) stands; the ruling follows every side, so a side merged in
    later, which it did not see, reopens the dispute."""
    if not note.rivals:
        raise TransitionError(f"note #{note.shown} has no concurrent changes to rule on")
    tips = [r.tip for r in note.rivals]
    if keep not in tips:
        raise TransitionError(f"--keep names none of #{note.shown}'s sides: " + ", ".join(ids.shown(t) for t in tips))
    return Draft(note.id, "ruled", reason, {"keep": keep})


def decide_fork(parent: Note, successors: list[Note], keep: str, reason: str) -> list[Draft]:
    """Settle a fork (several live notes supersede `parent`): the successor `keep` stands,
    every other live successor is revoked in its favour."""
    live = [n for n in successors if n.live]
    if len(live) < 2:
        raise TransitionError(f"note #{parent.shown} has no concurrent changes or fork to rule on")
    kept = [n for n in live if n.id == keep]
    if not kept:
        names = ", ".join(f"#{n.shown}" for n in live)
        raise TransitionError(f"--keep names none of the notes that supersede #{parent.shown}: {names}")
    why = f"ruling on the fork of #{parent.shown}, #{kept[0].shown} stands: {reason}"
    return [Draft(n.id, "revoked", why) for n in live if n.id != keep]
