"""Planning a check-in: read what reconciler.plan needs, and no more.

Three renderings meet: the base (what the file was made from), the edit, and the store
now.  A note the edit shows and the base does not, but the store now does, reached the
file by git (a merge, a pull) after the base was written: its base is the store now.  The blocks the edit changed say what you did; the blocks that differ between the
base and the store now say what others did meanwhile; only those blocks are parsed and
only the notes they name are read, so the cost follows the edit, not the store.  Short
ids in the files are turned into full ids here, against the items they stand for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..base import errors, ids, resting
from ..base.decisions import answer_refusal
from ..base.replay import Note
from ..base.stored_form import REST_LIMIT
from ..base.times import utc_now
from ..reconciler.blocks import Chunks, Key, base_items, blocks_by_id, diff_edit
from ..reconciler.parse import Item, LineError, ParsedFile, parse
from ..reconciler.plan import Plan, make_plan
from ..renderer import Selection, assemble_bytes, render_item
from ..renderer.format import HEADER_RE, HELP_OPEN, SECTION_TITLES, decode_query, due_read
from ..renderer.patch import headings_in
from ..storage.store import Store
from ..system.files import file_chunks, read_at


@dataclass
class Proposal:
    """A planned check-in with what it was planned from: the parsed edit, the plan, the
    notes as the base showed them (by their short ids there) and as they are now."""

    parsed: ParsedFile
    plan: Plan
    base_notes: dict[str, Note]
    now_notes: dict[str, Note]
    text: bytes = b""
    base_text: bytes | Path | None = None  # a base read from its file as needed (a checkout's), or its bytes
    partial: bool = False  # only the changed blocks parsed, only the notes they name read
    moment: str | None = None  # the base's moment (see propose)

    def base_bytes(self) -> bytes | None:
        """The base's bytes (read whole: for keeping a refused edit)."""
        if isinstance(self.base_text, Path):
            return b"".join(file_chunks(self.base_text))
        return self.base_text


@dataclass(frozen=True)
class Since:
    """The rendering now, as far as a check-in reads it when the memory moved since a calm
    base (see qem_edit.mirror.export.streamed): the notes whose items changed since the base's
    moment (the index's log of items), and those items now, as a rendering of them alone.
    Every other item is the base's, byte for byte."""

    kinds: dict[str, str | None]  # each changed note's kind (the index's; None: the note is no longer there)
    text: bytes


