"""Random programs of writes, edits and check-ins, checked against a reference model.

A hypothesis state machine drives the real library (qem_edit.writes.acts for writes, a kept
checkout on disk, qem_edit.writes.checkin.check_in) while other writers keep writing between a
checkout and its check-in, and keeps a model of the documented rules beside it:

- a lifecycle move lands only from the states README.md lists;
- a check-in applies your changes to notes nobody else touched since your checkout;
  a note others changed meanwhile is a conflict (nothing of the check-in lands) unless
  both reached the same end; notes you left alone keep whatever others did;
- a note forgotten meanwhile stays forgotten, whatever the edit did to it (its text is
  scrubbed from the kept edit too);
- new lines are new notes.

After every step the store's notes must equal the model's.  Notes are keyed by their full
ids; the model's dicts keep creation order, so a note is drawn by its place in that order
(ids are random: drawing from sorted ids would draw other notes on a replay).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from qem_edit.renderer import Selection

from qem_edit.base import errors
from qem_edit.mirror.export import export
from qem_edit.mirror.verify import verify_report
from qem_edit.storage.store import Store
from qem_edit.system.workspace import Workspace
from qem_edit.writes import acts, checkin
from qem_edit.writes.kept_edits import kept, new_checkout, owning, write_checkout

LIVE = {"active", "stale"}
# The lifecycle as README.md states it, written out here rather than imported.
ALLOWED = {
    "revoked": LIVE,
    "stale_flagged": {"active"},
    "reinstated": {"revoked", "stale", "expired"},
    "expired": LIVE,
}
TARGET = {"revoked": "revoked", "stale_flagged": "stale", "reinstated": "active", "expired": "expired"}
KINDS = ("task", "gotcha", "finding")
WORDS = st.sampled_from(["lock", "cache", "order", "retry", "daemon", "index", "venv", "build"])
TEXT = st.lists(WORDS, min_size=2, max_size=4).map(" ".join)


@dataclass(frozen=True)
class M:
    """A note as the model sees it."""

    kind: str
    priority: str
    text: str | None
    state: str = "active"
    provenance: str = "agent"
    by: str | None = None  # the successor's full id, once superseded


class Yes:
    """Applies every plan, with one reason."""

    def confirm(self, proposal, moved):  # type: ignore[no-untyped-def]
        return "apply"

    def confirm_mass(self, proposal, mass):  # type: ignore[no-untyped-def]
        return True

    def reason(self) -> str:
        return "model check-in"


class Memory(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="qem-model-"))
        self.place = Workspace(self.dir, self.dir / ".qem")
        self.store = Store.open(self.place.store_path, create=True)
        self.model: dict[str, M] = {}  # by full id, in creation order
        self.checkout = None  # (Checkout, the model at its base, my intended changes)

    def teardown(self) -> None:
        if hasattr(self, "store"):
            self.store.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- other writers --------------------------------------------------------------------

    @rule(kind=st.sampled_from(KINDS), text=TEXT)
    def add(self, kind: str, text: str) -> None:
        note = acts.add(self.store, self.place, text, kind, "medium", "agent", "other").note
        self.model[note.id] = M(kind, "medium", text)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), move=st.sampled_from(sorted(ALLOWED)))
    def move(self, data, move: str) -> None:  # type: ignore[no-untyped-def]
        note_id = data.draw(st.sampled_from(list(self.model)))
        before = self.model[note_id]
        try:
            acts.move(self.store, self.place, move, note_id, "because", "other")
        except errors.Refused:
            assert before.state not in ALLOWED[move], (move, before)
            return
        assert before.state in ALLOWED[move], (move, before)
        self.model[note_id] = replace(before, state=TARGET[move])

    @precondition(lambda self: any(n.state in LIVE for n in self.model.values()))
    @rule(data=st.data(), text=TEXT)
    def supersede(self, data, text: str) -> None:  # type: ignore[no-untyped-def]
        note_id = data.draw(st.sampled_from([i for i, n in self.model.items() if n.state in LIVE]))
        old = self.model[note_id]
        new = acts.supersede(self.store, self.place, note_id, text, "newer", "other").note
        self.model[note_id] = replace(old, state="superseded", by=new.id)
        self.model[new.id] = M(old.kind, old.priority, text, provenance=old.provenance)

    @precondition(lambda self: any(n.state != "forgotten" for n in self.model.values()))
    @rule(data=st.data())
    def forget(self, data) -> None:  # type: ignore[no-untyped-def]
        note_id = data.draw(st.sampled_from([i for i, n in self.model.items() if n.state != "forgotten"]))
        acts.forget(self.store, self.place, note_id, "leaked", "other")
        self.model[note_id] = replace(self.model[note_id], state="forgotten", text=None)

    # -- a person's edit -------------------------------------------------------------------

    @precondition(lambda self: self.checkout is None and self.model)
    @rule(data=st.data(), where=st.sampled_from(["kept", "recorded file", "mirror"]))
    def check_out_and_edit(self, data, where: str) -> None:  # type: ignore[no-untyped-def]
        if where == "kept":
            source = checkin.Source((c := new_checkout(self.store, self.place, Selection())).file, self.place, c)
        elif where == "recorded file":  # `qem checkout --path F` records F's base
            # (with force: after a conflict the edit's record is discarded and F keeps the edit,
            # which a checkout to F then refuses to write over; the person starts again with --force)
            path = write_checkout(self.store, self.place, Selection(), self.dir / "mine.md", force=True)
            source = checkin.Source(path, self.place, owning(self.place, path))
        else:  # the exported MEMORY.md, edited by hand: its base is what export last wrote
            mirror = self.place.mirror_path()
            export(self.store, mirror, force=True)  # start again from the rendering now
            source = checkin.Source(mirror, self.place)
        lines = source.path.read_text("utf-8").split("\n")
        shorts = {n.id: n.shown for n in self.store.notes()}  # as the checkout shows them
        mine: dict[object, tuple] = {}
        for number, (note_id, note) in enumerate(self.model.items(), start=1):
            if note.state not in LIVE or "\n" in (note.text or ""):
                continue
            choice = data.draw(st.sampled_from(["keep", "keep", "delete", "text", "stale"]), label=f"note {number}")
            prefix = f"- [#{shorts[note_id]}] "
            index = next(i for i, line in enumerate(lines) if line.startswith(prefix))
            if choice == "delete":
                del lines[index]
                mine[note_id] = ("revoked",)
            elif choice == "text":
                new_text = data.draw(TEXT.filter(lambda t, old=note.text: t != old), label="new text")
                lines[index] = lines[index][: len(lines[index]) - len(note.text)] + new_text
                mine[note_id] = ("superseded", new_text)
            elif choice == "stale" and note.state == "active":
                field = f" · {note.provenance} · "
                lines[index] = lines[index].replace(field, field + "STALE (mine) · ", 1)
                mine[note_id] = ("stale",)
        if data.draw(st.booleans(), label="add a new line"):
            text = data.draw(TEXT, label="new note")
            lines.insert(lines.index("## Tasks") + 1, f"- {text}")
            mine["new"] = ("created", text)
        source.path.write_text("\n".join(lines), "utf-8")
        # the check-in applies in file order, and so creates its notes' ids
        self.order = {key: next((i for i, line in enumerate(lines)
                                 if (line == f"- {mine[key][-1]}" if key == "new" else line.startswith(f"- [#{shorts[key]}] "))), -1)
                      for key in mine}
        self.checkout = (source, dict(self.model), mine)

    @precondition(lambda self: self.checkout is not None)
    @rule()
    def check_in(self) -> None:
        source, base, mine = self.checkout
        self.checkout = None
        outcome = checkin.check_in(self.store, source, Yes(), "me", allow_mass_change=True)
        expected = self._expected(base, mine)
        if expected is None:
            assert outcome.status == "refused", outcome.status
            assert checkin.is_conflict(outcome.proposal), checkin.problems(outcome.proposal)
            for kept_edit in kept(self.place):
                kept_edit.discard()
            return
        assert outcome.status in ("applied", "unchanged"), (outcome.status, outcome.proposal and checkin.problems(outcome.proposal))
        created = iter(outcome.created)
        for note_id, change in sorted(expected.items(), key=lambda kv: self.order[kv[0]]):
            self._apply_mine(note_id, change, created)
        assert next(created, None) is None

    def _expected(self, base: dict[str, M], mine: dict) -> dict | None:
        """The changes of mine that land (None: a conflict refuses the whole check-in)."""
        landing = {}
        for note_id, change in mine.items():
            if note_id == "new":
                landing[note_id] = change
                continue
            then, now = base[note_id], self.model[note_id]
            if now == then:
                landing[note_id] = change
            elif now.state == "forgotten":
                continue  # forgotten meanwhile: the edit's item was scrubbed, the forget stands
            elif not self._same_end(note_id, change, now):
                return None
        return landing

    def _same_end(self, note_id: str, change: tuple, now: M) -> bool:
        if change[0] == "revoked":
            return now.state == "revoked"
        if change[0] == "stale":
            return now.state == "stale"
        if now.state != "superseded":
            return False
        then = self.model[note_id]
        successor = self.model[now.by]
        return (successor.kind, successor.priority, successor.text) == (then.kind, then.priority, change[1])

    def _apply_mine(self, note_id, change, created) -> None:  # type: ignore[no-untyped-def]
        if change[0] == "created":
            self.model[next(created)] = M("task", "medium", change[1], provenance="human")
        elif self.model[note_id].state != {"revoked": "revoked", "stale": "stale", "superseded": "superseded"}[change[0]]:
            old = self.model[note_id]
            if change[0] == "superseded":
                new_id = next(created)
                self.model[note_id] = replace(old, state="superseded", by=new_id)
                self.model[new_id] = M(old.kind, old.priority, change[1], provenance="human")
            else:
                self.model[note_id] = replace(old, state=change[0])

    @invariant()
    def store_equals_model(self) -> None:
        if not hasattr(self, "store"):
            return
        got = {n.id: M(n.kind, n.priority, n.text, n.state, n.provenance, n.superseded_by) for n in self.store.notes()}
        assert got == self.model
        assert verify_report(self.store).problems == []


_LIMITS = {"phases": [Phase.explicit, Phase.reuse, Phase.generate]} if os.environ.get("QEM_MODEL_NOSHRINK") else {}
Memory.TestCase.settings = settings(
    max_examples=int(os.environ.get("QEM_MODEL_EXAMPLES", "20")),  # more: QEM_MODEL_EXAMPLES=500
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    **_LIMITS,
)
test_random_programs_match_the_model = Memory.TestCase
