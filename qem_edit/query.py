"""`qem query`: exact filters over note and event headers, answered with their scope.

Every answer says what was scanned (store, head seq, notes and events), whether it is
complete, and why not when not: a text filter cannot see forgotten text, and a currency
filter cannot place notes whose currency is unknown.  An empty result is an answer only
within that scope, and says so.  A repeated, empty, unknown or malformed filter is an
error, never ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterable

from . import errors
from .model import EVENT_TYPES, KINDS, PRIORITIES, PROVENANCES, STATES, TEXT_MISSING, Event, Note
from .resolver import Graph, disputed_with
from .store import Store
from .times import parse_time

NOTE_KEYS = (
    "kind", "state", "priority", "provenance", "actor", "since", "until",
    "supersedes", "current", "disputed", "text~",
)
EVENT_KEYS = ("type", "note", "actor", "since", "until", "checkin")
_FILTER = re.compile(r"(?P<name>[a-z]+)(?P<op>[=~])(?P<value>.*)\Z", re.S)


@dataclass(frozen=True)
class Filter:
    key: str
    value: str

    def __str__(self) -> str:
        return f"{self.key}{self.value}" if self.key.endswith("~") else f"{self.key}={self.value}"


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
            raise errors.BadInput(f"malformed filter {arg!r}; write KEY=VALUE (or text~SUBSTRING)")
        key = match["name"] + ("~" if match["op"] == "~" else "")
        value = match["value"]
        if key not in allowed:
            what = "event" if events else "note"
            raise errors.BadInput(f"unknown {what} filter {key!r}; {what} filters: {', '.join(allowed)}")
        if key in seen:
            raise errors.BadInput(f"filter {key!r} is given twice; give each filter once")
        if value == "":
            raise errors.BadInput(f"filter {key!r} is empty; give it a value")
        seen.add(key)
        out.append(Filter(key, value))
    return out


def _choice(value: str, allowed: Iterable[str], key: str) -> str:
    allowed = tuple(allowed)
    if value not in allowed:
        raise errors.BadInput(f"{key}={value!r}: use one of {', '.join(allowed)}")
    return value


def _note_id(value: str, key: str) -> str:
    if not re.fullmatch(r"#?[0-9a-zA-Z]+", value):
        raise errors.BadInput(f"{key}={value!r}: expected a note id (e.g. k3f9)")
    return value.lstrip("#")


Test = Callable[[object], bool]


def _equals(attribute: str, read: Callable[[str, str], object]) -> Callable[[str, str], Test]:
    """A filter on one field: KEY=VALUE holds when the field equals VALUE, as read."""

    def make(value: str, key: str) -> Test:
        wanted = read(value, key)
        return lambda item: getattr(item, attribute) == wanted

    return make


def _bound(attribute: str, end: bool) -> Callable[[str, str], Test]:
    """since= (a lower bound) or until= (an upper bound, inclusive) on a UTC time field."""

    def make(value: str, key: str) -> Test:
        moment = parse_time(value, key, end=end)
        if end:
            return lambda item: getattr(item, attribute) <= moment
        return lambda item: getattr(item, attribute) >= moment

    return make


def _one_of(allowed: tuple[str, ...]) -> Callable[[str, str], str]:
    return lambda value, key: _choice(value, allowed, key)


def _as_is(value: str, key: str) -> str:
    return value


# Filters that read one field; current=, disputed= and text~ need the graph or the scope.
_NOTE_FIELDS: dict[str, Callable[[str, str], Test]] = {
    "kind": _equals("kind", _one_of(KINDS)),
    "state": _equals("state", _one_of(STATES)),
    "priority": _equals("priority", _one_of(PRIORITIES)),
    "provenance": _equals("provenance", _one_of(PROVENANCES)),
    "actor": _equals("actor", _as_is),
    "since": _bound("created_at", end=False),
    "until": _bound("created_at", end=True),
    "supersedes": _equals("supersedes", _note_id),
}
_EVENT_FIELDS: dict[str, Callable[[str, str], Test]] = {
    "type": _equals("type", _one_of(EVENT_TYPES)),
    "note": _equals("note", _note_id),
    "actor": _equals("actor", _as_is),
    "since": _bound("at", end=False),
    "until": _bound("at", end=True),
    "checkin": _equals("checkin", _as_is),
}


def note_predicate(filters: list[Filter], graph: Graph, scope: Scope) -> Callable[[Note], bool]:
    tests: list[Test] = []
    for f in filters:
        key, value = f.key, f.value
        if key in _NOTE_FIELDS:
            tests.append(_NOTE_FIELDS[key](value, key))
        elif key == "current":
            v = _choice(value, ("yes", "no", "unknown"), key)
            unknown = sum(1 for n in graph.notes if graph.currency(n).value == "unknown")
            if unknown and v != "unknown":
                scope.gaps.append(f"{unknown} note(s) have unknown currency (see current=unknown)")
            tests.append(lambda n, v=v: graph.currency(n.id).value == v)  # type: ignore[attr-defined]
        elif key == "disputed":
            v = _choice(value, ("yes", "no"), key) == "yes"
            tests.append(lambda n, v=v: bool(disputed_with(n, graph) or n.rivals) == v)  # type: ignore[arg-type]
        elif key == "text~":
            forgotten = sum(1 for n in graph.notes.values() if n.text is None)
            if forgotten:
                scope.gaps.append(f"{forgotten} forgotten note(s) have no text to search")
            tests.append(lambda n, v=value: n.text is not None and v in n.text)  # type: ignore[attr-defined]
    return lambda n: all(t(n) for t in tests)


def event_predicate(filters: list[Filter]) -> Callable[[Event], bool]:
    tests = [_EVENT_FIELDS[f.key](f.value, f.key) for f in filters]
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
    scope = Scope(str(store.path), latest, len(notes), len(all_events))
    if events:
        match = event_predicate(parsed)
        results = [{**e.to_json(), "short": notes[e.note].shown if e.note in notes else None}
                   for e in all_events if match(e)]
    else:
        graph = Graph.of(notes)
        match_note = note_predicate(parsed, graph, scope)
        results = [
            {**n.to_json(), "current": graph.currency(n.id).value}
            for n in sorted(notes.values(), key=lambda n: n.id) if match_note(n)
        ]
    what = "events" if events else "notes"
    return QueryAnswer(scope, [str(f) for f in parsed], what, results, empty_answer(parsed, scope, what), count_only)


def _resolved(store: Store, f: Filter) -> Filter:
    """A filter naming a note (note=, supersedes=) names it by its full id."""
    if f.key in ("note", "supersedes"):
        return Filter(f.key, store.resolve(f.value))
    return f


# -- a query's notes, for a checkout ------------------------------------------------------------

_CHOICES = {"kind": KINDS, "state": STATES, "priority": PRIORITIES, "provenance": PROVENANCES}


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
    if any(f.key in ("current", "disputed") for f in parsed):
        found = answer(store, parsed)
        return Selected([r["id"] for r in found.results], found.scope)
    conditions = [_condition(f) for f in parsed]
    with store.reading():
        ids = store.select_notes([c for c, _ in conditions], [p for _, p in conditions])
        scope = Scope(str(store.path), None, store.count(), 0)
        forgotten = store.count(states=["forgotten"]) if any(f.key == "text~" for f in parsed) else 0
    if forgotten:
        scope.gaps.append(f"{forgotten} forgotten note(s) have no text to search")
    return Selected(ids, scope)


def _condition(f: Filter) -> tuple[str, object]:
    """One filter as SQL over the notes table (its value checked as `qem query` checks it)."""
    key, value = f.key, f.value
    if key in ("since", "until"):
        return ("created_at >= ?" if key == "since" else "created_at <= ?"), parse_time(value, key, end=key == "until")
    if key == "text~":
        return "instr(text, ?) > 0", value
    if key in _CHOICES:
        _choice(value, _CHOICES[key], key)
    return f"{key} = ?", value


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
            return f"{r['id'][:8]}\t{r['at']}\t#{r.get('short') or r['note'][:8]} {r['type']} by {r['actor']}{why}"
        first = (r["text"] or ("(forgotten)" if r["state"] == "forgotten" else TEXT_MISSING)).split("\n", 1)[0]
        return f"#{r['short']}\t{r['kind']}\t{r['state']}\tcurrent={r['current']}\t{first}"

    def data(self) -> object:
        payload: dict[str, object] = {"scope": self.scope.to_json(), "filters": self.filters, "count": len(self.results)}
        if not self.count_only:
            payload[self.what] = self.results
        return payload

    def remark(self) -> str | None:
        if not self.count_only:
            return None
        return self.scope.line() + ("" if self.results else "\n" + self.empty)
