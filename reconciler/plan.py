"""Turn an edited file into a plan of events, three-way.

Two-way first: the edited file against its base (the rendering it was made from) says
what *you* changed.  Then three-way: the base against the store's rendering now says what
*others* changed meanwhile.  A note changed on both sides is a conflict unless both sides
reach the same end; changes to different notes merge.  Everything is compared as the file
shows it, so it does not matter how the store got where it is (events written here, or
brought by a pull, a merge, a switch of branch).  This module owns the mapping from an
edit to events and the conflict rule; it reads nothing and writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..base.decisions import deadline_refusal
from ..base.replay import Note
from ..base.stored_form import normalize_text, seat_problem
from ..base.vocabulary import LIVE_STATES, MOVE_BY_VERB, MOVES, TextError, marker_move
from ..renderer.format import SECTION_TITLES, Selection, due_read
from .parse import Item, LineError, ParsedFile


@dataclass(frozen=True)
class Content:
    kind: str
    priority: str
    text: str
    anchors: tuple[str, ...] = ()  # the anchored paths, in order (their object ids are the check-in's to record)
    expires: str | None = None  # the note's end, a UTC time (None: none; a new item's kind may give one)
    triggers: tuple[tuple[str, str], ...] = ()  # its declared triggers, (name, value) in order
    to: str | None = None  # who owes it (a request)
    due: str | None = None  # its deadline, a UTC time
    answers: str | None = None  # the request it answers (a full id: the check-in resolves the one shown)
    rests_on: tuple[str, ...] = ()  # the notes it rests on (full ids, in order: the check-in resolves those shown)


@dataclass(frozen=True)
class Op:
    """One change of the check-in: an action on a note (its full id), or a new note."""

    action: str  # create, supersede, revoke, flag_stale, reinstate, expire, promote
    note_id: str | None
    line: int
    content: Content | None = None
    reason: str | None = None  # a marker's own reason, over the check-in's


@dataclass(frozen=True)
class Conflict:
    note_id: str
    line: int
    mine: tuple[Op, ...]
    theirs: str  # what the store did meanwhile, in words


@dataclass
class Plan:
    generation: int = 0  # the index generation it was made against: a write checks it
    ops: list[Op] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    errors: list[LineError] = field(default_factory=list)
    # notes others changed since the base that you left alone: their changes stand
    merged: list[str] = field(default_factory=list)
    # your changes that others had already made: nothing to write for them
    agreed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and not self.conflicts

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for op in self.ops:
            counts[op.action] = counts.get(op.action, 0) + 1
        return counts

    def summary(self) -> str:
        """"1 create, 2 supersede, 1 revoke": the counts, in the lifecycle's order."""
        counts = self.counts()
        return ", ".join(f"{counts[m.verb]} {m.shown}" for m in MOVES if m.verb in counts)


def in_selection(note: Note, selection: Selection) -> bool:
    return selection.holds(note.id, note.kind, note.state in LIVE_STATES)


def make_plan(
    parsed: ParsedFile,
    base_notes: Mapping[str, Note],
    now_notes: Mapping[str, Note],
    theirs: Mapping[str, str],
    removed: set[str] | None = None,
    created_since: Sequence[Note] = (),
) -> Plan:
    """The plan for checking `parsed` in.

    `base_notes`: the notes as the base shows them, keyed by the short id the base
    shows (each holds its full id); every note of the base, or, when `parsed` holds only
    the blocks the edit changed (reconciler.blocks), those and the ones in `removed`
    (short ids whose base items are gone).  `now_notes`: the notes now, by full id (at
    least those of `base_notes`, and their successors).  `theirs`: full id → what others
    did to it, for every note the store now shows otherwise than the base did.
    `created_since`: notes created since the base (a check-in that already landed).
    """
    plan = Plan(errors=list(parsed.errors))
    mine = _my_changes(parsed, base_notes, plan.errors, removed)
    for note_id, (line, ops) in mine.items():
        if note_id is None or note_id not in theirs:
            plan.ops.extend(ops)
        elif ops and all(_already(op, now_notes) for op in ops):
            plan.agreed.append(note_id)
        else:
            plan.conflicts.append(Conflict(note_id, line, tuple(ops), theirs[note_id]))
    plan.merged = sorted(n for n in theirs if n not in mine)
    if plan.ops and not plan.conflicts and all(op.action == "create" for op in plan.ops):
        done = _created_since(plan.ops, created_since)
        if done is not None:  # the whole edit is in the store already: do not create it twice
            plan.ops = []
            plan.agreed.extend(done)
    plan.ops.sort(key=lambda op: op.line)
    return plan


