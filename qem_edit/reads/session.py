"""A session's delivery: what one hook of an agent session gives, read against its ledger."""

# The harness's shell (qem_edit.shells.hookrun) reads the hook's input and finds the memory;
# here: the moments the hook gives (a compaction's first, where one is pending), the notes
# they trigger that the session's context window was not given yet, within the harness's
# budget, recorded in the session's ledger (qem_edit.system.ledger) as given; whether a
# call is held so that its notes are read before it runs; and the Stop hook's ask to record.
#
# Before means before.  What a hook gives before a tool reaches the model only after the
# tool ran (the harnesses send it beside the tool's result); a deny is the one answer the
# model reads before the action.  So before an edit or a command, when a note due there was
# not given whole in this context window (at the start, with a prompt, at a read of the
# file), the call is held: denied through the harness's own contract, the reason carrying
# the notes and saying the same call may be made again; the ledger records them given and
# the call held, so the call made again passes.  A read is never held, nor a call on any
# failure (the notes then go as context, or nothing does), nor where `.qem/config.toml`
# says `[delivery] hold = false`.

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from ..base.harness import (COMPACTING, HOLD, PROMPT, START, STOP, SUBAGENT, TOOL, Asked, Harness, session_key,
                            window_key)
from ..system import files

TYPE_CHECKING = False  # typing's flag, without importing typing: no hook loads it (ARCHITECTURE.md)
if TYPE_CHECKING:
    from ..storage.store import Store

Log = Callable[[BaseException], None]  # where a problem the reply goes on without is said (the hooks log)

HELD = ("qem held this call, before it ran, so that you read the notes below first (this is not an error"
        " in the call). Take them into account, then make the same call again now, or the call they lead you to:"
        " it goes through.")
HOLDS_AT = ("edit", "shell")  # the moments whose notes a call is held for (never a read)
ASK_TO_RECORD = (
    "Before you stop: did this session learn something a future session on this project needs "
    "(a rule the user gave, a trap in the code, a decision and its reason, a finding)? If so, record it now "
    "with the qem MCP tool `add` (or `qem add TEXT --kind KIND`), kind one of directive, task, gotcha, finding, "
    "reference, decision, operational, and `anchors` naming the files it is about. If nothing is worth keeping, stop.")


def reply(harness: Harness, event: str, ask: Asked, state: str, log: Log) -> str:
    """What the moment gives the session, in the harness's contract (its reply, a held
    call's deny, or no context): the ledger of the session's context window (the main
    thread's, or a subagent's: `agent_id` marks a hook fired inside one) is read and
    written in two short holds of its lock (what the moment is; then what was given), the
    memory read between them, so hooks of one session running side by side wait on each
    other for milliseconds, not a read.  `log`: where a setting that cannot be read is
    said (a hook's log)."""
    from ..system import ledger
    from . import starts

    key, window = session_key(harness, ask), window_key(harness, ask)
    with ledger.session(state, window) as book:
        if ask.does == COMPACTING:
            book.compacted()
            return harness.no_context
        if ask.does == STOP:
            return _stop(harness, ask, state, book)
        keeping = starts.asks(ask) and starts.fresh(book)  # a new window's start: its reply may be kept
        moments = _moments(ask, book, state)
        given = book.given_now()
        counted = book.notes_then >= 0
    read = _read(state, moments, given, counted, ask.session, keeping, harness.budget)
    try:
        return _answer(harness, event, ask, state, log, moments, given, keeping, read)
    finally:
        if read[-1] is not None:
            read[-1].close()  # (the store the start was read from, kept open to keep its reply)


def _answer(harness: Harness, event: str, ask: Asked, state: str, log: Log, moments: list, given: dict,
            keeping: bool, read: tuple) -> str:
    """`reply`'s second hold of the ledger: what the memory `read` gives, fitted and
    recorded; the reply kept where `keeping` (a new window's start) and it said everything."""
    from ..system import ledger
    from . import starts

    found, texts, changed, notes, due_here, standings, moment, bounds = read
    key, window = session_key(harness, ask), window_key(harness, ask)
    if window != key and ask.does == SUBAGENT:
        with ledger.session(state, key) as book:
            book.started(window)
    with ledger.session(state, window) as book:
        keeping = keeping and starts.fresh(book)  # (no hook beside this one wrote its ledger meanwhile)
        beside = book.given_now() != given  # a hook beside this one gave meanwhile
        if book.notes_then < 0:
            book.notes_then = notes
        holding = _holds(ask, found, due_here, book, state, log)
        if ask.does == HOLD and not holding:
            return harness.no_context  # no context goes before this tool: the hook after it gives it
        budget = harness.budget - (harness.measure(HELD) + 2 if holding else 0)
        text, whole = _given(harness, moments, found, texts, changed, book, budget, ask.does in (TOOL, HOLD),
                             standings, (lambda ids: _texts_now(state, ask.session, ids)) if beside else None)
        # What the next tool calls may be answered from (qem_edit.reads.quiet): not where a change
        # was left unsaid, nor where a hook beside this one gave a note whose change this read
        # could not see.
        book.seen = moment if whole and not beside else ""
        if holding and text:
            book.hold(_about(ask))
            return harness.deny(event, f"{HELD}\n\n{text}")
    out = harness.reply(event, text, ask.guest) if ask.does != HOLD else harness.no_context
    if keeping and whole and bounds is not None:  # what the next new window's start is answered from
        starts.keep(state, harness, event, ask, out, book, moment, bounds)
    return out


