"""What the command line's ways in share, without the command-line framework.

`qem`'s commands are parsed by typer (qem_edit.shells.cli), except the few that a hook or an
agent runs on every turn, which qem_edit.shells.quick parses first; both run the same bodies
here: the memory opened with its notices said (`open_saying_notices`), an act run as the actor
(`act`), the note text argument (`text_arg`), a write's answer printed (`show_written`), a
read's (`show_answer`), the bodies of the commands the pre-commit hooks run
(`export`, `verify`, `anchors_check`), and `guarded`, one command run as every command is
run (a failure's words and exit code, a closed pipe, Ctrl-C).  Importing this module costs
no framework.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from ..base import errors
from ..base.shown import say, tolerant_streams
from ..base.shown import show as _out
from ..system import db

TYPE_CHECKING = False  # typing's flag, without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from pathlib import Path


class PipeClosed(Exception):
    """Standard output was closed by its reader."""


def open_saying_notices(workspace_dir: Path | None, store_dir: Path | None, *, write: bool = False,
                        create: bool | None = None, name_set_aside: bool = True,
                        placed=None):  # type: ignore[no-untyped-def]
    """The workspace and its store (qem_edit.shells.opening.open_memory), what opening it did
    said on stderr, for a command of the command line.  A command that writes has its config checked first
    (a bad .qem/config.toml is refused before anything is written) and creates a missing
    store, unless `create=False` (a move on an existing note: with no store there is no
    note, and a refused command must not leave a new store behind)."""
    from .opening import open_memory

    place, store, notices = open_memory(workspace_dir, store_dir, write=write, create=write if create is None else create,
                                        name_set_aside=name_set_aside, placed=placed)
    for notice in notices:
        say(notice)
    for watch in opening_watched:
        watch(place, store, notices)
    return place, store


# Told of every memory a command opens (place, store, the notices said): a commit hook's
# answer is kept resting on what was read then (qem_edit.shells.quick, qem_edit.mirror.answered).
opening_watched: list[Callable] = []


def act(workspace_dir, store_dir, actor, run, *, create: bool = True):  # type: ignore[no-untyped-def]
    """Run one of qem_edit.writes.acts on the workspace's store as the actor; say its
    notices.  `run` returns the write's answer (qem_edit.writes.replies), which it returns."""
    from ..system import workspace as ws
    from .opening import open_memory, unmade

    who = ws.actor(actor)
    place, store, notices = open_memory(workspace_dir, store_dir, write=True, create=create)
    try:
        with store:
            written = run(store, place, who)
    except BaseException:
        unmade(store)  # a refused first write leaves no memory behind
        raise
    for notice in notices + written.notices:  # "created a new memory" only once the write stands
        say(notice)
    return written


def text_arg(text: str) -> str:
    """The note text argument, or standard input for `-`."""
    if text != "-":
        return text
    try:
        return stdin("the note text").read().decode("utf-8")
    except UnicodeDecodeError:
        raise errors.Refused("the note text on standard input is not UTF-8") from None


def stdin(what: str):  # type: ignore[no-untyped-def]
    """Standard input's bytes, for `what` given as `-`; BadInput where there is none (the
    shell closed it: `<&-`), which Python leaves as None."""
    if sys.stdin is None or getattr(sys.stdin, "buffer", None) is None:
        raise errors.BadInput(f"{what} is to be read from standard input (`-`), which is closed; nothing was written")
    return sys.stdin.buffer


def show_written(answer, as_json: bool = False) -> int:  # type: ignore[no-untyped-def]
    """A write's answer (qem_edit.writes.replies) printed: its text, or its JSON on one line."""
    if as_json:
        import json

        print(json.dumps(answer.data(), ensure_ascii=False))
    else:
        print(answer.text())
    return answer.exit_code


