"""The reads that pick what a session is given: by moment, path, command, term; `qem context`'s."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from ..base.replay import Note
from ..base.vocabulary import KIND_RANK, PRIORITIES, TRIGGER_NAMES
from ..system import db
from .index import NOTE_COLUMNS, note_from_row
from .reading import IN_FORCE, IndexReads


OTHER_TRIGGERS = tuple(name for name in TRIGGER_NAMES if name != "on")  # a path's, a command's
# A priority's rank (PRIORITY_RANK; an unknown one after them all), as a row's order needs it.
PRIORITY_RANK_SQL = ("CASE priority " + " ".join(f"WHEN '{p}' THEN {i}" for i, p in enumerate(PRIORITIES))
                     + f" ELSE {len(PRIORITIES)} END")


class DeliveryReads(IndexReads):
    """Store's reads for qem_edit.reads.delivery, qem_edit.reads.context and the hooks' ledger."""

    def due_at_moment(self, moment: str, bundle: Mapping[str, Iterable[str]],
                      declared: str = "") -> list[tuple]:
        """The notes in force a lifecycle moment fires (qem_edit.base.triggers): those declaring
        it (`@on:`), and those of the kinds and priorities `bundle` gives ({kind:
        priorities}) that declare no moment of their own; each once, in no order, as the
        row a delivery orders (qem_edit.reads.delivery.Ranks): (id, kind rank, priority,
        priority rank), and the first with their why, `declared`.  No text is read, and the
        rows are SQLite's as it made them, no column more than the order needs: a start at
        scale fires thousands."""
        rows = self._read(f"SELECT id, kind_rank, priority, {PRIORITY_RANK_SQL}, ? FROM notes WHERE {IN_FORCE}"
                          " AND id IN (SELECT note FROM triggers WHERE name = 'on' AND value = ?)", (declared, moment))
        for kind, priorities in bundle.items():
            wanted = list(priorities)
            # Those declaring no trigger, from notes_by_bundle alone; then those declaring
            # a path or a command but no moment, found from the triggers they declare.
            rows += self._read(
                f"SELECT id, kind_rank, priority, {PRIORITY_RANK_SQL} FROM notes INDEXED BY notes_by_bundle"
                f" WHERE kind_rank = ? AND priority IN ({db.marks(wanted)}) AND {IN_FORCE} AND triggers = '[]'",
                (KIND_RANK[kind], *wanted))
            rows += self._read(
                f"SELECT id, kind_rank, priority, {PRIORITY_RANK_SQL} FROM notes WHERE id IN (SELECT note"
                f" FROM triggers WHERE name IN ({db.marks(OTHER_TRIGGERS)})) AND kind_rank = ? AND priority IN"
                f" ({db.marks(wanted)}) AND {IN_FORCE} AND id NOT IN (SELECT note FROM triggers WHERE name = 'on')",
                (*OTHER_TRIGGERS, KIND_RANK[kind], *wanted))
        return self._seen(rows)

    def order_keys(self, note_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
        """Each note's (kind, priority), the fields its order needs (absent ids left out)."""
        out: dict[str, tuple[str, str]] = {}
        for chunk in db.chunks(sorted(set(note_ids))):
            out.update((n, (k, p)) for n, k, p in self._read(
                f"SELECT id, kind, priority FROM notes WHERE id IN ({db.marks(chunk)})", chunk))
        return out

    def patterns_in_force(self, name: str) -> list[tuple[str, str]]:
        """(pattern, note) of every `path` or `run` trigger of the notes in force."""
        return self._seen(self._read(f"SELECT t.value, t.note FROM triggers t JOIN notes n ON n.id = t.note"
                                     f" WHERE t.name = ? AND n.{IN_FORCE}", (name,)), 1)

    def terms_in_force(self, keys: Iterable[str]) -> list[tuple[str, str]]:
        """(term, note) of the backticked terms of the notes in force whose key is one of `keys`."""
        out: list[tuple[str, str]] = []
        for chunk in db.chunks(sorted(set(keys))):
            out += self._read(f"SELECT t.term, t.note FROM terms t JOIN notes n ON n.id = t.note"
                              f" WHERE t.key IN ({db.marks(chunk)}) AND n.{IN_FORCE}", chunk)
        return self._seen(out, 1)

    def last_changes(self, note_ids: Iterable[str]) -> dict[str, str]:
        """Each note's last change as a session ledger compares it: the event that put it in
        its state, else its own id (absent ids are left out)."""
        out: dict[str, str] = {}
        for chunk in db.chunks(sorted(set(note_ids))):
            out.update(self._read(f"SELECT id, coalesce(state_event, id) FROM notes WHERE id IN ({db.marks(chunk)})", chunk))
        return out

    def any_request_in_force(self) -> bool:
        """Whether a request is in force (of any session): what is owed and late moves with
        the clock and the seat asking."""
        return bool(self._read("SELECT 1 FROM notes INDEXED BY notes_requests WHERE (seat IS NOT NULL OR due IS NOT"
                               f" NULL) AND {IN_FORCE} LIMIT 1"))

    def term_keys(self) -> list[str]:
        """The keys (qem_edit.base.triggers.terms_of) of every backticked term the notes name,
        in force or not, of any session: a prompt holding none of them as a word names no
        term.  Each distinct key found by one step along the table's key (a few keys among
        tens of thousands of rows: the rows themselves are not read)."""
        return [k for k, in self._read(
            "WITH RECURSIVE k(key) AS (SELECT min(key) FROM terms UNION ALL SELECT (SELECT min(key) FROM terms"
            " WHERE key > k.key) FROM k WHERE k.key IS NOT NULL) SELECT key FROM k WHERE key IS NOT NULL")]

    def start_bounds(self, now: str) -> tuple[bool, str | None, set[str]]:
        """What a start's reply read at `now` holds for (qem_edit.reads.starts): whether a
        request is in force (of any session), the first end of a note in force after `now`
        (None: none ends), and the sessions holding session notes (in force or not)."""
        requests = self.any_request_in_force()
        until = self._read(f"SELECT min(expires) FROM notes INDEXED BY notes_by_end WHERE expires IS NOT NULL"
                           f" AND {IN_FORCE} AND expires > ?", (now,))[0][0]
        sessions = {s for s, in self._read("SELECT DISTINCT session FROM notes INDEXED BY notes_sessions"
                                           " WHERE scope = 'session'") if s is not None}
        return requests, until, sessions

    def latest_at(self) -> str | None:
        """When the latest event was written (None: the log holds none)."""
        return self._read("SELECT max(at) FROM events")[0][0]

    def count_in_force_besides(self, kind: str) -> int:
        """The notes in force of every kind but `kind`."""
        counted = self._read(f"SELECT count(*) FROM notes WHERE kind_rank != ? AND {IN_FORCE}", (KIND_RANK[kind],))[0][0]
        hidden = self.hidden()
        return counted - sum(1 for n in self.session_notes() if n.id in hidden and n.kind != kind) if hidden else counted

    def notes_in_force(self, kind: str, priority: str) -> Iterator[Note]:
        """The notes in force of one kind and priority, in id order, read lazily along the
        index's (kind rank, id) order (inside `reading`)."""
        hidden = self.hidden()
        for row in self.conn.execute(
                f"SELECT {NOTE_COLUMNS} FROM notes INDEXED BY notes_in_order WHERE kind_rank = ? AND priority = ?"
                f" AND {IN_FORCE} ORDER BY id", (KIND_RANK[kind], priority)):
            if row[0] not in hidden:
                yield note_from_row(row)
