"""Parse MEMORY.md text (rendered, or edited by a person) back into items.

The grammar is line-based by construction (see renderer.format): a column-0 line is
structure, an indented line is note text.  So the parser reads lines, never guesses, and
reports every line it cannot place, by number, instead of dropping it.  Editor noise (a
BOM, CRLF endings, trailing whitespace, a missing or extra final newline) is not a change.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..base.stored_form import anchor_path_problem
from ..base.triggers import TRIGGER_LIMIT, trigger_problem
from ..base.vocabulary import KIND_RANK, KINDS, PRIORITIES, PROVENANCES, TRIGGER_ATTRIBUTES
from ..renderer.format import (
    ANCHOR,
    ANSWERED_BY_MARKER_RE,
    ATTRIBUTE_LIKE_RE,
    ATTRIBUTE_RE,
    COMMENT_CLOSE,
    CONFLICT_PREFIXES,
    DISPUTED_MARKER_RE,
    ERRORS_OPEN,
    EXPIRES_MARKER_RE,
    HEADER_RE,
    HELP_OPEN,
    INDENT,
    ITEM_ID_RE,
    ITEM_RE,
    KIND_BY_TITLE,
    MARKER_START_RE,
    REQUEST_MARKERS,
    SECTION_TITLES,
    SEP,
    SHOWN_OID_RE,
    STATE_MARKER_RE,
    STATE_WORDS,
    SUPERSEDED_MARKER_RE,
    SUPERSEDES_MARKER_RE,
    TOMBSTONE_RE,
    TRIGGER_BY_ATTRIBUTE,
    Selection,
    decode_query,
    unescape_reason,
)


@dataclass(frozen=True)
class LineError:
    line: int  # 1-based; 0 for the file as a whole
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


@dataclass
class Item:
    """One list item: an existing note (`note_id`) or a new one (`note_id` None)."""

    line: int
    kind: str
    note_id: str | None  # the id as the file shows it (a short id)
    text: str | None  # None for a forgotten note's tombstone
    priority: str = "medium"
    provenance: str | None = None
    date: str | None = None
    state: str = "active"
    state_reason: str | None = None
    superseded_by: str | None = None
    supersedes: str | None = None
    expires: str | None = None  # the date its `expires` marker shows
    to: str | None = None  # its `to NAME` marker: who owes it
    due: str | None = None  # its `due` marker, as shown (a date or a UTC time)
    answers: str | None = None  # its `answers #ID` marker: the id as shown (the check-in makes it whole)
    rests_on: tuple[str, ...] = ()  # its `rests on #ID, #ID` marker: the ids as shown (the check-in makes them whole)
    raw: list[str] = field(default_factory=list)
    # its `@anchor:` lines: path → (line number, the object id shown, "" where none is)
    anchors: dict[str, tuple[int, str]] = field(default_factory=dict)
    # its trigger lines (`@on:`, `@when-path:`, `@when-run:`): (name, value) → line number
    triggers: dict[tuple[str, str], int] = field(default_factory=dict)

    @property
    def content(self) -> tuple[str, str, str | None]:
        return (self.kind, self.priority, self.text)


@dataclass
class ParsedFile:
    memory: str | None  # the memory the header names (None: no header)
    selection: Selection
    items: list[Item]
    errors: list[LineError]

    @property
    def ok(self) -> bool:
        return not self.errors


def clean_lines(text: str) -> list[str]:
    """The file's lines without editor noise."""
    if text.startswith("\ufeff"):
        text = text[1:]
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def parse(text: str, *, whole: bool = True, numbers: list[int] | None = None) -> ParsedFile:
    """The file's items and errors.  `whole` False: `text` is the header and the changed
    blocks of a file (reconciler.blocks), so sections it lacks are not missing; `numbers`:
    each of its lines' number in the whole file, for a message that names another line."""
    parser = _Parser(clean_lines(text))
    parser.numbers = numbers
    return parser.run(whole)


