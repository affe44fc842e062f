"""Rebuild an edited file on the store as it is now, for another round in the editor.

Your changes that did not conflict are kept as you wrote them; each conflict is shown with
your side, the base, and the store's side, between column-0 marker lines.  Column-0 lines
can never come from note text (text lines are indented), so the markers cannot be
confused with content, and the parser refuses a file that still holds one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..base.replay import Note
from ..base.vocabulary import KINDS
from ..renderer.format import (
    ERRORS_OPEN,
    INDENT,
    SECTION_TITLES,
    SEP,
    Selection,
    anchor_line,
    escape_first_line,
    escape_text_line,
    trigger_line,
)
from ..renderer.render import for_editing, header_line, render_item
from .parse import Item, ParsedFile
from .plan import Conflict, Plan, in_selection


def error_comment(messages: Sequence[str]) -> list[str]:
    if not messages:
        return []
    lines = [f"{ERRORS_OPEN} (qem removes this comment on check-in; anything typed in it is lost)"]
    # one line per message, whatever it quotes: the line numbers it gives count on that
    lines.extend(" ".join(message.split()).replace("-->", "- ->") for message in messages)
    lines.append("-->")
    return lines


def with_errors(text: str, messages: Sequence[str]) -> str:
    """`text` with qem's error comment (re)placed under its header line.  The messages'
    line numbers are moved by the lines the comment adds (or an older one took), so each
    still points at its line in the file the person reopens."""
    lines = text.split("\n")
    header, rest = lines[:1], lines[1:]
    # drop an earlier error comment
    i, removed = 0, 0
    while i < len(rest) and not rest[i].strip():
        i += 1
    if i < len(rest) and rest[i].startswith(ERRORS_OPEN):
        j = i
        while j < len(rest) and rest[j].rstrip() != "-->":
            j += 1
        removed = j + 1 - i
        rest = rest[:i] + rest[j + 1 :]
    shift = len(error_comment(messages)) - removed
    moved = [_shift_line(message, shift) for message in messages]
    return "\n".join(header + error_comment(moved) + rest)


def _shift_line(message: str, shift: int) -> str:
    match = re.match(r"line (\d+):", message)
    if not match or int(match.group(1)) <= 1:
        return message
    return f"line {int(match.group(1)) + shift}:" + message[match.end():]


def rebase(
    parsed: ParsedFile,
    plan: Plan,
    base_notes: Mapping[str, Note],
    now_notes: Mapping[str, Note],
    describe: Mapping[str, str],
    messages: Sequence[str],
    base: str | None = None,
) -> str:
    """The file to reopen: the store as it is now, your changes kept, conflicts marked.

    `base_notes` are keyed by the short id the base showed (as for make_plan), `now_notes`
    (every note) by full id; `describe` gives, per conflicting note, one line on what the
    store did to it; `base` is the rendering the reopened edit is based on (its help line
    names it).
    """
    selection: Selection = parsed.selection
    sections = _placed(parsed, plan, base_notes, now_notes, describe)
    new_items = [i for i in parsed.items if i.note_id is None and i.kind]
    out = [header_line(parsed.memory or "", selection), *error_comment(messages), ""]
    for kind in KINDS:
        if not selection.holds_kind(kind):
            continue
        out += [f"## {SECTION_TITLES[kind]}", ""]
        entries = sorted(sections[kind], key=lambda e: e[0])
        for _, lines in entries:
            out.extend(lines)
        for item in new_items:
            if item.kind == kind:
                out.extend(item.raw)
        if entries or any(i.kind == kind for i in new_items):
            out.append("")
    return for_editing("\n".join(out).rstrip("\n") + "\n", base)


def _placed(
    parsed: ParsedFile,
    plan: Plan,
    base_notes: Mapping[str, Note],
    now_notes: Mapping[str, Note],
    describe: Mapping[str, str],
) -> dict[str, list[tuple[str, list[str]]]]:
    """Each section's entries (note id, lines): conflict blocks, your changed items as
    you wrote them, every other note as the store has it now."""
    selection = parsed.selection
    shorts = {n.id: n.shown for n in now_notes.values()}
    base_by_id = {n.id: n for n in base_notes.values()}
    mine: dict[str, Item] = {base_notes[i.note_id].id: i for i in parsed.items if i.note_id in base_notes}
    changed = {op.note_id for op in plan.ops if op.note_id is not None}
    sections: dict[str, list[tuple[str, list[str]]]] = {k: [] for k in KINDS}
    shown: set[str] = set()  # notes a conflict block shows (a successor, beside its parent)
    for conflict in plan.conflicts:
        note = now_notes[conflict.note_id]
        block, also = _conflict_block(note, mine.get(note.id), base_by_id.get(note.id),
                                      describe.get(note.id, ""), now_notes, shorts)
        sections[note.kind].append((note.id, block))
        shown |= also | {note.id}
    for note in now_notes.values():
        if note.id in shown:
            continue
        if not in_selection(note, selection) and not (note.id in base_by_id and in_selection(base_by_id[note.id], selection)):
            continue
        if note.id in changed:
            item = mine.get(note.id)
            if item is not None:  # absent: you deleted it, and it stays deleted
                sections[item.kind or note.kind].append((note.id, item.raw))
        elif in_selection(note, selection):
            sections[note.kind].append((note.id, render_item(note, None, shorts)))
    return sections


def _conflict_block(
    now: Note, item: Item | None, base: Note | None, what: str, now_notes: Mapping[str, Note],
    shorts: Mapping[str, str],
) -> tuple[list[str], set[str]]:
    """Your side, the base and the store's side of one note, between marker lines; and the
    other notes the block shows.  Your side is written in a form that checks in against
    the store now: a change to a note the store superseded meanwhile is moved onto its
    successor, and text for a note forgotten meanwhile becomes a new note."""
    successor = None
    if now.state == "superseded" and now.superseded_by in now_notes:
        successor = now_notes[now.superseded_by]
    label, yours = _yours(now, item, base, successor, shorts)
    lines = [f"<<<<<<< yours: {label}", *yours, "||||||| base: as your file was made"]
    if base is not None:  # a text forgotten since is not written back: the base shows its tombstone
        lines.extend(render_item(base) if now.state != "forgotten" else render_item(now, None, shorts))
    lines.append(f"======= the store now: {what}")
    lines.extend(render_item(now, None, shorts))
    if successor is not None:
        lines.extend(render_item(successor, None, shorts))
    lines.append(f">>>>>>> end of the conflict on #{now.shown}: keep one side, delete the other and these marker lines")
    return lines, {successor.id} if successor is not None else set()


def _yours(now: Note, item: Item | None, base: Note | None, successor: Note | None,
           shorts: Mapping[str, str]) -> tuple[str, list[str]]:
    if successor is not None:
        replaced = f"#{successor.shown}, which replaced #{now.shown} since your base"
        if item is None:
            return f"you deleted #{now.shown}; {replaced}, goes too (keeping this side revokes it)", render_item(now, None, shorts)
        moved = _retarget(successor, item, base)
        return (f"your change to #{now.shown}, put on {replaced} (keeping this side makes it there)",
                render_item(now, None, shorts) + render_item(moved, None, shorts))
    if now.state == "forgotten" and item is not None and item.text:
        first, *more = item.text.split("\n")
        new = [f"- {item.priority}{SEP}{escape_first_line(first)}"] + [
            INDENT + escape_text_line(line) if line else "" for line in more]
        new += [anchor_line(path, shown) for path, (_, shown) in sorted(item.anchors.items())]
        new += [trigger_line(name, value) for name, value in sorted(item.triggers)]
        return (f"#{now.shown} was forgotten since your base; keeping this side makes your text a new note",
                render_item(now, None, shorts) + new)
    return f"#{now.shown} as you left it" + ("" if item else " (you deleted it)"), list(item.raw) if item else []


def _retarget(successor: Note, item: Item, base: Note | None) -> Note:
    """The successor with the change you made to its parent: your text, priority,
    provenance or state marker, where yours differs from the base."""
    if base is None:
        return successor
    changes: dict[str, object] = {}
    if item.text != base.text:
        changes["text"] = item.text
    if item.priority != base.priority:
        changes["priority"] = item.priority
    if item.provenance != base.provenance:
        changes["provenance"] = item.provenance
    if item.state != base.state:
        changes.update(state=item.state, state_at=None, state_reason=item.state_reason)
    if sorted(item.anchors) != [path for path, _ in base.anchors]:
        changes["anchors"] = tuple(sorted((path, shown) for path, (_, shown) in item.anchors.items()))
    if tuple(sorted(item.triggers)) != base.triggers:
        changes["triggers"] = tuple(sorted(item.triggers))
    return successor._replace(**changes)
