"""The MEMORY.md grammar, shared by the renderer (which writes it) and the parser.

Every structural line starts at column 0 (the header comment, `## ` section headings,
`- ` list items); every line of a note's text after its first is indented by two spaces.
That one rule is what makes the file unambiguous: no text can produce a column-0 line.
The first line of a text follows fixed fields and markers; a text that could be read as a
marker is escaped with a leading backslash.  See docs/FORMAT.md.
"""

from __future__ import annotations

import re

from ..base.records import Record
from ..base.vocabulary import KINDS, TRIGGER_ATTRIBUTES
from .version import FORMAT_VERSION  # noqa: F401  (the rendering's version: see version.py)

SEP = " · "
INDENT = "  "
SECTION_TITLES: dict[str, str] = {
    "directive": "Directives",
    "task": "Tasks",
    "gotcha": "Gotchas",
    "finding": "Findings",
    "reference": "References",
    "decision": "Decisions",
    "operational": "Operational",
}
KIND_BY_TITLE: dict[str, str] = {title.lower(): kind for kind, title in SECTION_TITLES.items()}
assert tuple(SECTION_TITLES) == KINDS

# State markers as the file shows them, and the note state each one means.
STATE_WORDS: dict[str, str] = {
    "REVOKED": "revoked",
    "STALE": "stale",
    "EXPIRED": "expired",
    "SUPERSEDED": "superseded",
}
WORD_BY_STATE: dict[str, str] = {state: word for word, state in STATE_WORDS.items()}

# The grammar a reader of the file needs (the parser, the imports, the checks): the pattern
# of each name here, compiled when the name is first asked for (`__getattr__` below), so a
# command that only writes the file (every `qem add`) compiles none of them.  The two a
# writer needs, ATTRIBUTE_LIKE_RE and MARKER_START_RE, are compiled here.
_GRAMMAR: dict[str, str] = {}
REQUEST_MARKERS: tuple[re.Pattern[str], ...]  # TO, DUE, ANSWERS, RESTS: a note's request markers, in order

# The header names the memory the file belongs to (so a file from another repository's
# memory is refused), never the moment it was rendered: a line that changed on every
# export would conflict on every merge.
# A checkout of a query's notes names the query too (`query=` its filters, each
# percent-encoded, joined by commas): the check-in reads the edit against exactly the
# notes the checkout held, never the rest of the memory.
_GRAMMAR["HEADER_RE"] = (
    r"<!-- qem memory=(?P<memory>[0-9a-z-]+)(?: kinds=(?P<kinds>[a-z,]+))?(?P<active> active)?"
    r"(?: query=(?P<query>[^\s]+))?(?: · .*)? -->\Z"
)
_ID = r"[0-9a-z]+"
ERRORS_OPEN = "<!-- qem:errors"
HELP_OPEN = "<!-- qem:help"
COMMENT_CLOSE = "-->"
# The end of every checkout (not of the exported mirror): how an edit turns into events,
# as `git rebase -i` explains its todo list.  No line of it starts a column-0 item or
# heading, and the parser skips it whole.
CHECKOUT_HELP = """\
<!-- qem:help (qem removes this comment on check-in; anything typed in it is lost)

How this file is checked in (`qem edit` does it when you close the editor):

  delete an item         revokes the note (the check-in asks why, or takes -m)
  change an item         supersedes the note: a new note with your text replaces it,
                         the old text stays in the log; a new priority or section does too
  a new `- text` line    a new note of its section's kind: `- high · text` sets the priority
  history items          superseded, revoked, expired and forgotten notes stay as they are
  DISPUTED               shows a disagreement: `qem rule` settles it, or an edit of the note

Markers, written after the provenance, each followed by ` · `:

  stale      - [#k3f9] 2026-06-05 · high · agent · STALE (moved to v2) · Release the lock first.
  revoke     - [#k3f9] 2026-06-05 · high · agent · REVOKED (it was wrong) · Release the lock first.
  expire     - [#k3f9] 2026-06-05 · high · agent · EXPIRED · Release the lock first.
  reinstate  delete the marker (and its date) from a stale, revoked or expired note
  promote    write `human` for the provenance: a person stands behind the note
  end        - [#k3f9] 2026-06-05 · high · agent · expires 2026-07-05 · Release the lock first.
             changing or removing `expires DATE` supersedes the note (`qem expire --due` expires
             it once the date is reached); a new `- expires DATE · text` line gives a new note one
  request    - [#k3f9] 2026-06-05 · high · agent · to alice · due 2026-07-05 · Send the report.
             `to NAME` (who owes it) and `due DATE` (its deadline, that UTC day's end) make a
             request; `answers #ID` on a note answers one; changing them supersedes the note;
             `answered by #ID` on a request is shown from the log and ignored on check-in
  rests on   - [#k3f9] 2026-06-05 · high · agent · rests on #m2p1, #q7c4 · The total is 4 days.
             the notes it rests on: when one is superseded, revoked, expired, forgotten or
             flagged stale, this note is flagged stale with it; changing the list supersedes it
  triggers   lines under a note: `@on: start`, `@when-path: src/index/**`, `@when-run: pytest*`
             say when an agent is given it (docs/AGENTS.md); changing them supersedes the note

A reason in parentheses is recorded on that note's event; the check-in's reason on the rest.
-->
"""
CONFLICT_PREFIXES = ("<<<<<<<", "|||||||", "=======", ">>>>>>>")

