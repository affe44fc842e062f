"""Times as qem writes and reads them: UTC, to the second, `YYYY-MM-DDTHH:MM:SSZ`.

Now (the one clock every event's time comes from), an ISO date or time given by a person
turned into that form, and whether an `--at` names a time rather than a git revision.
"""

from __future__ import annotations

import os
import time

from . import errors
from .patterns import Lazy

_CANONICAL = Lazy(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z\Z")
_AT_TIME = Lazy(r"\d{4}-\d{2}-\d{2}(?:[T ][0-9:]+(?:Z|[+-]\d{2}:?\d{2})?)?\Z")


def utc_now() -> str:
    """Now, UTC, second precision.  `QEM_NOW` pins it (tests and reproducible fixtures)."""
    pinned = os.environ.get("QEM_NOW")
    if pinned:
        if not _is_canonical(pinned):  # else it would be every new event's time, and no reader's
            raise errors.BadInput(f"QEM_NOW={pinned!r} is not a UTC time `YYYY-MM-DDTHH:MM:SSZ` (e.g."
                                  " 2026-01-01T00:00:00Z); nothing was written")
        return pinned
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())  # (not datetime: a hook's start-up need not load it)


def stamp(moment) -> str:  # type: ignore[no-untyped-def]
    """A `datetime` (naive UTC, or aware) as `YYYY-MM-DDTHH:MM:SSZ`.  Not `strftime`: its
    `%Y` writes the year 1 as `1` here (glibc), which no reader takes for a time."""
    if moment.tzinfo is not None:
        from datetime import timezone

        moment = moment.astimezone(timezone.utc)
    return (f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
            f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}Z")


def _is_canonical(value: str) -> bool:
    from datetime import datetime

    try:
        return _CANONICAL.match(value) is not None and bool(datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:  # a month 13, a 30th of February
        return False


def parse_time(value: str, key: str, *, end: bool) -> str:
    """An ISO date or UTC time → the canonical `YYYY-MM-DDTHH:MM:SSZ`, inclusive bounds."""
    import re
    from datetime import datetime, timezone

    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            day = datetime.strptime(value, "%Y-%m-%d")
            return stamp(day.replace(hour=23, minute=59, second=59) if end else day)
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise errors.BadInput(f"{key}={value!r} is not an ISO date or time (e.g. 2026-10-01 or 2026-10-01T12:00:00Z)") from None
    if moment.tzinfo is not None:
        try:
            moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
        except OverflowError:  # (9999-12-31T23:30:00-01:00 is in the year 10000, UTC)
            raise errors.BadInput(f"{key}={value!r} is, in UTC, outside the years 1 to 9999") from None
    return stamp(moment)


def is_time(at: str) -> bool:
    """Whether `--at` names a date or a time (else it names a git revision)."""
    return _AT_TIME.match(at) is not None
