"""JSON read and written as `json` does, by its own C functions, without importing `json`.

`import json` brings `re` (its Python layer compiles patterns as it is imported), and with it
`enum`, `functools` and `collections`: about 5 ms of a hook whose whole budget is a few times
a bare interpreter's start-up.  The work itself is done in C by `_json` (the scanner and the
encoder `json` calls); this module calls them as `json.loads` and `json.dumps` do, for the
options qem uses.  Whatever the fast path does not take (any error, a byte-order mark, text
in UTF-16 or UTF-32, an interpreter without `_json`) goes to `json` itself, so every result,
exception and message is `json`'s own (tests/test_cjson.py holds the two to one answer over
any value and any text).
"""

from __future__ import annotations

try:
    from _json import encode_basestring, encode_basestring_ascii, make_encoder, make_scanner
except ImportError:  # (an interpreter without the accelerator: json's own code, and its imports)
    make_encoder = make_scanner = None

_SPACE = " \t\n\r"  # JSON's whitespace (json.decoder.WHITESPACE)


class _Decoding:
    """What `json.JSONDecoder()` gives the C scanner (its defaults)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


_scan = make_scanner(_Decoding()) if make_scanner is not None else None


def loads(s: str | bytes | bytearray) -> object:
    """`json.loads(s)`."""
    if _scan is not None:
        if type(s) is not str:
            # json.detect_encoding: a NUL among the first two bytes is UTF-16 or UTF-32; EF, FE and FF
            # begin a byte-order mark (and no JSON value's first character in UTF-8)
            if isinstance(s, (bytes, bytearray)) and s[:1] not in (b"", b"\x00", b"\xef", b"\xfe", b"\xff") \
                    and s[1:2] != b"\x00":
                s = s.decode("utf-8", "surrogatepass")
        if type(s) is str and not s.startswith("\ufeff"):
            start = len(s) - len(s.lstrip(_SPACE))
            try:
                value, end = _scan(s, start)
            except (StopIteration, SystemError):
                pass  # (no value where one starts; or a string json rejects, whose error the scanner
                # raises as json.decoder's, and cannot where json.decoder is not loaded: json says where)
            else:
                if end == len(s) or not s[end:].strip(_SPACE):
                    return value
    import json

    return json.loads(s)


def encoder(*, ensure_ascii: bool = True, sort_keys: bool = False,
            separators: tuple[str, str] | None = None):  # type: ignore[no-untyped-def]
    """`json.JSONEncoder(ensure_ascii=..., sort_keys=..., separators=...).encode`."""
    items, keys = separators if separators is not None else (", ", ": ")
    if make_encoder is None:
        import json

        return json.JSONEncoder(ensure_ascii=ensure_ascii, sort_keys=sort_keys, separators=(items, keys)).encode
    text = encode_basestring_ascii if ensure_ascii else encode_basestring

    def encode(value: object) -> str:
        if isinstance(value, str):
            return text(value)
        try:  # (a new encoder each time, as json makes one: the circular check's marks start empty)
            return "".join(make_encoder({}, _refuse, text, None, keys, items, sort_keys, False, True)(value, 0))
        except (TypeError, ValueError, RecursionError):
            import json  # (json's own error and message)

            return json.JSONEncoder(ensure_ascii=ensure_ascii, sort_keys=sort_keys,
                                    separators=(items, keys)).encode(value)
    return encode


def _refuse(value: object) -> object:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


_plain = encoder()
_plain_unicode = encoder(ensure_ascii=False)


def dumps(value: object, *, ensure_ascii: bool = True, sort_keys: bool = False,
          separators: tuple[str, str] | None = None) -> str:
    """`json.dumps(value, ensure_ascii=..., sort_keys=..., separators=...)`."""
    if not sort_keys and separators is None:
        return (_plain if ensure_ascii else _plain_unicode)(value)
    return encoder(ensure_ascii=ensure_ascii, sort_keys=sort_keys, separators=separators)(value)


def __getattr__(name: str) -> object:
    """`cjson.JSONDecodeError`: json's, where an error is caught (json is loaded by then)."""
    if name == "JSONDecodeError":
        import json

        return json.JSONDecodeError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