_DATE = r"\d{4}-\d{2}-\d{2}"
_REASON = r"\((?P<reason>(?:[^\\()]|\\.)*)\)"
_GRAMMAR["STATE_MARKER_RE"] = rf"(?P<word>REVOKED|STALE|EXPIRED)(?: (?P<date>{_DATE}))?(?: {_REASON})?"
_GRAMMAR["SUPERSEDED_MARKER_RE"] = rf"SUPERSEDED by #(?P<by>{_ID})(?: (?P<date>{_DATE}))?(?: {_REASON})?"
_GRAMMAR["SUPERSEDES_MARKER_RE"] = rf"supersedes #(?P<of>{_ID})"
# The note's end (its created event's `expires`, shown as its UTC date): part of what the
# note says, so changing or removing it in an edit supersedes the note.
_GRAMMAR["EXPIRES_MARKER_RE"] = rf"expires (?P<expires>{_DATE})"
# A request and its answer (the created event's `to`, `due`, `answers`): what the note
# says, so changing or removing one in an edit supersedes the note.  `due` shows a date
# alone where the deadline is the end of that UTC day (what `--due DATE` records), else the
# UTC time.
_GRAMMAR["TO_MARKER_RE"] = r"to (?P<to>[^\s·#\\][^\s·]*)"
_GRAMMAR["DUE_MARKER_RE"] = rf"due (?P<due>{_DATE}(?:T\d{{2}}:\d{{2}}:\d{{2}}Z)?)"
_GRAMMAR["ANSWERS_MARKER_RE"] = rf"answers #(?P<answers>{_ID})"
# The notes a note rests on (its created event's `rests_on`), each by its id: what the note
# says, so changing the list in an edit supersedes the note; a new item names them too.
_GRAMMAR["RESTS_MARKER_RE"] = rf"rests on (?P<rests_on>#{_ID}(?:, #{_ID})*)"
_REQUEST_MARKERS = ("TO_MARKER_RE", "DUE_MARKER_RE", "ANSWERS_MARKER_RE", "RESTS_MARKER_RE")
DAY_END = "T23:59:59Z"


def due_shown(due: str) -> str:
    """A deadline as MEMORY.md shows it: its date where it is that day's end."""
    return due[:10] if due.endswith(DAY_END) else due


def due_read(shown: str) -> str:
    """A deadline as MEMORY.md shows it, back in its stored form."""
    return shown + DAY_END if len(shown) == 10 else shown
# Derived, read-only: an open dispute with another note, a fork, or concurrent changes of
# the note's own state.  Settled by a ruling or by editing the note, not by editing the
# marker, so the parser reads it and lets it go.
_GRAMMAR["DISPUTED_MARKER_RE"] = (
    rf"DISPUTED (?:with #{_ID}(?:, #{_ID})* \((?:dispute {_ID}|fork of #{_ID})\)"
    rf"|\(concurrent: [^()]*\))"
)
# Derived, read-only: the answers that speak for a request (qem_edit.base.owing.answering),
# shown on the request's item (`answered by #A`, or `#A, #B` where two in force may
# disagree).  An answer is another note's event, so the index renders the request's item
# again when one lands, goes or changes state; the parser reads it and lets it go.
_GRAMMAR["ANSWERED_BY_MARKER_RE"] = rf"answered by #{_ID}(?:, #{_ID})*"
# Words that begin a marker: a text starting with one is escaped so it cannot pass for one.
MARKER_START_RE = re.compile(r"(?:REVOKED|STALE|EXPIRED|SUPERSEDED|FORGOTTEN|DISPUTED|supersedes|expires)\b|rests on #"
                             r"|(?:to|due|answers) [^\s·]+ · |answered by #[^\s·]+(?:, #[^\s·]+)* · ")