def propose(store: Store, text: str | bytes, base_text: str | bytes | Path | None = None, *, whole: bool = False,
            moment: str | None = None, heads: list[int] | None = None, calm: bool = False) -> Proposal:
    """Plan checking `text` (the edited file) in against `base_text`, the rendering it was
    made from (None: the store's rendering now, as for a file of unknown history; a path:
    its file, read a chunk at a time, never whole).
    `whole`: parse the whole file and read every note (the rebase needs them all).
    `moment`: when the base is a checkout's rendering, the moment it was made at (then,
    while the store has not moved, the base is the rendering now, and is not made again:
    `now_text` None stands for it).
    `heads`: where the headings of the base's file start, as its checkout recorded them.
    `calm`: the base was made of the index's items alone (then, once the store moved, the
    rendering now is read as the items that changed since `moment`: `Since`)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    header = _header(data)
    base: bytes | Path | None = base_text.encode("utf-8") if isinstance(base_text, str) else base_text
    selection = _checked_out(store, _selection_of(header), base)
    generation, now = (_unmoved(store, base, moment) or (_since(store, base, moment, selection) if calm else None)
                       or _now(store, selection))
    now_text = now.text if isinstance(now, Since) else now
    base = now_text if base is None else base
    assert base is not None
    source = _chunks(base)
    diff = None if whole else diff_edit(source, data, heads=heads if isinstance(base, Path) else None)
    if diff is not None and diff.parsed.memory is not None:
        parsed, removed, partial = diff.parsed, diff.removed, True
    else:
        parsed, removed, partial = _parsed_whole(data), None, False
    _check_header(store, parsed, header, source)
    _answered_whole(store, parsed)
    parsed.selection = selection
    mine = {i.note_id for i in parsed.items if i.note_id is not None} | (removed or set())
    items, theirs_shorts = _read_base(base, heads, now, mine if partial else None, diff.base_blocks if diff else {})
    arrived = {s for s in mine if s not in items}
    if arrived and now_text is not None:  # notes git brought into the file after its base (a merge,
        items.update(base_items(now_text, arrived))  # a pull): their base is now
    if arrived and removed is not None:
        removed = removed | arrived  # each stands in the edit where the base had nothing
    base_notes = _base_notes(store, items, parsed)
    now_notes = _now_notes(store, base_notes, partial or selection.notes is not None)
    theirs, created = _theirs(store, base_notes, items, now_notes, theirs_shorts, now_text)
    plan = make_plan(parsed, base_notes, now_notes, theirs, removed, created)
    plan.errors += _ungrounded(store, plan)
    plan.generation = generation
    return Proposal(parsed, plan, base_notes, now_notes, data, base, partial, moment)


def _read_base(base: bytes | Path, heads: list[int] | None, now: bytes | Since | None, mine: set[str] | None,
               known: dict[str, Key]) -> tuple[dict[str, Item], set[str]]:
    """The base's items the check-in reads (every one: `mine` None; else those of the
    notes the edit names, `mine`, and of the notes others changed since), and the short
    ids, as the base or now shows them, of the notes others changed since the base."""
    source = _chunks(base)
    if not isinstance(now, Since):
        theirs, between = _changed_between(source, now)
        items = base_items(source, None if mine is None else mine | theirs, {**between, **known})
        return items, theirs
    # the changed notes' items now, and the base's (under the short id it shows), looked up by id
    theirs = set(base_items(now.text, None))
    found = _blocks_of(base, heads if isinstance(base, Path) else None, now.kinds)
    items = base_items(source, None if mine is None else mine | set(found), {**found, **known})
    return items, theirs | set(found)


def _blocks_of(base: bytes | Path, heads: list[int] | None, kinds: dict[str, str | None]) -> dict[str, Key]:
    """The base's blocks of these notes (id → kind; None: any section), looked up by
    bisection in their sections (reconciler.blocks.blocks_by_id): a few small reads each,
    however large the base; `heads`, where its section headings start, is found when not
    known."""
    wanted = {note_id: SECTION_TITLES[kind] if kind else None for note_id, kind in kinds.items()}
    if not wanted:
        return {}
    if isinstance(base, bytes):
        return blocks_by_id(lambda at, size: base[at:at + size], len(base), heads or headings_in((base,)), wanted)
    with read_at(base) as (read, size):
        return blocks_by_id(read, size, heads if heads is not None else headings_in(file_chunks(base)), wanted)


def whole(store: Store, proposal: Proposal) -> Proposal:
    """`proposal` with the whole file parsed and every note read (for the rebase)."""
    if not proposal.partial:
        return proposal
    return propose(store, proposal.text, proposal.base_text, whole=True, moment=proposal.moment)


def _header(data: bytes) -> str:
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    end = data.find(b"\n", start)
    return data[start:end if end >= 0 else len(data)].rstrip().decode("utf-8", "replace")


def _selection_of(header: str) -> Selection:
    match = HEADER_RE.match(header)
    if match is None:
        return Selection()
    kinds = tuple(match["kinds"].split(",")) if match["kinds"] else None
    query = decode_query(match["query"]) if match["query"] else None
    return Selection(kinds=kinds, active_only=bool(match["active"]), query=query)


def _chunks(base: bytes | Path) -> Chunks:
    """The base a chunk at a time: its bytes, or its file read afresh on each call."""
    if isinstance(base, Path):
        return lambda: file_chunks(base)
    return lambda: (base,)


def _checked_out(store: Store, selection: Selection, base: bytes | Path | None) -> Selection:
    """A query's checkout holds exactly the notes its base shows (those the query matched
    when it was checked out): the edit is read against those and no others, whatever
    matches the query now.  Without its base the file cannot be checked in."""
    if not selection.query:
        return selection
    if base is None:
        raise errors.BadInput(
            f"this file holds the notes that matched {' '.join(selection.query)} when it was rendered, and qem"
            " has no record of which they were; check them out with `qem checkout FILTERS --path FILE`"
            " (or `qem edit FILTERS`) and edit that; nothing was checked in")
    items = base_items(_chunks(base), None)
    ids = {_full_id(store, short, item) for short, item in items.items()}
    return selection._replace(notes=frozenset(i for i in ids if i is not None))


def _unmoved(store: Store, base: bytes | Path | None, moment: str | None) -> tuple[int, None] | None:
    """The generation, when the rendering now is the checkout's base made at `moment` (but
    for its help comment: the base stands for it, and nothing is rendered or copied);
    None when that cannot be known."""
    if base is None or moment is None:
        return None
    head = store.head()
    if store.moment(head) != moment:
        return None
    return head, None


def _since(store: Store, base: bytes | Path | None, moment: str | None,
           selection: Selection) -> tuple[int, Since] | None:
    """The generation and the rendering now as `Since`, when the base is a calm rendering
    made at `moment` and the index can tell every item that changed since (None: it
    cannot; then the rendering now is made whole)."""
    if base is None or moment is None or selection.active_only:
        return None
    with store.reading():
        changed = store.items_changed_since(moment)
        if changed is None or store.has_disagreements():
            return None
        if selection.notes is not None:
            changed = [i for i in changed if i in selection.notes]
        known = store.notes_by_id(changed)
        kinds: dict[str, str | None] = {i: known[i].kind if i in known else None for i in changed
                                        if i not in known or selection.holds_kind(known[i].kind)}
        text = assemble_bytes(store.memory_id(), selection, store.items_of_notes(known))
        return store.head(), Since(kinds, text)


def _now(store: Store, selection: Selection) -> tuple[int, bytes]:
    from ..mirror.export import render_store

    try:
        return render_store(store, selection)
    except KeyError:  # a header naming an unknown kind: the parse says which
        return render_store(store, Selection())


def _parsed_whole(data: bytes) -> ParsedFile:
    try:
        decoded = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise errors.BadFile(f"the file line {line}: not UTF-8 text; nothing was checked in") from None
    parsed = parse(decoded)
    if parsed.memory is None:
        if not parsed.errors:
            raise errors.BadFile("the file holds nothing to check in")
        raise errors.BadFile(f"this is not a qem file: {parsed.errors[0]}")
    return parsed


def _check_header(store: Store, parsed: ParsedFile, header: str, base: Chunks) -> None:
    """A file of another memory is refused; a header changed from the base's (say
    `kinds=gotcha` deleted from a narrowed checkout, which would read as every other
    kind's notes deleted) is refused naming line 1."""
    if parsed.memory != store.memory_id():
        raise errors.BadFile(
            f"line 1: this file is a rendering of another memory ({parsed.memory}), not of this one"
            f" ({store.memory_id()}); nothing was checked in"
        )
    base_header = _header(next(iter(base()), b""))
    base_match, match = HEADER_RE.match(base_header), HEADER_RE.match(header)
    fields = ("kinds", "active", "query")
    if base_match and match and [base_match[f] for f in fields] != [match[f] for f in fields]:
        parsed.errors.insert(0, LineError(1, "the header line was changed; it says which notes this file holds,"
                                             " and the check-in reads the edit against it: put it back as it"
                                             f" was, {base_header}"))


