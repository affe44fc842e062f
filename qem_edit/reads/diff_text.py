"""`qem diff` written out: text, markdown for a pull request, JSON, `--stat`.

`qem diff` written out: plain text for a terminal, markdown for a pull-request comment
(GitHub's flavour: short texts inline and escaped, long ones folded in `<details>`), JSON
for scripts, and `--stat`, the counts per note kind and event type.  Removed events come
first in every form (a line of their own before the summary, then their notes), so a
reviewer cannot miss them; the notes about the code the change edits come last, after
what memory learned, and the summary counts them."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from ..base import ids
from ..base.replay import Event
from ..base.shown import visible
from ..base.vocabulary import EVENT_TYPES, KINDS, READING_ORDER
from .diff import DRIFTED, WORK_TREE, Anchored, Change, Debt, MemoryDiff
from .removals import Removal

ABOUT_THE_CODE = "memory about the code this change edits"  # the heading of the notes anchored to it
NAMED_TOUCHED = 3  # the touched paths under a folder anchor a line names (the rest are counted)
SHORT_OID = 12  # the digits of an object id shown
SHORT_TEXT = 100  # longer texts, and texts of several lines, are folded in markdown
NAMED_REMOVALS = 10  # the removed notes the removal line names (the rest are counted)
_ALWAYS = re.compile(r"([\\`*_{}\[\]<>|~&#!])")  # what means something anywhere in a line
_AT_START = re.compile(r"\A(?:(\d+)([.)])|([!-/:-@\[-`{-~]))")  # lists, headings, quotes, breaks


def _groups() -> tuple[tuple[str, str], ...]:
    """The groups (a change's event type, and the stale flags a code change caused, apart
    and just before the other flags) in the order a reader meets them, with their headings."""
    out = []
    for move in READING_ORDER:
        if move.event == "stale_flagged":
            out.append((DRIFTED, "made stale by drift"))
        out.append((move.event, move.label))
    return tuple(out)


GROUPS = _groups()


@dataclass
class DiffAnswer:
    diff: MemoryDiff
    format: str = "text"
    stat: bool = False
    max_chars: int = 0  # markdown: cut at a change to fit this many characters (0: no limit)

    @property
    def exit_code(self) -> int:
        return 1 if self.diff.changed else 0

    def text(self) -> str:
        if self.format == "markdown":
            return markdown_stat(self.diff) if self.stat else markdown(self.diff, self.max_chars)
        return text_stat(self.diff) if self.stat else plain(self.diff)

    def data(self) -> object:
        return as_data(self.diff)

    def remark(self) -> str | None:
        return "\n".join(f"qem: {n}" for n in self.diff.notices) or None


# -- shared words ----------------------------------------------------------------------------


def span(diff: MemoryDiff) -> str:
    new = diff.new.label if diff.new.label != WORK_TREE else WORK_TREE
    return f"{diff.old.label} → {new}"


def counts(events: list[Event]) -> dict[str, int]:
    found: dict[str, int] = {}
    for event in events:
        found[event.type] = found.get(event.type, 0) + 1
    return {t: found[t] for t in EVENT_TYPES if t in found}


def summary(diff: MemoryDiff) -> str:
    """The counts in one line; the notes about the code the change edits too, and said so
    when memory did not change (the exit status says it did not)."""
    about = _about(len(diff.anchored))
    if not diff.changed:
        return f"no memory changes ({span(diff)})" + (f", but {about}" if about else "")
    drifted = sum(1 for c in diff.changes if c.group == DRIFTED)
    parts = ", ".join(f"{n} {t}" + (f" ({drifted} by drift)" if t == "stale_flagged" and drifted else "")
                      for t, n in counts(diff.added).items())
    line = f"{_events(len(diff.added))} ({span(diff)})" + (f": {parts}" if parts else "")
    others = len(diff.missing) - sum(len(r.events) for r in diff.removed)
    if others:
        line += (f"; {diff.old.label} holds {_events(others, '')} {diff.new.label} does not, written there since"
                 f" (`qem diff {_rev(diff.new.label)} {diff.old.label}` lists them)")
    return line + (f"; {about}" if about else "")


def _about(count: int) -> str:
    if not count:
        return ""
    return f"{count} note{' in force is' if count == 1 else 's in force are'} about the code this change edits"


def removal_line(diff: MemoryDiff) -> str | None:
    """The removed events in one line, naming their notes (None: nothing was removed)."""
    if not diff.removed:
        return None
    count, notes = sum(len(r.events) for r in diff.removed), len(diff.removed)
    named = ", ".join(f"{_short(diff, r.note)} {r.kind or 'note'}" for r in diff.removed[:NAMED_REMOVALS])
    more = f" and {notes - NAMED_REMOVALS} more" if notes > NAMED_REMOVALS else ""
    unsure = f" (or written on {diff.old.label} since: no merge base here to tell)" if diff.unsure else ""
    return (f"{_events(count)} REMOVED{unsure}, from {notes} note{'' if notes == 1 else 's'}: {named}{more}"
            f" ({diff.old.label} holds {'it' if count == 1 else 'them'}, {diff.new.label} does not: a git rm, a revert"
            " or a dropped commit of .qem/ files; `qem revoke` and `qem forget` are the recorded ways)")


def headlines(diff: MemoryDiff) -> list[str]:
    line = removal_line(diff)
    return ([line] if line else []) + [summary(diff)]


def removal_headline(removal: Removal, diff: MemoryDiff) -> str:
    what = "the note is gone" if removal.whole else "the note reads as if they never happened"
    count = len(removal.events)
    return (f"{_short(diff, removal.note)} {removal.kind or 'note'}: {count} event{'' if count == 1 else 's'}"
            f" removed ({removal.types}); {what}")


def _short(diff: MemoryDiff, note: str) -> str:
    return "#" + ids.shown(note, diff.shorts.get(note))


def _events(count: int, what: str = "memory ") -> str:
    return f"{count} {what}event{'' if count == 1 else 's'}"


def _rev(label: str) -> str:
    return "HEAD" if label == WORK_TREE else label


def who(event: Event) -> str:
    agent = " (agent)" if event.data.get("writer") == "agent" else ""
    checkin = f", check-in {ids.shown(event.checkin)}" if event.checkin else ""
    reason = f": {event.reason}" if event.reason else ""
    return f"by {event.actor}{agent} at {event.at}{checkin}{reason}"


def headline(change: Change, diff: MemoryDiff) -> str:
    """The change in one line, texts aside: `#k3f9 directive`, `#k3f9 → #m2n8 gotcha`."""
    short = lambda n: "#" + ids.shown(n, diff.shorts.get(n))  # noqa: E731
    kind = diff.kinds.get(change.note, "note")
    event = change.events[0]
    if change.group == "superseded":
        return f"{short(change.note)} → {short(change.other or '')} {kind}"
    if change.group == "disputed":
        return f"dispute {ids.side_shown(str(event.data.get('dispute')))}: {short(change.note)} and {short(change.other or '')}"
    if change.group == "ruled" and event.data.get("dispute") is not None:
        return f"dispute {ids.side_shown(str(event.data['dispute']))}: {short(change.other or '')} stands"
    if change.group == "ruled":
        return f"{short(change.note)} {kind}: concurrent changes settled, side {ids.side_shown(str(change.other))} stands"
    if change.group == "created":
        data = event.data
        return f"{short(change.note)} {kind} · {data.get('priority')} · {data.get('provenance')}"
    if change.group == "promoted":
        return f"{short(change.note)} {kind}: provenance {event.data.get('from', '?')} → human"
    return f"{short(change.note)} {kind}"


def grouped(diff: MemoryDiff) -> list[tuple[str, list[Change]]]:
    return [(title, found) for group, title in GROUPS
            if (found := [c for c in diff.changes if c.group == group])]


def drift_lines(change: Change) -> list[str]:
    """Each drifted path of a stale flag a code change caused, and what happened to it."""
    return [f"anchor {path}: " + (f"changed {was[:SHORT_OID]} → {now[:SHORT_OID]}" if now is not None
                                  else f"deleted (was {was[:SHORT_OID]})") for path, was, now in change.drift]


def anchored_headline(anchored: Anchored, diff: MemoryDiff) -> str:
    note = anchored.note
    return f"{_short(diff, note.id)} {note.kind}" + (" (flagged stale)" if note.state == "stale" else "")


def touched_line(anchored: Anchored) -> str:
    """The note's anchors the change touches: a file's path, a folder's with the touched
    paths under it."""
    def shown(path: str, paths: tuple[str, ...]) -> str:
        if paths == (path,):
            return path
        more = f" and {len(paths) - NAMED_TOUCHED} more" if len(paths) > NAMED_TOUCHED else ""
        return f"{path}/ ({', '.join(paths[:NAMED_TOUCHED])}{more})"

    return "anchored to " + "; ".join(shown(path, paths) for path, paths in anchored.touched)


# -- plain text ------------------------------------------------------------------------------


def plain(diff: MemoryDiff) -> str:
    lines = headlines(diff)
    if diff.removed:
        lines += ["", f"removed ({len(diff.removed)})"]
        for removal in diff.removed:
            lines += [f"  {removal_headline(removal, diff)}", *_removed_text(removal),
                      f"    {removal.events[0].type} {who(removal.events[0])}"]
    for title, changes in grouped(diff):
        lines += ["", f"{title} ({len(changes)})"]
        for change in changes:
            lines.append(f"  {headline(change, diff)}")
            lines += _plain_texts(change) + [f"    {line}" for line in drift_lines(change)]
            lines.append(f"    {who(change.events[0])}")
    if diff.debts:
        lines += ["", f"{OWED} ({len(diff.debts)})"] + [f"  {debt_line(d, diff)}" for d in diff.debts]
    if diff.anchored:
        lines += ["", f"{ABOUT_THE_CODE} ({len(diff.anchored)})"]
        for anchored in diff.anchored:
            lines += [f"  {anchored_headline(anchored, diff)}", f"    {anchored.note.first_line()}",
                      f"    {touched_line(anchored)}"]
    return "\n".join(lines)


OWED = "what is owed"  # the section of new requests, answers and what became late


def debt_line(debt: Debt, diff: MemoryDiff) -> str:
    """`became late #k3f9 (task): owed by alice, due ..., late by 2d · Send the report`."""
    note = debt.note
    return f"{debt.what} {_short(diff, note.id)} ({note.kind}): {debt.words} · {note.first_line()}"


def _removed_text(removal: Removal) -> list[str]:
    if removal.text is None:
        return ["    (text not shown: forgotten, or not in either log)"]
    return [f"    {line}" for line in removal.text.split("\n")]


def _plain_texts(change: Change) -> list[str]:
    def block(mark: str, text: str | None) -> list[str]:
        shown = text if text is not None else "(text not shown: forgotten)"
        return [f"    {mark}{line}" for line in shown.split("\n")]

    if change.group == "forgotten":
        return ["    (the text is erased, and never shown)"]
    if change.group == "superseded":
        return block("- ", change.old_text) + block("+ ", change.text)
    if change.group in ("disputed", "ruled"):
        return []
    return block("", change.text)


def text_stat(diff: MemoryDiff) -> str:
    table = stat_table(diff)
    width = max((len(k) for k in table), default=0)
    lines = [f"{kind.ljust(width)}  " + ", ".join(f"{n} {t}" for t, n in row.items()) for kind, row in table.items()]
    removal = removal_line(diff)
    return "\n".join(([removal] if removal else []) + lines + [summary(diff)])


def stat_table(diff: MemoryDiff) -> dict[str, dict[str, int]]:
    """Added events counted per note kind, then event type (both in the model's order)."""
    by_kind: dict[str, list[Event]] = {}
    for event in diff.added:
        by_kind.setdefault(diff.kinds.get(event.note, "unknown"), []).append(event)
    order = [*KINDS, "unknown"]
    return {k: counts(by_kind[k]) for k in order if k in by_kind}


# -- markdown (GitHub) -------------------------------------------------------------------------


def escape(text: str) -> str:
    """Inline text that markdown shows as it is, lines joined: what makes markup anywhere
    escaped, and what makes a block (a list, a heading, a break) at the line's start."""
    flat = _ALWAYS.sub(r"\\\1", " ".join(text.split("\n")))
    if flat[:1] == "\\":
        return flat
    return _AT_START.sub(lambda m: f"{m[1]}\\{m[2]}" if m[1] else f"\\{m[3]}", flat, count=1)


def fenced(text: str) -> list[str]:
    """A code block holding `text` whatever backticks it holds."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}text", *text.split("\n"), fence]


def markdown_headlines(diff: MemoryDiff) -> list[str]:
    """The heading, the removal line (bold, first) and the summary."""
    removal = removal_line(diff)
    return [f"### Memory changes: {escape(span(diff))}", "", *([f"**{escape(removal)}**", ""] if removal else []),
            escape(summary(diff))]


def _markdown_removed(diff: MemoryDiff) -> list[str]:
    """The notes whose events the new side lost, each with its text: never cut."""
    if not diff.removed:
        return []
    lines = ["", f"#### Removed ({len(diff.removed)})", ""]
    for removal in diff.removed:
        first = removal.events[0]
        lines += [f"- **{escape(removal_headline(removal, diff))}**",
                  *(_markdown_text("", removal.text) if removal.text is not None else
                    ["  *(text not shown: forgotten, or not in either log)*"]),
                  f"  {escape(first.type + ' ' + who(first))}"]
    return lines


def markdown(diff: MemoryDiff, max_chars: int = 0) -> str:
    """The comment; with `max_chars`, changes are taken in order while the whole comment
    (the line that says what was left out included) fits, and the first that does not
    ends it: a hosting service refuses a longer comment (GitHub: 65,536 characters).  The
    headlines and the removals are never cut."""
    head = "\n".join(markdown_headlines(diff) + _markdown_removed(diff))
    tail = "".join(f"\n\n> {escape(notice)}" for notice in diff.notices)
    sections = _markdown_sections(diff)
    total = sum(len(items) for _, items in sections)
    # counted as printed: control characters written out (qem_edit.base.shown), and the final newline
    room = max_chars - 1 - len(visible(head + tail + _left_out(diff, total))) if max_chars else None
    body: list[str] = []
    shown = 0
    for title, items in sections:
        heading = ["", f"#### {title.capitalize()} ({len(items)})", ""]
        for i, item in enumerate(items):
            lines = (heading if i == 0 else []) + item
            cost = sum(len(visible(line)) + 1 for line in lines)
            if room is not None and cost > room:
                return head + "".join("\n" + line for line in body) + tail + _left_out(diff, total - shown)
            body += lines
            shown, room = shown + 1, None if room is None else room - cost
    return head + "".join("\n" + line for line in body) + tail


def _markdown_sections(diff: MemoryDiff) -> list[tuple[str, list[list[str]]]]:
    """Each group's heading and its items' lines, what memory learned first, then the notes
    about the code the change edits."""
    sections = [(title, [_markdown_change(c, diff) for c in changes]) for title, changes in grouped(diff)]
    if diff.debts:
        sections.append((OWED, [[f"- {escape(debt_line(d, diff))}"] for d in diff.debts]))
    if diff.anchored:
        sections.append((ABOUT_THE_CODE, [[f"- **{escape(anchored_headline(a, diff))}**",
                                           f"  {escape(a.note.first_line())}", f"  {escape(touched_line(a))}"]
                                          for a in diff.anchored]))
    return sections


def _left_out(diff: MemoryDiff, count: int) -> str:
    """The last line of a comment cut short: how many changes (and notes about the code,
    which come last) are not in it, and the command that shows them all."""
    rev = lambda label: "" if label == WORK_TREE else f" {label}"  # noqa: E731
    notes = min(count, len(diff.anchored))
    parts = [f"{n:,} more {one if n == 1 else many}" for n, one, many in (
        (count - notes, "change", "changes"), (notes, "note about the code", "notes about the code")) if n]
    return (f"\n\n**… {' and '.join(parts)} not shown here (the comment's size"
            f" limit); `qem diff{rev(diff.old.label)}{rev(diff.new.label)}` lists every one.**")


def _markdown_change(change: Change, diff: MemoryDiff) -> list[str]:
    lines = [f"- **{escape(headline(change, diff))}**", f"  {escape(who(change.events[0]))}"]
    if change.group == "forgotten":
        return lines[:1] + ["  *(the text is erased, and never shown)*", lines[1]]
    if change.group == "superseded":
        return lines[:1] + _markdown_text("was", change.old_text) + _markdown_text("now", change.text) + lines[1:]
    if change.group in ("disputed", "ruled"):
        return lines
    return lines[:1] + _markdown_text("", change.text) + [f"  {escape(line)}" for line in drift_lines(change)] + lines[1:]


def _markdown_text(label: str, text: str | None) -> list[str]:
    prefix = f"{label}: " if label else ""
    if text is None:
        return [f"  {prefix}*(text not shown: forgotten)*"]
    if len(text) <= SHORT_TEXT and "\n" not in text:
        return [f"  {escape(prefix + text)}"]
    first = text.split("\n", 1)[0][:SHORT_TEXT]
    summary_ = html.escape(f"{prefix}{first}…", quote=False)
    return ["", f"  <details><summary>{summary_}</summary>", "",
            *(f"  {line}" if line else "" for line in fenced(text)), "", "  </details>", ""]


def markdown_stat(diff: MemoryDiff) -> str:
    types = [t for t in EVENT_TYPES if t in counts(diff.added)]
    lines = markdown_headlines(diff)
    if types:
        lines += ["", "| kind | " + " | ".join(types) + " |", "| --- |" + " ---: |" * len(types)]
        for kind, row in stat_table(diff).items():
            lines.append(f"| {kind} | " + " | ".join(str(row.get(t, 0)) for t in types) + " |")
    return "\n".join(lines)


# -- JSON ------------------------------------------------------------------------------------------


def as_data(diff: MemoryDiff) -> dict[str, object]:
    def side(s) -> dict[str, object]:  # type: ignore[no-untyped-def]
        return {"rev": None if s.label == WORK_TREE else s.label, "commit": s.commit, "events": len(s.events)}

    return {
        "from": side(diff.old), "to": side(diff.new), "changed": diff.changed,
        "counts": counts(diff.added), "stat": stat_table(diff),
        "changes": [_change_data(c, diff) for c in diff.changes],
        "missing": [e.id for e in diff.missing], "notices": diff.notices,
        "removed": [_removal_data(r, diff) for r in diff.removed], "removed_unsure": diff.unsure,
        "anchored": [_anchored_data(a, diff) for a in diff.anchored],
        "owed": [{"what": d.what, "note": d.note.id, "short": ids.shown(d.note.id, diff.shorts.get(d.note.id)), "to": d.note.to,
                  "due": d.note.due, "answers": d.note.answers, "words": d.words, "text": d.note.text}
                 for d in diff.debts],
    }


def _anchored_data(anchored: Anchored, diff: MemoryDiff) -> dict[str, object]:
    note = anchored.note
    oids = dict(note.anchors)
    return {"note": note.id, "short": ids.shown(note.id, diff.shorts.get(note.id)), "kind": note.kind,
            "state": note.state, "text": note.text,
            "anchors": [{"path": path, "oid": oids.get(path), "touched": list(paths)} for path, paths in anchored.touched]}


def _removal_data(removal: Removal, diff: MemoryDiff) -> dict[str, object]:
    return {"note": removal.note, "short": ids.shown(removal.note, diff.shorts.get(removal.note)), "kind": removal.kind,
            "text": removal.text, "whole": removal.whole, "events": [e.to_json() for e in removal.events]}


def _change_data(change: Change, diff: MemoryDiff) -> dict[str, object]:
    shown = lambda n: ids.shown(n, diff.shorts.get(n)) if n else None  # noqa: E731
    return {
        "group": change.group, "note": change.note, "short": shown(change.note),
        "kind": diff.kinds.get(change.note), "other": change.other, "other_short": shown(change.other),
        "text": change.text, "old_text": change.old_text,
        "agent": any(e.data.get("writer") == "agent" for e in change.events),
        "drift": [{"path": p, "was": was, "now": now} for p, was, now in change.drift] if change.drift else None,
        "events": [e.to_json() for e in change.events],
    }
