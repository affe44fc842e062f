"""The notes a structured filter selects (`qem query`, a checkout); its SQL is built here."""

from __future__ import annotations

from collections.abc import Sequence

# One filter on a note as plain data: its field (a Note's), the comparison's name
# (qem_edit.reads.query's, which compares the same way in a scan) and the value.
Condition = tuple[str, str, object]

# the notes table's column of each field a filter names (a request's `to` is its `seat`)
_COLUMNS = {"kind": "kind", "state": "state", "priority": "priority", "provenance": "provenance", "actor": "actor",
            "created_at": "created_at", "supersedes": "supersedes", "text": "text", "to": "seat", "due": "due"}
_COMPARED = {"=": "{} = ?", ">=": "{} >= ?", "<=": "{} <= ?", "<": "{} < ?", "contains": "instr({}, ?) > 0"}
_ANCHORED = {  # a note's anchors, by path, in the index's anchors table
    "has": "id IN (SELECT note FROM anchors WHERE path = ?)",
    "has under": "id IN (SELECT note FROM anchors WHERE path = ? OR (path > ? AND path < ?))",
}


def _sql(condition: Condition) -> tuple[str, tuple[object, ...]]:
    """A condition as SQL over the notes table, with the values it binds."""
    field, compare, value = condition
    if field == "anchors" and compare in _ANCHORED:
        if compare == "has under":
            from ..system.anchors import folder_range

            return _ANCHORED[compare], (value, *folder_range(str(value)))
        return _ANCHORED[compare], (value,)
    if field not in _COLUMNS or compare not in _COMPARED:
        raise ValueError(f"no filter compares a note's {field!r} by {compare!r}")
    return _COMPARED[compare].format(_COLUMNS[field]), (value,)


def selecting(conditions: Sequence[Condition]) -> tuple[str, list[object]]:
    """The query `Store.select_notes` runs for these conditions (the ids of the notes
    meeting every one, in the projection's order), with the values it binds."""
    built = [_sql(c) for c in conditions]
    clause = f" WHERE {' AND '.join(sql for sql, _ in built)}" if built else ""
    params = [value for _, binds in built for value in binds]
    return f"SELECT id FROM notes{clause} ORDER BY kind_rank, id", params