def _changed_between(base: Chunks, now: bytes | None) -> tuple[set[str], dict[str, Key]]:
    """The short ids (as the base shows them, or as now shows them) of the notes whose
    items differ between the two renderings (`now` None: the base, unmoved), and the
    base's items of them at hand."""
    if now is None or _same_but_help(base(), now):
        return set(), {}  # nothing changed since the base (a checkout's base ends in its help)
    diff = diff_edit(base, now)
    if diff is None:
        before = {i.note_id: i.raw for i in parse(b"".join(base()).decode("utf-8", "replace")).items}
        after = {i.note_id: i.raw for i in parse(now.decode("utf-8", "replace")).items}
        return {n for n in set(before) | set(after) if n is not None and before.get(n) != after.get(n)}, {}
    return {i.note_id for i in diff.parsed.items if i.note_id is not None} | diff.removed, diff.base_blocks


def _same_but_help(base: Iterable[bytes], now: bytes) -> bool:
    """Whether the base is `now`, or `now` with a checkout's help comment after it,
    compared a chunk at a time."""
    at, extra = 0, b""
    for chunk in base:
        if at < len(now):
            size = min(len(chunk), len(now) - at)
            if not now.startswith(chunk if size == len(chunk) else chunk[:size], at):
                return False
            chunk, at = chunk[size:], at + size
        extra += chunk
        if len(extra) > 1 << 20:
            return False
    return at == len(now) and (not extra or extra.startswith(b"\n" + HELP_OPEN.encode()))


