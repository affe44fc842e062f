"""qem_edit.base.cjson answers as the standard library's json answers: the same text written
for any value, the same value read from any text, the same exception and message where
json raises one."""

from __future__ import annotations

import json
import math
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from qem_edit.base import cjson

ANY_CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
TEXT = st.text(alphabet=ANY_CHAR) | st.text()
NUMBER = st.integers() | st.integers(min_value=-(1 << 200), max_value=1 << 200) | st.floats() \
    | st.sampled_from([0.0, -0.0, 1e-05, 1e16, 1e300, math.inf, -math.inf, math.nan])
SCALAR = st.none() | st.booleans() | NUMBER | TEXT
KEY = TEXT | st.integers() | st.floats() | st.booleans() | st.none()
VALUE = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                     | st.dictionaries(TEXT, inner, max_size=4) | st.dictionaries(KEY, inner, max_size=4),
                     max_leaves=25)
OPTIONS = st.fixed_dictionaries({"ensure_ascii": st.booleans(), "sort_keys": st.booleans(),
                                 "separators": st.sampled_from([None, (",", ":"), (", ", ": ")])})


def _answer(call, *args, **kwargs) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """What a call gave, or the exception it raised (its type and message), as text."""
    try:
        return "value", repr(call(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - the exception is the answer compared
        return type(exc).__name__, str(exc)


@settings(max_examples=400)
@given(VALUE, OPTIONS)
def test_a_value_is_written_as_json_writes_it(value: object, options: dict) -> None:
    assert _answer(cjson.dumps, value, **options) == _answer(json.dumps, value, **options)
    encode = cjson.encoder(**options)
    assert _answer(encode, value) == _answer(json.JSONEncoder(**options).encode, value)


@settings(max_examples=300)
@given(VALUE, st.sampled_from(["", " ", "\n", "\t\r\n ", "\x0b", "\u00a0"]), st.sampled_from(["", " \n", "x", "\x00"]))
def test_a_value_written_is_read_as_json_reads_it(value: object, before: str, after: str) -> None:
    try:
        text = before + json.dumps(value, ensure_ascii=False) + after
    except (TypeError, ValueError):
        return
    assert _answer(cjson.loads, text) == _answer(json.loads, text)
    for encoding in ("utf-8", "utf-16", "utf-16-le", "utf-32-be", "utf-8-sig"):
        try:
            raw = text.encode(encoding, "surrogatepass")
        except UnicodeEncodeError:
            continue
        assert _answer(cjson.loads, raw) == _answer(json.loads, raw), encoding


@settings(max_examples=400)
@given(st.text(alphabet=ANY_CHAR) | st.text(alphabet="[]{}\":,0123456789.eE+-tfnrulsaNIi \t\n\r\\x"))
def test_any_text_is_read_as_json_reads_it(text: str) -> None:
    assert _answer(cjson.loads, text) == _answer(json.loads, text)


@settings(max_examples=300)
@given(st.binary() | st.binary().map(lambda b: b'{"a": "' + b + b'"}'))
def test_any_bytes_are_read_as_json_reads_them(raw: bytes) -> None:
    assert _answer(cjson.loads, raw) == _answer(json.loads, raw)
    assert _answer(cjson.loads, bytearray(raw)) == _answer(json.loads, bytearray(raw))


def test_the_errors_json_names() -> None:
    """A caller catches json's own exception, through cjson, with its place in the text."""
    for bad in ('{"a": 1', '[1, 2] x', "", "\ufeff{}", '"\x01"', "[" * 100_000):
        try:
            cjson.loads(bad)
        except cjson.JSONDecodeError as exc:
            assert isinstance(exc, json.JSONDecodeError) and (exc.msg, exc.pos) == _position(bad)
        except RecursionError:
            assert bad.startswith("[[")
        else:
            raise AssertionError(bad)


def _position(bad: str) -> tuple[str, int]:
    try:
        json.loads(bad)
    except json.JSONDecodeError as exc:
        return exc.msg, exc.pos
    raise AssertionError(bad)


def test_reading_and_writing_import_no_json() -> None:
    """The point of the module: reading and writing load neither json nor re.  And where json
    is not loaded, an error is still json's own (the C scanner raises json.decoder's error
    only where json.decoder is loaded already)."""
    bad = ['"\x01"', '"\\x"', '{"a": "b\\u12"}', '{"a" 1}', '[1,]', "[1] 2", "", "\ufeff1", '"\ud800"x']
    errors = {text: _position(text) for text in bad}
    probe = ("import sys\nfrom qem_edit.base import cjson\n"
             f"for text, (msg, pos) in {errors!r}.items():\n"
             "    try:\n        cjson.loads(text)\n    except ValueError as exc:\n"
             "        assert type(exc).__name__ == 'JSONDecodeError' and (exc.msg, exc.pos) == (msg, pos), (text, exc)\n"
             "    else:\n        raise AssertionError(text)\n"
             "    for name in ('json', 'json.decoder', 'json.scanner', 'json.encoder', 're', 'enum'):\n"
             "        sys.modules.pop(name, None)\n")
    done = _fresh(probe)
    assert done.returncode == 0, done.stderr
    probe = ("import sys\nfrom qem_edit.base import cjson\n"
             "assert cjson.loads(b'{\"a\": [1, 2.5, null, \"\\\\u00e9\"]}') == {'a': [1, 2.5, None, '\\u00e9']}\n"
             "assert cjson.dumps({'b': 1, 'a': 'é'}, ensure_ascii=False, sort_keys=True, separators=(',', ':'))"
             " == '{\"a\":\"é\",\"b\":1}'\n"
             "print(sorted(m for m in ('json', 're', 'enum', 'functools', 'collections') if m in sys.modules))")
    done = _fresh(probe)
    assert done.stdout.strip() == "[]", (done.stdout, done.stderr)


def _fresh(probe: str) -> subprocess.CompletedProcess:
    """`probe` run by an interpreter that has loaded nothing of its own (no site: no json, no re)."""
    return subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True,
                          env={"PYTHONPATH": ":".join(p for p in sys.path if p)})
