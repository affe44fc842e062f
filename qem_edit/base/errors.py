"""The failures a user can meet, each with its documented exit code.

Library code raises these; `words` gives what a failure says, which every shell says in
the same words (the CLI on stderr, with the exit status only `cli.py` turns it into; the
MCP server as a tool error).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_DIFFERENT = 1  # a check found a difference
EXIT_INPUT = 2  # bad usage or bad input; nothing written
EXIT_CONFLICT = 3  # a conflict; nothing written
EXIT_INTERRUPTED = 130


class QemError(Exception):
    """A failure with a message for the user and nothing written."""

    exit_code = EXIT_INPUT

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class StoreMissing(QemError):
    """The store file does not exist and the command only reads."""


class NotAStore(QemError):
    """The file exists but is not a qem store (or is corrupt)."""


class SchemaTooNew(QemError):
    """The store was written by a newer qem."""


class StoreUnwritable(QemError):
    """The store is read-only or its directory cannot be written."""


class StoreBusy(QemError):
    """Another process held the store's write lock for longer than we wait."""


class NoSuchNote(QemError):
    """An id that names no note in the store."""


class Refused(QemError):
    """A lifecycle move that makes no sense for the note's state, or bad note content."""


class BadInput(QemError):
    """A file or argument that cannot be read as what it should be."""


class BadFile(BadInput):
    """A file being checked in that cannot be: one of its lines, its header, its bytes
    (a check-in puts the file's name before the message: the latest kept edit is checked
    in without one given)."""


class HeadMoved(QemError):
    """The store moved on between planning a check-in and applying it."""

    exit_code = EXIT_CONFLICT

    def __init__(self, message: str, *, moved: int = 0) -> None:
        super().__init__(message)
        self.moved = moved  # how many events others appended meanwhile


class Interrupted(QemError):
    """Ctrl-C at a prompt or while qem worked; nothing was written."""

    exit_code = EXIT_INTERRUPTED


class ConflictError(QemError):
    """A check-in whose changes overlap changes made in the store since its base."""

    exit_code = EXIT_CONFLICT


def words(exc: BaseException) -> list[str]:
    """What a failure says, a line each, for a shell to say after its `qem: `: a QemError's
    message (an interruption's without `error:`) and hint, an OSError's file and reason
    (a file qem cannot create or write), anything else named, with nothing written."""
    if isinstance(exc, QemError):
        label = "" if isinstance(exc, Interrupted) else "error: "
        return [f"{label}{exc}"] + ([exc.hint] if exc.hint else [])
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return [f"error: {where}{exc.strerror or exc}"]
    return [f"error: {type(exc).__name__}: {exc}; nothing was written"]


def choice(value: str | None, allowed: tuple[str, ...], what: str, *, as_filter: bool = False) -> str | None:
    """`value` when `allowed` holds it (None, an option not given, passes); else BadInput
    listing the choices, naming the value as an option's (`unknown kind 'x'`) or, for
    `qem query`, as a filter's (`kind='x'`)."""
    if value is None or value in allowed:
        return value
    listed = ", ".join(allowed)
    if as_filter:
        raise BadInput(f"{what}={value!r}: use one of {listed}")
    raise BadInput(f"unknown {what} {value!r}; use one of: {listed}")