_GRAMMAR["ITEM_RE"] = (
    rf"- \[#(?P<id>{_ID})\] (?P<date>{_DATE}){SEP}(?P<priority>[^ ·]+){SEP}"
    rf"(?P<provenance>[^ ·]+){SEP}(?P<rest>.*)\Z"
)
_GRAMMAR["TOMBSTONE_RE"] = rf"- \[#(?P<id>{_ID})\] FORGOTTEN(?: (?P<date>{_DATE}))?\Z"
_GRAMMAR["ITEM_ID_RE"] = rf"- \[#(?P<id>{_ID})\]"


class Selection(Record):
    """Which notes a rendering holds: some kinds (None: all), only live ones or all; for
    a query's checkout, the query's filters (`query`, as `qem query` takes them) and the
    notes it matched when checked out (`notes`, full ids; None where not yet known)."""

    kinds: tuple[str, ...] | None = None
    active_only: bool = False
    query: tuple[str, ...] | None = None
    notes: frozenset[str] | None = None

    def holds_kind(self, kind: str) -> bool:
        return self.kinds is None or kind in self.kinds

    def holds(self, note_id: str, kind: str, live: bool) -> bool:
        """Whether a note with this id, kind and liveness is in the rendering."""
        return (self.holds_kind(kind) and not (self.active_only and not live)
                and (self.notes is None or note_id in self.notes))

    def describe(self) -> str:
        kinds = "all kinds" if self.kinds is None else "kinds " + ", ".join(self.kinds)
        query = f", the notes matching {' '.join(self.query)} when checked out" if self.query else ""
        return kinds + (", live notes only" if self.active_only else "") + query


def encode_query(filters: tuple[str, ...]) -> str:
    """The header's `query=` value: each filter percent-encoded (no space, comma or `>`
    survives), joined by commas."""
    from urllib.parse import quote

    return ",".join(quote(f, safe="=~:#.@+") for f in filters)


def decode_query(value: str) -> tuple[str, ...]:
    from urllib.parse import unquote

    return tuple(unquote(part) for part in value.split(","))


def escape_reason(reason: str) -> str:
    flat = " ".join(reason.split())
    return flat.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def unescape_reason(escaped: str) -> str:
    return re.sub(r"\\(.)", r"\1", escaped)


# Attribute lines: what a note says about itself besides its text, one per line under its
# item, `  @NAME: VALUE`, after the text's lines.  A note's anchor is `  @anchor: PATH ·
# OID` (OID: the first ANCHOR_SHOWN hex digits of the object id it recorded, for a reader:
# a check-in records the content as it is then).  No text line can pass for one: a further
# text line that starts with `@NAME:`, after any backslashes, is written with one more.
_GRAMMAR["ATTRIBUTE_RE"] = r"@(?P<name>[a-z][a-z0-9-]*):(?: (?P<value>.*))?\Z"
ATTRIBUTE_LIKE_RE = re.compile(r"\\*@[a-z][a-z0-9-]*:")
ANCHOR = "anchor"
ANCHOR_SHOWN = 12  # a fixed length: git's own abbreviation grows with the repository's size
_GRAMMAR["SHOWN_OID_RE"] = r"[0-9a-f]{4,64}\Z"


TRIGGER_BY_ATTRIBUTE = {attribute: name for name, attribute in TRIGGER_ATTRIBUTES.items()}


def trigger_line(name: str, value: str) -> str:
    """A declared trigger's line: `@on: MOMENT`, `@when-path: PATTERN`, `@when-run: PATTERN`."""
    return f"{INDENT}@{TRIGGER_ATTRIBUTES[name]}: {value}"


def anchor_line(path: str, oid: str) -> str:
    """An anchor's line (a person's new anchor has no object id to show yet)."""
    return f"{INDENT}@{ANCHOR}: {path}" + (f"{SEP}{oid[:ANCHOR_SHOWN]}" if oid else "")


def escape_text_line(line: str) -> str:
    """A text line after the first, as the file shows it (before its indent)."""
    return "\\" + line if ATTRIBUTE_LIKE_RE.match(line) else line


def escape_first_line(line: str) -> str:
    if line.startswith("\\") or MARKER_START_RE.match(line):
        return "\\" + line
    return line


def __getattr__(name: str) -> object:
    """A name of the reading grammar, compiled on first use and kept."""
    if name == "REQUEST_MARKERS":
        value: object = tuple(globals().get(marker) or __getattr__(marker) for marker in _REQUEST_MARKERS)
    elif name in _GRAMMAR:
        value = re.compile(_GRAMMAR[name])
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