def _base_notes(store: Store, items: dict[str, Item], parsed: ParsedFile) -> dict[str, Note]:
    """The notes as the base showed them, by the short id it showed, each with its full
    id; a short id that names no note any more is reported on the lines that use it."""
    out: dict[str, Note] = {}
    for short, item in items.items():
        note_id = _full_id(store, short, item)
        if note_id is None:
            lines = [i.line for i in parsed.items if i.note_id == short]
            for line in lines:
                parsed.errors.append(LineError(line, f"note #{short} is no longer in this memory (a switch of"
                                                     " branch or a reset took it away); remove its item"))
            continue
        note = _note_of(item, note_id, _exact_end(store, item, note_id))
        out[short] = note._replace(answers=store.note(note_id).answers) if item.answers else note
        if item.rests_on:
            out[short] = out[short]._replace(rests_on=store.note(note_id).rests_on)
    return out


def _answered_whole(store: Store, parsed: ParsedFile) -> None:
    """Each edited item's `answers #ID` made the full id of the note it names (a line that
    names no note, or several, is refused on its line)."""
    for item in parsed.items:
        if item.answers is None:
            continue
        try:
            item.answers = store.resolve(item.answers)
        except errors.QemError as exc:
            parsed.errors.append(LineError(item.line, f"`answers #{item.answers}`: {exc}"))
            continue
        refusal = answer_refusal(store.note(item.answers)) if item.note_id is None else None
        if refusal:  # (a new item's, on its line; an edited note's new pointer: decisions.decide_create)
            parsed.errors.append(LineError(item.line, refusal))
    for item in parsed.items:
        _rests_whole(store, parsed, item)


def _rests_whole(store: Store, parsed: ParsedFile, item: Item) -> None:
    """An edited item's `rests on #ID, ...` made the full ids of the notes it names, in
    order (a line naming no note, or several, is refused on its line)."""
    whole: set[str] = set()
    for shown in item.rests_on:
        try:
            whole.add(store.resolve(shown))
        except errors.QemError as exc:
            parsed.errors.append(LineError(item.line, f"`rests on #{shown}`: {exc}"))
    if len(whole) > REST_LIMIT:
        parsed.errors.append(LineError(item.line, f"`rests on`: a note rests on up to {REST_LIMIT} other notes"))
    item.rests_on = tuple(sorted(whole))


def _ungrounded(store: Store, plan: Plan) -> list[LineError]:
    """The errors of the lines whose new or edited note would rest on a note that is no
    ground (resting.base_refusal: out of force, flagged stale, past its end, or a private
    note under a team one), decided here, in the plan, so that a dry run refuses what the
    check-in would (a check-in's notes are team notes; a successor's scope is its note's)."""
    ops = [op for op in plan.ops if op.content is not None and op.content.rests_on]
    if not ops:
        return []
    now = utc_now()
    with store.seeing_every_session():  # (a session note is judged by its scope, as the write judges it)
        bases = store.notes_by_id({b for op in ops for b in op.content.rests_on})  # type: ignore[union-attr]
    out = []
    for op in ops:
        team = op.note_id is None or store.note(op.note_id).scope == "team"
        for base_id in op.content.rests_on:  # type: ignore[union-attr]
            base = bases.get(base_id)
            refusal = None if base is None else resting.base_refusal(base, now, team, called="that note")
            if refusal:
                out.append(LineError(op.line, f"`rests on #{base.shown}`: {refusal}"))  # type: ignore[union-attr]
    return out


def _exact_end(store: Store, item: Item, note_id: str) -> str | None:
    """The end a base item's `expires` marker shows, to the second: the note's own while
    its date is the one shown (a rendering shows the date alone), else that date's start."""
    if item.expires is None:
        return None
    end = store.note(note_id).expires
    return end if end is not None and end[:10] == item.expires else f"{item.expires}T00:00:00Z"


def _full_id(store: Store, short: str, item: Item) -> str | None:
    """The note a base item stands for: its short id, or, where notes created since share
    that prefix, the one whose creation date, kind and text the item shows."""
    try:
        return store.resolve(short)
    except errors.NoSuchNote:
        pass
    candidates = ids.matching(short, sorted(n for n in store.notes_by_prefix(short)))
    fits = [n for n in store.notes_by_id(candidates).values()
            if n.created_at[:10] == item.date and n.kind == item.kind and (n.text == item.text or n.text is None)]
    return fits[0].id if len(fits) == 1 else None


