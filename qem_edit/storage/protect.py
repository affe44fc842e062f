"""Protected kinds: the notes only a person may take out of force.

Directives are the user's own rules, so by default an agent cannot supersede, revoke,
expire or forget one; a person can (`qem edit`, the lifecycle commands run as a person,
`qem rule`).  The setting is `.qem/config.toml`:

    [protect]
    kinds = ["directive"]        # the default; [] protects nothing
    agents = ["claude-*"]        # actor names (glob patterns) that are always agents

Who is an agent, checkably over the log: an event an agent writes carries
`"writer": "agent"` in its data.  A writer is an agent when its shell says so (the MCP
server passes `agent=True` to the acts; the command line reads `QEM_ACTOR_KIND=agent`)
or when its actor name matches one of `agents`.  `qem verify` applies the same rule to
every event of the log, so a merged branch that broke it fails CI, naming the events.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from ..base import errors, ids
from ..base.decisions import NEW_NOTE
from ..base.records import Record
from ..base.replay import Event, Note
from ..base.vocabulary import KINDS, MOVE_BY_EVENT, MOVES

TYPE_CHECKING = False  # typing's flag, without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from ..system.files import AnyPath

ACTOR_KIND_ENV = "QEM_ACTOR_KIND"
ACTOR_KINDS = ("agent", "person")
DEFAULT_KINDS = ("directive",)
WRITER = "writer"  # the key an agent's events carry in their data
# the moves that take a note out of force, or erase it: a person's act on a protected note
GUARDED = frozenset(m.event for m in MOVES if m.out_of_force)


class Protected(errors.Refused):
    """An agent's move on a note of a protected kind."""


class Rule(Record):
    """The workspace's setting: the protected kinds, and the actor names that are agents."""

    kinds: frozenset[str] = frozenset(DEFAULT_KINDS)
    agents: tuple[str, ...] = ()

    def is_agent(self, actor: str) -> bool:
        return any(fnmatch.fnmatchcase(actor, pattern) for pattern in self.agents)


def rule_of(store_root: AnyPath) -> Rule:
    """The `[protect]` setting of the memory at `store_root` (the default without one);
    BadInput naming the file and the field when it is malformed."""
    from ..system.workspace import CONFIG_NAME, read_settings

    path = Path(store_root, CONFIG_NAME)
    return _checked(read_settings(path).get("protect", {}), path)


def _checked(section: object, path: Path) -> Rule:
    if not isinstance(section, dict):
        raise errors.BadInput(f"{path}: [protect] must be a table")
    kinds = section.get("kinds", list(DEFAULT_KINDS))
    if not isinstance(kinds, list) or any(k not in KINDS for k in kinds):
        raise errors.BadInput(f"{path}: [protect] kinds must be a list of kinds ({', '.join(KINDS)})")
    agents = section.get("agents", [])
    if not isinstance(agents, list) or not all(isinstance(a, str) and a for a in agents):
        raise errors.BadInput(f"{path}: [protect] agents must be a list of actor names (glob patterns)")
    return Rule(frozenset(kinds), tuple(agents))


def writer_is_agent(explicit: bool | None = None) -> bool:
    """Whether this process writes as an agent: `explicit` when given (the MCP server
    says True), else `QEM_ACTOR_KIND` (agent or person; unset: person)."""
    if explicit is not None:
        return explicit
    value = os.environ.get(ACTOR_KIND_ENV, "").strip().lower()
    if value and value not in ACTOR_KINDS:
        raise errors.BadInput(f"{ACTOR_KIND_ENV}={value!r}: use agent or person")
    return value == "agent"


def is_agents(event: Event, rule: Rule) -> bool:
    """Whether `event` was written by an agent, as the log records it."""
    return event.data.get(WRITER) == "agent" or rule.is_agent(event.actor)


def refusal(note: Note, event_type: str, actor: str) -> Protected:
    """Why an agent may not make this move, and who may and how."""
    move = MOVE_BY_EVENT[event_type]
    verb, how = move.refusal, move.how.format(id=note.shown)
    return Protected(
        f"note #{note.shown} is a {note.kind}, a protected kind: {actor}, writing as an agent, cannot {verb} it;"
        " nothing was written",
        hint=f"a person may: `{how}` run as a person (without {ACTOR_KIND_ENV}=agent), `qem edit`, or `qem rule`;"
             " the protected kinds are [protect] kinds in .qem/config.toml")