def _about(ask: Asked) -> str:
    """What a tool call is about, as the ledger remembers a held one: the same call made
    again is about the same."""
    return "\0".join([ask.moment, ask.command, *ask.paths])


def _holds(ask: Asked, found, due_here: set, book, state: str, log: Log) -> bool:  # type: ignore[no-untyped-def]
    """Whether this call is held: it runs before its tool, a note due at its edit or
    command was not given whole in this epoch, the ledger knows what the epoch gave, the
    same call was not held already, and the project did not turn holding off."""
    if not ask.holds or not book.may_hold() or book.was_held(_about(ask)):
        return False
    if not any(row[0] in due_here and not book.was_given(row[0], True) for row in found.dues()):
        return False
    return _hold_setting(state, log)


def _hold_setting(state: str, log: Log) -> bool:
    """`[delivery] hold` in the memory's config.toml (default true), read only when a call
    would be held; a file that cannot be read, or a value that is not true or false, holds
    nothing (said in the hooks log)."""
    try:
        config = os.path.join(state, "config.toml")
        text = files.read_text(config)
        value = _plain_hold(text)
        if value is None:  # written some other way: read as TOML (tomllib costs a hook ~10 ms to import)
            import tomllib

            value = tomllib.loads(text).get("delivery", {}).get("hold", True)
        if not isinstance(value, bool):
            raise ValueError(f"[delivery] hold in {config} is {value!r}, not true or false;"
                             " no call is held")
        return value
    except (OSError, ValueError, AttributeError) as exc:
        log(exc)
        return False


_NAME = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")  # a bare TOML key


def _plain_hold(text: str) -> bool | None:
    """`[delivery] hold` where config.toml says it plainly, as qem writes it (a `[delivery]`
    table, a `hold = true|false` line, or neither); None where anything else there names
    them (an inline table, a dotted key, a multi-line string): TOML must read it."""
    if '"""' in text or "'''" in text:
        return None
    table, value = "", True
    for line in text.splitlines():
        header = _table(line)
        if header is not None or line.lstrip().startswith("["):
            table = header if header is not None else "?"
            continue
        hold = _hold_line(line) if table == "delivery" else None
        if hold is not None:
            value = hold
        elif "delivery" in line or (table in ("delivery", "?") and "hold" in line):
            return None
    return value


# A line read as `\s*\[\s*([A-Za-z0-9_-]+)\s*\]\s*(?:#.*)?` and `\s*hold\s*=\s*(true|false)\s*(?:#.*)?`
# read it (str.strip's spaces are the pattern's `\s`), without a regular expression engine loaded
# for a call the hook holds (tests/test_hold.py holds the two to one reading).

def _table(line: str) -> str | None:
    """The table a `[name]` line opens (spaces and a comment around it); None for any other line."""
    rest = line.lstrip()
    if not rest.startswith("["):
        return None
    name, bracket, after = rest[1:].lstrip().partition("]")
    name = name.rstrip()
    return name if bracket and name and _NAME.issuperset(name) and _ends(after) else None


def _hold_line(line: str) -> bool | None:
    """The value of a `hold = true|false` line (spaces and a comment around it); None for any other."""
    rest = line.lstrip()
    if not rest.startswith("hold"):
        return None
    rest = rest[4:].lstrip()
    if not rest.startswith("="):
        return None
    rest = rest[1:].lstrip()
    word = "true" if rest.startswith("true") else "false" if rest.startswith("false") else None
    return word == "true" if word is not None and _ends(rest[len(word):]) else None


def _ends(rest: str) -> bool:
    """Whether a line ends here: nothing but spaces, then a comment or nothing."""
    rest = rest.lstrip()
    return not rest or rest.startswith("#")


