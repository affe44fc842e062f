"""What a note rests on: the stale flag a base's change owes its dependents.

What a note rests on, pure: the stale flag a base's change owes its dependents, and
whether a note's bases still hold.

A note may rest on others (`rests_on`, ids in its created event: "the total is 4 days,
from the 2-day estimate").  When a base leaves plain force (superseded, revoked, expired,
forgotten, or flagged stale), every note resting on it is flagged stale in the same write,
and so, through them, every note resting on those: one bad base puts in doubt the whole
subgraph above it.  A flag names its cause in its reason and in its data (`rests_on`: the
base that changed, the event that changed it, and the note where the change began with the
state it reached), so a reader says why, a person confirms the note (`reinstate`) or
re-points it (a successor resting on what holds now), and a later write never flags it
again for the same change.  The flag is an ordinary stale flag: two clones that flag the
same change reach the same state, and their branches agree (replay.fold).

Pure: notes and events in, drafts and answers out.  The store walks the dependents and
records the drafts (store.Transaction.flag_dependents).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from . import ids
from .decisions import Draft, team_base_refusal
from .records import Record
from .replay import Event, Note, check_transition, past_end

# The events that can take a base out of plain force (a move whose target is one of
# vocabulary.OUT_OF_PLAIN_FORCE).
CHANGES = frozenset({"stale_flagged", "superseded", "revoked", "expired", "forgotten"})
_WORDS = {"stale": "flagged stale", "superseded": "superseded", "revoked": "revoked", "expired": "expired",
          "forgotten": "forgotten"}


class Root(Record):
    """Where a change began: the note whose own change it was, the state it reached, and
    (a supersession) its successor."""

    note: str
    change: str
    by: str | None = None


def base_refusal(base: Note, now: str, team: bool, shown: Callable[[str], str] = ids.shown,
                 called: str | None = None) -> str | None:
    """Why `base` is no ground for a new note to rest on (None: it is): out of plain force
    or flagged stale, past its end (replay.past_end, the test every read makes:
    qem_edit.reads.standing), or, for a team note (`team`), a private or session note.  The one
    decision `qem add --rests-on`, `qem supersede --rests-on` and a check-in's plan take;
    `called`: how the message names the base (`note #ID`)."""
    name = called or f"note #{base.shown}"
    if base.state != "active":
        by = f" by #{shown(base.superseded_by)}" if base.superseded_by else ""
        return (f"{name} is {base.state}{by}; a note rests only on a note in force"
                " and not flagged stale (reinstate it, or rest on what holds now)")
    if past_end(base, now):
        return (f"{name} is past its end ({base.expires}): not in force; a note rests only on a note"
                " in force (give it a new end, or rest on what holds now)")
    return team_base_refusal(base, name) if team else None


def root_of(base: Note, flag: Event | None) -> Root:
    """Where `base`'s change began: the note its own stale flag names as the root when it
    was flagged for what it rests on (`flag`, its state event), else `base` itself."""
    cause = flag.data.get("rests_on") if flag is not None and flag.type == "stale_flagged" else None
    if isinstance(cause, Mapping) and isinstance(cause.get("root"), str) and isinstance(cause.get("change"), str):
        return Root(str(cause["root"]), str(cause["change"]))
    return Root(base.id, base.state, base.superseded_by)


def owed(note: Note, base: Note) -> bool:
    """Whether `note` is owed a flag for `base`'s state now: it is in plain force and rests
    on a base that is not (whether that change is settled already is `settled`)."""
    return note.state == "active" and base.id in note.rests_on and base.state != "active" and base.state_event is not None


def settled(events: Iterable[Event], base: str, change: Event) -> bool:
    """Whether a note's `events` settle `base`'s change `change`: one is a stale flag for
    that very change (a person who reinstated the note since confirmed it over it), or a
    reinstatement written after it (a greater clock: a person put the note back in force
    over its bases as they were then)."""
    for event in events:
        cause = event.data.get("rests_on") if event.type == "stale_flagged" else None
        if isinstance(cause, Mapping) and cause.get("base") == base and cause.get("event") == change.id:
            return True
        if event.type == "reinstated" and event.order > change.order:
            return True
    return False


def decide_flag(note: Note, base: Note, root: Root, shown: Callable[[str], str]) -> Draft:
    """The stale flag `note` is owed because `base`, which it rests on, changed (the change
    began at `root`); its reason names the base, the path and the change, its data the
    same by ids.  `shown`: how a message names a note id."""
    check_transition(note, "stale_flagged")
    through = "" if root.note == base.id else f" through #{shown(base.id)}"
    change = _WORDS.get(root.change, root.change) + (f" by #{shown(root.by)}" if root.by else "")
    reason = f"rests on #{shown(root.note)}{through}, which was {change}"
    data = {"rests_on": {"base": base.id, "event": str(base.state_event), "root": root.note, "change": root.change}}
    return Draft(note.id, "stale_flagged", reason, data)


def cause_of(note: Note, flag: Event | None) -> Root | None:
    """The base change a stale note was flagged for (None: its flag was not for a base)."""
    if note.state != "stale" or flag is None or not isinstance(flag.data.get("rests_on"), Mapping):
        return None
    return root_of(note, flag)


def cycle(start: str, bases_of: Callable[[str], tuple[str, ...]]) -> list[str] | None:
    """A cycle of rests-on among the notes `start` rests on, transitively (the notes in it,
    in order, the first repeated at the end), or None.  A cycle has no ground to stand on:
    a reader answers unknown and names it, never picks a note of it as the one that holds."""
    path: list[str] = []
    on_path: set[str] = set()
    done: set[str] = set()

    def walk(node: str) -> list[str] | None:
        if node in on_path:
            return path[path.index(node):] + [node]
        if node in done:
            return None
        path.append(node)
        on_path.add(node)
        for base in bases_of(node):
            found = walk(base)
            if found:
                return found
        path.pop()
        on_path.discard(node)
        done.add(node)
        return None

    return walk(start)


def standing(note: Note, bases: Mapping[str, Note], loop: list[str] | None, now: str) -> tuple[str, str]:
    """Whether what `note` rests on holds: ("yes" | "no" | "unknown", why).  No where a base
    is out of plain force or past its end at `now` (not swept yet: replay.past_end); unknown where a base is not in this log or the bases form a
    cycle (named); yes where every base is in plain force."""
    if loop:
        return "unknown", "its bases form a cycle: " + " → ".join(f"#{ids.shown(n, _short(bases, n))}" for n in loop)
    missing = [b for b in note.rests_on if b not in bases]
    out = [bases[b] for b in note.rests_on if b in bases and (bases[b].state != "active" or past_end(bases[b], now))]
    if out:
        return "no", "; ".join(f"#{b.shown} is past its end ({b.expires})" if b.state == "active"
                               else f"#{b.shown} is {_WORDS.get(b.state, b.state)}" for b in out)
    if missing:
        return "unknown", "; ".join(f"#{ids.shown(b)} is not in this log" for b in missing)
    return "yes", "every note it rests on is in force"


def _short(bases: Mapping[str, Note], note_id: str) -> str | None:
    return bases[note_id].shown if note_id in bases else None