def add(text: str, kind: str, priority: str = "medium", provenance: str = "agent", as_json: bool = False,
        allow_secret: bool = False, anchor: list[str] | None = None, expires: str | None = None,
        ttl: str | None = None, on: list[str] | None = None, when_path: list[str] | None = None,
        when_run: list[str] | None = None, workspace_dir: Path | None = None, store_dir: Path | None = None,
        actor: str | None = None, to: str | None = None, due: str | None = None, answers: str | None = None,
        scope: str | None = None, session: str | None = None, rests_on: list[str] | None = None) -> int:
    """`qem add` (and `qem answer`): a note written, its id printed (`qem add`'s options are
    declared in qem_edit.shells.quick)."""
    from pathlib import Path

    from ..writes import acts, replies

    body = text_arg(text)
    triggers = acts.declared(on, when_path, when_run)
    request = acts.Request(to, due, answers)
    return show_written(act(workspace_dir, store_dir, actor, lambda h, p, who: replies.added(acts.add(
        h, p, body, kind, priority, provenance, who, allow_secret=allow_secret, anchors=anchor, cwd=Path.cwd(),
        expires=expires, ttl=ttl, triggers=triggers, request=request, scope=scope, session=session,
        rests_on=rests_on))), as_json)


def checkin(path: Path | None = None, reason: str | None = None, yes: bool = False, dry_run: bool = False,
            as_json: bool = False, mass: bool = False, allow_secret: bool = False, workspace_dir: Path | None = None,
            store_dir: Path | None = None, actor: str | None = None) -> int:
    """`qem checkin`: an edited file checked in (qem_edit.shells.quick holds the options' help)."""
    from ..system import workspace as ws
    from .terminal import run_checkin

    place, store = open_saying_notices(workspace_dir, store_dir, write=True, create=False)
    with store:
        outcome = run_checkin(store, place, path, reason, yes, dry_run, ws.actor(actor),
                              as_json=as_json, allow_mass_change=mass, allow_secret=allow_secret)
        return checked_in(outcome)


def checked_in(outcome) -> int:  # type: ignore[no-untyped-def]
    """A check-in's exit status: 1 for a dry run that found changes (as `export --check`),
    2 for an empty or unreadable edit, 3 for conflicts."""
    from ..writes.checkin import Status, is_conflict

    if outcome.status is Status.REFUSED:
        return errors.EXIT_CONFLICT if is_conflict(outcome.proposal) else errors.EXIT_INPUT
    if outcome.status is Status.EMPTY:
        return errors.EXIT_INPUT
    if outcome.status is Status.DRY_RUN and outcome.proposal.plan.ops:
        return errors.EXIT_DIFFERENT
    return errors.EXIT_OK


def guarded(run: Callable[[], object]) -> int:
    """Run one command as every command runs: its exit status; a failure (errors.QemError,
    or an OSError: a file qem cannot create or write) said in its words with its code; a
    closed standard output ends it quietly (`qem log | head`), as git does; Ctrl-C is 130."""
    catch_interrupts()
    tolerant_streams()  # a note's é on an ASCII stream is written `\xe9`, not a traceback
    said = False  # that the command was interrupted
    try:
        code = run()
    except (PipeClosed, BrokenPipeError):
        silence_stdout()
        code = errors.EXIT_OK
    except (errors.QemError, OSError) as exc:
        from ..storage.secrets import withheld  # a refused value is named, a secret in it never shown

        for line in errors.words(exc):
            say(withheld(line))
        code = exc.exit_code if isinstance(exc, errors.QemError) else errors.EXIT_INPUT
        said = isinstance(exc, errors.Interrupted)
    except KeyboardInterrupt:
        print("\nqem: interrupted", file=sys.stderr)
        code, said = errors.EXIT_INTERRUPTED, True
    if db.interrupted() and not said:  # a Ctrl-C that ended an SQLite statement, or that typer took as its exit 130
        print("\nqem: interrupted", file=sys.stderr)
        code = errors.EXIT_INTERRUPTED
    return code if isinstance(code, int) else 0


def silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def catch_interrupts() -> None:
    """Ctrl-C ends long SQLite work too (qem_edit.system.db.on_interrupt), where Python's own
    handler is in place (the main thread of a process that did not ignore SIGINT)."""
    import _signal  # (signal's own C module, loaded as Python starts: `signal` adds enums, `threading` a thread's name)

    try:
        if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
            _signal.signal(_signal.SIGINT, db.on_interrupt)
    except ValueError:  # not the main thread: signals are the main thread's
        pass


# -- the commands the pre-commit hooks run (qem_edit.shells.quick holds their options' help) -------------


