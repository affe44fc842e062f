"""`qem anchors list` and `qem anchors suggest`: the reads of what notes are anchored to.

`qem anchors list` and `qem anchors suggest`: the reads of what the notes in force are
anchored to, and of the paths their texts name that they are not anchored to.

`listed` reads the index's anchors table (a row per note and path; a folder's paths found
by their range in the index on paths), for the notes in force.  `suggested` reads the
texts of the notes in force for paths in backticks (`src/lock.py`) that name a file or a
folder of the work tree as an anchor may (`anchors.checked_path` judges each: inside the
tree, through no link out of it, not in `.git/` or `.qem/`) and that the note is not
anchored to.  It anchors nothing: it says the command that would (a successor keeping the
text, anchored to the note's paths and these).  Each returns an answer that knows its text
and JSON forms, as every read does (qem_edit.reads.answers).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

from ..base import errors
from ..base.replay import Note
from ..base.vocabulary import LIVE_STATES
from ..storage.store import Store
from ..system import anchors

SHORT_OID = 12  # hex digits of an object id a line shows


@dataclass
class AnchorList:
    """`qem anchors list`: a line per note in force and path it is anchored to, by path,
    then note id."""

    rows: list[tuple[str, str, Note]]  # (path, object id, note)
    folder: str | None = None  # the path (or folder) asked about; None: every path
    exit_code = 0

    def text(self) -> str:
        return "\n".join(f"{path}\t{oid[:SHORT_OID]}\t#{note.shown}\t{note.kind}\t{note.state}\t{note.first_line()}"
                         for path, oid, note in self.rows)

    def data(self) -> object:
        return [{"path": path, "oid": oid, "note": note.id, "short": note.shown, "kind": note.kind,
                 "state": note.state, "first_line": note.first_line()} for path, oid, note in self.rows]

    def remark(self) -> str | None:
        if self.rows:
            return None
        where = f" to {self.folder} or to anything in it" if self.folder is not None else ""
        return f"no note in force is anchored{where}"


def listed(store: Store, path: str | None = None) -> AnchorList:
    """The anchors of the notes in force (only `path`'s, and those inside the folder it
    names, when given: a path as anchors are stored, from the top of the work tree)."""
    folder = anchors.named_path(path, f"anchors list {path}") if path is not None else None
    rows = store.anchors_in_force(folder=folder)
    notes = store.notes_by_id({note for note, _, _ in rows})
    return AnchorList([(p, oid, notes[n]) for n, p, oid in rows if n in notes], folder)


# -- the paths a note's text names --------------------------------------------------------------

_TICKED = re.compile(r"`([^`\n]+)`")  # a code span of one backtick, as markdown pairs them
_ABSOLUTE = re.compile(r"(?:[/\\~]|[A-Za-z]:)")


def named_paths(text: str) -> Iterator[str]:
    """What a text names in backticks that may be a path: no space in it, no URL, not
    absolute, no `..` (a path out of the tree is never followed, whatever is there)."""
    for found in _TICKED.finditer(text):
        token = found[1]
        if any(c.isspace() for c in token) or "://" in token or _ABSOLUTE.match(token):
            continue
        if ".." in token.replace("\\", "/").split("/"):
            continue
        yield token


def _in_tree(tree: anchors.WorkTree, token: str) -> str | None:
    """The anchor `token` would be (as stored), where it names a file or folder of the
    work tree an anchor may name; None where it does not."""
    try:
        return anchors.checked_path(tree, token, tree.top)
    except errors.BadInput:
        return None


@dataclass
class Suggestion:
    """A note in force whose text names paths of the work tree it is not anchored to."""

    note: Note
    paths: list[str]

    def command(self) -> str:
        """The command that anchors them: a successor with the note's own text (`qem show
        --json` read on standard input), anchored to its paths and these."""
        short = self.note.shown
        wanted = sorted({p for p, _ in self.note.anchors} | set(self.paths))
        text = f"qem show {short} --json | python3 -c 'import json, sys; print(json.load(sys.stdin)[\"text\"])'"
        anchored = " ".join(f"--anchor {shlex.quote(p)}" for p in wanted)
        return f"{text} | qem supersede {short} - -m 'anchored to the paths its text names' {anchored}"


@dataclass
class Suggestions:
    """`qem anchors suggest`: per note, the paths to anchor and the command that would."""

    found: list[Suggestion]
    exit_code = 0

    def text(self) -> str:
        return "\n".join(f"#{s.note.shown} names {', '.join(s.paths)}, not anchored:\n  {s.command()}"
                         for s in self.found)

    def data(self) -> object:
        return [{"note": s.note.id, "short": s.note.shown, "paths": s.paths,
                 "anchors": [p for p, _ in s.note.anchors], "command": s.command()} for s in self.found]

    def remark(self) -> str | None:
        if not self.found:
            return "no note in force names, in backticks, a path of the work tree it is not anchored to"
        paths = sum(len(s.paths) for s in self.found)
        return f"{len(self.found)} note(s) name {paths} path(s) they are not anchored to; nothing was anchored"


def suggested(store: Store, tree: anchors.WorkTree) -> Suggestions:
    """The notes in force (in the projection's order) whose text names, in backticks,
    files or folders of `tree` they are not anchored to, and those paths (sorted)."""
    judged: dict[str, str | None] = {}  # a token many notes name is looked up once

    def judge(token: str) -> str | None:
        if token not in judged:
            judged[token] = _in_tree(tree, token)
        return judged[token]

    found = []
    for note in store.notes(states=sorted(LIVE_STATES)):
        paths = {judge(token) for token in named_paths(note.text or "")} - {None} - {p for p, _ in note.anchors}
        if paths:
            found.append(Suggestion(note, sorted(paths)))  # type: ignore[arg-type]
    return Suggestions(found)
