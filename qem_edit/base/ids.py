"""Ids that many clones can make without asking each other.

An event's id is a hash of its canonical bytes, so the same event reached by two paths
(a merge, a cherry-pick) is one event, and two different events are two.  A note's id is
the id of its `created` event, which carries a random nonce, so recreating a note with the
same text makes a new id.  Ids are written in lowercase Crockford base32 without i, l,
o and u, 26 characters (130 bits).

MEMORY.md shows a note by a short id: the shortest prefix of its id, at least the length
the note was created with, that no other note's id shares and that holds a letter (so a
short id is never all digits, and old numeric ids stay valid as aliases).  A new note
whose id shares a shown prefix lengthens only the notes involved.  Pure.
"""

from __future__ import annotations

import bisect
import os

ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lowercase
ID_LENGTH = 26
MIN_SHORT = 4
SHOWN = 8  # how much of an id a message shows where no short id stands for it
SIDE_SHOWN = 6  # how much of a dispute's or a side's id a message shows (what `qem rule` takes back)


_PAIRS = [a + b for a in ALPHABET for b in ALPHABET]  # every 10-bit value as two characters


def encode(data: bytes, length: int = ID_LENGTH) -> str:
    """`data` (big-endian, zero bits after its end) in base32, its first `length`
    characters (two at a time: this is on the path of every log line read)."""
    if length == ID_LENGTH and len(data) >= 17:
        return _id_of(data)
    size = -(-5 * length // 8)
    number = int.from_bytes(data[:size].ljust(size, b"\0"), "big") >> (8 * size - 5 * length)
    out = []
    if length % 2:
        out.append(ALPHABET[number >> (5 * length - 5)])
    for shift in range(10 * (length // 2) - 10, -1, -10):
        out.append(_PAIRS[(number >> shift) & 1023])
    return "".join(out)


def _id_of(data: bytes) -> str:
    """`encode(data)` of an id's 130 bits, its 13 pairs written out rather than looped
    over (a third less time; an id is taken of every record a fresh clone reads)."""
    n, p = int.from_bytes(data[:17], "big") >> 6, _PAIRS
    return "".join((p[n >> 120], p[(n >> 110) & 1023], p[(n >> 100) & 1023], p[(n >> 90) & 1023],
                    p[(n >> 80) & 1023], p[(n >> 70) & 1023], p[(n >> 60) & 1023], p[(n >> 50) & 1023],
                    p[(n >> 40) & 1023], p[(n >> 30) & 1023], p[(n >> 20) & 1023], p[(n >> 10) & 1023],
                    p[n & 1023]))


def content_id(data: bytes) -> str:
    """The id of a log file's canonical bytes."""
    import hashlib  # here, not at the top: OpenSSL's start-up is paid only by what hashes

    return encode(hashlib.sha256(data).digest())


SMALL = 1 << 18  # bytes: below this the builtin SHA-256 is done before hashlib would be imported


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of `data`, in hex.  Importing hashlib starts OpenSSL, about 3 ms, a tenth
    of a hook's whole budget, so what is short (a session's name) is hashed by the
    interpreter's own SHA-256 where it has one; what is long by OpenSSL's, several times
    faster per byte."""
    if len(data) < SMALL:
        try:  # the builtin module: _sha256 up to Python 3.11, _sha2 from 3.12
            from _sha256 import sha256  # type: ignore[import-not-found]
        except ImportError:
            try:
                from _sha2 import sha256  # type: ignore[import-not-found,no-redef]
            except ImportError:  # (an interpreter built without them)
                from hashlib import sha256
        return sha256(data).hexdigest()
    import hashlib

    return hashlib.sha256(data).hexdigest()


def numbered_pointer(number: int) -> str:
    """What a converted note's `supersedes` holds when its old pointer named a note the old
    log created later (a cycle among numbered notes, which content-hashed ids cannot close):
    the old number, hashed, which the graph reads back as that note (`renumbered`)."""
    return content_id(f"qem: old note #{number}".encode())


def renumbered(aliases: "dict[str, int]") -> dict[str, str]:
    """Each converted note's `numbered_pointer`, to the note (its id → its old number given)."""
    return {numbered_pointer(number): note_id for note_id, number in aliases.items()}


def nonce() -> str:
    return encode(os.urandom(17))


def new_checkin_id() -> str:
    """A check-in's id, shared by every event it writes (an edit's, a sweep's)."""
    return f"ci-{os.urandom(6).hex()}"


def is_id(value: object) -> bool:
    """A full note or event id: ID_LENGTH characters of ALPHABET."""
    return isinstance(value, str) and len(value) == ID_LENGTH and not value.strip(ALPHABET)


def is_prefix(text: str) -> bool:
    """Some characters of ALPHABET, all of them (what an id typed short may be)."""
    return bool(text) and not text.strip(ALPHABET)


def shown(an_id: str, short: str | None = None) -> str:
    """An id as a message names it: its note's short id where one is known (`short`),
    else the id's first characters (a note the index does not hold, an event, a check-in)."""
    return short or an_id[:SHOWN]


def side_shown(an_id: str) -> str:
    """A dispute's id, or a side's (the tip of one of a note's concurrent changes), as a
    message names it: a prefix `qem rule` takes back."""
    return an_id[:SIDE_SHOWN]


def short_length(count: int) -> int:
    """The short-id length a note is created with when the store holds `count` notes:
    long enough that a new note rarely shares a shown prefix (32^L at least 64 times the
    notes), so MEMORY.md lines seldom lengthen as the store grows."""
    length = MIN_SHORT
    while 32 ** length < 64 * (count + 1):
        length += 1
    return length


def short_ids(notes: dict[str, int]) -> dict[str, str]:
    """Each note's short id, from every note's id and its created-with length."""
    ordered = sorted(notes)
    return {note_id: _short(note_id, notes[note_id], ordered, i) for i, note_id in enumerate(ordered)}


def short_of(note_id: str, length: int, neighbours: list[str]) -> str:
    """One note's short id, given the ids next to it in sorted order (it may be among them)."""
    others = [n for n in neighbours if n != note_id]
    ordered = sorted(others + [note_id])
    return _short(note_id, length, ordered, ordered.index(note_id))


def _short(note_id: str, length: int, ordered: list[str], i: int) -> str:
    shared = 0
    for j in (i - 1, i + 1):
        if 0 <= j < len(ordered):
            shared = max(shared, _common(note_id, ordered[j]))
    size = max(length, shared + 1)
    while size < len(note_id) and not any(c.isalpha() for c in note_id[:size]):
        size += 1
    return note_id[:size]


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def matching(prefix: str, ordered: list[str]) -> list[str]:
    """The ids in sorted `ordered` that start with `prefix`."""
    start = bisect.bisect_left(ordered, prefix)
    out = []
    for note_id in ordered[start:]:
        if not note_id.startswith(prefix):
            break
        out.append(note_id)
    return out
