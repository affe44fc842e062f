"""The reads by place: the notes' anchors by path, and the log files holding events and texts."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..base.stored_form import is_utf8
from ..system import db
from .reading import LIVE, IndexReads


class PathReads(IndexReads):
    """Store's reads for the anchors' reads, drift, the staged check and git staging."""

    def anchors_in_force(self, paths: Iterable[str] | None = None, *, folder: str | None = None,
                         states: tuple[str, ...] = LIVE) -> list[tuple[str, str, str]]:
        """(note, path, object id) of every anchor of the notes in these states (in force,
        unless told), by path, then note; `paths`: only those paths; `folder`: only that
        path and the paths inside the folder it names (their range in the index on paths:
        qem_edit.system.anchors.folder_range).  A path that is not UTF-8 (git names a file by
        its bytes) is no anchor's: it matches none."""
        sql = f"SELECT a.note, a.path, a.oid FROM anchors a CROSS JOIN notes n ON n.id = a.note WHERE n.state IN" \
              f" ({db.marks(states)})"
        if folder is not None:
            from ..system.anchors import folder_range

            if not is_utf8(folder):
                return []
            return self._seen(self._read(sql + " AND (a.path = ? OR (a.path > ? AND a.path < ?)) ORDER BY a.path,"
                                         " a.note", [*states, folder, *folder_range(folder)]))
        if paths is None:
            return self._seen(self._read(sql + " ORDER BY a.path, a.note", states))
        out: list[tuple[str, str, str]] = []
        for chunk in db.chunks(sorted({path for path in paths if is_utf8(path)})):
            out += self._read(sql + f" AND a.path IN ({db.marks(chunk)})", [*states, *chunk])
        return sorted(self._seen(out), key=lambda row: (row[1], row[0]))

    def anchored_paths(self, most: int, *, states: tuple[str, ...] = LIVE) -> list[str] | None:
        """The paths the notes in these states (in force, unless told) are anchored to, in
        order, as `anchors_in_force` gives them; None where there are more than `most`, read no
        further (a commit hook's kept answer: a memory of 20,000 anchors was 120 ms of reading
        every one, joined with its note, to learn that there are too many)."""
        if self.hidden():  # (another session's notes: left out row by row, as anchors_in_force leaves them)
            paths = sorted({path for _, path, _ in self.anchors_in_force(states=states)})
        else:
            paths = [path for (path,) in self._read(
                f"SELECT DISTINCT a.path FROM anchors a CROSS JOIN notes n ON n.id = a.note WHERE n.state IN"
                f" ({db.marks(states)}) ORDER BY a.path LIMIT ?", [*states, most + 1])]
        return paths if len(paths) <= most else None

    def any_anchor_in_force(self, *, states: tuple[str, ...] = LIVE) -> bool:
        """Whether a note in these states (in force, unless told) is anchored, as
        `bool(anchors_in_force(states=states))` answers, reading one row where it can."""
        if self.hidden():
            return bool(self.anchors_in_force(states=states))
        return bool(self._read(f"SELECT 1 FROM anchors a CROSS JOIN notes n ON n.id = a.note WHERE n.state IN"
                               f" ({db.marks(states)}) LIMIT 1", states))

    def anchors_of_notes(self, note_ids: Iterable[str], *, states: tuple[str, ...] = LIVE) -> list[tuple[str, str, str]]:
        """(note, path, object id) of every anchor of these notes (of those in these states)."""
        out: list[tuple[str, str, str]] = []
        for chunk in db.chunks(sorted(set(note_ids))):
            out += self._read(f"SELECT a.note, a.path, a.oid FROM anchors a CROSS JOIN notes n ON n.id = a.note"
                              f" WHERE n.state IN ({db.marks(states)}) AND a.note IN ({db.marks(chunk)})",
                              [*states, *chunk])
        return sorted(out, key=lambda row: (row[1], row[0]))

    def holders(self, names: list[str]) -> Iterator[tuple[str, str, str]]:
        """For every event and text that one of the log files `names` holds: (the event's
        id, or `t:` and the note for a text; a file holding it; its note), a row per file,
        read a chunk of names at a time."""
        for chunk in db.chunks(names):
            marks = db.marks(chunk)
            yield from self._read(f"SELECT e.event, e.file, v.note FROM event_files e JOIN events v ON v.id = e.event"
                                  f" WHERE e.event IN (SELECT event FROM event_files WHERE file IN ({marks}))", chunk)
            yield from self._read(f"SELECT 't:' || note, file, note FROM texts WHERE note IN"
                                  f" (SELECT note FROM texts WHERE file IN ({marks}))", chunk)

    def files_of_events(self, event_ids: Iterable[str]) -> set[str]:
        """The log files (paths under the memory's folder) that hold these events."""
        out: set[str] = set()
        for chunk in db.chunks(sorted(set(event_ids))):
            out.update(f for (f,) in self._read(f"SELECT file FROM event_files WHERE event IN ({db.marks(chunk)})", chunk))
        return out

    def files_of_texts(self, note_ids: Iterable[str]) -> set[str]:
        """The log files (paths under the memory's folder) that hold these notes' texts."""
        out: set[str] = set()
        for chunk in db.chunks(sorted(set(note_ids))):
            out.update(f for (f,) in self._read(f"SELECT file FROM texts WHERE note IN ({db.marks(chunk)})", chunk))
        return out
