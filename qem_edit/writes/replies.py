"""The writes' answers, once for every shell: each knows its text and its JSON form."""

# A write a shell runs returns one of these (built from what qem_edit.writes.acts wrote),
# and the shell only shows it: the command line prints `text()`, or `data()` for `--json`;
# the MCP server returns `agent_text()`, with `agent_data()` as the structured result.
# Where the two ways in say a write differently (an agent reads no `--json`, so the
# server's text names the note's kind, priority and provenance), the answer holds both
# forms, so that neither shell builds its own.  Each carries the notices its write left
# (`notices`), which the shell says beside it.

from __future__ import annotations


from ..base import ids
from ..base.records import Record

TYPE_CHECKING = False  # typing's flag, without importing typing: no hook or write loads it (ARCHITECTURE.md)
if TYPE_CHECKING:  # (records, read only by a type checker: an answer is built from what acts wrote)
    from ..base.replay import Event, Note


class NoteWritten(Record):
    """`add`, `answer`, `supersede`, `share`: the note the write made, and the notes in
    force with its very text (`repeats`, named so its repeat can be revoked)."""

    note: Note
    repeats: tuple[Note, ...]
    notices: list[str]
    superseding: str | None = None  # supersede: the old note, as shown
    private: dict[str, str] | None = None  # share: the private note it ends, as shown before the share
    exit_code = 0

    def text(self) -> str:
        return self.note.shown

    def data(self) -> dict[str, object]:
        return {"id": self.note.id, "short": self.note.shown, "state": self.note.state, "repeats": self._repeats()}

    def agent_text(self) -> str:
        n = self.note
        about = f"({n.kind} · {n.priority} · {n.provenance})"
        if self.private is not None:
            return f"#{n.shown} is the team's, superseding private note #{self.private['short']} {about}"
        if self.superseding is not None:
            return f"#{n.shown} created, superseding #{self.superseding} {about}"
        return f"#{n.shown} created {about}"

    def agent_data(self) -> dict[str, object]:
        if self.private is not None:
            return {**self.note.to_json(), "private": self.private}
        return {**self.note.to_json(), "repeats": self._repeats()}

    def _repeats(self) -> list[dict[str, str]]:
        return [{"id": n.id, "short": n.shown} for n in self.repeats]

    def remark(self) -> str | None:
        return None


class Moved(Record):
    """A move by a note's id (revoke, flag_stale, expire, promote…) and `forget`: the note
    after it, and the event; said alike by both shells."""

    note: Note
    event: Event
    notices: list[str]
    exit_code = 0

    def text(self) -> str:
        return f"#{self.note.shown} {self.event.type} (event {ids.shown(self.event.id)})"

    def data(self) -> dict[str, object]:
        return {**self.note.to_json(), "event": self.event.to_json()}

    agent_text, agent_data = text, data

    def remark(self) -> str | None:
        return None


class Disputed(Record):
    """`dispute`: the dispute opened, by the id `qem rule` takes back."""

    dispute: str
    notices: list[str]
    exit_code = 0

    def text(self) -> str:
        return ids.side_shown(self.dispute)


class Ruled(Record):
    """`rule`: what was ruled on and what stands, as the person named them."""

    what: str
    keep: str
    notices: list[str]
    exit_code = 0

    def text(self) -> str:
        return f"{self.what} ruled: {self.keep} stands"


class Confirmed(Record):
    """A person's act (forget, promote, rule) the MCP client asked its person for: what the
    person confirmed, on which note, as whom and why, and the event it wrote (a rule that
    settles a dispute writes none of a note's)."""

    act: str
    given: str  # the id as the call named it
    about: str  # the note's line the person read before confirming
    actor: str
    reason: str
    event: Event | None
    notices: list[str]
    exit_code = 0

    def agent_text(self) -> str:
        return f"{self.act}: {self.about}, by {self.actor} ({self.reason})"

    def agent_data(self) -> dict[str, object]:
        return {"act": self.act, "id": self.given, "actor": self.actor, "reason": self.reason,
                "event": self.event.to_json() if self.event is not None else None}


def added(written) -> NoteWritten:  # type: ignore[no-untyped-def]
    """A new note's answer (`add`, `answer`), from what acts.add wrote."""
    return NoteWritten(*_written(written))


def superseded(store, written) -> NoteWritten:  # type: ignore[no-untyped-def]
    """A successor's answer, the note it supersedes read as the store shows it now."""
    return NoteWritten(*_written(written), superseding=store.note(written.note.supersedes).shown)


def shared(store, place, given: str, reason: str | None, actor: str, **options) -> NoteWritten:  # type: ignore[no-untyped-def]
    """`share` made (acts.share) and answered: the private note it ends named as it was
    shown before the share."""
    from .acts import share

    private = store.note(store.resolve(given))
    return NoteWritten(*_written(share(store, place, given, reason, actor, **options)),
                       private={"id": private.id, "short": private.shown})


def moved(written) -> Moved:  # type: ignore[no-untyped-def]
    """A move's (or a forget's) answer, from what acts.move or acts.forget wrote."""
    return Moved(written.note, written.event, written.notices)


def confirmed(written, act: str, given: str, about: str, actor: str, reason: str) -> Confirmed:  # type: ignore[no-untyped-def]
    """A person's act, asked through the MCP client, answered from what it wrote."""
    return Confirmed(act, given, about, actor, reason, written.event, written.notices)


def disputed(written) -> Disputed:  # type: ignore[no-untyped-def]
    return Disputed(written.dispute or "", written.notices)


def ruled(written, what: str, keep: str) -> Ruled:  # type: ignore[no-untyped-def]
    return Ruled(what, keep, written.notices)


def _written(written) -> tuple[Note, tuple[Note, ...], list[str]]:  # type: ignore[no-untyped-def]
    return written.note, tuple(written.repeats), written.notices
