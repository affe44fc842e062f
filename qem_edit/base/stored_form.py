"""What a stored event may hold: the rules a write keeps and the log's reader checks alike.

Each rule answers what is wrong with a value (None: nothing), so a writer refuses it with
that message and the log's reader sets another clone's file aside with the same one.
"""

from __future__ import annotations

import unicodedata

from . import ids
from .patterns import Lazy
from .vocabulary import LOCAL_SCOPES, OUT_OF_PLAIN_FORCE, SESSION_LIMIT, TextError

TYPE_CHECKING = False  # typing's flag, without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from collections.abc import Mapping

_TIMESTAMP = Lazy(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z\Z")


def normalize_text(text: str) -> str:
    """Normalize a note text once and for all, the way every write does.

    CRLF and CR become LF, trailing whitespace is stripped from each line, and leading and
    trailing blank lines are dropped.  Empty results and NUL characters are refused.
    """
    if "\x00" in text:
        raise TextError("note text contains a NUL character")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines = [line.rstrip() for line in lines]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    if not lines:
        raise TextError("note text is empty")
    return "\n".join(lines)


def actor_problem(actor: object) -> str | None:
    """What keeps `actor` from being a writer's name (None: nothing), on write and on read
    alike: one non-empty line with no control characters (a name is printed to terminals
    and into MEMORY.md) and no spaces at its ends."""
    if not isinstance(actor, str) or not actor or actor != actor.strip():
        return "actor must be a non-empty name with no spaces at its ends"
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in actor):
        return "actor must be one line with no control characters"
    return None


SEAT_LIMIT = 100  # characters of a seat's name


def seat_problem(seat: object) -> str | None:
    """What keeps `seat` from being who a request is owed by (None: nothing), on write and
    on read alike: an actor's, a person's or an agent's name, one word (MEMORY.md shows it
    as `to NAME` among the fields a ` · ` separates), no control character."""
    if not isinstance(seat, str) or not seat:
        return "a seat (to) must be a non-empty name"
    if len(seat) > SEAT_LIMIT or any(c.isspace() or c == "·" or unicodedata.category(c)[0] in "CZ" for c in seat):
        return f"a seat (to) is one word of at most {SEAT_LIMIT} characters, no space, `·` or control character"
    if seat.startswith(("#", "\\")):
        return "a seat (to) does not start with # or a backslash"
    return None


def request_problem(data: Mapping[str, object], own_id: str | None = None) -> str | None:
    """What is wrong with a created event's `to`, `due` and `answers` (None: nothing), as a
    write makes them and the log's reader checks another clone's."""
    if "to" in data and seat_problem(data["to"]):
        return str(seat_problem(data["to"]))
    if "due" in data and not is_timestamp(data["due"]):
        return f"due {data['due']!r} is not a UTC time like 2026-07-27T10:00:00Z"
    if "answers" in data and (not ids.is_id(data["answers"]) or data["answers"] == own_id):
        return f"answers {data['answers']!r} is not another note's id"
    return rests_on_problem(data, own_id)


REST_LIMIT = 64  # the notes one note may rest on


def rests_on_problem(data: Mapping[str, object], own_id: str | None = None) -> str | None:
    """What is wrong with a created event's `rests_on` (None: nothing), as a write makes it
    and the log's reader checks another clone's: a non-empty list of other notes' ids,
    each once, in id order (so the same bases make the same bytes)."""
    if "rests_on" not in data:
        return None
    value = data["rests_on"]
    if not isinstance(value, list) or not value or len(value) > REST_LIMIT:
        return f"rests_on must be a list of 1 to {REST_LIMIT} note ids"
    if not all(ids.is_id(v) and v != own_id for v in value) or value != sorted(set(value)):
        return f"rests_on {value!r} is not other notes' ids, each once, in order"
    return None


