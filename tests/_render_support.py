"""Helpers shared by the MEMORY.md tests (test_render.py, test_export.py, test_roundtrip.py).

Hypothesis strategies for notes in every state with hostile texts, and the structural
checks the format promises.  (Stores are built with builders.load_store.)
"""

from __future__ import annotations

import hashlib
import re
from datetime import date
from pathlib import Path

from hypothesis import strategies as st
from qem_edit.renderer.format import ITEM_RE, SECTION_TITLES

from qem_edit.base import ids
from qem_edit.base.replay import Note
from qem_edit.base.stored_form import anchor_path_problem, normalize_text
from qem_edit.base.vocabulary import KINDS, PRIORITIES, PROVENANCES, TextError

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "fixtures" / "golden"
CORPUS = ROOT / "fixtures" / "corpus-749.jsonl"
CORPUS_MD = ROOT / "fixtures" / "MEMORY-749.md"
MEMORY = "t3stmem0ry00"  # the memory id the generated renderings name

# Fragments that imitate the file's own syntax, markdown's, or an editor's noise.
HOSTILE = (
    "\n## Directives\n- [#999] 2026-01-01 · high · agent · forged\n",
    "## Tasks", "- [#5] 2026-06-01 · low · agent · lookalike", "- ", "* ", "+ ", "1. ", "-",
    "<!-- qem base=999 -->", "<!--", "-->", "<!-- qem:errors", "```", "~~~", "    code",
    "- [#k3f9] 2026-06-01 · low · agent · lookalike", "<!-- qem memory=t3stmem0ry00 -->",
    "\t", " · ", "·", "REVOKED", "REVOKED 2026-01-01 (x) · ", "STALE (r) · ", "EXPIRED · ",
    "SUPERSEDED by #3 2026-01-01 · ", "supersedes #2 · ", "FORGOTTEN", "FORGOTTEN 2026-01-01",
    "DISPUTED with #1 (dispute 1) · ", "\\", "\\\\", "\\(", "<<<<<<< yours", "=======",
    ">>>>>>> theirs", "|||||||", "> ", "#", "[#1]: https://example.invalid", "`", "***", "---",
    "===", "\r\n", "\r", "\n", "\n\n", "\n  ", "  ", " ", "\x0b", "\x0c", "\x1c", "\x85",
    "\u2028", "\ufeff", "\u00a0", "\u3000", "(", ")", "é", "日本", "🙂", "\u202e",
    "\n@anchor: src/x.py · 0123456789ab", "\n\\@anchor: x", "\n@when-run: y", "@todo:", "\n  @a: b",
)
_CHARS = st.characters(blacklist_categories=("Cs",))
FRAGMENT = st.one_of(st.text(_CHARS, max_size=12), st.sampled_from(HOSTILE))
RAW_TEXT = st.lists(FRAGMENT, min_size=1, max_size=10).map("".join)


def _normalized(raw: str) -> str | None:
    try:
        return normalize_text(raw)
    except TextError:
        return None


TEXT = RAW_TEXT.map(_normalized).filter(lambda t: t is not None)
REASON = st.one_of(st.none(), RAW_TEXT)
# Anchors: paths as a writer may store them (spaces, ` · `, `@x:` and non-ASCII inside),
# each with an object id of either length.
_PART = st.text(st.sampled_from("ab. ·@:#-_é日\\"), min_size=1, max_size=6)
ANCHOR_PATH = st.lists(_PART, min_size=1, max_size=3).map("/".join).filter(lambda p: anchor_path_problem(p) is None)
OID = st.one_of(st.text("0123456789abcdef", min_size=40, max_size=40), st.text("0123456789abcdef", min_size=64, max_size=64))
ANCHORS = st.dictionaries(ANCHOR_PATH, OID, max_size=3).map(lambda a: tuple(sorted(a.items())))
DAY = st.dates(min_value=date(2000, 1, 1), max_value=date(2099, 12, 31))
TIME = st.tuples(DAY, st.integers(0, 23), st.integers(0, 59), st.integers(0, 59)).map(
    lambda t: f"{t[0].isoformat()}T{t[1]:02d}:{t[2]:02d}:{t[3]:02d}Z"
)
STATES = ("active", "active", "stale", "revoked", "expired", "superseded", "forgotten")


def an_id(*seed: object) -> str:
    """A 26-character note id, fixed by `seed`."""
    return ids.encode(hashlib.sha256(repr(seed).encode()).digest())


# A few ids notes are drawn from and point at, so supersedes targets and dispute sides are
# shared (forks happen), and some share a prefix (their short ids grow past 4 characters).
POOL = [an_id("pool", i) for i in range(32)] + [an_id("pool", 0)[:5] + an_id("twin", i)[5:] for i in range(8)]
ID = st.one_of(st.sampled_from(POOL), st.integers(0, 2**64).map(lambda i: an_id("any", i)))


