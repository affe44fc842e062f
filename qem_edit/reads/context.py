"""`qem context`: what an agent reads at session start, in two tiers.

The seed's two-tier recall, made deterministic.  The first tier is every directive in
force (active or stale), each in full: a rule that is cut is a rule not followed, so a
directive is shown whole or counted as left out, never cut.  The second,
the index tier, is one line per other note in force, `[#id] kind/priority · first line ·
provenance frame · age`, so an agent sees that a note exists for a line and expands it
with `qem show ID`.  The first line is given whole (a fact after a long prefix is still
in the context); only one past 1,000 characters is cut, and then says so and how to read
the rest.  Both are ordered by kind rank, then priority, then id.

The budget bounds the whole answer (tokens ≈ characters / 4, rounded up, counted on the
markdown rendering, header and footer included): the directives, then the index lines,
are taken in order while they fit, and the first that does not ends it; what did not fit
is counted in the last line with the command that lists it (`--skip N` leaves out the
first N of that order, directives first).  Superseded, revoked, expired and forgotten notes are
left out; stale, disputed and past-their-end ones are marked (qem_edit.reads.standing).  Nothing here consults the clock except
for the reference date the ages are counted to (today, `QEM_NOW`, or `--at`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import date
from itertools import chain, islice

from ..base import errors
from ..base.records import Record
from ..base.replay import Note, scope_mark
from ..base.vocabulary import FRAMES, KIND_RANK, KINDS, PRIORITIES, PRIORITY_RANK
from ..storage.store import Store
from .delivery import indented
from .standing import Standing, Standings

CHARS_PER_TOKEN = 4  # the usual rule of thumb for English text and code in BPE tokenizers
DEFAULT_BUDGET = 2000
LONGEST = 1000  # characters of a first line the index tier shows whole; a longer one is cut, and says so
FORMATS = ("markdown", "json")


def tokens(text: str) -> int:
    """The documented approximation: one token per 4 characters, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


def order(note: Note) -> tuple[int, int, str]:
    """Kind rank, then priority (high first), then id."""
    return (KIND_RANK[note.kind], PRIORITY_RANK.get(note.priority, len(PRIORITIES)), note.id)


class Entry(Record):
    """One note as the context shows it: its age in days and its standing (past its end,
    in dispute: qem_edit.reads.standing, every read's decision).  (NamedTuples, not dataclasses,
    here: every hook imports this module.)"""

    note: Note
    age: int
    standing: Standing = Standing()
    late: int | None = None  # seconds a request not answered is past its deadline

    def head(self) -> str:
        n = self.note
        return f"[#{n.shown}] {n.kind}/{n.priority}"

    def marks(self) -> list[str]:
        scope = [scope_mark(self.note).upper()] if self.note.local else []  # a note not the team's
        return (["STALE"] if self.note.state == "stale" else []) + self.standing.marks() + scope

    def tail(self) -> str:
        marks = "".join(f" · {m}" for m in self.marks())
        if self.late is not None:
            from ..base.owing import duration

            marks += f" · LATE {duration(self.late)}"
        return f"{FRAMES.get(self.note.provenance, self.note.provenance)} · {self.age}d{marks}"

    def block(self) -> str:
        """The directive tier: the whole text, indented under its header line."""
        return f"- {self.head()} · {self.tail()}\n{indented(self.note.text or self.note.first_line())}"

    def line(self) -> str:
        """The index tier: the whole first line (the budget decides how many lines, never
        how much of one); past LONGEST characters, cut and said so, with the command that
        gives the rest."""
        first = self.note.first_line().strip()
        if len(first) > LONGEST:
            first = (f"{first[:LONGEST].rstrip()}… [cut at {LONGEST:,} of {len(first):,} characters:"
                     f" `qem show {self.note.shown}` gives it whole]")
        return f"{self.head()} · {first} · {self.tail()}"

    def to_json(self, full: bool) -> dict[str, object]:
        n = self.note
        out: dict[str, object] = {
            "id": n.id, "short": n.shown, "kind": n.kind, "priority": n.priority, "provenance": n.provenance,
            "frame": FRAMES.get(n.provenance, n.provenance), "state": n.state, "created_at": n.created_at,
            "age_days": self.age, "stale": n.state == "stale", "disputed": bool(self.standing.disputes),
            "anchors": [{"path": path, "oid": oid} for path, oid in n.anchors],
            "expires": n.expires, **self.standing.to_json(),
            "to": n.to, "due": n.due, "late_seconds": self.late,
        }
        out["text" if full else "line"] = n.text if full else self.line()
        return out


