"""The terminal around a check-in: the editor, the prompts, and what a person is shown.

`run_edit` (qem edit) and `run_checkin` (qem checkin) are shells over checkin.check_in:
they choose the source, answer its questions at the terminal (or from --yes and -m),
print the plan and what happened, and return the outcome; only the CLI turns an outcome
into an exit status.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import checkin, errors
from .checkin import Outcome, Proposal, Source
from .checkouts import Checkout, find_checkout, new_checkout, owning
from .model import MOVE_BY_VERB, MOVES
from .renderer import Selection
from .store import Store
from .workspace import Workspace

# -- the editor ------------------------------------------------------------------------------


def editor_command() -> str:
    for name in ("QEM_EDITOR", "VISUAL", "EDITOR"):
        value = os.environ.get(name)
        if name == "VISUAL" and os.environ.get("TERM") == "dumb":
            continue
        if value and value.strip():
            return value
    return "vi"


def run_editor(path: Path) -> int:
    """Run the editor on `path` the way git does: through the shell, path as "$1"."""
    editor = editor_command()
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


def say(message: str) -> None:
    print(f"qem: {message}", file=sys.stderr, flush=True)


def interactive() -> bool:
    return sys.stdin.isatty()


def ask(prompt: str) -> str:
    print(prompt, end="", file=sys.stderr, flush=True)
    line = sys.stdin.readline()
    if not line:
        return ""  # end of input: the safe choice
    return line.strip()


class Prompter:
    """Answers a check-in's questions: from --yes and -m where given, else at the
    terminal; with no terminal, refuses with what to pass instead."""

    def __init__(self, source: Source, reason: str | None, yes: bool, *, edit_again: bool) -> None:
        self.source = source
        self.given_reason = reason.strip() if reason and reason.strip() else None
        self.yes = yes
        self.edit_again = edit_again

    def confirm(self, proposal: Proposal, moved: int) -> str:
        print(describe_plan(proposal), file=sys.stderr)
        if self.yes:
            return "apply"
        if not interactive():
            also = " (and -m REASON)" if self.edit_again else ""
            raise errors.BadInput(f"no terminal to confirm the plan: pass --yes{also}", hint=self.source.hint())
        prompt = "[y]es / [e]dit again / [N]o, keep the edit" if self.edit_again else "[y/N]"
        answer = ask(f"Apply these changes? {prompt}: ").lower()
        if self.edit_again and answer in ("e", "edit"):
            return "edit"
        return "apply" if answer in ("y", "yes") else "keep"

    def reason(self) -> str:
        if self.given_reason is None:
            self.given_reason = self._ask_reason()
        return self.given_reason

    def _ask_reason(self) -> str:
        if not interactive():
            raise errors.BadInput(
                "no terminal to ask for the check-in's reason: pass -m REASON", hint=self.source.hint()
            )
        while True:
            answer = ask("Reason for this check-in (recorded on each event): ")
            if answer:
                return answer
            if not sys.stdin.isatty():
                raise errors.BadInput("a check-in needs a reason", hint=self.source.hint())


# -- what a person is shown ----------------------------------------------------------------------


def describe_plan(proposal: Proposal) -> str:
    plan = proposal.plan
    out: list[str] = []
    for op in plan.ops:
        out.extend(_describe_op(op, proposal))
    summary = summarize(plan)
    out.append(f"Plan: {summary or 'nothing to write'} (base seq {plan.base}, store head {plan.head})")
    if plan.merged:
        out.append(f"Kept others' changes since your base to {_ids(plan.merged)}")
    if plan.agreed:
        out.append(f"Already done in the store, nothing to write: {_ids(plan.agreed)}")
    return "\n".join(out)


def _describe_op(op, proposal: Proposal) -> list[str]:  # type: ignore[no-untyped-def]
    old = proposal.base_notes.get(op.note_id) if op.note_id is not None else None
    if op.action == "create":
        assert op.content
        return [f"  + create {op.content.kind} · {op.content.priority} · human"] + [
            f"      {line}" for line in op.content.text.split("\n")
        ]
    if op.action == "supersede" and op.content and old:
        return (
            [f"  ~ supersede #{op.note_id} ({old.kind} · {old.priority}) with a new"
             f" {op.content.kind} · {op.content.priority} · human note"]
            + [f"    - {line}" for line in (old.text or "").split("\n")]
            + [f"    + {line}" for line in op.content.text.split("\n")]
        )
    move = MOVE_BY_VERB[op.action]
    first = ((old.text if old else None) or "").split("\n")[0]
    why = f" ({op.reason})" if op.reason else ""
    return [f"  {move.sign} {move.shown} #{op.note_id}{why}: {first}"]


def summarize(plan) -> str:  # type: ignore[no-untyped-def]
    """"1 create, 2 supersede, 1 revoke": the plan's counts, in the lifecycle's order."""
    counts = plan.counts()
    return ", ".join(f"{counts[m.verb]} {m.shown}" for m in MOVES if m.verb in counts)


def _ids(ids: list[int]) -> str:
    return ", ".join(f"#{i}" for i in ids)


def report(outcome: Outcome) -> None:
    """Say what a check-in did (its plan was shown when it was confirmed)."""
    proposal = outcome.proposal
    if outcome.status == "landed_before":
        assert outcome.source.checkout is not None
        say(
            f"this edit was already checked in as {outcome.checkin_id}; nothing more to write"
            f" (see `qem log`); removing the kept edit {outcome.source.checkout.id}"
        )
    elif outcome.status == "applied":
        assert proposal is not None
        new = f"; new notes {_ids(outcome.created)}" if outcome.created else ""
        say(f"checked in {outcome.checkin_id}: {summarize(proposal.plan)}{new}")
        for notice in outcome.notices:
            say(notice)
    elif outcome.status in ("unchanged", "dry_run") and proposal is not None and not proposal.plan.ops:
        say("no changes; nothing written")
        if proposal.plan.merged:
            say(f"others changed {_ids(proposal.plan.merged)} since your base; kept")
    elif outcome.status == "dry_run":
        assert proposal is not None
        print(describe_plan(proposal), file=sys.stderr)
        say("dry run; nothing written")
    elif outcome.status == "keep":
        say(f"nothing written; {outcome.source.hint()}")


def show_problems(proposal: Proposal, heading: bool) -> list[str]:
    messages = checkin.problems(proposal)
    if heading:
        what = "conflicts with changes made since your base" if checkin.is_conflict(proposal) else (
            "the edit cannot be checked in"
        )
        say(f"{what}:")
    for message in messages:
        print(f"  {message}", file=sys.stderr)
    return messages


def refusal(outcome: Outcome, hint: str) -> errors.QemError:
    """The error a refused check-in ends in, when nobody is there to edit again."""
    assert outcome.proposal is not None
    count = len(checkin.problems(outcome.proposal))
    exc_type = errors.ConflictError if checkin.is_conflict(outcome.proposal) else errors.BadInput
    return exc_type(f"{count} problem(s); nothing was written", hint=hint)


# -- qem edit ---------------------------------------------------------------------------------


def run_edit(store: Store, place: Workspace, selection: Selection, reason, yes: bool, resume, who: str) -> Outcome:
    """Check out (or resume a kept edit), run the editor, check the edit in; with a
    terminal, a refused edit can be edited again until it lands or the person stops."""
    if resume is not None:
        checkout = find_checkout(place, resume)
        done = checkin.already_landed(store, checkout)
        if done is not None:
            checkout.discard()
            outcome = Outcome("landed_before", Source(checkout.file, place, checkout), checkin_id=done)
            report(outcome)
            return outcome
        marked = checkin.rebase_kept(store, checkout)
        if marked:
            say(
                f"the store changed since this edit's base; {marked} conflict(s) are marked in the file"
                " (keep one side of each, delete the other and the marker lines)"
            )
    else:
        checkout = new_checkout(store, place, selection)
    source = Source(checkout.file, place, checkout)
    asker = Prompter(source, reason, yes, edit_again=True)
    while True:
        status = run_editor(checkout.file)
        if status != 0:
            say(f"the editor exited with status {status}; nothing was checked in")
            raise errors.BadInput("the editor failed", hint=checkout.resume_hint())
        outcome = _edit_round(store, source, asker, who)
        if outcome.status != "edit":
            return outcome


def _edit_round(store: Store, source: Source, asker: Prompter, who: str) -> Outcome:
    checkout = source.checkout
    assert checkout is not None
    if not checkin.read_edit(checkout.file).strip():
        say("the file is empty; no changes, nothing written")
        checkout.discard()
        return Outcome("unchanged", source)
    try:
        outcome = checkin.check_in(store, source, asker, who)
    except errors.QemError as exc:
        exc.hint = exc.hint or checkout.resume_hint()
        raise
    if outcome.status == "refused":
        return _refused_in_edit(store, outcome, checkout)
    report(outcome)
    return outcome


def _refused_in_edit(store: Store, outcome: Outcome, checkout: Checkout) -> Outcome:
    assert outcome.proposal is not None
    show_problems(outcome.proposal, heading=True)
    if not interactive():
        # keep the user's text as it was; the rebased version is offered on resume
        raise refusal(outcome, checkout.resume_hint())
    answer = ask("What now? [e]dit again / e[x]it keeping the edit: ").lower()
    if answer not in ("e", "edit"):
        say(f"nothing written; {checkout.resume_hint()}")
        return outcome
    checkin.reopen(store, checkout, outcome.proposal)
    outcome.status = "edit"
    return outcome


# -- qem checkin -------------------------------------------------------------------------------


def run_checkin(store: Store, place: Workspace, path: Path | None, reason, yes: bool, dry_run: bool, who: str) -> Outcome:
    """Check in a kept edit or a file (by default the latest kept edit, else MEMORY.md)."""
    source = _checkin_source(store, place, path)
    outcome = checkin.check_in(store, source, Prompter(source, reason, yes, edit_again=False), who, dry_run=dry_run)
    if outcome.status == "refused":
        assert outcome.proposal is not None and outcome.kept is not None
        show_problems(outcome.proposal, heading=False)
        hint = source.hint()
        if source.checkout is None:
            hint += f", and copied to {outcome.kept.file}; resolve it with `qem edit --resume {outcome.kept.id}`"
        raise refusal(outcome, hint)
    report(outcome)
    return outcome


def _checkin_source(store: Store, place: Workspace, path: Path | None) -> Source:
    if path is not None:
        return Source(path, place, owning(place, path))
    latest = _latest_or_none(place)
    mirror = place.mirror_path()
    if latest is None:
        return Source(mirror, place)
    from .export import check

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