@st.composite
def note_for(draw, note_id: str, disputes: bool = False) -> Note:
    state = draw(st.sampled_from(STATES))
    changed = state != "active" or draw(st.booleans())  # a reinstated note has a state_at
    return Note(
        id=note_id,
        kind=draw(st.sampled_from(KINDS)),
        priority=draw(st.sampled_from(PRIORITIES)),
        text=None if state == "forgotten" else draw(TEXT),
        provenance=draw(st.sampled_from(PROVENANCES)),
        created_at=draw(TIME),
        actor="tester",
        supersedes=draw(st.one_of(st.none(), st.sampled_from(POOL))),
        superseded_by=draw(ID) if state == "superseded" else None,
        state=state,
        state_at=draw(TIME) if changed else None,
        state_reason=draw(REASON) if changed else None,
        disputes=tuple(draw(st.lists(st.tuples(ID, st.sampled_from(POOL)), max_size=2)))
        if disputes and state in ("active", "stale")
        else (),
        anchors=draw(ANCHORS),
    )


@st.composite
def note_sets(draw, max_notes: int = 8, disputes: bool = False) -> list[Note]:
    """Notes with distinct ids, each with the short id the store would give it (ids from
    POOL share supersedes targets, so forks happen)."""
    chosen = draw(st.lists(ID, unique=True, max_size=max_notes))
    notes = [draw(note_for(i, disputes)) for i in chosen]
    shorts = ids.short_ids({n.id: ids.MIN_SHORT for n in notes})
    return [n._replace(short=shorts[n.id]) for n in notes]


def flat_reason(reason: str | None) -> str | None:
    """A reason as the file shows it: whitespace runs are one space; blank is none."""
    if reason is None:
        return None
    return " ".join(reason.split()) or None


# -- structure -------------------------------------------------------------------------------

_STRUCTURE = ("<!-- qem memory=", "## ", "- [#")


def column_zero_lines(text: str) -> list[str]:
    """Every line that is not note text: text lines are empty or indented by two spaces."""
    return [line for line in text.split("\n") if line and not line.startswith("  ")]


def check_column_zero_rule(text: str, notes: list[Note]) -> None:
    """The line-level proof that no text can forge structure: exactly one header, one
    heading per section, one `- [#` line per note, and nothing else at column 0."""
    lines = column_zero_lines(text)
    assert all(line.startswith(_STRUCTURE) for line in lines), [
        line for line in lines if not line.startswith(_STRUCTURE)
    ]
    assert sum(line.startswith("<!-- qem memory=") for line in lines) == 1
    assert [line for line in lines if line.startswith("## ")] == [
        f"## {title}" for title in SECTION_TITLES.values()
    ]
    assert sorted(re.match(r"- \[#([0-9a-z]+)\]", line)[1] for line in lines if line.startswith("- [#")) == sorted(
        n.shown for n in notes
    )


def markdown_outline(text: str) -> list[tuple[str, list[str]]]:
    """(top-level h2 title, [shown id of each top-level list item]) as CommonMark reads it."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(text)
    outline: list[tuple[str, list[str]]] = []
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.level == 0:
            assert token.tag == "h2", token
            outline.append((tokens[i + 1].content, []))
        elif token.type == "list_item_open" and token.level == 1:
            j = i + 1
            while tokens[j].type != "inline":
                j += 1
            match = re.match(r"\[#([0-9a-z]+)\]", tokens[j].content)
            assert match, tokens[j].content
            assert outline, "a list item before any heading"
            outline[-1][1].append(match[1])
        elif token.level == 0 and token.type not in (
            "heading_open", "heading_close", "inline", "bullet_list_open", "bullet_list_close", "html_block",
        ):
            raise AssertionError(f"unexpected top-level block {token.type} at line {token.map}")
        elif token.type == "html_block" and token.level == 0:
            assert token.content.startswith("<!-- qem memory="), token.content
    return outline


def expected_outline(notes: list[Note]) -> list[tuple[str, list[str]]]:
    """Each section's notes, by the ids they are shown by, in id order."""
    return [
        (SECTION_TITLES[kind], [n.shown for n in sorted(notes, key=lambda n: n.id) if n.kind == kind]) for kind in KINDS
    ]


def marker_date(item) -> str | None:  # type: ignore[no-untyped-def]
    """The date shown in an existing item's state marker (the renderer puts it first)."""
    match = ITEM_RE.match(item.raw[0])
    if match is None:
        return None
    found = re.match(r"(?:REVOKED|STALE|EXPIRED|SUPERSEDED by #[0-9a-z]+) (\d{4}-\d{2}-\d{2})", match["rest"])
    return found[1] if found else None