class Context:
    """`qem context`: the two tiers, what did not fit, and where they came from."""

    exit_code = 0

    def __init__(self, memory: str, latest: str | None, reference: str, budget: int, directives: list[Entry],
                 index: list[Entry], others: int, skip: int = 0, at: str | None = None,
                 directive_total: int = 0) -> None:
        self.memory = memory
        self.latest = latest  # the newest event the answer reflects (or the --at it was asked as of)
        self.reference = reference  # the date ages are counted to
        self.budget = budget  # 0: no limit
        self.directives = directives  # the directives shown, in order
        self.index = index
        self.others = others  # notes of the index tier, shown or not (after --skip)
        self.skip = skip
        self.at = at
        self.directive_total = directive_total  # directives in force (after --skip), shown or not

    @property
    def omitted(self) -> int:
        return self.directive_total - len(self.directives) + self.others - len(self.index)

    def header(self) -> str:
        as_of = f"as of {self.at}" if self.at else f"the log up to {self.latest or 'nothing'}"
        limit = f"budget {self.budget:,} tokens (≈ characters / {CHARS_PER_TOKEN})" if self.budget else "no budget"
        return (f"# Memory (qem context)\n\n{self.memory} ({as_of}); ages in days to {self.reference}; {limit}."
                " `qem show ID` expands a note.")

    def sections(self, index: Iterable[Entry] | None = None, directives: Iterable[Entry] | None = None) -> list[str]:
        """The header, the directives (unless --skip passed them all), and the index tier
        (once every directive is shown: the order is never broken)."""
        parts = [self.header()]
        shown = list(self.directives if directives is None else directives)
        if self.directive_total or not self.skip:
            parts.append(f"## Directives ({self.directive_total})\n\n" + ("\n".join(e.block() for e in shown) or "(none)"))
        if len(shown) < self.directive_total:
            return parts
        entries = list(self.index if index is None else index)
        parts.append(self.index_heading() + ("\n".join(e.line() for e in entries) or "(none)"))
        return parts

    def index_heading(self) -> str:
        return f"## Index ({self.others:,} other note{'' if self.others == 1 else 's'} in force)\n\n"

    def footer(self, omitted: int | None = None, directives: int | None = None) -> str:
        """The line that says what did not fit and the command that shows it (at its
        longest when given the largest counts, for `fill` to keep room for it)."""
        omitted = self.omitted if omitted is None else omitted
        if not omitted:
            return ""
        cut = self.directive_total - len(self.directives) if directives is None else directives
        rest = f"qem context --skip {self.skip + self.directive_total + self.others - omitted} --budget 0"
        among = f" ({cut:,} of them directive{'' if cut == 1 else 's'})" if cut else ""
        notes = "note in force did" if omitted == 1 else "notes in force did"
        return f"\n\n… {omitted:,} more {notes} not fit the budget{among}; `{rest}` lists them"

    def text(self) -> str:
        return "\n\n".join(self.sections()) + self.footer()

    def data(self) -> object:
        return {
            "memory": self.memory, "latest": self.latest, "at": self.at, "reference": self.reference,
            "budget": self.budget, "chars_per_token": CHARS_PER_TOKEN, "tokens": tokens(self.text()),
            "directives": [e.to_json(True) for e in self.directives],
            "index": [e.to_json(False) for e in self.index], "skip": self.skip,
            "omitted": {"count": self.omitted,
                        "command": self.footer().split("`")[1] if self.omitted else None},
        }

    def remark(self) -> str | None:
        return None


def fill(context: Context, candidates: Iterator[Entry]) -> Context:
    """The directives, then the index lines, in order while the whole answer, footer
    included, stays within the budget (counted in characters: tokens = characters / 4,
    rounded up); the first that does not fit ends it, so what is left out is a tail of
    the order, listed by the footer's command."""
    limit = context.budget * CHARS_PER_TOKEN
    reserve = len(context.footer(context.directive_total + context.others, context.directive_total))  # at its longest
    size = len("\n\n".join(context.sections()))
    for entry in candidates:
        grown = size + _cost(context, entry)
        if context.budget and grown + reserve > limit:
            break
        directive = len(context.directives) < context.directive_total
        (context.directives if directive else context.index).append(entry)
        size = grown
    return context