def base_change_problem(type_: str, data: Mapping[str, object]) -> str | None:
    """What is wrong with a stale flag's `rests_on` (None: nothing): the note it rests on
    that changed (`base`), the event that changed it (`event`), and where the change began
    (`root`, the note whose own change it was, and its `change`, the state it reached)."""
    if "rests_on" not in data or type_ == "created":
        return None
    cause = data["rests_on"]
    if type_ != "stale_flagged" or not isinstance(cause, dict) or set(cause) != {"base", "event", "root", "change"}:
        return "only a stale flag carries rests_on: exactly {base, event, root, change}"
    if not (ids.is_id(cause["base"]) and ids.is_id(cause["event"]) and ids.is_id(cause["root"])):
        return "a stale flag's rests_on names notes and an event by their ids"
    if cause["change"] not in OUT_OF_PLAIN_FORCE:
        return f"rests_on change {cause['change']!r} is not a state a base leaves force by"
    return None


def reason_problem(reason: object) -> str | None:
    """What keeps `reason` from being an event's reason (None: nothing): a string with no
    NUL (which would make MEMORY.md a binary file), or none."""
    if reason is not None and not (isinstance(reason, str) and "\x00" not in reason):
        return "reason must be a string with no NUL, or null"
    return None


def is_timestamp(value: object) -> bool:
    return isinstance(value, str) and bool(_TIMESTAMP.match(value))


# -- anchors: the files a note is about ----------------------------------------------------------
#
# An event's `anchors` (docs/DUMP.md) is a list of {"path", "oid"}: a path from the top of
# the work tree, `/`-separated, that stays inside it, and the git object id (SHA-1, or
# SHA-256 in such a repository) of what it held.  The writer's rules and the reader's are
# these same functions, so an anchor from another clone is checked as a write checks it.

OID_LENGTHS = (40, 64)  # hex digits of a SHA-1 and of a SHA-256 object id
_OID = Lazy(r"(?:[0-9a-f]{40}|[0-9a-f]{64})\Z")
UNANCHORABLE = (".git", ".qem")  # git's own files, and the memory's log
ANCHORING = ("created", "anchored", "reinstated")  # the events that may carry `anchors`


def is_utf8(text: str) -> bool:
    """Whether `text` is UTF-8 text: a name decoded from bytes with surrogates (as git's
    paths are, and the file system's) is not where those bytes were not UTF-8."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def utf8_named(name: str) -> str:
    """`name` as UTF-8 text: where it was decoded from bytes that are not UTF-8 (with
    surrogates, as git's paths and the file system's are), those bytes as `\\x` escapes;
    any other name as it is."""
    return name if is_utf8(name) else name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def anchor_path_problem(path: object) -> str | None:
    """What keeps `path` from being an anchor's path (None: nothing): relative, `/`-separated,
    no `.` or `..` or empty part, no backslash, one line with no control characters (MEMORY.md
    shows it on a line), no spaces at its ends, nothing inside .git/ or .qem/."""
    if not isinstance(path, str) or not path:
        return "an anchor's path must be a non-empty string"
    if path.startswith("/") or (path[1:2] == ":" and path[:1].isascii() and path[:1].isalpha()
                                 and path[2:3] in ("", "/", "\\")):  # (`C:`, `C:/`, `C:\`)
        return "an absolute path; name it from the top of the work tree"
    if not is_utf8(path):
        return "a path that is not UTF-8"
    if "\\" in path:
        return "a backslash in a path; separate its parts with /"
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in path) or path != path.strip():
        return "a path holding a control character, or spaces at its ends"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "a path with an empty, `.` or `..` part; name it from the top of the work tree"
    inside = next((part for part in parts if part in UNANCHORABLE), None)
    if inside is not None:
        return f"a path inside {inside}/ ({'git' if inside == '.git' else 'the memory'}'s own files), which no note is about"
    return None


def anchors_problem(value: object) -> str | None:
    """What is wrong with an event's `anchors` (None: nothing): a list of distinct paths,
    each {"path": PATH, "oid": HEX} and nothing else."""
    if not isinstance(value, list):
        return "anchors must be a list of {path, oid}"
    seen: set[str] = set()
    for anchor in value:
        if not isinstance(anchor, dict) or set(anchor) != {"path", "oid"}:
            return "each anchor is exactly {path, oid}"
        problem = anchor_path_problem(anchor["path"])
        if problem:
            return f"anchor {anchor['path']!r}: {problem}"
        if not isinstance(anchor["oid"], str) or not _OID.match(anchor["oid"]):
            return f"anchor {anchor['path']!r}: its oid is not a git object id (40 or 64 lowercase hex digits)"
        if anchor["path"] in seen:
            return f"anchor {anchor['path']!r} is named twice"
        seen.add(anchor["path"])
    return None


def anchors_of(data: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    """An event's anchors as (path, oid) pairs in path order; none where it has none (or,
    never reached past the log's checks, malformed ones)."""
    value = data.get("anchors")
    if value is None or anchors_problem(value) is not None:
        return ()
    return tuple(sorted((str(a["path"]), str(a["oid"])) for a in value))  # type: ignore[index, union-attr]


