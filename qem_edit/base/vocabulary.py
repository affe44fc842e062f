"""The note domain's words: kinds, states, scopes, the table of moves, moments and triggers' names.

Pure: no database, no clock, no terminal.  The store, the renderer and the reconciler all
speak these words, and the table of moves here is the one place that decides which
lifecycle moves make sense.
"""

from __future__ import annotations

from .records import Record

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
PRIORITY_RANK: dict[str, int] = {p: i for i, p in enumerate(PRIORITIES)}
PROVENANCES: tuple[str, ...] = ("auto", "agent", "user-stated", "human")
# How a note's provenance frames it: a label the reader weighs, never a change of order.
FRAMES: dict[str, str] = {
    "human": "human-endorsed",
    "user-stated": "the user's words",
    "agent": "agent-recorded, verify",
    "auto": "auto-captured, unreviewed",
}
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


class Move(Record):
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


class TextError(ValueError):
    """A note text that cannot be stored (empty, or holding a NUL)."""


class TransitionError(ValueError):
    """A lifecycle move that makes no sense for the note's current state."""


class LogError(ValueError):
    """An event that cannot be replayed (unknown type, unknown note, malformed data)."""


# When a note is delivered to an agent (qem_edit.base.triggers reads these): its own
# declared moments (`on`), path patterns (`path`: the note fires before an agent edits a
# matching file) and command patterns (`run`: before a matching shell command runs).
# Stored in its created event's data as {"on": [...], "path": [...], "run": [...]}, each
# list sorted and without repeats, only the names it declares.  MEMORY.md shows each as an
# attribute line: `@on: start`, `@when-path: src/index/**`, `@when-run: pytest*`.
MOMENTS = ("start", "compact", "prompt", "edit", "read", "shell")
TRIGGER_NAMES = ("on", "path", "run")
TRIGGER_ATTRIBUTES = {"on": "on", "path": "when-path", "run": "when-run"}  # name → MEMORY.md's
Trigger = tuple[str, str]  # (name, value)


SCOPE_MARKS = {"private": "private", "session": "this session"}  # by scope: a note not the team's


def scoped_prefix(scope: object) -> str:
    """A line's mark before a note's text (`(private) `, `(this session) `; "" for a team
    note), as `qem list`, `query` and `owed` print it."""
    return f"({SCOPE_MARKS[scope]}) " if isinstance(scope, str) and scope in SCOPE_MARKS else ""


SCOPE_WORDS = {"private": "private: this clone only, never committed (`qem share ID` makes it a team note)",
               "session": "session {session}: this agent session only, ended when it ends"}
