"""A note's end: when it is due to expire, and the sweep that expires it.

A note may carry an end, a UTC time recorded in its `created` event as `expires`, so
every clone folds the same note.  A writer gives it as a date (`--expires 2026-12-31`,
the start of that day, UTC), a full UTC time (`2026-12-31T18:00:00Z`), or a time to live
counted from the event's own timestamp (`--ttl 30d`; units h, d, w), fixed once when the
event is written.  A kind may have a default time to live for new notes (`[expiry]` in
.qem/config.toml); a successor keeps its predecessor's end unless told otherwise.

Nothing expires by being read: a note past its end stays as it is (every read names it
so: qem_edit.reads.standing) until `qem expire --due` writes its `expired` event, in one
check-in with every other note due.  A note written with an end already past keeps it,
and its own write expires it (decisions.decide_create).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..base import errors
from ..base.decisions import ENDED_WHEN_WRITTEN
from ..base.records import Record
from ..base.replay import Note
from ..base.times import stamp
from ..base.vocabulary import KINDS

TYPE_CHECKING = False  # typing's flag, without importing typing: no hook or write loads it (ARCHITECTURE.md)
if TYPE_CHECKING:
    from collections.abc import Callable

    from ..storage.store import Store
    from ..storage.transaction import Transaction
    from ..system.workspace import Workspace

UNITS = {"h": 3600, "d": 86400, "w": 7 * 86400}
_TTL = re.compile(r"([1-9][0-9]{0,5})([hdw])\Z")
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}\Z")
_STAMP = "%Y-%m-%dT%H:%M:%SZ"
NONE = "none"  # `--expires none`: no end (a successor's, or a new note's despite its kind's default)


def ttl_seconds(given: str, what: str = "--ttl") -> int:
    """A time to live (`30d`: a number, then h, d or w) in seconds; BadInput naming it."""
    found = _TTL.match(given.strip())
    if found is None and re.fullmatch(r"[+-]?0+[hdw]|-[0-9]+[hdw]", given.strip()):
        raise errors.BadInput(f"{what} {given!r}: a time to live must be at least 1 hour (1h); a note that should"
                              " end now is expired (`qem expire ID`), one with no end takes `--expires none`;"
                              " nothing was written")
    if found is None:
        raise errors.BadInput(f"{what} {given!r}: give a whole number of hours, days or weeks, like 12h, 30d"
                              " or 2w (units: h, d, w); nothing was written")
    return int(found[1]) * UNITS[found[2]]


def end_given(given: str) -> str | None:
    """`--expires`: a date (YYYY-MM-DD, its start, UTC), a UTC time (YYYY-MM-DDTHH:MM:SSZ),
    or `none`; the UTC time it names (None for none)."""
    from datetime import datetime  # (only a write that names an end: an add loads no datetime)

    if given.strip().lower() == NONE:
        return None
    text = given.strip()
    try:
        if _DAY.match(text):
            return stamp(datetime.strptime(text, "%Y-%m-%d"))
        return stamp(datetime.strptime(text, _STAMP))
    except ValueError:
        raise errors.BadInput(f"--expires {given!r}: give a date (YYYY-MM-DD) or a UTC time"
                              " (YYYY-MM-DDTHH:MM:SSZ), or none; nothing was written") from None


class Asked(Record):
    """What a writer asked for: an end (`given`: a UTC time in `end`, or None for none),
    a time to live (`ttl`, seconds), or neither (the default applies)."""

    end: str | None = None
    given: bool = False
    ttl: int | None = None

    def at(self, moment: str, default: str | None = None) -> str | None:
        """The end for an event written at `moment`; `default` when nothing was asked
        (the kind's, or the predecessor's).  A time to live counts from `moment`; an end
        at or before it is kept, and the write expires the note at once (decisions.decide_create)."""
        if self.ttl is not None:
            return shifted(moment, self.ttl)
        return self.end if self.given else default


def asked(expires: str | None, ttl: str | None) -> Asked:
    """The writer's `--expires`/`--ttl` (MCP: `expires`/`ttl`), checked: both at once is
    refused, as is a bad date or unit."""
    if expires is not None and ttl is not None:
        raise errors.BadInput("give --expires or --ttl, not both; nothing was written")
    if ttl is not None:
        return Asked(ttl=ttl_seconds(ttl))
    if expires is not None:
        return Asked(end=end_given(expires), given=True)
    return Asked()


def shifted(moment: str, seconds: int) -> str:
    """`moment` (a UTC time) plus `seconds`; BadInput past the year 9999."""
    from datetime import datetime, timedelta

    try:
        return stamp(datetime.strptime(moment, _STAMP) + timedelta(seconds=seconds))
    except OverflowError:
        raise errors.BadInput(f"an end {seconds // 86400:,} days after {moment} is past the year 9999;"
                              " nothing was written") from None


def kind_ttls(config: Mapping[str, object], path: Path) -> dict[str, int]:
    """`[expiry]` of a memory's config: kind → the time to live of its new notes, in
    seconds; BadInput naming the file and the key when a value is not a kind's ttl."""
    section = config.get("expiry", {})
    if not isinstance(section, dict):
        raise errors.BadInput(f"{path}: [expiry] must be a table of kind = \"30d\"")
    out = {}
    for key, value in section.items():
        if key not in KINDS:
            raise errors.BadInput(f"{path}: [expiry] {key}: not a kind; use one of: {', '.join(KINDS)}")
        if not isinstance(value, str):
            raise errors.BadInput(f"{path}: [expiry] {key} must be a string like \"30d\" (units: h, d, w)")
        out[key] = ttl_seconds(value, f"{path}: [expiry] {key} =")
    return out


