"""The fixture generator and the committed corpus it produced (fixtures/corpus-749.jsonl)."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from qem_edit.base.replay import Note, replay
from qem_edit.base.stored_form import normalize_text
from qem_edit.base.vocabulary import KINDS

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "fixtures" / "generate.py"
CORPUS = ROOT / "fixtures" / "corpus-749.jsonl"
KEYS = ["seq", "note_id", "type", "at", "actor", "reason", "checkin", "data"]
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z\Z")


def _load_generator() -> ModuleType:
    # fixtures/ is a folder of data and one script, not a package
    spec = importlib.util.spec_from_file_location("fixtures_generate", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _load_generator()


@pytest.fixture(scope="module")
def events() -> list[dict]:
    return gen.generate(749)


def numbered(events: list[dict]) -> dict[int, Note]:
    """The notes of a generated (numbered) log, loaded as qem loads it, by their numbers
    (each note keeps its number as its alias)."""
    return {n.alias: n for n in replay(gen.to_events(events)).values()}


@pytest.fixture(scope="module")
def notes(events: list[dict]) -> dict[int, Note]:
    return numbered(events)


def _created(events: list[dict]) -> list[dict]:
    return [e for e in events if e["type"] == "created"]


def _texts(events: list[dict]) -> list[str]:
    return [e["data"]["text"] for e in _created(events) if e["data"]["text"] is not None]


def test_generation_is_deterministic(events: list[dict]) -> None:
    assert gen.generate(749) == events
    assert gen.generate(749, seed=750) != events


def test_committed_corpus_is_fresh_generation_byte_for_byte(events: list[dict]) -> None:
    assert CORPUS.read_bytes() == gen.dump_lines(events).encode("utf-8")


def test_script_runs_standalone_from_anywhere(tmp_path: Path) -> None:
    out = subprocess.run(
        # -I -S: no site-packages, so the script has only the stdlib and its own path setup
        [sys.executable, "-I", "-S", str(SCRIPT), "--notes", "749"],
        cwd=tmp_path,
        capture_output=True,
        check=True,
    ).stdout
    assert out == CORPUS.read_bytes()


def test_lines_follow_the_dump_format() -> None:
    raw = CORPUS.read_bytes()
    assert raw.endswith(b"\n") and b"\r" not in raw
    lines = raw.decode("utf-8").split("\n")[:-1]
    parsed = [json.loads(line) for line in lines]
    for line, event in zip(lines, parsed):
        assert list(event) == KEYS
        assert line == json.dumps(event, ensure_ascii=False)
    assert [e["seq"] for e in parsed] == list(range(1, len(parsed) + 1))
    assert all(TIMESTAMP.match(e["at"]) for e in parsed)
    assert [e["at"] for e in parsed] == sorted(e["at"] for e in parsed)
    assert parsed[0]["at"].startswith("2026-05-04T08:")
    assert parsed[-1]["at"][:7] in ("2026-10", "2026-11")
    assert all(e["actor"] for e in parsed)
    assert all(e["checkin"] is None for e in parsed)
    # non-ASCII stays raw in the file, as `qem dump` writes it
    assert "·" in raw.decode("utf-8") and "\\u00b7" not in raw.decode("utf-8")


def test_counts_match_the_seed_corpus(events: list[dict], notes: dict[int, Note]) -> None:
    assert sorted(notes) == list(range(1, 750))
    assert [e["note_id"] for e in _created(events)] == list(range(1, 750))
    directives = [n for n in notes.values() if n.kind == "directive"]
    assert len(directives) == 43
    assert all(n.state == "active" for n in directives)
    assert all(n.provenance == "agent" for n in notes.values())
    kinds = Counter(n.kind for n in notes.values())
    assert set(kinds) == set(KINDS)
    assert kinds.most_common(2)[0][0] == "finding" and kinds.most_common(2)[1][0] == "gotcha"
    priorities = Counter(n.priority for n in notes.values())
    assert priorities.most_common(1)[0][0] == "medium" and priorities["high"] and priorities["low"]
    types = Counter(e["type"] for e in events)
    assert 45 <= types["superseded"] <= 75
    assert 25 <= types["revoked"] <= 50
    assert 20 <= types["stale_flagged"] <= 40
    assert 1 <= types["reinstated"] <= types["stale_flagged"] + types["revoked"]
    assert 1 <= types["expired"] <= 15
    assert types["forgotten"] == 2
    assert "promoted" not in types


def test_same_second_creations_exist(events: list[dict]) -> None:
    created = _created(events)
    ties = sum(1 for a, b in zip(created, created[1:]) if a["at"] == b["at"])
    assert 0.03 * len(created) <= ties <= 0.08 * len(created)


def test_supersessions_are_paired_and_some_chain(
    events: list[dict], notes: dict[int, Note]
) -> None:
    for i, event in enumerate(events):
        old = event["data"].get("supersedes") if event["type"] == "created" else None
        if old is not None:
            follow = events[i + 1]
            assert follow["type"] == "superseded" and follow["note_id"] == old
            assert follow["data"] == {"by": event["note_id"]} and follow["at"] == event["at"]

    by_id = {n.id: n for n in notes.values()}

    def chain(number: int) -> int:
        length, note = 0, notes[number]
        while note.supersedes is not None:
            note = by_id[note.supersedes]
            length += 1
        return length

    lengths = [chain(i) for i in notes]
    assert max(lengths) >= 2
    assert max(lengths) <= 3


def test_forgotten_notes_keep_no_text(events: list[dict], notes: dict[int, Note]) -> None:
    forgotten = [e for e in events if e["type"] == "forgotten"]
    assert len(forgotten) == 2
    for tomb in forgotten:
        assert tomb["reason"] and tomb["data"] == {}
        created = next(e for e in _created(events) if e["note_id"] == tomb["note_id"])
        assert created["data"]["text"] is None
        assert notes[tomb["note_id"]].state == "forgotten"
    # and only forgotten notes lack a text
    assert sum(1 for e in _created(events) if e["data"]["text"] is None) == 2


def test_lifecycle_events_carry_reasons_and_empty_data(events: list[dict]) -> None:
    for event in events:
        if event["type"] in ("revoked", "stale_flagged", "forgotten"):
            assert event["reason"]
        if event["type"] in ("revoked", "stale_flagged", "reinstated", "expired", "forgotten"):
            assert event["data"] == {}
        if event["type"] == "created":
            assert event["reason"] is None
            assert list(event["data"]) == ["kind", "priority", "provenance", "text", "supersedes"]


def test_every_text_is_normalized(events: list[dict]) -> None:
    for text in _texts(events):
        assert normalize_text(text) == text


def test_text_mix_is_realistic(events: list[dict]) -> None:
    texts = _texts(events)
    multi = sum("\n" in t for t in texts) / len(texts)
    non_ascii = sum(any(ord(c) > 127 for c in t) for t in texts) / len(texts)
    assert 0.15 <= multi <= 0.30
    assert 0.07 <= non_ascii <= 0.20
    assert len(set(texts)) >= 0.95 * len(texts)
    assert any("\n\n" in t for t in texts)  # interior blank line
    assert any("\t" in t for t in texts)
    assert any(line.startswith("#") for t in texts for line in t.split("\n"))
    assert any(line.startswith("```") for t in texts for line in t.split("\n"))


def test_replay_succeeds(events: list[dict], notes: dict[int, Note]) -> None:
    states = Counter(n.state for n in notes.values())
    assert set(states) == {"active", "stale", "superseded", "revoked", "expired", "forgotten"}
    assert states["superseded"] == sum(1 for e in events if e["type"] == "superseded")


def test_adversarial_texts_are_present(events: list[dict]) -> None:
    texts = _texts(events)
    lines_of = [t.split("\n") for t in texts]

    def has(pred) -> bool:
        return any(pred(t, lines) for t, lines in zip(texts, lines_of))

    assert has(
        lambda t, ls: len(ls) >= 3
        and ls[1] == "## Directives"
        and ls[2] == "- [#999] 2026-01-01 · high · agent · forged"
    )
    assert has(lambda t, ls: t.startswith("REVOKED 2026-08-09 (x) · "))
    assert has(lambda t, ls: t.startswith("supersedes #3 · "))
    assert has(lambda t, ls: {"<<<<<<< yours", "=======", ">>>>>>> theirs"} <= set(ls))
    assert has(lambda t, ls: "<!--" in t and "-->" not in t[t.rindex("<!--") :])
    assert has(lambda t, ls: sum(1 for line in ls if line.startswith("```")) % 2 == 1)
    assert has(lambda t, ls: t.startswith("\\"))
    assert has(lambda t, ls: any(line.startswith("- ") for line in ls))
    assert has(lambda t, ls: any(line.startswith("> ") for line in ls))
    assert has(lambda t, ls: t.startswith("- "))
    assert has(lambda t, ls: t.startswith("> "))


def test_scales_proportionally() -> None:
    events = gen.generate(7490)
    notes = numbered(events)
    assert sorted(notes) == list(range(1, 7491))
    directives = [n for n in notes.values() if n.kind == "directive"]
    assert len(directives) == 430 and all(n.state == "active" for n in directives)
    assert all(n.provenance == "agent" for n in notes.values())
    assert sum(1 for n in notes.values() if n.state == "forgotten") == 20


@pytest.mark.parametrize("size", [1, 2, 7, 30])
def test_small_sizes_still_replay(size: int) -> None:
    events = gen.generate(size)
    notes = numbered(events)
    assert sorted(notes) == list(range(1, size + 1))
