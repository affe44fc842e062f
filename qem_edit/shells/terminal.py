"""The terminal around a check-in: the editor, the prompts, and what a person is shown.

`run_edit` (qem edit) and `run_checkin` (qem checkin) are shells over checkin.check_in:
they choose the source, answer its questions at the terminal (or from --yes and -m),
print the plan and what happened, and return the outcome; only the CLI turns an outcome
into an exit status.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from ..base import errors, ids
from ..base.shown import say, show
from ..base.vocabulary import MOVE_BY_VERB
from ..renderer import Selection
from ..renderer.format import trigger_line
from ..storage.store import Store
from ..system.files import file_chunks, same_bytes
from ..system.workspace import Workspace
from ..writes import checkin
from ..writes.checkin import Outcome, Source, Status
from ..writes.checkin_plan import Proposal
from ..writes.kept_edits import Checkout, find_checkout, new_checkout, owning

# -- the editor ------------------------------------------------------------------------------

# An editor that hands the file back sooner than this, unchanged, most likely opened a
# window and returned (a GUI without its wait flag): the edit is kept, not taken as "no
# changes", or the person's later save would land in a checkout already removed.
AT_ONCE_S = 1.0


def editor_command() -> str:
    """The editor, chosen as git chooses: QEM_EDITOR, VISUAL (not on a dumb terminal),
    EDITOR, else vi; but on a dumb terminal (TERM dumb or unset), or with no terminal to
    read from (an agent's shell, a pipe), there is no vi to fall back on, and qem says so
    rather than start one that hangs."""
    dumb = os.environ.get("TERM", "dumb") in ("", "dumb")
    for name in ("QEM_EDITOR", "VISUAL", "EDITOR"):
        value = os.environ.get(name)
        if name == "VISUAL" and dumb:
            continue
        if value and value.strip():
            return value
    if dumb or not interactive():
        raise errors.BadInput(
            f"no editor{'' if dumb else ' and no terminal for vi'}: set EDITOR (or QEM_EDITOR) to the"
            " editor to use, or edit a file yourself"
            " with `qem checkout --path FILE` and `qem checkin --path FILE`"
        )
    return "vi"


def run_editor(editor: str, path: Path) -> int:
    """Run the editor on `path` the way git does: through the shell, path as "$1"."""
    say(f"waiting for your editor ({editor}) to close {path} ...")
    import signal
    import subprocess

    previous = signal.signal(signal.SIGINT, _ignore)  # the editor owns Ctrl-C while it runs
    try:
        return subprocess.run(["sh", "-c", f'{editor} "$@"', editor, str(path)]).returncode
    except OSError as exc:
        raise errors.BadInput(f"cannot run the editor {editor!r}: {exc.strerror}") from None
    finally:
        signal.signal(signal.SIGINT, previous)


def _ignore(signum, frame) -> None:  # a Python handler, unlike SIG_IGN, is not inherited
    pass


# -- talking to the person -------------------------------------------------------------------------


def interactive() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()


def ask(prompt: str) -> str | None:
    """One answer from the terminal; None at end of input (Ctrl-D): the safe choice."""
    print(prompt, end="", file=sys.stderr, flush=True)
    line = sys.stdin.readline() if sys.stdin is not None else ""
    if not line:
        print(file=sys.stderr)
        return None
    return line.strip()


class Prompter:
    """Answers a check-in's questions: from --yes and -m where given, else at the
    terminal; with no terminal, refuses with what to pass instead."""

    def __init__(self, source: Source, reason: str | None, yes: bool, *, edit_again: bool, show: bool = True) -> None:
        self.source = source
        self.given_reason = reason.strip() if reason and reason.strip() else None
        self.yes = yes
        self.edit_again = edit_again
        self.show = show  # print each plan on stderr before it is confirmed

    def confirm(self, proposal: Proposal, moved: int) -> str:
        if moved:
            say(f"the store moved on: {moved} new event(s) since the plan you saw; planned again")
        if self.show:
            show(describe_plan(proposal), sys.stderr)
        if self.yes:
            return "apply"
        if not interactive():
            also = " (and -m REASON)" if self.edit_again else ""
            raise errors.BadInput(f"no terminal to confirm the plan: pass --yes{also}", hint=self.source.hint())
        prompt = "[y]es / [e]dit again / [N]o, keep the edit" if self.edit_again else "[y/N]"
        answer = (ask(f"Apply these changes? {prompt}: ") or "").lower()
        if self.edit_again and answer in ("e", "edit"):
            return "edit"
        return "apply" if answer in ("y", "yes") else "keep"

    def confirm_mass(self, proposal: Proposal, mass: checkin.MassChange) -> bool:
        say(mass.describe())
        if not interactive():
            raise errors.BadInput(
                f"{mass.describe()}: if that is what you mean, pass --allow-mass-change", hint=self.source.hint()
            )
        return ask("Type `yes` to apply it anyway (anything else keeps the edit): ") == "yes"

    def reason(self) -> str | None:
        if self.given_reason is None:
            self.given_reason = self._ask_reason()
        return self.given_reason

    def _ask_reason(self) -> str | None:
        if not interactive():
            raise errors.BadInput(
                "no terminal to ask for the check-in's reason: pass -m REASON", hint=self.source.hint()
            )
        while True:
            answer = ask("Reason for this check-in (recorded on each event): ")
            if answer is None:
                return None  # Ctrl-D: no reason, nothing written, the edit kept
            if answer:
                return answer


# -- what a person is shown ----------------------------------------------------------------------

CONTEXT_LINES = 2  # unchanged lines shown around each change of a superseded text


def describe_plan(proposal: Proposal) -> str:
    plan = proposal.plan
    out: list[str] = []
    for op in plan.ops:
        out.extend(_describe_op(op, proposal))
    summary = plan.summary()
    out.append(f"Plan: {summary or 'nothing to write'}")
    if plan.merged:
        out.append(f"Kept others' changes since your base to {_ids(plan.merged, proposal)}")
    if plan.agreed:
        out.append(f"Already done in the store, nothing to write: {_ids(plan.agreed, proposal)}")
    return "\n".join(out)


def _describe_op(op, proposal: Proposal) -> list[str]:  # type: ignore[no-untyped-def]
    old = _base_by_id(proposal).get(op.note_id) if op.note_id is not None else None
    shown = old.shown if old is not None else ids.shown(op.note_id or "")
    if op.action == "create":
        assert op.content
        end = f" · expires {op.content.expires[:10]}" if op.content.expires else ""
        return [f"  + create {op.content.kind} · {op.content.priority} · human{end}"] + [
            f"      {line}" for line in op.content.text.split("\n")
        ] + [f"      @anchor: {path}" for path in op.content.anchors] + [
            f"      {trigger_line(name, value).strip()}" for name, value in op.content.triggers]
    if op.action == "supersede" and op.content and old:
        return [
            f"  ~ supersede #{shown} ({old.kind} · {old.priority}) with a new"
            f" {op.content.kind} · {op.content.priority} · human note"
        ] + _end_change(old.expires, op.content.expires) + text_change((old.text or "").split("\n"),
                                                                        op.content.text.split("\n")) + anchor_change(old, op.content) + trigger_change(old, op.content)
    move = MOVE_BY_VERB[op.action]
    first = ((old.text if old else None) or "").split("\n")[0]
    why = f" ({op.reason})" if op.reason else ""
    return [f"  {move.sign} {move.shown} #{shown}{why}: {first}"]


def anchor_change(old, content) -> list[str]:  # type: ignore[no-untyped-def]
    """The anchors a supersession drops and adds (each kept one's content is read anew)."""
    before = [path for path, _ in old.anchors]
    return ([f"    - @anchor: {path}" for path in before if path not in content.anchors]
            + [f"    + @anchor: {path}" for path in content.anchors if path not in before])


def trigger_change(old, content) -> list[str]:  # type: ignore[no-untyped-def]
    """The triggers a supersession drops and adds."""
    return ([f"    - {trigger_line(*t).strip()}" for t in old.triggers if t not in content.triggers]
            + [f"    + {trigger_line(*t).strip()}" for t in content.triggers if t not in old.triggers])


def _end_change(old: str | None, new: str | None) -> list[str]:
    """A supersession's change of the note's end, in a line of the plan (none: no line)."""
    if old == new:
        return []
    return [f"    expires {old[:10] if old else '(none)'} → {new[:10] if new else '(none)'}"]


def text_change(old: list[str], new: list[str]) -> list[str]:
    """The lines a supersession changes, with a little context and the count of the
    unchanged lines left out; a line that differs from its old self only in Unicode
    normalization (é as one code point or two) is marked, since it looks the same."""
    import difflib

    out: list[str] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for group in matcher.get_grouped_opcodes(CONTEXT_LINES):
        first, last = group[0], group[-1]
        if first[1] > 0:
            out.append(f"    ({first[1]} unchanged line(s))")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend(f"      {line}" for line in old[i1:i2])
                continue
            out.extend(f"    - {line}" for line in old[i1:i2])
            out.extend(f"    + {line}{_normalization_note(old, i1, i2, j, line)}" for j, line in enumerate(new[j1:j2], j1))
        if last[2] < len(old):
            out.append(f"    ({len(old) - last[2]} unchanged line(s))")
    return out


def _normalization_note(old: list[str], i1: int, i2: int, j: int, line: str) -> str:
    import unicodedata

    same = unicodedata.normalize("NFC", line)
    if any(unicodedata.normalize("NFC", o) == same and o != line for o in old[i1:i2]):
        return "   (differs only in Unicode normalization)"
    return ""


def _base_by_id(proposal: Proposal) -> dict:  # type: ignore[type-arg]
    return {n.id: n for n in proposal.base_notes.values()}


def _ids(note_ids: list[str], proposal: Proposal | None = None, shown: dict[str, str] | None = None) -> str:
    names = dict(shown or {})
    if proposal is not None:
        names.update({n.id: n.shown for n in proposal.now_notes.values()})
        names.update({n.id: short for short, n in proposal.base_notes.items()})
    return ", ".join(f"#{ids.shown(i, names.get(i))}" for i in note_ids)


def report(outcome: Outcome, as_json: bool = False) -> None:
    """Say what a check-in did: what happened on stderr; what a script reads (a dry run's
    plan, the new notes' ids) on stdout, as text or JSON."""
    if as_json:
        from ..reads.answers import as_json as json_text
        from ..storage.secrets import withheld

        text = json_text(checkin.outcome_data(outcome))  # a refused plan's items, as written, but no secret
        print(withheld(text) if outcome.status is Status.REFUSED else text)
    proposal = outcome.proposal
    if outcome.status is Status.LANDED_BEFORE:
        assert outcome.source.checkout is not None
        say(
            f"this edit was already checked in as {outcome.checkin_id}; nothing more to write"
            f" (see `qem log`); removing the kept edit {outcome.source.checkout.id}"
        )
    elif outcome.status is Status.APPLIED:
        assert proposal is not None
        new = f"; new notes {_ids(outcome.created, shown=outcome.shown)}" if outcome.created else ""
        say(f"checked in {outcome.checkin_id}: {proposal.plan.summary()}{new}")
        if not as_json:
            for note_id in outcome.created:
                print(outcome.shown.get(note_id, note_id))
        for notice in outcome.notices:
            say(notice)
    elif outcome.status in (Status.UNCHANGED, Status.DRY_RUN) and proposal is not None and not proposal.plan.ops:
        say("no changes; nothing written" if not outcome.notices else "no changes; no event written")
        for notice in outcome.notices:
            say(notice)
        if proposal.plan.merged:
            say(f"others changed {_ids(proposal.plan.merged, proposal)} since your base; kept")
    elif outcome.status is Status.DRY_RUN:
        assert proposal is not None
        if not as_json:
            show(describe_plan(proposal))
        say("dry run; nothing written")
    elif outcome.status is Status.KEEP:
        say(f"nothing written; {outcome.source.hint()}")
    elif outcome.status is Status.EMPTY:
        # never taken for "no changes": an editor that saved nothing must not cost the edit
        raise errors.BadInput("the file is empty: nothing to check in", hint=outcome.source.hint() + _discard_hint(outcome))


def _discard_hint(outcome: Outcome) -> str:
    checkout = outcome.source.checkout
    return f" (to drop it: `qem checkouts --discard {checkout.id}`)" if checkout is not None else ""


def show_problems(proposal: Proposal, heading: bool) -> list[str]:
    messages = checkin.problems(proposal)
    if heading:
        what = "conflicts with changes made since your base" if checkin.is_conflict(proposal) else (
            "the edit cannot be checked in"
        )
        say(f"{what}:")
    for message in messages:
        show(f"  {message}", sys.stderr)
    return messages


def refusal(outcome: Outcome, hint: str | None) -> errors.QemError:
    """The error a refused check-in ends in, when nobody is there to edit again."""
    assert outcome.proposal is not None
    count = len(checkin.problems(outcome.proposal))
    exc_type = errors.ConflictError if checkin.is_conflict(outcome.proposal) else errors.BadInput
    return exc_type(f"{count} problem(s); nothing was written", hint=hint)


@contextmanager
def kept_on_interrupt(hint: Callable[[], str]):  # type: ignore[no-untyped-def]
    """Ctrl-C anywhere in a check-in: nothing was written, and the edit is where `hint`
    says; exit 130 with that said."""
    try:
        yield
    except KeyboardInterrupt:
        raise errors.Interrupted(f"interrupted; {hint()}") from None


# -- qem edit ---------------------------------------------------------------------------------


def run_edit(store: Store, place: Workspace, selection: Selection, reason, yes: bool, resume, who: str,
             allow_mass_change: bool = False, allow_secret: bool = False) -> Outcome:
    """Check out (or resume a kept edit), run the editor, check the edit in; with a
    terminal, a refused edit can be edited again until it lands or the person stops."""
    editor = editor_command()  # no editor: refused before a checkout is made
    checkout = _resume(store, place, resume) if resume is not None else new_checkout(store, place, selection)
    if isinstance(checkout, Outcome):
        return checkout  # the kept edit had landed already
    source = Source(checkout.file, place, checkout)
    asker = Prompter(source, reason, yes, edit_again=True)
    with kept_on_interrupt(checkout.resume_hint):
        while True:
            outcome = _edit_once(store, source, asker, who, editor, allow_mass_change, allow_secret)
            if outcome.status is not Status.EDIT:
                return outcome


def _resume(store: Store, place: Workspace, resume: str) -> Checkout | Outcome:
    checkout = find_checkout(place, resume)
    done = checkin.already_landed(store, checkout)
    if done is not None:
        checkout.discard()
        outcome = Outcome(Status.LANDED_BEFORE, Source(checkout.file, place, checkout), checkin_id=done)
        report(outcome)
        return outcome
    marked = checkin.rebase_kept(store, checkout)
    if marked:
        say(
            f"the store changed since this edit's base; {marked} conflict(s) are marked in the file"
            " (keep one side of each, delete the other and the marker lines)"
        )
    return checkout


def _edit_once(store: Store, source: Source, asker: Prompter, who: str, editor: str, allow_mass_change: bool,
               allow_secret: bool = False) -> Outcome:
    """One round: the editor, then the check-in of what it left."""
    checkout = source.checkout
    assert checkout is not None
    before = checkout.keep_draft()
    started = time.monotonic()
    status = run_editor(editor, checkout.file)
    if status != 0:
        say(f"the editor exited with status {status}; nothing was checked in")
        raise errors.BadInput("the editor failed", hint=checkout.resume_hint())
    if time.monotonic() - started < AT_ONCE_S and same_bytes(checkout.file, file_chunks(before)):
        say(
            "the editor returned at once and the file is unchanged: an editor that opens a window"
            " must be told to wait (e.g. EDITOR='code --wait' or 'subl -w');"
            f" nothing was checked in; {checkout.resume_hint()}"
        )
        return Outcome(Status.KEEP, source, kept=checkout)
    try:
        _refuse_emptied(checkout, before)
    finally:
        checkout.draft_file.unlink(missing_ok=True)
    try:
        outcome = checkin.check_in(store, source, asker, who, allow_mass_change=allow_mass_change,
                                   allow_secret=allow_secret)
    except errors.QemError as exc:
        exc.hint = exc.hint or checkout.resume_hint()
        raise
    if outcome.status is Status.REFUSED:
        return _refused_in_edit(store, outcome, checkout)
    report(outcome)
    return outcome


def _refuse_emptied(checkout: Checkout, before: Path) -> None:
    """An editor that saved an empty file (or only whitespace) has not said "no changes",
    and must not cost the draft it was given (`before`: where it stays): the draft is put
    back as it was, and the check-in stops with how to take it up again."""
    if not checkout.file.exists():
        checkin.read_edit(checkout.file)  # says the file is gone
    if any(not chunk.isspace() for chunk in file_chunks(checkout.file)):
        return
    checkout.restore(before)
    raise errors.BadInput("the file is empty: nothing to check in; the edit is kept as it was before the editor"
                          " emptied it", hint=checkout.resume_hint() + f" (to drop it: `qem checkouts --discard {checkout.id}`)")


def _refused_in_edit(store: Store, outcome: Outcome, checkout: Checkout) -> Outcome:
    assert outcome.proposal is not None
    show_problems(outcome.proposal, heading=True)
    if not interactive():
        # keep the user's text as it was; the rebased version is offered on resume
        raise refusal(outcome, checkout.resume_hint())
    answer = (ask("What now? [e]dit again / e[x]it keeping the edit: ") or "").lower()
    if answer not in ("e", "edit"):
        say(f"nothing written; {checkout.resume_hint()}")
        return outcome
    checkin.reopen(store, checkout, outcome.proposal)
    outcome.status = Status.EDIT
    return outcome


# -- qem checkin -------------------------------------------------------------------------------


def run_checkin(store: Store, place: Workspace, path: Path | None, reason, yes: bool, dry_run: bool, who: str,
                *, as_json: bool = False, allow_mass_change: bool = False, allow_secret: bool = False) -> Outcome:
    """Check in a kept edit or a file (by default the latest kept edit, else MEMORY.md)."""
    source = _checkin_source(store, place, path)
    asker = Prompter(source, reason, yes, edit_again=False, show=not as_json)
    with kept_on_interrupt(source.hint):
        try:
            outcome = checkin.check_in(store, source, asker, who, dry_run=dry_run,
                                       allow_mass_change=allow_mass_change, allow_secret=allow_secret)
        except errors.BadFile as exc:  # (not another refusal: no terminal to confirm, a mass change, git)
            raise _naming(exc, source.path) from None
    if outcome.status is Status.REFUSED:
        assert outcome.proposal is not None
        if as_json:
            report(outcome, as_json=True)
        show_problems(outcome.proposal, heading=False)
        raise _naming(refusal(outcome, _refused_hint(source, outcome, dry_run)), source.path)
    report(outcome, as_json=as_json)
    return outcome


def _naming(exc: errors.QemError, path: Path) -> errors.QemError:
    """`exc` saying which file it is about (the latest kept edit is checked in without a
    name given): its message after the file's name, where it does not name it already."""
    message = str(exc)
    if str(path) in message:
        return exc
    return type(exc)(f"{path}: {message}", hint=exc.hint)


def _refused_hint(source: Source, outcome: Outcome, dry_run: bool) -> str | None:
    if dry_run:
        return None  # a dry run keeps nothing: the file is where it was
    hint = source.hint()
    if source.checkout is None and outcome.kept is not None:
        hint += f", and copied to {outcome.kept.file}; resolve it with `qem edit --resume {outcome.kept.id}`"
    return hint


def _checkin_source(store: Store, place: Workspace, path: Path | None) -> Source:
    if path is not None:
        return Source(path, place, owning(place, path))
    latest = _latest_or_none(place)
    mirror = place.mirror_path()
    if latest is None:
        return Source(mirror, place)
    from ..mirror.export import check

    # Both a kept edit and a hand-edited MEMORY.md could be meant; guessing could check in
    # the wrong one: refuse, and name them.
    if mirror.is_file() and check(store, mirror).precious:
        raise errors.BadInput(
            f"both {mirror} (edited by hand) and the kept edit {latest.id} could be checked in;"
            f" name one: `qem checkin --path {mirror}` or `qem checkin --path {latest.file}`"
        )
    return Source(latest.file, place, latest)


def _latest_or_none(place: Workspace) -> Checkout | None:
    try:
        return find_checkout(place, "last")
    except errors.BadInput:
        return None
