"""`qem query`: exact filters over note and event headers, answered with their scope.

Every answer says what was scanned (store, head seq, notes and events), whether it is
complete, and why not when not: a text filter cannot see forgotten text, and a currency
filter cannot place notes whose currency is unknown.  An empty result is an answer only
within that scope, and says so.  A repeated, empty, unknown or malformed filter is an
error, never ignored.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..base import errors, ids
from ..base.owing import answered, is_request
from ..base.replay import TEXT_MISSING, Event, Note
from ..base.resolver import Graph
from ..base.times import parse_time, utc_now
from ..base.vocabulary import EVENT_TYPES, KINDS, PRIORITIES, PROVENANCES, STATES, scoped_prefix
from ..storage.store import Store, read_gaps  # (read_gaps: query's word, kept where the readers import it)
from ..system import anchors
from .standing import Standings

NOTE_KEYS = (
    "kind", "state", "priority", "provenance", "actor", "since", "until",
    "supersedes", "current", "disputed", "text~", "anchor", "anchor~", "to", "due<", "answered",
)
ANSWERED = ("yes", "no", "unknown", "not-owed")  # answered=: qem_edit.base.owing's values ("not owed" spelled as one word)
EVENT_KEYS = ("type", "note", "actor", "since", "until", "checkin")
_FILTER = re.compile(r"(?P<name>[a-z]+)(?P<op>[=~<])(?P<value>.*)\Z", re.S)


@dataclass(frozen=True)
class Filter:
    key: str
    value: str

    def __str__(self) -> str:
        return f"{self.key}{self.value}" if self.key.endswith(("~", "<")) else f"{self.key}={self.value}"


@dataclass
class Scope:
    store: str
    latest: str | None  # the newest event's time: what "as of" the answer is
    notes: int
    events: int
    gaps: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.gaps

    def line(self) -> str:
        status = "complete" if self.complete else "incomplete: " + "; ".join(self.gaps)
        latest = f" (the log up to {self.latest})" if self.latest else " (an empty log)"
        return f"scope: {self.store}{latest}: {self.notes:,} notes / {self.events:,} events scanned; {status}"

    def to_json(self) -> dict[str, object]:
        return {
            "store": self.store, "latest": self.latest, "notes_scanned": self.notes,
            "events_scanned": self.events, "complete": self.complete, "incomplete_because": self.gaps,
        }


def parse_filters(args: Iterable[str], events: bool) -> list[Filter]:
    allowed = EVENT_KEYS if events else NOTE_KEYS
    seen: set[str] = set()
    out: list[Filter] = []
    for arg in args:
        match = _FILTER.match(arg)
        if not match:
            raise errors.BadInput(f"malformed filter {arg!r}; write KEY=VALUE (or text~SUBSTRING, anchor~FOLDER)")
        key = match["name"] + (match["op"] if match["op"] != "=" else "")
        value = match["value"]
        if key not in allowed:
            raise _unknown(key, allowed, "event" if events else "note")
        if key in seen:
            raise errors.BadInput(f"filter {key!r} is given twice; give each filter once")
        if value == "":
            raise errors.BadInput(f"filter {key!r} is empty; give it a value")
        seen.add(key)
        out.append(Filter(key, value))
    return out




def _unknown(key: str, allowed: tuple[str, ...], what: str) -> errors.BadInput:
    """An unknown filter; where only its operator is wrong (kind~, text=), the one it takes."""
    listed = f"{what} filters: {', '.join(allowed)}"
    if key + "<" in allowed:
        return errors.BadInput(f"no filter {key}=: write {key}<DATE (before it); {listed}")
    other = key[:-1] if key.endswith("~") else key + "~"
    if other in allowed:
        shown, right = (key, other + "=") if key.endswith("~") else (key + "=", other)
        return errors.BadInput(f"no filter {shown}: write {right}VALUE; {listed}")
    return errors.BadInput(f"unknown {what} filter {key!r}; {listed}")


def _note_id(value: str, key: str) -> str:
    if not re.fullmatch(r"#?[0-9a-zA-Z]+", value):
        raise errors.BadInput(f"{key}={value!r}: expected a note id (e.g. k3f9)")
    return value.lstrip("#")


Test = Callable[[object], bool]


def _anchors_any(match: Callable[[str, str], bool]) -> Callable[[object, object], bool]:
    return lambda anchored, path: any(match(p, path) for p, _ in anchored)  # type: ignore[attr-defined]


# How a filter on one field compares the field with its value, by name: here in a scan, and
# in the index by the same name (qem_edit.storage.selection, given the filter as plain data).
_COMPARISONS: dict[str, Callable[[object, object], bool]] = {
    "=": operator.eq,
    ">=": operator.ge,  # since=: a lower bound
    "<=": operator.le,  # until=: an upper bound, inclusive
    "<": lambda field, bound: field is not None and field < bound,  # type: ignore[operator]  # due<: before, strictly
    "contains": lambda text, part: text is not None and part in text,  # type: ignore[operator]
    "has": _anchors_any(operator.eq),  # anchor=: one of the note's anchors is that path
    "has under": _anchors_any(anchors.under),  # anchor~: one is that path, or inside the folder it names
}


@dataclass(frozen=True)
class _Field:
    """A filter on one field: the field, how KEY=VALUE's value is read (and checked), and
    how the two compare; the scan's test and the index's condition are both made from it."""

    name: str
    read: Callable[[str, str], object]
    compare: str = "="

    def test(self, value: str, key: str) -> Test:
        holds, wanted = _COMPARISONS[self.compare], self.read(value, key)
        return lambda item: holds(getattr(item, self.name), wanted)

    def condition(self, value: str, key: str) -> tuple[str, str, object]:
        """The filter as plain data for the index (qem_edit.storage.selection): the note's
        field, the comparison's name, the value read."""
        return self.name, self.compare, self.read(value, key)


