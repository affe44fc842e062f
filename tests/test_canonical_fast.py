"""The record check's shortcuts give the verdicts of the rules they stand for.  A record's
line vouched for by orjson (logtree.parsed_record) gets the verdict the standard library's
canonical encoder gives it, on every JSON value and every byte string: a line is proven
canonical only where `canonical` writes exactly it, and any other line is read by the
standard library as before.  A writer's name passed without asking `actor_problem` is one
it passes; an id written out pair by pair is the base32 of its bits."""

from __future__ import annotations

import json
import math

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qem_edit.base import ids
from qem_edit.base.stored_form import actor_problem
from qem_edit.storage import logtree
from qem_edit.storage.logtree import LogFileError, canonical, pack_part, parsed_record

# strings of any characters: non-ASCII, control characters, quotes, backslashes, lone surrogates
ANY_TEXT = st.text(st.characters(blacklist_categories=()), max_size=12)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=-(1 << 70), max_value=1 << 70)
    | st.floats(allow_nan=True, allow_infinity=True) | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=12,
)


def standard_verdict(body: bytes) -> tuple[str, object]:
    """What the standard library makes of a line: not JSON, JSON not in canonical form, or
    canonical (with the value, as its repr: NaN is not equal to itself)."""
    try:
        obj = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return "not json", None
    if _not_a_number_in(obj):  # (Python's json reads NaN and Infinity; JSON has no such number)
        return "not json", None
    try:
        again = canonical(obj)
    except UnicodeEncodeError:
        return "not canonical", repr(obj)
    return ("canonical" if again == body + b"\n" else "not canonical"), repr(obj)


def _not_a_number_in(value: object) -> bool:
    if isinstance(value, float):
        return math.isnan(value) or math.isinf(value)
    if isinstance(value, dict):
        return any(_not_a_number_in(v) for v in value.values())
    if isinstance(value, list):
        return any(_not_a_number_in(v) for v in value)
    return False


def fast_verdict(body: bytes) -> tuple[str, object]:
    try:
        obj, proven = parsed_record(body, "line 1")
    except LogFileError:
        return "not json", None
    if proven:
        return "canonical", repr(obj)
    # not proven: the standard library read it, so its own compare decides as before
    try:
        again = canonical(obj)
    except UnicodeEncodeError:
        return "not canonical", repr(obj)
    return ("canonical" if again == body + b"\n" else "not canonical"), repr(obj)


def lines_of(value: object) -> list[bytes]:
    """The ways a value can be written as one line: canonically, by orjson, escaped to
    ASCII, with spaces, keys in their given order."""
    out = []
    for make in (lambda v: canonical(v)[:-1],
                 lambda v: orjson.dumps(v, option=orjson.OPT_SORT_KEYS),
                 lambda v: orjson.dumps(v),
                 lambda v: json.dumps(v, sort_keys=True, separators=(",", ":")).encode(),
                 lambda v: json.dumps(v, ensure_ascii=False).encode("utf-8", "surrogatepass"),
                 lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")):
        try:
            out.append(make(value))
        except (UnicodeEncodeError, TypeError, ValueError, OverflowError):
            continue  # (a lone surrogate in UTF-8, an integer orjson does not write, NaN)
    return out


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_every_way_of_writing_a_value_gets_the_standard_verdict(value: object) -> None:
    for body in lines_of(value):
        assert fast_verdict(body) == standard_verdict(body), body


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40) | VALUES.map(lambda v: json.dumps(v).encode()), st.binary(max_size=3), st.integers(0, 40))
def test_any_bytes_get_the_standard_verdict(body: bytes, noise: bytes, at: int) -> None:
    for line in (body, body[:at] + noise + body[at:]):
        if b"\n" not in line:
            assert fast_verdict(line) == standard_verdict(line), line


def test_a_canonical_line_is_vouched_for_without_encoding_it_again() -> None:
    body = canonical({"a": ["é", "\u2028", "\x1f\"\\", 1 << 60, None, True], "b": {"z": -3, "y": "1.5e-7"}})[:-1]
    obj, proven = parsed_record(body, "line 1")
    assert proven and canonical(obj)[:-1] == body


@pytest.mark.parametrize("written", [b"0.00001", b"1e16", b"1E+16", b"NaN", b"18446744073709551616", b"-0"])
def test_a_number_the_standard_library_writes_otherwise_is_not_canonical(written: bytes) -> None:
    """orjson writes 1e-05 as 0.00001: a line in its form is no canonical record, as
    before (and an integer past 64 bits, which orjson reads as a float, is read as one)."""
    body = b'{"a":' + written + b"}"
    assert standard_verdict(body)[0] == fast_verdict(body)[0]


def test_an_event_line_holding_a_float_in_orjson_form_is_set_aside() -> None:
    """A pack line whose record orjson writes back byte for byte, with a float the
    standard library writes otherwise: its pack is at fault, as it was before."""
    good = _an_event_object()
    line = canonical(good)
    assert pack_part("packs/e-x.jsonl", "e", line, 1).problem is None
    good["data"]["weight"] = 1e-05
    hostile = orjson.dumps(good, option=orjson.OPT_SORT_KEYS) + b"\n"
    assert b"0.00001" in hostile and orjson.dumps(orjson.loads(hostile), option=orjson.OPT_SORT_KEYS) + b"\n" == hostile
    problem = pack_part("packs/e-x.jsonl", "e", hostile, 1).problem
    assert problem is not None and "not in canonical form" in str(problem)


def _an_event_object() -> dict:
    note = "cjska8dh5ngxyz01tpyfjhjtjz"
    return {"v": logtree.FORMAT, "type": "revoked", "note": note, "at": "2026-05-05T22:26:46Z", "actor": "alice",
            "reason": "user corrected this", "checkin": None, "clock": 143, "prev": [note], "data": {}}


@settings(max_examples=500, deadline=None)
@given(ANY_TEXT | st.text(st.characters(max_codepoint=127), max_size=12) | st.none() | st.integers())
def test_a_writer_name_gets_the_rules_verdict(actor: object) -> None:
    logtree._FINE_ACTORS.clear()  # (the names found fine before would pass without either check)
    assert logtree._actor_problem(actor) == actor_problem(actor)


@pytest.mark.parametrize("actor", ["ana\x7f", "\tana", "ana\x00b", " ana", "ana ", "", "session-8953"])
def test_a_writer_name_of_ascii_is_held_to_the_rule(actor: str) -> None:
    logtree._FINE_ACTORS.clear()
    assert logtree._actor_problem(actor) == actor_problem(actor)


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=17, max_size=40))
def test_an_id_is_the_base32_of_its_first_130_bits(data: bytes) -> None:
    bits = "".join(f"{byte:08b}" for byte in data)[:5 * ids.ID_LENGTH]
    assert ids.encode(data) == "".join(ids.ALPHABET[int(bits[i:i + 5], 2)] for i in range(0, len(bits), 5))
