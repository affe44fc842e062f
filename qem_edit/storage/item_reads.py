"""The rendered MEMORY.md items read out of the index as bytes, for export and a check-in.

What export joins (every item of a kind, in id order), and the items of some notes (a
check-in's file of a selection); the items themselves are rendered and kept by
qem_edit.storage.index.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..base.vocabulary import KIND_RANK
from ..system import db
from ..system.db import sqlite3
from .index import ITEM


def items_of_notes(conn: sqlite3.Connection, note_ids: Iterable[str]) -> dict[str, list[bytes]]:
    """The rendered items of these notes as UTF-8 bytes, by kind, in id order."""
    wanted = sorted(set(note_ids))
    rows: list[tuple[int, bytes, bytes]] = []
    conn.text_factory = bytes
    try:
        for chunk in db.chunks(wanted):
            rows += conn.execute(f"SELECT kind_rank, id, {ITEM} FROM items INDEXED BY items_by_id"
                                 f" WHERE id IN ({db.marks(chunk)})", chunk).fetchall()
    finally:
        conn.text_factory = str
    out: dict[str, list[bytes]] = {kind: [] for kind in KIND_RANK}
    rank_kind = {rank: kind for kind, rank in KIND_RANK.items()}
    for rank, _, item in sorted(rows):
        out[rank_kind[rank]].append(item)
    return out


def items_by_kind(conn: sqlite3.Connection, kinds: Iterable[str], *, with_ids: bool = False) -> dict[str, list]:
    """Each kind's rendered items as UTF-8 bytes, in id order (what export joins); with
    `with_ids`, as (note id, item) pairs."""
    columns = f"id, {ITEM}" if with_ids else ITEM
    conn.text_factory = bytes
    try:
        out: dict[str, list] = {}
        for kind in kinds:
            rows = conn.execute(
                f"SELECT {columns} FROM items WHERE kind_rank = ? ORDER BY id", (KIND_RANK[kind],)
            ).fetchall()
            out[kind] = [(i.decode("ascii"), item) for i, item in rows] if with_ids else [row[0] for row in rows]
        return out
    finally:
        conn.text_factory = str
