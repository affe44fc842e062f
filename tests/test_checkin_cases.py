"""Check-in cases: an edited file in, what the person is shown out, one case per file in
fixtures/checkin/ (the format is in fixtures/checkin/README.md).

Each case builds its store in-process from its log, checks that its base is that store's
rendering (so a case cannot drift from the renderer), makes the writes of `since` through
the store's transactions (others writing while the file was being edited), plans the
edited file with `proposal.propose`, and compares the outcome exactly: the plan as
`terminal.describe_plan` prints it, the lines `checkin.problems` gives, or the error that
refuses the file.  The plan of the changed blocks alone and the plan of the whole file
must say the same.

A difference fails.  After an intended change, `QEM_UPDATE_CASES=1` rewrites the expected
section of every case that differs; review the diff (`git diff fixtures/checkin`).

What the command line adds around a check-in (exit status, the edit kept with its resume
hint, nothing written, the line named on stderr) is checked by test_edit.py, in a child
process, for a few representative cases.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from builders import CASES, load_store, render_text, store_path
from qem_edit.reconciler.parse import parse

from qem_edit.base import errors, ids
from qem_edit.base.decisions import NewNote
from qem_edit.base.vocabulary import KINDS
from qem_edit.shells.terminal import describe_plan
from qem_edit.storage.store import Store
from qem_edit.system.files import file_chunks
from qem_edit.writes import checkin
from qem_edit.writes import checkin_plan as proposal_module
from qem_edit.writes.acts import note_text, reason_for

UPDATE = os.environ.get("QEM_UPDATE_CASES") == "1"
HEADING = re.compile(r"%% (?P<name>[a-z]+)(?P<escaped>, escaped)?(?:: (?P<value>.*))?")
OUTCOMES = ("plan", "problems", "error")
ORDER = ("about", "log", "base", "since", "edited")  # then one of OUTCOMES, last


@dataclass
class Section:
    name: str
    value: str | None
    text: str
    start: int  # the index of its heading among the file's lines


def read_case(path: Path) -> dict[str, Section]:
    """The case's sections by name, each section's text decoded."""
    lines = path.read_text("utf-8").split("\n")
    if lines[-1] == "":
        lines.pop()
    starts = [i for i, line in enumerate(lines) if line.startswith("%% ")]
    assert starts and starts[0] == 0, f"{path.name}: the first line must be a `%% ` heading"
    sections: dict[str, Section] = {}
    for start, end in zip(starts, starts[1:] + [len(lines)]):
        match = HEADING.fullmatch(lines[start])
        assert match, f"{path.name}:{start + 1}: not a section heading: {lines[start]!r}"
        text = "".join(line + "\n" for line in lines[start + 1 : end])
        if match["escaped"]:
            text = unescape(text)
        assert match["name"] not in sections, f"{path.name}: two `{match['name']}` sections"
        sections[match["name"]] = Section(match["name"], match["value"], text, start)
    names = list(sections)
    outcome = [n for n in names if n in OUTCOMES]
    assert len(outcome) == 1 and names[-1] == outcome[0], f"{path.name}: the last section must be one of {OUTCOMES}"
    assert [n for n in ORDER if n in names] == names[:-1] and {"about", "log", "base", "edited"} <= set(names), (
        f"{path.name}: sections {names}; expected {ORDER} (since optional), then the outcome"
    )
    return sections


def unescape(text: str) -> str:
    r"""Python's backslash escapes (`\r`, `\t`, `\ufeff`, `\\`; a backslash at the end of a
    line joins it to the next), any other character as it is."""
    return text.encode("latin-1", "backslashreplace").decode("unicode_escape")


def escape(text: str) -> str:
    """`unescape`'s inverse for the lines of an expected outcome, keeping them readable."""
    out = []
    for line in text.split("\n"):
        line = "".join(
            {"\\": "\\\\", "\r": "\\r", "\t": "\\t"}.get(c, c if c.isprintable() else f"\\u{ord(c):04x}") for c in line
        )
        stripped = line.rstrip(" ")
        out.append(stripped + "\\x20" * (len(line) - len(stripped)))
    return "\n".join(out)


def shown(proposal: proposal_module.Proposal) -> tuple[str, str]:
    """What the person is shown: the plan, or the problems."""
    if proposal.plan.ok:
        return "plan", describe_plan(proposal) + "\n"
    return "problems", "".join(line + "\n" for line in checkin.problems(proposal))


def gist(proposal: proposal_module.Proposal) -> tuple:
    """What a plan does, in any order, or how many problems stop it (the whole-file parse
    may word a problem, or order the ops, otherwise than the changed blocks' parse)."""
    if proposal.plan.ok:
        return "plan", sorted(map(repr, proposal.plan.ops)), proposal.plan.merged, proposal.plan.agreed
    return "problems", len(checkin.problems(proposal))


def rewrite(path: Path, at: int, kind: str, text: str) -> None:
    lines = path.read_text("utf-8").split("\n")[:at]
    body = text[:-1] if text.endswith("\n") else text
    if escape(body) != body:
        lines += [f"%% {kind}, escaped", escape(body)]
    else:
        lines += [f"%% {kind}", body]
    path.write_text("\n".join(lines) + "\n", "utf-8")


# -- `since`: what others wrote meanwhile ------------------------------------------------------

