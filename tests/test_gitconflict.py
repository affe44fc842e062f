"""Reading a MEMORY.md that git left with conflict markers (qem_edit.base.gitconflict, pure).

The real-git side (a merge of two renderings, a stash pop over a hand edit) is in
test_git.py; here every shape of marker, side and mistake is checked on its own.
"""

from __future__ import annotations

import pytest

from qem_edit.base import gitconflict as gc

HEAD = "<!-- qem memory=abc -->"
A = "- [#aaaa] 2026-01-01 · medium · agent · alpha"
B = "- [#bbbb] 2026-01-01 · medium · agent · beta"
B_STALE = "- [#bbbb] 2026-01-01 · medium · agent · STALE 2026-01-02 (old) · beta"
B_EDIT = "- [#bbbb] 2026-01-01 · medium · agent · beta, fixed by hand"
C = "- [#cccc] 2026-01-01 · medium · agent · gamma"
KNOWN = frozenset({HEAD, "", "## Findings", A, B, B_STALE, C})


def conflicted(ours: list[str], theirs: list[str], base: list[str] | None = None) -> str:
    middle = ["<<<<<<< HEAD", *ours]
    if base is not None:
        middle += ["||||||| merged common ancestors", *base]
    middle += ["=======", *theirs, ">>>>>>> feature"]
    return "\n".join([HEAD, "", "## Findings", "", A, *middle, ""])


def test_markers_are_found_only_at_column_zero():
    assert gc.has_markers(conflicted([B], [C]))
    assert not gc.has_markers("\n".join([HEAD, A, "  <<<<<<< indented text of a note", "  ======="]))
    assert not gc.has_markers("<<<<<<<< eight is no marker\n=======x")
    assert gc.has_markers("<<<<<<<\nx\n=======\ny\n>>>>>>>\n")  # bare markers, as some tools write


def test_markers_are_found_as_a_line_by_line_reading_finds_them():
    """The one-pass search finds a marker line exactly where reading the file a line at a
    time finds one: random files of marker-like pieces, line ends and text."""
    import random
    import re

    line = re.compile(rb"(?:(?:<<<<<<<|\|{7}|>>>>>>>)(?: [^\n]*)?|=======)\r?")
    pieces = [b"<<<<<<<", b"|||||||", b"=======", b">>>>>>>", b"<", b"=", b"|", b">", b"\n", b"\r", b" ", b"x",
              b"<<<<<<< HEAD", b"======= ", b"  =======", b"<|=><|=>"]
    rng = random.Random(5)
    for _ in range(3000):
        raw = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        want = any(line.fullmatch(part) for part in raw.split(b"\n"))
        assert gc.has_markers(raw) is want, raw


def test_a_merge_of_renderings_holds_nobody_s_edit():
    text = conflicted([B_STALE], [B, C])
    assert gc.personal_hunks(text, KNOWN) == []
    assert gc.resolved(text, KNOWN) == "\n".join([HEAD, "", "## Findings", "", A, B_STALE, ""])  # ours


@pytest.mark.parametrize("mine_first", [True, False])
def test_the_side_with_a_person_s_line_is_taken(mine_first):
    ours, theirs = ([B_EDIT], [B_STALE]) if mine_first else ([B_STALE], [B_EDIT])
    text = conflicted(ours, theirs)
    assert gc.personal_hunks(text, KNOWN) == [6]  # the line of its <<<<<<< marker
    assert B_EDIT in gc.resolved(text, KNOWN).split("\n")
    assert B_STALE not in gc.resolved(text, KNOWN).split("\n")


def test_the_common_ancestor_of_a_diff3_conflict_is_left_out():
    text = conflicted([B_STALE], [B_EDIT], base=[B])
    resolved = gc.resolved(text, KNOWN).split("\n")
    assert B_EDIT in resolved and B not in resolved and B_STALE not in resolved


def test_edits_on_both_sides_are_named():
    text = conflicted([B_EDIT], ["- [#cccc] 2026-01-01 · medium · agent · gamma, by hand too"])
    with pytest.raises(gc.BothSides) as raised:
        gc.resolved(text, KNOWN)
    assert raised.value.lines == [6]


def test_blank_lines_and_crlf_are_no_edit():
    text = conflicted([B_STALE, ""], [B + "\r", "   "])
    assert gc.personal_hunks(text, KNOWN) == []


@pytest.mark.parametrize("text, line", [
    ("\n".join([HEAD, "<<<<<<< HEAD", B, "======="]), 2),  # never ends
    ("\n".join([HEAD, B, "=======", C]), 3),  # a separator outside a conflict
    ("\n".join([HEAD, "<<<<<<< HEAD", B, ">>>>>>> x"]), 4),  # an end before the separator
])
def test_markers_that_do_not_pair_up_name_the_line(text, line):
    with pytest.raises(gc.Unbalanced) as raised:
        gc.resolved(text, KNOWN)
    assert f"line {line}" in str(raised.value)