def _moments(ask: Asked, book, state: str) -> list:  # type: ignore[no-untyped-def]
    """The moments this hook gives (a compaction's first, where one is pending)."""
    from ..base.triggers import from_cwd
    from ..system.workspace import work_top
    from . import delivery

    if ask.does == START:
        if ask.source in ("clear", "compact"):
            book.compacted()
    if ask.does == PROMPT:
        book.heard(ask.prompt)
    top = work_top(state)
    moments = []
    if book.pending_compact and ask.does in (START, PROMPT):
        moments.append(delivery.Moment("compact", top=str(top)))
        book.pending_compact = False
    if (ask.does == START and ask.source != "compact") or ask.does == SUBAGENT:
        moments.append(delivery.Moment("start", top=str(top)))
    elif ask.does == PROMPT:
        moments.append(delivery.Moment("prompt", prompt=ask.prompt, top=str(top)))
    elif ask.does in (TOOL, HOLD):  # the call's own moment first (its heading), then a command's edits and reads
        for event, named in ((ask.moment, ask.paths), *ask.also):
            paths = from_cwd(named, ask.cwd or str(top), str(top))
            if paths or event == ask.moment:
                command = ask.command if event == ask.moment else ""
                moments.append(delivery.Moment(event, paths=paths, command=command, top=str(top)))
    return moments


READ_AHEAD = 420  # texts read for a reply: more than a budget's worth of the shortest lines (24 characters)
AHEAD_STEP = 64  # texts read at once for a tiered reply, until their lines pass its budget


def _ahead(store: Store, fresh: Iterator[str], budget: int) -> dict:
    """The notes, texts and all, of the first of `fresh` (ids in the reply's order) a
    reply can give: READ_AHEAD of them at most, and where `budget` (a tiered reply's: in
    the harness's unit, never fewer than characters), none past those whose lines alone
    (tiers.least) pass it.  A reply is fitted in order and ends at the first note that
    does not fit, or whose text was not read, so it gives what it would with every text
    read; a start at scale reads a hundred texts, not READ_AHEAD."""
    from itertools import islice

    if not budget:
        return store.notes_by_id(islice(fresh, READ_AHEAD))
    from .tiers import least

    texts: dict = {}
    size, left = 0, READ_AHEAD
    while size <= budget and left > 0:
        ids = list(islice(fresh, min(AHEAD_STEP, left)))
        if not ids:
            break
        read = store.notes_by_id(ids)
        texts.update(read)
        size += sum(least(read[n]) for n in ids if n in read)
        left -= len(ids)
    return texts


def _read(state: str, moments: list, given: dict[str, list], counted: bool,  # type: ignore[no-untyped-def]
          session: str | None = None, bounded: bool = False, budget: int = 0):
    """From the memory: what the moments trigger (each note once, the first moment's),
    the texts of the first of them the session was not given (`given`: this epoch's
    ledger entries) that a reply of `budget` can give, the changes of the notes given
    this epoch, how many notes it holds (-1 where the session's ledger has counted them
    already: `counted`), the notes due at an edit or a command among them, in force
    (what a call is held for), the notes' standing (past their end, in dispute:
    qem_edit.reads.standing), and the index's moment the read saw
    (qem_edit.storage.store.Store.moment), and, where `bounded`, what a start's reply
    holds for (qem_edit.reads.starts.Bounds, the store still open in it for the reply to
    keep: `Bounds.close` lets it go; else None), read first.  Read for `session`: another
    session's session notes are not given.  The digest the next tool calls are answered
    from is kept on the way (qem_edit.reads.quiet)."""
    from ..base.times import utc_now
    from ..storage.store import Store
    from . import quiet

    store = Store.open(state, create=False, write=False)
    store.session = session
    bounds = None
    try:
        with store.reading():
            now = utc_now()
            if bounded:
                from .starts import Bounds

                bounds = Bounds(store, now)
            found = _found(store, moments, given, counted, now, budget)
            digest = quiet.written(store, found[-1])
        quiet.keep(store, digest)
    except BaseException:
        store.close()
        raise
    if bounds is None:
        store.close()  # (else open for the reply to keep: it closes it)
    return (*found, bounds)