def _note_of(item: Item, note_id: str, expires: str | None = None) -> Note:
    """A base item as a note: what the plan compares an edited item with."""
    return Note(
        id=note_id, kind=item.kind, priority=item.priority, text=item.text, provenance=item.provenance or "agent",
        created_at=f"{item.date or '0000-00-00'}T00:00:00Z", actor="", supersedes=item.supersedes,
        superseded_by=item.superseded_by, state=item.state, state_reason=item.state_reason, short=item.note_id or "",
        anchors=tuple(sorted((path, shown) for path, (_, shown) in item.anchors.items())),
        expires=expires, triggers=tuple(sorted(item.triggers)), to=item.to,
        due=None if item.due is None else due_read(item.due), answers=item.answers,
    )


def _now_notes(store: Store, base_notes: dict[str, Note], partial: bool) -> dict[str, Note]:
    """The notes now: those the base showed and their successors (`partial`, or a
    query's checkout, whose base shows all of its notes), or every note."""
    if not partial:
        return {n.id: n for n in store.notes()}
    now = store.notes_by_id(n.id for n in base_notes.values())
    successors = {n.superseded_by for n in now.values() if n.superseded_by}
    now.update(store.notes_by_id(successors - set(now)))
    return now


def _theirs(store: Store, base_notes: dict[str, Note], items: dict[str, Item], now_notes: dict[str, Note],
            shorts: set[str], now_text: bytes | None) -> tuple[dict[str, str], list[Note]]:
    """What others did to each note the store now shows otherwise than the base did
    (full id → words; a short id lengthened since is no change), and the notes created
    since the base."""
    theirs: dict[str, str] = {}
    known = {n.id for n in base_notes.values()}
    created: list[Note] = []
    looked = [now_notes[base_notes[s].id] for s in shorts if s in base_notes and base_notes[s].id in now_notes]
    now_items = base_items(now_text, {n.shown for n in looked}) if looked and now_text is not None else {}
    as_based = _base_shorts(base_notes, now_notes)
    for short in shorts:
        base = base_notes.get(short)
        if base is None:
            note_id = _resolved_or_none(store, short)
            if note_id is not None and note_id not in known:
                created += store.notes_by_id([note_id]).values()
            continue
        now = now_notes.get(base.id)
        if now is None:
            theirs[base.id] = "its note is no longer in this memory"
        elif (render_item(now._replace(short=base.short), None, as_based) != items[short].raw
              and _shown_otherwise(items[short], now_items.get(now.shown), now)):
            theirs[base.id] = their_words(base, now, as_based)
    return theirs, created


def _shown_otherwise(base: Item, now_item: Item | None, now: Note) -> bool:
    """Whether the store's rendering now shows the note otherwise than the base did (its
    own short id aside).  The item rendered above for the same question lacks what needs
    other notes (the short ids of notes not read here, dispute and fork markers): a block
    that only moved beside a note added meanwhile must not read as a change."""
    if now_item is None:
        return True  # not in the rendering now (out of a narrowed checkout): it changed
    first, *rest = now_item.raw
    return [first.replace(f"[#{now.shown}]", f"[#{base.note_id}]", 1), *rest] != base.raw


def _base_shorts(base_notes: dict[str, Note], now_notes: dict[str, Note]) -> dict[str, str]:
    """Short ids as the base showed them (a short id lengthened since is no change)."""
    shorts = {n.id: n.shown for n in now_notes.values()}
    shorts.update({n.id: short for short, n in base_notes.items()})
    return shorts


def _resolved_or_none(store: Store, short: str) -> str | None:
    try:
        return store.resolve(short)
    except errors.NoSuchNote:
        return None


def their_words(base: Note, now: Note, shorts: Mapping[str, str] | None = None) -> str:
    """What the store did to a note since the base, in one line (`shorts`: notes' short
    ids, for the successor it names)."""
    def name(note_id: str) -> str:
        return ids.shown(note_id, (shorts or {}).get(note_id))

    if now.rivals:
        from ..base.resolver import rival_words

        return rival_words(now, name)
    if now.state != base.state:
        what = now.state + (f" by #{name(now.superseded_by)}" if now.state == "superseded" and now.superseded_by else "")
        who = f" by {now.state_actor}" if now.state_actor else ""
        when = f" at {now.state_at}" if now.state_at else ""
        why = f" ({' '.join(now.state_reason.split())})" if now.state_reason else ""
        return f"{what}{who}{when}{why}"
    if now.provenance != base.provenance:
        return f"promoted to {now.provenance}"
    return "changed (its markers or disputes)"