def guard(notes: Iterable[tuple[Note, str]], actor: str, rule: Rule) -> None:
    """Refuse (Protected) the first guarded move on a protected note: (note, event type)."""
    for note, event_type in notes:
        if event_type in GUARDED and note.kind in rule.kinds:
            raise refusal(note, event_type, actor)


def violations(conn, rule: Rule, shown: Callable[[str], str] = ids.shown) -> list[str]:  # type: ignore[no-untyped-def]
    """Every agent's event in the log that the rule forbids and no person has answered
    since (a person's later event on the note that follows it: a reinstatement, say),
    named for `qem verify`; `conn` is an index of the log (qem_edit.storage.index), whose events
    are streamed, the guarded moves on protected kinds in order; `shown` gives a note's
    short id."""
    if not rule.kinds:
        return []
    from .verify_reads import guarded_events

    out = []
    for event, kind in guarded_events(conn, sorted(GUARDED), sorted(rule.kinds)):
        if is_agents(event, rule) and not _answered(conn, event.id, rule):
            out.append(f"event {ids.shown(event.id)}: {event.actor}, an agent, {event.type} {kind}"
                       f" #{shown(event.note)}, a protected kind only a person may change (at {event.at};"
                       " a person answers it by a move on the note, e.g. `qem reinstate`)")
    return out


def _answered(conn, event_id: str, rule: Rule) -> bool:  # type: ignore[no-untyped-def]
    """Whether a person's event other than a creation follows `event_id` (through `prev`,
    at any distance, within the note: an event of another note answers nothing)."""
    from .verify_reads import followers

    return any(type_ != "created" and writer != "agent" and not rule.is_agent(actor)
               for type_, actor, writer in followers(conn, event_id))


def writes_as_agent(tx, actor: str) -> bool:  # type: ignore[no-untyped-def]
    """Whether a transaction writing as `actor` is an agent's (its shell said so, or its
    name is one of [protect] agents)."""
    rule = getattr(tx, "_protect_rule", None)
    if rule is None:  # read once a transaction
        rule = tx._protect_rule = rule_of(tx.store.root)
    return bool(tx.agent or rule.is_agent(actor))


def guarded_writer(tx, drafts: list, actor: str) -> bool:  # type: ignore[no-untyped-def]
    """For a transaction about to record `drafts` as `actor`: whether the writer is an
    agent, having refused (Protected) a guarded move of an agent's on a protected note,
    and an agent's endorsement (`human` is a person standing behind a note)."""
    agent = writes_as_agent(tx, actor)
    if agent:
        guard(((tx.note(d.note), d.type) for d in drafts if d.note not in (None, NEW_NOTE) and d.type in GUARDED), actor,
              tx._protect_rule)
        for draft in drafts:
            if draft.type == "promoted" or (draft.type == "created" and draft.data.get("provenance") == "human"):
                raise _endorsement(tx, draft, actor)
    return agent


def _endorsement(tx, draft, actor: str) -> Protected:  # type: ignore[no-untyped-def]
    what = f"promote note #{tx.note(draft.note).shown}" if draft.type == "promoted" else "write a note as human"
    return Protected(f"{actor}, writing as an agent, cannot {what}: provenance human means a person stands"
                     " behind the note; nothing was written",
                     hint=f"a person may (without {ACTOR_KIND_ENV}=agent): `qem promote ID`, or `human` for the"
                          " provenance in `qem edit`; an agent writes agent, or user-stated for the user's own words")


def log_problems(store, fresh) -> list[str]:  # type: ignore[no-untyped-def]
    """`qem verify`'s check: the rule over every event the log files hold (as `qem verify`
    read them afresh into the index `fresh`, an SQLite connection of its own: the store's
    index may be damaged; files that cannot be read are named elsewhere)."""
    def shown(note: str) -> str:
        return ids.shown(note, store.shorts([note]).get(note))

    return violations(fresh, rule_of(store.root), shown)