def show_answer(answer, as_json: bool = False, withhold: bool = False) -> int:  # type: ignore[no-untyped-def]
    """Print an answer (qem_edit.reads.answers) in the form asked for; its exit status.
    `withhold`: a report on files from anywhere (`qem verify`), its secrets withheld."""
    if as_json:
        from ..reads.answers import as_json as json_text  # (only here: a text answer need not import the reads)

    text = json_text(answer.data()) if as_json else answer.text()
    if withhold and text:  # (nothing to withhold in nothing: a clean verify loads no secret patterns)
        from ..storage.secrets import withheld

        text = withheld(text)
    if text:
        print(text) if as_json else _out(text)  # JSON carries its own escapes (answers.as_json)
    remark = answer.remark()
    if remark:
        _out(remark, sys.stderr)
    return answer.exit_code


def export(filters: list[str] | None = None, path: Path | None = None, check: bool = False, diff: bool = False,
           stdout: bool = False, force: bool = False, at: str | None = None, staged: bool = False,
           workspace_dir: Path | None = None, store_dir: Path | None = None) -> int:
    """`qem export`: MEMORY.md rendered, checked (`--check`, `--diff`) or printed."""
    from ..mirror import export as mirror

    if at is not None and (not stdout or check or diff):
        raise errors.BadInput("--at renders history: use it with --stdout (and without --check/--diff)")
    if filters and (not stdout or at is not None):
        raise errors.BadInput("filters select notes to print: use them with --stdout (and without --at);"
                              " MEMORY.md always holds the whole memory")
    if not (stdout or check or diff):
        _settle_log(workspace_dir, store_dir)
    place, store = open_saying_notices(workspace_dir, store_dir)
    target = place.mirror_name(path)  # (a string: pathlib is a third of a commit hook's start-up)
    with store:
        if stdout:  # the file's bytes, never decoded
            if not filters and at is None:
                with mirror.rendering(store) as (_, chunks):  # streamed, never held whole
                    sys.stdout.flush()
                    sys.stdout.buffer.writelines(chunks)
                    sys.stdout.buffer.flush()
                return 0
            chosen = selection(store, None, False, filters)
            write_bytes(mirror.render_store(store, chosen)[1] if at is None else mirror.render_as_of(store, at))
            return 0
        if staged and path is None:
            refused = _judge_staged(store, place)
            if refused is not None:
                return refused
        if check or diff:
            return _check_mirror(store, target, check, diff)
        wrote = mirror.export_kept(store, target, force, place.root_name)
    say(f"{'wrote' if wrote else 'unchanged:'} {target}")
    return 0


def _settle_log(workspace_dir: Path | None, store_dir: Path | None) -> None:
    """Before rendering after a merge: the log files git left unmerged, settled and said
    (qem_edit.mirror.export.settle_unmerged)."""
    from ..mirror.export import settle_unmerged
    from ..system.workspace import resolve

    for path in settle_unmerged(resolve(workspace_dir, store_dir).store_name):
        say(f"settled {path}, which the merge left unmerged (a log file is never changed: kept as its name says)")


def _judge_staged(store, place) -> int | None:  # type: ignore[no-untyped-def]
    """`--staged`: the commit's verdict where it is not the work tree's (its exit
    status; nothing is written), else None (judge the work tree)."""
    from ..mirror.staged import staged_verdict

    verdict = staged_verdict(store, place)
    if verdict is None:
        return None
    _out(("ok: " if verdict.clean else "qem: ") + verdict.message, sys.stderr)  # (memory's text, shown)
    return 0 if verdict.clean else 1


def _check_mirror(store, target: str, check: bool, diff: bool) -> int:  # type: ignore[no-untyped-def]
    """`export --check` and/or `--diff` printed (qem_edit.mirror.export.checked): the diff
    on stdout, the verdict on stderr; exit 1 when the file differs from the rendering."""
    from ..mirror import export as mirror

    found = mirror.checked(store, target, check, diff)
    if found.patch is not None:
        write_bytes(found.patch.encode("utf-8"))
    if found.verdict is not None:
        _out(("ok: " if found.verdict.clean else "qem: ") + found.verdict.message, sys.stderr)
    return found.exit_code


