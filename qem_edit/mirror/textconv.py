"""Readable `git diff` of the committed log, one line per event.

Readable diffs of the committed log: `git diff` and `git log -p` show one line per
event (and per text) instead of canonical JSON, through git's textconv.

`qem hooks install` configures it for one repository: the committed `.qem/.gitattributes`
gives the log files the `diff=qem-log` attribute, and the local git config says what
that driver runs (`diff.qem-log.textconv`, the qem that installed it, by absolute path).
A clone that has not run it sees the JSON, as before; nothing else changes.

git hands the textconv a temporary copy of the file, under a name that is not the log
file's, so a file is read by its content: an event, a text, or a pack of either.  What
cannot be read is shown as it is, so a damaged file still diffs; but no control character
of either reaches the pager raw (qem_edit.base.shown).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from ..base import errors, ids
from ..base.replay import Event
from ..base.shown import visible
from ..storage.logtree import LogFileError, event_from, text_from
from ..system import gitrepo

DRIVER = "qem-log"
ATTRIBUTES = ("events/** -text diff=qem-log", "texts/** -text diff=qem-log", "packs/** -text diff=qem-log")


def readable(data: bytes) -> bytes:
    """A log file's bytes as one readable line per record (the bytes themselves when they
    are not a log file's), control characters always made visible: git hands this to its
    pager, and from there to a terminal, whatever qem's own stdout is."""
    try:
        lines = [_line(json.loads(raw), n) for n, raw in enumerate(data.decode("utf-8").splitlines(), 1) if raw]
    except (UnicodeDecodeError, ValueError, LogFileError, RecursionError):  # (nested past the parser's stack)
        return visible(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
    return visible("".join(line + "\n" for line in lines)).encode("utf-8")


def _line(obj: object, number: int) -> str:
    if isinstance(obj, dict) and "type" in obj:
        return event_line(event_from(obj, f"line {number}"))
    if isinstance(obj, dict) and set(obj) == {"key", "note", "text"}:
        return f"text of note {obj['note']}: {_one_line(str(obj['text']))}"
    record = text_from(obj, f"line {number}")
    return f"text: {_one_line(record.text)}"


def _one_line(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]  # newlines as \n, the rest as it is


def event_line(event: Event) -> str:
    """`event 4tq1x0ab 2026-11-30T10:00:00Z revoked note k3f9x2aa by alice (agent): "why"`"""
    data = dict(event.data)
    agent = " (agent)" if data.pop("writer", None) == "agent" else ""
    if event.type == "created":
        note = f"note {event.id} {data.get('kind')} · {data.get('priority')} · {data.get('provenance')}"
        if data.get("supersedes"):
            note += f" supersedes {data['supersedes']}"
    else:
        note = f"note {event.note}" + "".join(f" {key} {data[key]}" for key in
                                               ("by", "from", "dispute", "with", "kept", "keep") if key in data)
    checkin = f" check-in {event.checkin}" if event.checkin else ""
    reason = f": {_one_line(event.reason)}" if event.reason else ""
    return f"event {ids.shown(event.id)} {event.at} {event.type} {note} by {event.actor}{agent}{checkin}{reason}"


def main(path: str) -> int:
    """`qem log-textconv FILE`: what git runs; the readable form on standard output."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise errors.BadInput(f"cannot read {path}: {exc.strerror}") from None
    sys.stdout.buffer.write(readable(data))
    sys.stdout.buffer.flush()
    return 0


# -- installing it -----------------------------------------------------------------------------


def install(store_root: Path) -> list[str]:
    """Configure the textconv for the repository holding `store_root`; what was done."""
    top = gitrepo.toplevel(store_root if store_root.is_dir() else store_root.parent)
    if top is None:
        raise errors.BadInput(f"{store_root} is not in a git repository; the textconv is git's")
    command = f"{shlex.quote(sys.executable)} -m qem_edit log-textconv"
    done = gitrepo.set_config(top, f"diff.{DRIVER}.textconv", command)
    if not done:
        raise errors.BadInput(f"git config could not be written in {top}")
    said = [f"git config diff.{DRIVER}.textconv \"{command}\" (this clone's .git/config)"]
    if _attributes(store_root):
        said.append(f"{store_root / '.gitattributes'}: log files diff through {DRIVER} (commit it)")
    return said


def _attributes(store_root: Path) -> bool:
    """Give the log files the diff attribute in `.qem/.gitattributes`; whether it changed."""
    from ..storage.logtree import GITATTRIBUTES
    from ..system.files import write_atomic

    path = store_root / ".gitattributes"
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        text = GITATTRIBUTES
    except (OSError, UnicodeDecodeError) as exc:
        raise errors.BadInput(f"cannot read {path}: {exc}") from None
    lines = text.split("\n")
    wanted = [a for a in ATTRIBUTES if a not in lines]
    if not wanted and path.exists():
        return False
    kept = [line for line in lines if line.split(" ")[0] not in {a.split(" ")[0] for a in wanted}]
    store_root.mkdir(parents=True, exist_ok=True)
    write_atomic(path, ("\n".join(kept).rstrip("\n") + "\n" + "".join(a + "\n" for a in wanted)).encode("utf-8"))
    return True