SINCE_ACTOR = "other"
SINCE_AT = "2026-06-20T10:00:00Z"
MOVES = {"revoke": "revoked", "flag-stale": "stale_flagged", "expire": "expired", "reinstate": "reinstated",
         "promote": "promoted"}
WRITE = re.compile(r"(?P<verb>[a-z-]+) (?P<what>#\d+|[a-z]+)(?: (?P<rest>.*))?")
REASON = re.compile(r"\((?P<reason>.*)\)")


def write_since(store: Store, text: str, where: str) -> None:
    """Make each write of a `since` section (fixtures/checkin/README.md), in order, one
    transaction each, as SINCE_ACTOR at SINCE_AT; `#N` is a note's old number."""
    for number, line in enumerate(text.splitlines(), start=1):
        match = WRITE.fullmatch(line)
        assert match, f"{where}:{number}: not a write: {line!r}"
        verb, what, rest = match["verb"], match["what"], match["rest"]
        if verb == "add":
            assert what in KINDS and rest, f"{where}:{number}: `add KIND TEXT`"
            new = NewNote(what, "medium", "agent", note_text(rest))
            store.write(lambda tx: tx.create(new, SINCE_ACTOR), at=SINCE_AT)
            continue
        assert what.startswith("#"), f"{where}:{number}: {verb} names a note by its old number, #N"
        note_id = store.resolve(what)
        if verb == "supersede":
            assert rest, f"{where}:{number}: `supersede #N TEXT`"
            old = store.note(note_id)
            new = NewNote(old.kind, old.priority, old.provenance, note_text(rest), note_id)
            store.write(lambda tx: tx.create(new, SINCE_ACTOR), at=SINCE_AT)
            continue
        assert verb in (*MOVES, "forget"), f"{where}:{number}: unknown write {verb!r}"
        reason = REASON.fullmatch(rest) if rest is not None else None
        assert rest is None or reason, f"{where}:{number}: after the note, only `(REASON)`"
        why = reason_for(MOVES.get(verb, "forgotten"), reason["reason"] if reason else None)
        if verb == "forget":
            store.write(lambda tx: tx.forget(note_id, SINCE_ACTOR, why or ""), at=SINCE_AT)
        else:
            store.write(lambda tx: tx.emit(note_id, MOVES[verb], SINCE_ACTOR, why), at=SINCE_AT)


def pinned_nonces(name: str):  # type: ignore[no-untyped-def]
    """Nonces drawn from the case's name, so the notes and events `since` makes have the
    same ids on every run (an expected outcome may show them)."""
    count = iter(range(1 << 30))
    return lambda: ids.encode(hashlib.sha256(f"{name}:{next(count)}".encode()).digest()[:17])


CASE_FILES = sorted(CASES.glob("*.case"))


def planned(store: Store, path: Path, edited: str, base: bytes | Path) -> tuple[str, str]:
    """The outcome of planning `edited` against `base` (its bytes, or its file)."""
    try:
        proposal = proposal_module.propose(store, edited.encode("utf-8"), base)
    except errors.QemError as exc:
        return "error", f"{exc}\n"
    whole = proposal_module.whole(store, proposal)
    assert gist(whole) == gist(proposal), f"{path.name}: the changed blocks and the whole file plan differently"
    return shown(proposal)


def test_the_cases_are_there() -> None:
    assert len(CASE_FILES) >= 40, CASE_FILES


@pytest.mark.parametrize("path", CASE_FILES, ids=[p.stem for p in CASE_FILES])
def test_checkin_case(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    case = read_case(path)
    base, edited = case["base"].text, case["edited"].text
    assert case["log"].value and not case["log"].text, f"{path.name}: `%% log: FILE`, a log in {CASES}"
    with load_store(store_path(tmp_path), path.parent / case["log"].value) as store:
        rendered = render_text(store, parse(base).selection)[1]
        assert base == rendered, f"{path.name}: the base is not the log's rendering:\n" + "".join(
            difflib.unified_diff(base.splitlines(True), rendered.splitlines(True), "case base", "rendering")
        )
        if "since" in case:
            monkeypatch.setattr(ids, "nonce", pinned_nonces(path.stem))
            write_since(store, case["since"].text, f"{path.name} since")
        kind, got = planned(store, path, edited, base.encode("utf-8"))
        base_file = tmp_path / "base.md"
        base_file.write_text(base, encoding="utf-8")
        with monkeypatch.context() as patched:  # the base read from its file, in chunks of a few blocks
            patched.setattr(proposal_module, "file_chunks", lambda where: file_chunks(where, 97))
            assert planned(store, path, edited, base_file) == (kind, got), f"{path.name}: the base read in chunks"
    [expected] = [case[n] for n in OUTCOMES if n in case]
    if (kind, got) != (expected.name, expected.text) and UPDATE:
        rewrite(path, expected.start, kind, got)
        return
    edit = "".join(difflib.unified_diff(base.splitlines(True), edited.splitlines(True), "base", "edited"))
    assert (kind, got) == (expected.name, expected.text), (
        f"{path.name} ({case['about'].value}); the edit:\n{edit}\n"
        f"expected {expected.name}:\n{expected.text}\ngot {kind}:\n{got}"
        "(an intended change: QEM_UPDATE_CASES=1, then review the diff)"
    )