def _cost(context: Context, entry: Entry) -> int:
    """The characters `entry` adds to the answer: its block or line (in place of "(none)"
    when it is its tier's first), and the index tier's heading after the last directive."""
    directive = len(context.directives) < context.directive_total
    shown = context.directives if directive else context.index
    cost = len(entry.block() if directive else entry.line()) + (1 if shown else -len("(none)"))
    if directive and len(shown) + 1 == context.directive_total:
        cost += len("\n\n" + context.index_heading() + "(none)")
    return cost


def age(created_at: str, reference: str) -> int:
    return max(0, (date.fromisoformat(reference[:10]) - date.fromisoformat(created_at[:10])).days)


def entry(note: Note, reference: str, standings: Standings, now: str = "",
          answers: Callable[[str], list[Note]] | None = None) -> Entry:
    """A note as the context shows it, its standing decided by `standings` (a note past
    its end is marked, not hidden: only the sweep's event expires it); `now`: the UTC time
    a request's deadline is judged at: one past it that no answer (`answers`: the notes
    answering a note id) answers yes is marked LATE."""
    return Entry(note, age(note.created_at, reference), standings.of(note), _late(note, now, answers))


def _late(note: Note, now: str, answers: Callable[[str], list[Note]] | None) -> int | None:
    if not now or note.due is None or note.due >= now or answers is None:
        return None  # (most notes: no deadline, so no answers read)
    from ..base.owing import NO, UNKNOWN, answered

    said = answered(note, answers(note.id), now)
    return said.late if said.value in (NO, UNKNOWN) else None


# -- building it from a memory ------------------------------------------------------------------


def build(store: Store, budget: int = DEFAULT_BUDGET, at: str | None = None, skip: int = 0) -> Context:
    """The context of the memory as it is (or as it was `at` a date or git revision)."""
    from ..base.times import is_time, parse_time, utc_now

    if budget < 0:
        raise errors.BadInput(f"--budget {budget}: give a number of tokens (0: no limit)")
    if skip < 0:
        raise errors.BadInput(f"--skip {skip}: give a number of index lines to leave out")
    if at is None:
        return _now(store, budget, skip, utc_now())
    reference = at[:10] if is_time(at) else utc_now()[:10]
    return _past(store, budget, skip, at, reference, parse_time(at, "--at", end=True) if is_time(at) else utc_now())


def _now(store: Store, budget: int, skip: int, now: str) -> Context:
    """From the index: the directives, then the other notes streamed in order until the
    budget is spent (at 74,900 notes, the rest is counted, never read)."""
    reference = now[:10]
    with store.reading():
        latest, standings = store.latest_at(), Standings.read(store, now)
        answers = lambda note_id: store.answers_to([note_id]).get(note_id, [])  # noqa: E731
        every = [entry(note, reference, standings, now, answers) for note in _in_order(store, ["directive"])]
        directives, past = every[skip:], max(0, skip - len(every))  # --skip counts the directives first
        others = store.count_in_force_besides("directive")
        context = Context(str(store.root), latest, reference, budget, [], [], max(0, others - past), skip,
                          directive_total=len(directives))
        notes = islice(_in_order(store, [k for k in KINDS if k != "directive"]), past, None)
        return fill(context, chain(directives, (entry(note, reference, standings, now, answers) for note in notes)))


def _in_order(store: Store, kinds: list[str]) -> Iterator[Note]:
    """The notes in force of these kinds, in the context's order, read lazily
    kind by kind and priority by priority along the index's (kind rank, id) order: no
    sort, and nothing past what the budget takes is read."""
    for kind in kinds:
        for priority in PRIORITIES:
            yield from store.notes_in_force(kind, priority)


def _past(store: Store, budget: int, skip: int, at: str, reference: str, now: str) -> Context:
    """From a replay of the log as it was `at` (qem_edit.reads.history), ordered here."""
    from .history import notes_as_of

    past = notes_as_of(store, at)
    standings = Standings.of_notes(past, now)
    ordered = sorted((n for n in past.values() if n.live), key=order)
    given: dict[str, list[Note]] = {}
    for note in past.values():
        if note.answers is not None:
            given.setdefault(note.answers, []).append(note)
    answers = lambda note_id: given.get(note_id, [])  # noqa: E731
    every = [entry(n, reference, standings, now, answers) for n in ordered if n.kind == "directive"]
    directives, others = every[skip:], [n for n in ordered if n.kind != "directive"][max(0, skip - len(every)):]
    context = Context(str(store.root), None, reference, budget, [], [], len(others), skip, at,
                      directive_total=len(directives))
    return fill(context, chain(directives, (entry(n, reference, standings, now, answers) for n in others)))