def write_bytes(data: bytes) -> None:
    """Print bytes as they are, whatever the locale: a rendering is the file's bytes."""
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def selection(store, kinds: list[str] | None, active: bool, filters: list[str] | None):  # type: ignore[no-untyped-def]
    """The notes a checkout (or a printed rendering) holds: some kinds, live ones, or
    exactly those a query matches now (said on stderr, with the query's scope)."""
    from ..renderer import Selection
    from ..writes.kept_edits import query_selection

    if not filters:
        return Selection(kinds=_kinds(kinds), active_only=active)
    if kinds or active:
        raise errors.BadInput("give either --kind/--active or query filters (kind=... state=active), not both")
    chosen = query_selection(store, filters)
    say(f"{len(chosen.notes or ()):,} notes match {' '.join(chosen.query or ())}; the rendering holds only them")
    return chosen


def _kinds(kinds: list[str] | None) -> tuple[str, ...] | None:
    from ..base.vocabulary import KINDS

    if not kinds:
        return None
    for k in kinds:
        errors.choice(k, KINDS, "kind")
    return tuple(k for k in KINDS if k in kinds)


def verify(repair: bool = False, fail_on_disputes: bool = False, fail_on_drift: bool = False,
           fail_on_late: bool = False, staged: bool = False, base: str | None = None, as_json: bool = False,
           workspace_dir: Path | None = None, store_dir: Path | None = None) -> int:
    """`qem verify`: the log, the index and MEMORY.md checked (`--staged`: as the commit carries them)."""
    from ..mirror.verify import verify_report

    if staged:
        return _verify_staged(as_json, workspace_dir, store_dir, repair=repair, disputes_fail=fail_on_disputes,
                              base=base, drift_fail=fail_on_drift, late_fail=fail_on_late)
    place, store = open_saying_notices(workspace_dir, store_dir, write=False, name_set_aside=False)  # it lists them itself
    with store:
        return show_answer(verify_report(store, place, repair=repair, disputes_fail=fail_on_disputes, base=base,
                                         drift_fail=fail_on_drift, late_fail=fail_on_late), as_json, withhold=True)


def _verify_staged(as_json: bool, workspace_dir: Path | None, store_dir: Path | None, **options: object) -> int:
    """`qem verify --staged`: git's first question about the commit (the top it names) asked as
    the workspace is found, answered while the store opens."""
    from ..mirror.staged import verify_staged
    from ..system import gitrepo
    from ..system.workspace import git_top

    try:
        place, store = open_saying_notices(workspace_dir, store_dir, write=False, name_set_aside=False,
                                           placed=lambda place: gitrepo.start_top(git_top(place.root_name),
                                                                                  place.root_name))
        with store:
            return show_answer(verify_staged(store, place, **options), as_json, withhold=True)
    finally:
        gitrepo.forget_tops()


def anchors_check(staged: bool = False, rev: str | None = None, flag: bool = False, as_json: bool = False,
                  workspace_dir: Path | None = None, store_dir: Path | None = None, actor: str | None = None) -> int:
    """`qem anchors check`: the notes whose anchored content drifted, listed (`--flag`: written)."""
    from ..reads import drift

    if staged and rev is not None:
        raise errors.BadInput("--staged and --rev judge two different places: give one")
    if flag and rev is not None:
        raise errors.BadInput("--flag writes what the work tree, or the commit being made (--staged), asks for;"
                              " --rev REV only lists what REV's tree would")
    judged = drift.STAGED if staged else rev if rev is not None else drift.WORK_TREE
    place, store = open_saying_notices(workspace_dir, store_dir)  # read: a commit that drifts nothing writes nothing
    with store:
        report = drift.check(store, drift.tree_of(place), judged)
        if flag and report.notes:
            from ..system import workspace as ws
            from ..system.unstaged import guard
            from ..writes import acts

            guard(place.mirror_path(), workspace=place.root)  # a flag renders MEMORY.md: never over a set-aside edit
            report = acts.flag_drift(store, place, report, ws.actor(actor))
        touched = drift.touched_notes(store, report) if flag and judged == drift.STAGED else set()
        if touched:  # an earlier run's flags, which a failed `git commit -a` dropped
            from ..mirror.gitstage import stage_notes_left_out

            report.staged_before = stage_notes_left_out(store, place, touched)
    for notice in report.notices:
        say(notice)
    return show_answer(report, as_json)
