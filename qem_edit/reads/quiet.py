"""What a tool call can fire, kept beside the index: a hook that finds nothing due opens no index.

Before every edit, read and command an agent makes, a hook asks what the call's moment
fires.  Nearly always the answer is nothing new: the file has no note, or its notes were
given already.  This module keeps beside the index (`.qem/index.db-moments.json`, ignored
by git as SQLite's own files are) what any tool call can fire: the notes declaring the
edit, read and command moments, every anchor in force, every `when-path` and `when-run`
pattern.  From it and the session's ledger a hook knows, without loading SQLite or the
store, that nothing is due: every note the call fires was given whole in this context
window, and the log has not moved since the session's last full reply (so no note given
changed).  Anything else (a note to give, a log that moved, a ledger or a digest that
cannot be read or is another version's) is answered by the full read
(qem_edit.reads.session), which writes the digest again.

The digest names the log's fingerprint (qem_edit.storage.stamp) and the index's
generation it was read at; it is used only while the log's fingerprint is that one, and
the store removes it after every change it makes to the index (a write, a catch-up, a
rebuild), so a change within one tick of a coarse file clock cannot leave it behind.  The
rules it is read by are the index's own (qem_edit.base.triggers: `declaring`, `by_paths`,
`by_command`).  A digest brought from elsewhere (a commit forcing an ignored file in) names
a fingerprint no other checkout has, and is never used; it is read as untrusted all the same.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .. import __version__
from ..base.errors import QemError
from ..base.harness import Asked
from ..base.triggers import BUNDLES, bundle_at, by_command, by_paths, declaring, from_cwd
from ..storage.stamp import stamp
from ..system import files, ledger
from ..system.workspace import MOMENTS_NAME, work_top

TYPE_CHECKING = False  # typing's flag, without importing typing: no hook loads it (ARCHITECTURE.md)
if TYPE_CHECKING:
    from ..storage.store import Store

VERSION = 1  # of the digest's form: a digest of another form (or another qem's) is written again
TOOL_MOMENTS = ("edit", "read", "shell")  # the moments a tool call gives


def nothing_due(ask: Asked, state: Path, window: str) -> bool:
    """Whether this tool call fires nothing the context window `window` (a ledger key) was
    not given whole, and no note it was given changed since: True only when the digest,
    the ledger and the log all say so; False (read it in full) on any doubt."""
    if ask.moment not in TOOL_MOMENTS:
        return False
    try:
        digest = _digest(state)
        book = ledger.peek(state, window)
        if digest is None or book is None or book.notes_then < 0 or book.seen != digest["stamp"]:
            return False
        fired = _fired(ask, state, digest)
    except (QemError, OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return False  # a link or a folder where the digest is, a digest or a ledger of another shape
    return all(book.was_given(note, True) for note in fired)


def _digest(state: Path) -> dict | None:
    """The digest, where it is this qem's and names the log as it is now; else None."""
    raw = files.read_regular(state / MOMENTS_NAME)
    if raw is None:
        return None
    head, _, body = raw.partition(b"\n")
    header = json.loads(head)
    if header != _header(json.dumps(stamp(state)), header.get("generation")):
        return None
    data = json.loads(body)
    return {"stamp": header["stamp"], **data} if isinstance(data, dict) else None


def _fired(ask: Asked, state: Path, digest: dict) -> set[str]:
    """Every note the call's moments fire by the digest (as qem_edit.session's `_moments`
    makes them: the call's own, then a command's edits and reads)."""
    top = str(work_top(state))
    anchors: dict[str, list[str]] = {}
    for path, note in digest["anchors"]:
        anchors.setdefault(str(path), []).append(str(note))
    fired: set[str] = set()
    for event, named in ((ask.moment, ask.paths), *ask.also):
        paths = from_cwd(named, ask.cwd or top, top)
        if not paths and event != ask.moment:
            continue
        for moment in declaring(event):
            fired.update(str(n) for n in digest["on"][moment])
        if event in ("edit", "read"):
            fired.update(by_paths(paths, lambda covering: ((n, p) for p in covering for n in anchors.get(p, ())),
                                  [(str(p), str(n)) for p, n in digest["paths"]]))
        elif event == "shell" and ask.command and event == ask.moment:
            fired.update(by_command(ask.command, [(str(p), str(n)) for p, n in digest["runs"]]))
    return fired


def _header(log_stamp: str | None, generation: object) -> dict[str, object]:
    """What a digest is of: its form, the qem and the bundles (the moments each kind fires
    at, which it read the notes by) that wrote it, the log's fingerprint, the index's generation."""
    return {"v": VERSION, "qem": __version__, "bundles": json.dumps(BUNDLES), "stamp": log_stamp,
            "generation": generation}


def written(store: Store) -> bytes | None:
    """The digest of the index as `store` reads it now (inside its read snapshot), or None
    where the one beside it is of this very index (or there is no file to keep it in)."""
    if store.index_path is None:
        return None
    header = json.dumps(_header(store.log_stamp(), store.head()), separators=(",", ":"))
    try:
        with open(store.root / MOMENTS_NAME, "rb") as handle:
            if handle.readline().rstrip(b"\n") == header.encode():
                return None
    except OSError:
        pass
    with store.seeing_every_session():  # every session's notes: a digest serves them all
        body = {"on": {m: [n for n, *_ in store.due_at_moment(m, bundle_at(m))] for m in TOOL_MOMENTS},
                "anchors": [(path, note) for note, path, _ in store.anchors_in_force()],
                "paths": store.patterns_in_force("path"), "runs": store.patterns_in_force("run")}
    return (header + "\n" + json.dumps(body, separators=(",", ":"))).encode()  # (ASCII: any text escaped)


def keep(store: Store, digest: bytes | None) -> None:
    """Write the digest `written` made (after the read it was made in), then take it back
    if the index moved meanwhile: a writer removes the digest after its commit, so one
    written after that removal is seen here as of an older generation.  A digest that
    cannot be written is not kept (the hooks then read in full, as before)."""
    if digest is None:
        return
    path = store.root / MOMENTS_NAME
    try:
        files.write_atomic(path, digest, mode=0o600, durable=False)
        if json.loads(digest.partition(b"\n")[0])["generation"] != store.head():
            os.unlink(path)
    except (QemError, OSError, ValueError):
        pass