def _created_since(creates: Sequence[Op], created: Sequence[Note]) -> list[str] | None:
    """The notes a check-in created since the base with the content of each of `creates`,
    or None unless every one has its match.

    When everything else an edit asks for is already in the store and so is every new note
    it adds, the edit itself landed: qem died after the commit and before it could clear
    the file (MEMORY.md checked in with --path), and checking the file in again must not
    create its notes a second time.
    """
    pool: dict[Content, list[str]] = {}
    for note in created:  # (by kind, priority and text: a new item's end may be its kind's default)
        if note.provenance == "human" and note.supersedes is None and note.text is not None:
            pool.setdefault(content_of(note), []).append(note.id)
    found = []
    for op in creates:
        matches = pool.get(replace(op.content, expires=None)) if op.content else None
        if not matches:
            return None
        found.append(matches.pop(0))
    return found


def _my_changes(
    parsed: ParsedFile,
    base_notes: Mapping[str, Note],
    errors: list[LineError],
    removed: set[str] | None = None,
) -> dict:
    """full note id (None for new notes) → (line, ops), for every note you changed."""
    changes: dict = {}
    new_ops: list[Op] = []
    seen: dict[str, int] = {}
    for item in parsed.items:
        if not item.kind or not _in_checkout(item, parsed.selection, errors):
            continue  # outside any section: already an error
        if item.note_id is None:
            content = _content(item, errors)
            if content:
                new_ops.append(Op("create", None, item.line, content))
            continue
        base = _known_item(item, parsed, base_notes, seen, removed, errors)
        if base is not None:
            ops = _item_changes(item, base, errors)
            if ops:
                changes[base.id] = (item.line, ops)
    changes.update(_deletions(parsed.selection, base_notes, seen, removed, errors))
    if new_ops:
        changes[None] = (new_ops[0].line, new_ops)
    return changes


def _in_checkout(item: Item, selection: Selection, errors: list[LineError]) -> bool:
    if selection.holds_kind(item.kind):
        return True
    errors.append(
        LineError(
            item.line,
            f"section {SECTION_TITLES[item.kind]} is outside this checkout"
            f" ({selection.describe()}); move the note back or check out that kind",
        )
    )
    return False


def _known_item(
    item: Item,
    parsed: ParsedFile,
    base_notes: Mapping[str, Note],
    seen: dict[str, int],
    removed: set[str] | None,
    errors: list[LineError],
) -> Note | None:
    """The base note an existing item stands for; None (with the error) when the id is
    repeated, unknown at the base, outside the checkout, or its unchanged item is still in
    the file beside it."""
    assert item.note_id is not None
    twice = "; keep one item per note, or remove the [#ID] to make a new note"
    if item.note_id in seen:
        errors.append(LineError(item.line, f"note #{item.note_id} appears twice (also on line {seen[item.note_id]}){twice}"))
        return None
    seen[item.note_id] = item.line
    base = base_notes.get(item.note_id)
    if base is None or not in_selection(base, parsed.selection):
        where = (
            "in the rendering this file was made from: it is made up, or from another memory"
            if base is None
            else "in this checkout"
        )
        errors.append(LineError(item.line, f"no note #{item.note_id} {where}; remove the [#ID] to make a new note"))
        return None
    if removed is not None and item.note_id not in removed:
        errors.append(LineError(item.line, f"note #{item.note_id} appears twice (its unchanged item is still in the file){twice}"))
        return None
    return base