def _one_of(allowed: tuple[str, ...]) -> Callable[[str, str], object]:
    return lambda value, key: errors.choice(value, allowed, key, as_filter=True)


def _as_is(value: str, key: str) -> str:
    return value


def _time(end: bool) -> Callable[[str, str], str]:
    return lambda value, key: parse_time(value, key, end=end)


def _anchor_path(value: str, key: str) -> str:
    return anchors.named_path(value, f"{key}{'' if key.endswith('~') else '='}{value}")


# Filters that read one field (a note's are its column in the index too); current= and
# disputed= need the graph, and text~ adds to the scope what it cannot see.
_NOTE_FIELDS: dict[str, _Field] = {
    "kind": _Field("kind", _one_of(KINDS)),
    "state": _Field("state", _one_of(STATES)),
    "priority": _Field("priority", _one_of(PRIORITIES)),
    "provenance": _Field("provenance", _one_of(PROVENANCES)),
    "actor": _Field("actor", _as_is),
    "since": _Field("created_at", _time(end=False), ">="),
    "until": _Field("created_at", _time(end=True), "<="),
    "supersedes": _Field("supersedes", _note_id),
    "text~": _Field("text", _as_is, "contains"),
    "anchor": _Field("anchors", _anchor_path, "has"),  # a path as stored, from the top of the work tree
    "anchor~": _Field("anchors", _anchor_path, "has under"),  # that path, and the folder it names
    "to": _Field("to", _as_is),  # who owes a request
    "due<": _Field("due", _time(end=False), "<"),  # a deadline before a date (its start) or time
}
_EVENT_FIELDS: dict[str, _Field] = {
    "type": _Field("type", _one_of(EVENT_TYPES)),
    "note": _Field("note", _note_id),
    "actor": _Field("actor", _as_is),
    "since": _Field("at", _time(end=False), ">="),
    "until": _Field("at", _time(end=True), "<="),
    "checkin": _Field("checkin", _as_is),
}