def _found(store: Store, moments: list, given: dict[str, list], counted: bool, at: str, budget: int = 0) -> tuple:
    """`_read`'s answer, read from `store` inside its read snapshot, the notes' standings
    as they are at the time `at`, the texts read ahead for a reply of `budget` at most
    (0: READ_AHEAD texts)."""
    from ..system.ledger import tip
    from . import delivery
    from .standing import Standings

    entries, seen, due_here = delivery.Ranks(), set(), set()
    for i, moment in enumerate(moments):
        found = delivery.hits(store, moment)
        if moment.event in HOLDS_AT:
            due_here.update(found.ids())
        found = found.without(seen, lambda _: True)  # (each note once: the first moment's)
        if i + 1 < len(moments):
            seen.update(found.ids())
        entries += found
    fresh = (row[0] for row in entries.dues() if row[0] not in given or not given[row[0]][1]  # (each due whole)
             or (delivery.owed_of(row) == delivery.LATE and row[0] + LATE_MARK not in given))
    texts = _ahead(store, fresh, budget if not due_here and any(m.event in delivery.TIERED for m in moments) else 0)
    standings = Standings.read(store, at, texts.values())
    due_here -= {n for n, note in texts.items() if standings.of(note).past_end}  # not in force: holds nothing
    recorded = {n: entry[2] for n, entry in given.items()}
    now = store.last_changes(recorded)
    moved = [n for n, last in recorded.items() if now.get(n, "") != last]
    notes = store.notes_by_id(moved)
    after = store.notes_by_id(n.superseded_by for n in notes.values() if n.superseded_by)
    changed = {n: delivery.Change(notes[n], after.get(notes[n].superseded_by or "")) if n in notes else None
               for n in moved}
    count = -1 if counted else store.count()
    return (entries, texts, {n: (c, tip(c.note) if c else "") for n, c in changed.items()}, count,
            due_here, standings, store.moment(store.head()))


def _given(harness: Harness, moments: list, found, texts: dict, changed: dict,  # type: ignore[no-untyped-def]
           book, budget: int, tool: bool = False, standings=None, more=None) -> tuple[str, bool]:
    """The reply's context, from what the ledger says was not given yet, within `budget`
    (the harness's unit), and whether it said every change of a note given; what it
    gives, recorded.  Its heading is a tool call's own moment (the first), else the last
    (a start's after a compaction's).  The notes' texts are those read ahead (`texts`),
    and where `more` is given (a hook beside this one gave notes since the read: those
    after them may fit now), what `more(ids)` reads of those it left out."""
    from ..system.ledger import tip
    from . import delivery

    entries = found.without(book.given, lambda row: book.was_given(row[0], True) and not (
        delivery.owed_of(row) == delivery.LATE and not book.was_given(row[0] + LATE_MARK, True)))
    changes = []
    for n, (change, last) in changed.items():
        entry = book.given.get(n)
        if entry is None or entry[0] != book.epoch or entry[2] == last:
            continue  # given in another epoch since, or its change said by a hook beside this one
        if change is None:
            book.given.pop(n)  # gone from the index (a forget purged it past reading)
        else:
            changes.append(change)
    if not entries and not changes:
        return "", True  # (nothing to fit: the fitting's modules are not loaded)
    from . import tiers

    def fetch(ids: list[str]) -> dict:
        missing = [n for n in ids if n not in texts] if more is not None else []
        if missing:
            texts.update(more(missing))
        return {n: texts[n] for n in ids if n in texts}

    out = tiers.fitter(moments)(moments[0] if tool else moments[-1], entries, changes, budget, fetch,
                                measure=harness.measure, standings=standings)
    for change in out.changes:
        book.give(change.note.id, book.given[change.note.id][1], tip(change.note))
    late = {row[0] for row in entries.owed() if row[5] == delivery.LATE}
    for h in out.given:
        book.give(h.note.id, h.full, tip(h.note))
        if h.note.id in late:  # given as late: not again this epoch (given before it was late: again now)
            book.give(h.note.id + LATE_MARK, True, "")
    return out.text(), len(out.changes) == len(changes)


def _texts_now(state: str, session: str | None, ids: list[str]) -> dict:
    """The notes `ids` as the index holds them now, for `session` (none where it cannot be
    read): the texts a reply reads after its read ahead, where a hook beside it gave the
    notes before them meanwhile (a race: the read ahead counted those)."""
    from ..storage.store import Store

    try:
        store = Store.open(state, create=False, write=False)
    except Exception:  # noqa: BLE001 - the reply then ends at the first note it has no text of, counted
        return {}
    try:
        store.session = session
        with store.reading():
            return store.notes_by_id(ids)
    except Exception:  # noqa: BLE001 - as above
        return {}
    finally:
        store.close()


LATE_MARK = "@late"  # a ledger entry beside a request's: given as late (its last change "", which no note's is)


def _stop(harness: Harness, ask: Asked, state: str, book) -> str:  # type: ignore[no-untyped-def]
    """The opt-in Stop hook: once a session, and only when it recorded no note, ask the
    agent to record what a future session needs; never when the harness says the agent
    is already going on because of a stop hook."""
    from ..storage.store import Store

    if ask.stop_hook_active or book.stop_asked:
        return harness.no_context
    store = Store.open(state, create=False, write=False)
    try:
        now = store.count()
    finally:
        store.close()
    if book.notes_then < 0:
        book.notes_then = now
    if now > book.notes_then:  # a note was created since the session began
        return harness.no_context
    book.stop_asked = True
    return harness.stop_reply(ASK_TO_RECORD)