def _deletions(
    selection: Selection,
    base_notes: Mapping[str, Note],
    seen: dict[str, int],
    removed: set[str] | None,
    errors: list[LineError],
) -> dict:
    """Items deleted from the file: a live note is revoked; history cannot be deleted."""
    gone = base_notes.items() if removed is None else (
        (n, base_notes[n]) for n in sorted(removed) if n in base_notes
    )
    changes = {}
    for short, base in gone:
        if short in seen or not in_selection(base, selection):
            continue
        if base.state in LIVE_STATES:
            changes[base.id] = (0, [Op("revoke", base.id, 0)])
        else:
            errors.append(
                LineError(
                    0,
                    f"note #{short} ({base.state}) was deleted from the file, but history"
                    " stays: put its item back (to erase a note for good, use"
                    f" `qem forget {short}`)",
                )
            )
    return changes


def _content(item: Item, errors: list[LineError], base: Note | None = None) -> Content | None:
    try:
        text = normalize_text(item.text or "")
    except TextError as exc:
        errors.append(LineError(item.line, str(exc)))
        return None
    problem = _request_problem(item)
    if problem:
        errors.append(LineError(item.line, problem))
        return None
    content = Content(item.kind, item.priority, text, tuple(sorted(item.anchors)), _end(item, base),
                      tuple(sorted(item.triggers)), item.to, None if item.due is None else due_read(item.due),
                      item.answers, item.rests_on)
    what = f"note #{item.note_id}" if item.note_id else "the new note"
    problem = deadline_refusal(what, content.due, content.expires, base)
    if problem:
        errors.append(LineError(item.line, problem))
        return None
    return content


def _request_problem(item: Item) -> str | None:
    """What is wrong with an item's `to` and `due` markers (None: nothing)."""
    what = f"note #{item.note_id}" if item.note_id else "the new note"
    if item.to is not None and seat_problem(item.to):
        return f"{what}: {seat_problem(item.to)}"
    if item.due is not None:
        if not _real_time(due_read(item.due)):
            return f"{what}: due {item.due} is not a date (YYYY-MM-DD) or a UTC time (YYYY-MM-DDTHH:MM:SSZ)"
    return None