def note_predicate(filters: list[Filter], graph: Graph, scope: Scope,
                   answered_of: Callable[[Note], str | None] | None = None,
                   standings: Standings | None = None) -> Callable[[Note], bool]:
    """current= by the graph (judged at its `now`: a note past its end is not current),
    disputed= by `standings` (qem_edit.reads.standing: every read's decision)."""
    standings = standings or Standings.of_notes(graph.notes, graph.now or utc_now())
    tests: list[Test] = []
    for f in filters:
        key, value = f.key, f.value
        if key == "current":
            v = errors.choice(value, ("yes", "no", "unknown"), key, as_filter=True)
            unknown = sum(1 for n in graph.notes if graph.currency(n).value == "unknown")
            if unknown and v != "unknown":
                scope.gaps.append(f"{unknown} note(s) have unknown currency (see current=unknown)")
            tests.append(lambda n, v=v: graph.currency(n.id).value == v)  # type: ignore[attr-defined]
        elif key == "answered":
            tests.append(_answered_test(value, answered_of, scope))
        elif key == "disputed":
            v = errors.choice(value, ("yes", "no"), key, as_filter=True) == "yes"
            tests.append(lambda n, v=v: bool(standings.of(n).disputes) == v)  # type: ignore[arg-type, union-attr]
        else:
            forgotten = sum(1 for n in graph.notes.values() if n.text is None) if key == "text~" else 0
            if forgotten:
                scope.gaps.append(f"{forgotten} forgotten note(s) have no text to search")
            tests.append(_NOTE_FIELDS[key].test(value, key))
    return lambda n: all(t(n) for t in tests)


def _answered_test(value: str, answered_of: Callable[[Note], str | None] | None, scope: Scope) -> Test:
    """answered=: a request's answer (qem_edit.base.owing), read where the query is made."""
    wanted = errors.choice(value, ANSWERED, "answered", as_filter=True).replace("-", " ")
    assert answered_of is not None, "answered= is read with the answers (query.answer)"
    return lambda n: answered_of(n) == wanted  # type: ignore[arg-type]


def answers_reader(store: Store, notes: dict[str, Note], scope: Scope) -> Callable[[Note], str | None]:
    """answered= over `notes`: each request's answer now (None: not a request); the files
    set aside, which may hold an answer, named in the scope."""
    gaps = read_gaps(store)
    scope.gaps.extend(g for g in gaps if g not in scope.gaps)
    by_request: dict[str, list[Note]] = {}
    for note in notes.values():
        if note.answers is not None:
            by_request.setdefault(note.answers, []).append(note)
    now = utc_now()
    return lambda n: answered(n, by_request.get(n.id, []), now, gaps).value if is_request(n) else None


def event_predicate(filters: list[Filter]) -> Callable[[Event], bool]:
    tests = [_EVENT_FIELDS[f.key].test(f.value, f.key) for f in filters]
    return lambda e: all(t(e) for t in tests)


def empty_answer(filters: list[Filter], scope: Scope, what: str) -> str:
    described = " ".join(str(f) for f in filters) or "(no filter)"
    return (
        f"no {what} match {described} in {scope.notes:,} notes / {scope.events:,} events"
        f" (the log up to {scope.latest or 'nothing'}): an answer only within this scope"
        + ("" if scope.complete else ", which is incomplete")
    )


# -- the answer ---------------------------------------------------------------------------------


def answer(store: Store, parsed: list[Filter], events: bool = False, count_only: bool = False) -> "QueryAnswer":
    """`qem query`: one snapshot of the store scanned with `parsed` (from parse_filters)."""
    parsed = [_resolved(store, f) for f in parsed]
    with store.reading():
        notes = {n.id: n for n in store.notes()}
        all_events = store.events()
    latest = max((e.at for e in all_events), default=None)
    scope = Scope(str(store.root), latest, len(notes), len(all_events))
    if events:
        match = event_predicate(parsed)
        results = [{**e.to_json(), "short": notes[e.note].shown if e.note in notes else None}
                   for e in all_events if match(e)]
    else:
        now = utc_now()
        graph, standings = Graph.of(notes, now), Standings.of_notes(notes, now)
        reader = answers_reader(store, notes, scope) if any(f.key == "answered" for f in parsed) else None
        match_note = note_predicate(parsed, graph, scope, reader, standings)
        results = [
            {**n.to_json(), "current": graph.currency(n.id).value, **_standing(standings.of(n))}
            for n in sorted(notes.values(), key=lambda n: n.id) if match_note(n)
        ]
    what = "events" if events else "notes"
    return QueryAnswer(scope, [str(f) for f in parsed], what, results, empty_answer(parsed, scope, what), count_only)