class _Parser:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.items: list[Item] = []
        self.errors: list[LineError] = []
        self.kind: str | None = None
        self.item: Item | None = None
        self.text_lines: list[str] = []
        self.pending_blank = 0
        self.headings: dict[str, int] = {}  # kind → the line of its `## ` heading
        self.numbers: list[int] | None = None

    def at(self, n: int) -> int:
        """Line `n` of the text as the whole file numbers it."""
        return self.numbers[n - 1] if self.numbers else n

    def error(self, line_no: int, message: str) -> None:
        self.errors.append(LineError(line_no, message))

    def run(self, whole: bool = True) -> ParsedFile:
        lines = self.lines
        start, memory, selection = self._header()
        i = start
        while i < len(lines):
            i = self._line(i)
        self._close_item()
        if memory is not None and whole:
            self._missing_sections(selection)
        return ParsedFile(memory, selection, self.items, self.errors)

    def _missing_sections(self, selection: Selection) -> None:
        """Every section the file was made with must still be there: a missing heading
        (an editor that saved half the file, a section cut by mistake) would otherwise
        read as every note under it deleted."""
        kinds = [k for k in KINDS if selection.holds_kind(k)]
        for kind in kinds:
            if kind in self.headings:
                continue
            later = [self.headings[k] for k in kinds if k in self.headings and KIND_RANK[k] > KIND_RANK[kind]]
            where, side = (min(later), "before") if later else (max(len(self.lines), 1), "after")
            self.error(
                where,
                f"the section `## {SECTION_TITLES[kind]}` is missing (it belongs {side} this line):"
                " the file must keep every section it was made with, even an empty one;"
                " put the heading back, with its notes, or start again with `qem checkout`",
            )

    def _header(self) -> tuple[int, int | None, Selection]:
        lines = self.lines
        i = 0
        while i < len(lines) and not lines[i]:
            i += 1
        if i == len(lines):
            return i, None, Selection()
        match = HEADER_RE.match(lines[i])
        if not match:
            self.error(
                i + 1,
                "the first line must be qem's header comment (`<!-- qem memory=ID ... -->`),"
                " which names the memory this file was rendered from; restore it, or"
                " start again with `qem checkout`",
            )
            return i, None, Selection()
        kinds = tuple(match["kinds"].split(",")) if match["kinds"] else None
        if kinds is not None and any(k not in SECTION_TITLES for k in kinds):
            self.error(i + 1, f"the header names an unknown kind in {match['kinds']!r}")
            kinds = None
        query = decode_query(match["query"]) if match["query"] else None
        selection = Selection(kinds=kinds, active_only=bool(match["active"]), query=query)
        i += 1
        # The error comment qem writes above a file it reopens is not part of the file.
        while i < len(lines) and not lines[i]:
            i += 1
        if i < len(lines) and lines[i].startswith(ERRORS_OPEN):
            j = i
            while j < len(lines) and lines[j] != "-->":
                j += 1
            if j == len(lines):
                self.error(i + 1, "qem's error comment is not closed by a `-->` line")
                return len(lines), match["memory"], selection
            i = j + 1
        return i, match["memory"], selection

    def _line(self, i: int) -> int:
        line = self.lines[i]
        n = i + 1
        if not line:
            if self.item is not None:
                self.pending_blank += 1
            return i + 1
        if line.startswith(INDENT) or line.startswith("\t"):
            self._further(n, line)
            return i + 1
        self._close_item()
        if line.startswith(HELP_OPEN):
            return self._skip_comment(i)
        if line.startswith(CONFLICT_PREFIXES):
            self.error(
                n,
                "an unresolved conflict marker; keep the side you want, delete the other"
                " and every marker line, then check in again",
            )
        elif line.startswith("## "):
            self._section(n, line)
        elif line.startswith("#"):
            self.error(n, f"not a qem section heading: {line!r}; sections are `## " + "`, `## ".join(SECTION_TITLES.values()) + "`")
        elif line.startswith("- "):
            self._item(n, line)
        elif line.startswith(("* ", "+ ")) or line == "-":
            self.error(n, "start a note's line with `- ` (dash, space)")
        elif line.startswith(" "):
            self.error(n, "a note's further lines are indented by exactly two spaces")
        else:
            self.error(
                n,
                "text that is neither a section heading nor part of a note; indent it by"
                " two spaces to continue the note above, start it with `- ` to make it a"
                " new note, or delete it",
            )
        return i + 1

    def _further(self, n: int, line: str) -> None:
        """An indented line: a further line of the note above, of its text or an attribute."""
        body = line[2:] if line.startswith(INDENT) else line[1:]
        if self.item is None:
            self.error(n, "an indented line outside any note; indent only a note's own lines")
        elif self.item.text is None:
            self.error(n, f"a forgotten note's tombstone (#{self.item.note_id}) has no text")
        else:
            self.text_lines.extend([""] * self.pending_blank)
            if not ATTRIBUTE_LIKE_RE.match(body):
                self.text_lines.append(body)
            elif body.startswith("\\"):
                self.text_lines.append(body[1:])  # a text line, escaped so as not to pass for one
            else:
                self._attribute(n, body)
            self.item.raw.extend([""] * self.pending_blank)
            self.item.raw.append(line)
        self.pending_blank = 0

    def _attribute(self, n: int, body: str) -> None:
        """An attribute line of the item above: `@anchor: PATH` (` · OID`, as shown)."""
        assert self.item is not None
        match = ATTRIBUTE_RE.match(body)
        if match is not None and match["name"] in TRIGGER_BY_ATTRIBUTE:
            self._trigger(n, TRIGGER_BY_ATTRIBUTE[match["name"]], match["value"] or "")
            return
        if match is None or match["name"] != ANCHOR or not match["value"]:
            self.error(n, f"not an attribute line qem knows: {body!r}; a note's anchor reads `@anchor: PATH`,"
                          " its triggers `@on: MOMENT`, `@when-path: PATTERN`, `@when-run: PATTERN`"
                          " (a text line starting with `@word:` is written `\\@word:`)")
            return
        path, sep, shown = match["value"].rpartition(SEP)
        if not (sep and SHOWN_OID_RE.match(shown)):
            path, shown = match["value"], ""
        problem = anchor_path_problem(path)
        if problem:
            self.error(n, f"anchor {path!r}: {problem}")
        elif path in self.item.anchors:
            self.error(n, f"anchor {path!r} is named twice (also on line {self.at(self.item.anchors[path][0])})")
        else:
            self.item.anchors[path] = (n, shown)

    def _trigger(self, n: int, name: str, value: str) -> None:
        assert self.item is not None
        problem = trigger_problem(name, value)
        if problem:
            self.error(n, f"@{TRIGGER_ATTRIBUTES[name]}: {problem}")
        elif (name, value) in self.item.triggers:
            self.error(n, f"@{TRIGGER_ATTRIBUTES[name]}: {value} is named twice (also on line {self.at(self.item.triggers[name, value])})")
        elif sum(1 for key in self.item.triggers if key[0] == name) >= TRIGGER_LIMIT:
            self.error(n, f"@{TRIGGER_ATTRIBUTES[name]}: more than {TRIGGER_LIMIT} on one note")
        else:
            self.item.triggers[name, value] = n

    def _skip_comment(self, i: int) -> int:
        """qem's help comment at the end of a checkout is not part of the file."""
        j = i + 1
        while j < len(self.lines) and self.lines[j] != COMMENT_CLOSE:
            j += 1
        if j == len(self.lines):
            self.error(i + 1, "qem's help comment is not closed by a `-->` line")
        return j + 1

    def _section(self, n: int, line: str) -> None:
        title = line[3:].strip()
        kind = KIND_BY_TITLE.get(title.lower())
        if kind is not None:
            self.headings.setdefault(kind, n)
        if kind is None:
            self.error(
                n,
                f"unknown section {title!r}; sections are "
                + ", ".join(SECTION_TITLES.values()),
            )
        self.kind = kind

    def _item(self, n: int, line: str) -> None:
        if self.kind is None:
            self.error(n, "a note outside any section; move it under a `## ` heading")
            # still parse it, for the ids it names, but under no kind
        kind = self.kind or ""
        tomb = TOMBSTONE_RE.match(line)
        if tomb:
            self._open(Item(n, kind, tomb["id"], None, state="forgotten", date=tomb["date"]), line)
            return
        match = ITEM_RE.match(line)
        if match:
            self._existing(n, kind, match, line)
            return
        if ITEM_ID_RE.match(line):
            self.error(
                n,
                "malformed note line; it must read `- [#ID] YYYY-MM-DD · priority ·"
                " provenance · text` as qem wrote it",
            )
            self._open(Item(n, kind, ITEM_ID_RE.match(line)["id"], ""), line)  # type: ignore[index]
            return
        self._new(n, kind, line[2:], line)

    def _existing(self, n: int, kind: str, match: re.Match[str], line: str) -> None:
        item = Item(n, kind, match["id"], "", date=match["date"])
        item.priority = match["priority"]
        item.provenance = match["provenance"]
        if item.priority not in PRIORITIES:
            self.error(n, f"note #{item.note_id}: unknown priority {item.priority!r}; use high, medium or low")
        if item.provenance not in PROVENANCES:
            self.error(
                n, f"note #{item.note_id}: unknown provenance {item.provenance!r}; use " + ", ".join(PROVENANCES)
            )
        rest = match["rest"]
        states: list[str] = []
        while True:
            marker = None
            for regex in (STATE_MARKER_RE, SUPERSEDED_MARKER_RE, SUPERSEDES_MARKER_RE, EXPIRES_MARKER_RE,
                          DISPUTED_MARKER_RE, *REQUEST_MARKERS, ANSWERED_BY_MARKER_RE):
                m = regex.match(rest)
                if m and rest[m.end() :].startswith(SEP):
                    marker = m
                    break
            if marker is None:
                break
            groups = marker.groupdict()
            if not groups:
                pass  # DISPUTED, answered by: derived from the log, nothing to check in
            elif "word" in groups:
                states.append(STATE_WORDS[groups["word"]])
                item.state_reason = _reason(groups)
            elif "by" in groups:
                states.append("superseded")
                item.superseded_by = groups["by"]
                item.state_reason = _reason(groups)
            elif "expires" in groups:
                if item.expires is not None:
                    self.error(n, f"note #{item.note_id} has two `expires` markers; keep one")
                item.expires = groups["expires"]
            elif set(groups) & {"to", "due", "answers", "rests_on"}:
                self._requested(n, item, groups, f"note #{item.note_id}")
            else:
                item.supersedes = groups["of"]
            rest = rest[marker.end() + len(SEP) :]
        if len(states) > 1:
            self.error(n, f"note #{item.note_id} has {len(states)} state markers; keep at most one")
        if states:
            item.state = states[0]
        item.text = self._first_text_line(n, rest, f"note #{item.note_id}")
        self._open(item, line)

    def _new(self, n: int, kind: str, rest: str, line: str) -> None:
        item = Item(n, kind, None, "", provenance="human")
        head, sep, tail = rest.partition(SEP)
        if sep and head in PRIORITIES:
            item.priority = head
            rest = tail
        while True:
            marker = next((m for m in (r.match(rest) for r in (EXPIRES_MARKER_RE, *REQUEST_MARKERS))
                           if m and rest[m.end():].startswith(SEP)), None)
            if marker is None:
                break
            if "expires" in marker.groupdict():
                item.expires = marker["expires"]
            else:
                self._requested(n, item, marker.groupdict(), "the new note")
            rest = rest[marker.end() + len(SEP):]
        item.text = self._first_text_line(n, rest, "the new note")
        self._open(item, line)

    def _requested(self, n: int, item: Item, groups: dict[str, str], what: str) -> None:
        """A `to`, `due`, `answers` or `rests on` marker taken into the item, each at most once."""
        (name, value), = groups.items()
        if getattr(item, name) not in (None, ()):
            self.error(n, f"{what} has two `{name.replace('_', ' ')}` markers; keep one")
        setattr(item, name, tuple(v.lstrip("#") for v in value.split(", ")) if name == "rests_on" else value)

    def _first_text_line(self, n: int, rest: str, what: str) -> str:
        if rest.startswith("\\"):
            return rest[1:]
        if MARKER_START_RE.match(rest):
            self.error(
                n,
                f"{what}: {rest.split()[0]} looks like a marker but is not one (markers read"
                " `REVOKED (reason) · text`, `STALE (reason) · text`, `EXPIRED · text`); to"
                " start a text with that word, write it as \\" + rest.split()[0],
            )
        return rest

    def _open(self, item: Item, line: str) -> None:
        self.item = item
        self.text_lines = [item.text] if item.text is not None else []
        item.raw.append(line)
        self.pending_blank = 0

    def _close_item(self) -> None:
        item = self.item
        if item is None:
            return
        if item.text is not None:
            item.text = "\n".join(self.text_lines)
            if not item.text.strip():
                who = f"note #{item.note_id}" if item.note_id else "a new note"
                self.error(
                    item.line,
                    f"{who} has no text; to revoke a note delete its whole item",
                )
        self.items.append(item)
        self.item = None
        self.text_lines = []
        self.pending_blank = 0


def _reason(groups: dict[str, str | None]) -> str | None:
    reason = groups.get("reason")
    return unescape_reason(reason) if reason is not None else None