# A stale flag a code change caused (`qem anchors check --flag`) says so in its data's
# `drift`: a list of {"path", "was", "now"}, an anchored path, the object id its anchor
# recorded and the one it holds now (null: the path was deleted).
Drift = tuple[str, str, str | None]  # (path, was, now)


def drift_of(data: Mapping[str, object]) -> tuple[Drift, ...]:
    """A stale flag's drift, in the order given; none where it has none (the log's reader
    sets a malformed one aside: drift_problem; one that reaches here anyway reads as a
    plain flag)."""
    if "drift" not in data or drift_problem("stale_flagged", data) is not None:
        return ()
    return tuple((str(d["path"]), str(d["was"]), d["now"]) for d in data["drift"])  # type: ignore[index, union-attr]


def drift_problem(type_: str, data: Mapping[str, object]) -> str | None:
    """What is wrong with a stale flag's `drift` or a re-anchoring's `moved` (None:
    nothing), as the log's reader checks another clone's event."""
    if type_ == "anchored" and not ("anchors" in data and _pairs_problem(data.get("moved"), ("from", "to")) is None):
        return "a re-anchoring holds its anchors and what moved ({from, to} paths)"
    if type_ == "stale_flagged" and "drift" in data:
        value = data["drift"]
        if not isinstance(value, list) or not value:
            return "drift must be a non-empty list of {path, was, now}"
        for entry in value:
            if not isinstance(entry, dict) or set(entry) != {"path", "was", "now"}:
                return "each drift is exactly {path, was, now}"
            if anchor_path_problem(entry["path"]) or not _is_oid(entry["was"]):
                return f"drift {entry['path']!r}: not an anchor's path and object id"
            if entry["now"] is not None and not _is_oid(entry["now"]):
                return f"drift {entry['path']!r}: now is neither an object id nor null"
            if entry["now"] == entry["was"]:
                return f"drift {entry['path']!r}: now is what it was, which is no drift"
        if len({str(entry["path"]) for entry in value}) != len(value):
            return "drift names a path twice"
    return None


def _is_oid(value: object) -> bool:
    return isinstance(value, str) and bool(_OID.match(value))


def _pairs_problem(value: object, keys: tuple[str, str]) -> str | None:
    if not isinstance(value, list) or not value:
        return "not a non-empty list"
    for entry in value:
        if not isinstance(entry, dict) or set(entry) != set(keys) or any(anchor_path_problem(entry[k]) for k in keys):
            return "not a pair of anchor paths"
    return None


def scope_problem(scope: object, session: object) -> str | None:
    """What is wrong with a created event's `scope` and `session` (None: nothing): the
    log's reader sets such a file aside, and every writer refuses it."""
    if scope is None and session is None:
        return None
    if not isinstance(scope, str) or scope not in LOCAL_SCOPES:  # (a list from a clone: no set member, no crash)
        return f"scope {scope!r} is not one of {', '.join(sorted(LOCAL_SCOPES))} (a team note has none)"
    if scope == "private":
        return None if session is None else "a private note names no session"
    if not isinstance(session, str) or not session or len(session) > SESSION_LIMIT \
            or any(unicodedata.category(c)[0] in "CZ" for c in session):
        return (f"a session note's session must be the harness's session id, 1 to {SESSION_LIMIT} printable"
                " characters with no spaces")
    return None