def _standing(standing) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """A note's standing in a query's result: the standing's JSON, and its marks for the line."""
    return {**standing.to_json(), "marks": standing.marks()}


def _resolved(store: Store, f: Filter) -> Filter:
    """A filter naming a note (note=, supersedes=) names it by its full id."""
    if f.key in ("note", "supersedes"):
        return Filter(f.key, store.resolve(f.value))
    return f


# -- a query's notes, for a checkout ------------------------------------------------------------


@dataclass
class Selected:
    """The notes a query matched (full ids, in the projection's order), and its scope."""

    ids: list[str]
    scope: Scope


def select(store: Store, parsed: list[Filter]) -> Selected:
    """The notes matching note filters (from parse_filters), for a checkout.  Filters on a
    note's own fields run in the index, so the cost follows the answer; current= and
    disputed= need the graph of every note."""
    parsed = [_resolved(store, f) for f in parsed]
    if any(f.key in ("current", "disputed", "answered") for f in parsed):
        found = answer(store, parsed)
        return Selected([r["id"] for r in found.results], found.scope)
    conditions = [_NOTE_FIELDS[f.key].condition(f.value, f.key) for f in parsed]
    with store.reading():
        ids = store.select_notes(conditions)
        scope = Scope(str(store.root), None, store.count(), 0)
        forgotten = store.count(states=["forgotten"]) if any(f.key == "text~" for f in parsed) else 0
    if forgotten:
        scope.gaps.append(f"{forgotten} forgotten note(s) have no text to search")
    return Selected(ids, scope)


@dataclass
class QueryAnswer:
    """`qem query`: what matched, after the scope that was scanned."""

    scope: Scope
    filters: list[str]
    what: str  # "notes" or "events"
    results: list[dict]
    empty: str  # what an empty answer means, within its scope
    count_only: bool = False
    exit_code = 0

    def text(self) -> str:
        if self.count_only:
            return str(len(self.results))  # a bare number for scripts; the scope on stderr
        described = f" {' '.join(self.filters)}" if self.filters else ""
        lines = [self.scope.line(), f"{len(self.results):,} {self.what} match{described}"]
        if not self.results:
            lines.append(self.empty)
        lines += [self._line(r) for r in self.results]
        return "\n".join(lines)

    def _line(self, r: dict) -> str:
        if self.what == "events":
            why = f" ({r['reason']})" if r["reason"] else ""
            return f"{ids.shown(r['id'])}\t{r['at']}\t#{ids.shown(r['note'], r.get('short'))} {r['type']} by {r['actor']}{why}"
        first = (r["text"] or ("(forgotten)" if r["state"] == "forgotten" else TEXT_MISSING)).split("\n", 1)[0]
        marks = "".join(f" · {m}" for m in r.get("marks", []))  # past its end, disputed: as every read names them
        return f"#{r['short']}\t{r['kind']}\t{r['state']}\tcurrent={r['current']}\t{scoped_prefix(r.get('scope'))}{first}{marks}"

    def data(self) -> object:
        payload: dict[str, object] = {"scope": self.scope.to_json(), "filters": self.filters, "count": len(self.results)}
        if not self.count_only:
            payload[self.what] = self.results
        return payload

    def remark(self) -> str | None:
        if not self.count_only:
            return None
        return self.scope.line() + ("" if self.results else "\n" + self.empty)