def _real_time(stamp: str) -> bool:
    """Whether a `YYYY-MM-DDTHH:MM:SSZ` names a moment of the calendar (pure: no clock)."""
    year, month, day = int(stamp[:4]), int(stamp[5:7]), int(stamp[8:10])
    hour, minute, second = int(stamp[11:13]), int(stamp[14:16]), int(stamp[17:19])
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days = (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
    return 1 <= month <= 12 and 1 <= day <= days[month - 1] and hour < 24 and minute < 60 and second < 60


def content_of(note: Note) -> Content:
    """A note's content as an edit's is compared with it: the object ids it recorded are
    shown for a reader and never compared."""
    return Content(note.kind, note.priority, note.text or "", tuple(path for path, _ in note.anchors), note.expires,
                   note.triggers, note.to, note.due, note.answers, note.rests_on)


def _end(item: Item, base: Note | None) -> str | None:
    """The end an item's `expires` marker asks for: the base note's own (to the second)
    while the date it shows is unchanged, else the start (UTC) of the date written."""
    if item.expires is None:
        return None
    if base is not None and base.expires is not None and base.expires[:10] == item.expires:
        return base.expires
    return f"{item.expires}T00:00:00Z"


def _item_changes(item: Item, base: Note, errors: list[LineError]) -> list[Op]:
    """The ops an edited item asks for against its base note; none at all when anything
    about the item is refused (the refusals go to `errors`)."""
    before = len(errors)
    ops = _item_ops(item, base, errors)
    return ops if len(errors) == before else []


def _item_ops(item: Item, base: Note, errors: list[LineError]) -> list[Op]:
    def refuse(message: str) -> list[Op]:
        errors.append(LineError(item.line, f"note #{item.note_id}: {message}"))
        return []

    if base.state == "forgotten" or item.state == "forgotten":
        return _tombstone_changes(item, base, refuse)
    if item.date != base.created_at[:10]:
        return refuse(f"the created date is history; put back {base.created_at[:10]}")
    if item.supersedes != base.supersedes:
        return refuse("the `supersedes` link is history; put it back as it was")
    ops: list[Op] = []
    if item.provenance != base.provenance:
        if item.provenance != "human":
            return refuse(f"provenance can only be raised to human, not to {item.provenance}")
        ops.append(Op("promote", base.id, item.line))
    content = _content(item, errors, base)
    if content is None:
        return []
    changed = content != content_of(base)
    if base.state == "superseded":
        return _superseded_changes(item, base, changed, refuse) or ops
    if item.state == "superseded":
        return refuse("to supersede a note, change its text; do not write the marker")
    return ops + _state_and_text_changes(item, base, content if changed else None, refuse)


def _tombstone_changes(item: Item, base: Note, refuse) -> list[Op]:  # type: ignore[no-untyped-def]
    if base.state != "forgotten":
        return refuse("a note is forgotten with `qem forget`, not by editing its line")
    if item.state != "forgotten":
        return refuse("it was forgotten; leave its tombstone as it is")
    return []


def _superseded_changes(item: Item, base: Note, changed: bool, refuse) -> list[Op]:  # type: ignore[no-untyped-def]
    """A superseded note's item is history: only its provenance may be raised."""
    if item.state != "superseded" or item.superseded_by != base.superseded_by:
        return refuse(f"it is superseded by #{base.superseded_by}; that link is history")
    if changed:
        return refuse(
            f"it is superseded by #{base.superseded_by} and its text is history;"
            f" edit #{base.superseded_by} instead"
        )
    return []


def _state_and_text_changes(item: Item, base: Note, content: Content | None, refuse) -> list[Op]:  # type: ignore[no-untyped-def]
    """A new text supersedes; a changed marker moves the state; both at once only to
    bring a note back with new text (reinstated, then superseded)."""
    n, line = base.id, item.line
    if content is not None and base.state not in LIVE_STATES:
        if item.state != "active":
            return refuse(
                f"it is {base.state} and its text is history; to bring it back with new"
                " text, remove its marker too (it is reinstated, then superseded)"
            )
        return [Op("reinstate", n, line, reason=None), Op("supersede", n, line, content)]
    if content is not None and item.state != base.state and not (base.state == "stale" and item.state == "active"):
        return refuse("change its text or its state marker, not both in one check-in")
    if content is not None:
        return [Op("supersede", n, line, content)]
    if item.state != base.state:
        move = marker_move(base.state, item.state)
        if move is None:
            return refuse(f"cannot go from {base.state} to {item.state}")
        return [Op(move.verb, n, line, reason=item.state_reason)]
    return []


def _already(op: Op, now_notes: Mapping[str, Note]) -> bool:
    """Whether the store already reached the end `op` asks for (both sides did it)."""
    now = now_notes.get(op.note_id) if op.note_id is not None else None
    if now is None:
        return False
    if now.state == "forgotten":
        return op.action == "revoke"  # you deleted it; it is gone for good
    if op.action == "supersede":
        if now.state != "superseded" or op.content is None:
            return False
        successor = now_notes.get(now.superseded_by or "")
        return successor is not None and op.content == content_of(successor)
    if op.action == "promote":
        return now.provenance == "human"
    return now.state == MOVE_BY_VERB[op.action].target