def defaults(place: "Workspace") -> dict[str, int]:
    """The workspace's per-kind times to live (`[expiry]` in .qem/config.toml)."""
    from ..system.workspace import CONFIG_NAME

    return kind_ttls(place.config(), place.store_path / CONFIG_NAME)


def new_end(tx: "Transaction", kind: str, wish: Asked, ttls: Mapping[str, int]) -> str | None:
    """A new note's end, as of the transaction's time: as asked, else its kind's default."""
    default = shifted(tx.at, ttls[kind]) if kind in ttls else None
    return wish.at(tx.at, default)


def ended_notice(note: Note) -> str:
    """What a write says of a note it made with an end already past (decisions.decide_create
    expired it in the same write): the CLI's add and supersede, MCP's, a check-in."""
    return (f"note #{note.shown}'s end ({note.expires}) was already past: recorded, with its end, and"
            f" expired in the same write: it is not in force (`qem show {note.shown}`)")


def born_ended(notes: "Iterable[Note]") -> list[Note]:
    """Of notes just written, those their own write expired, their end being past."""
    return [n for n in notes if n.state == "expired" and n.state_reason == ENDED_WHEN_WRITTEN]


def due_notice(store: "Store", now: str) -> str | None:
    """After a load: the notes in force it left past their end (a dump carries a log as it
    was, so a load adds no event of its own; every read names them so until the sweep)."""
    due = store.due(now)
    if not due:
        return None
    named = ", ".join(f"#{n.shown}" for n in due[:5]) + (f" and {len(due) - 5:,} more" if len(due) > 5 else "")
    return (f"{len(due):,} note{'' if len(due) == 1 else 's'} in force past {'its' if len(due) == 1 else 'their'}"
            f" end ({named}): not in force, named so by every read; `qem expire --due` records it")


# -- the sweep ---------------------------------------------------------------------------------


class Swept:
    """What `qem expire --due` wrote: the notes it expired (as they are now), as of when,
    in which check-in; and notices from keeping the mirror current."""

    exit_code = 0

    def __init__(self, now: str, notes: list[Note] | None = None, checkin: str | None = None,
                 notices: list[str] | None = None) -> None:
        self.now, self.notes, self.checkin = now, notes if notes is not None else [], checkin
        self.notices: list[str] = notices if notices is not None else []

    def text(self) -> str:
        if not self.notes:
            return f"no note in force is past its end at {self.now}; nothing expired"
        lines = [f"expired {len(self.notes)} note{'' if len(self.notes) == 1 else 's'} past their end"
                 f" at {self.now} (check-in {self.checkin}):"]
        lines += [f"  #{n.shown} {n.kind} · ended {n.expires} · {n.first_line()}" for n in self.notes]
        return "\n".join(lines)

    def data(self) -> object:
        return {"now": self.now, "checkin": self.checkin,
                "expired": [{"id": n.id, "short": n.shown, "kind": n.kind, "expires": n.expires,
                             "text": n.first_line()} for n in self.notes]}

    def remark(self) -> str | None:
        return None


def sweep(store: "Store", place: "Workspace", actor: str, agent: bool | None = None) -> Swept:
    """Expire every note in force past its end, now (`QEM_NOW` pins it): one `expired`
    event each, all in one check-in id, in one write; none due, nothing written."""
    from ..base.ids import new_checkin_id
    from ..base.times import utc_now
    from ..mirror.export import auto_export

    now = utc_now()
    store.every_session = True  # a note's end holds whoever sweeps: another session's notes too
    if not store.due(now):
        return Swept(now)
    checkin = new_checkin_id()
    expired: list[str] = []

    def work(tx: "Transaction") -> None:
        for note in store.due(now):  # (again, under the write lock: another sweep may have come first)
            tx.emit(note.id, "expired", actor, "past its end", checkin)
            expired.append(note.id)

    store.write(work, at=now, agent=agent)
    notes = store.notes_by_id(expired)
    swept = Swept(now, [notes[n] for n in expired], checkin if expired else None)
    swept.notices = auto_export(store, place)
    return swept


SESSION_ENDED = "its session ended"  # the reason a session note's end gives


def end_sessions(store: "Store", place: "Workspace", ended: "Callable[[str], bool]", actor: str) -> list[str]:
    """A session note holds for its session alone: every one in force whose session
    `ended` says is over is expired, in one write and one check-in id (none: nothing
    written).  Returns the notes ended."""
    from ..base.ids import new_checkin_id
    from ..mirror.export import auto_export

    store.every_session = True  # this writer ends other sessions' notes: it sees them all
    if not any(ended(str(n.session)) for n in store.session_notes()):
        return []
    checkin, done = new_checkin_id(), []

    def work(tx: "Transaction") -> None:
        for note in store.session_notes():  # again, under the write lock
            if ended(str(note.session)):
                tx.emit(note.id, "expired", actor, SESSION_ENDED, checkin)
                done.append(note.id)

    store.write(work, agent=False)  # the scope's own rule, as a note's end is: no agent's choice to refuse
    auto_export(store, place)
    return done


def end_sessions_in(state: Path | str, ended: "Callable[[str], bool]") -> list[str]:
    """`end_sessions` on the memory in the folder `state` (a hook's, which names the
    folder, not a workspace, as a string: qem_edit.shells.hookrun), as the login's act
    (QEM_ACTOR or the login name)."""
    from ..storage.store import Store
    from ..system.workspace import actor, resolve

    state = Path(state)  # (a write: the commands' Paths from here on)
    store = Store.open(state, create=False, write=True)
    try:
        return end_sessions(store, resolve(state.parent, state), ended, actor())
    finally:
        store.close()
