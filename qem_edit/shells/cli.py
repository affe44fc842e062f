"""The `qem` command line: each command parses its options, calls the core, returns a code.

Exit codes (also in `qem --help` and README.md):
  0  ok
  1  a check found a difference (`export --check`, `export --diff`, `verify`, `diff`)
  2  bad usage or bad input; nothing was written
  3  a conflict; nothing was written
  130 interrupted

Errors are raised as `errors.QemError` anywhere below and turned into one message and one
exit status in `main`, the only place that exits.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..base import errors
from ..base.shown import say
from ..base.shown import show as _out
from ..base.vocabulary import KINDS, MOMENTS, MOVE_BY_VERB, READING_ORDER, STATES, Move
from ..storage.store import Store
from . import quick, shell

HELP = """qem: an agent's memory as an append-only event log, legible and editable as MEMORY.md.

Notes are never overwritten: every change is an event, and a note's state is the replay
of its events. `qem export` renders the store to a byte-stable MEMORY.md; `qem edit`
lets a person change it in $EDITOR and checks the edit back in as events.

\b
Exit codes:
  0    ok
  1    a check found a difference (export --check/--diff, verify, diff)
  2    bad usage or bad input; nothing was written
  3    a conflict; nothing was written
  130  interrupted
"""

def _typer(**settings) -> typer.Typer:  # type: ignore[no-untyped-def]
    """A command group as each of qem's is made: plain help text (no rich markup), `-h`,
    no shell-completion commands, no pretty tracebacks (a traceback reaching a user is a
    bug, and shell.py says every error in words)."""
    return typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                       context_settings={"help_option_names": ["-h", "--help"]}, **settings)


app = _typer(help=HELP, no_args_is_help=True)


def _typer_option(opt: quick.Opt, optional: bool = True):  # type: ignore[no-untyped-def]
    """typer's parameter for an option of quick's table (one declaration, read by both):
    its type from how it takes a value, its spellings and help from the table."""
    kind = {"flag": bool, "many": list[str]}.get(opt.takes, Path if opt.convert is quick.as_path else opt.convert)
    info = typer.Option(*opt.names, help=opt.help, metavar=opt.metavar, show_default=opt.show_default)
    return Annotated[Optional[kind] if optional and opt.takes != "flag" else kind, info]  # type: ignore[valid-type]


def _typer_argument(arg: quick.Arg, kind):  # type: ignore[no-untyped-def]
    """typer's positional parameter for an argument of quick's table, of type `kind`."""
    return Annotated[kind, typer.Argument(help=arg.help, show_default=False)]


def _declared_by(spec: quick.Spec, body):  # type: ignore[no-untyped-def]
    """Give a command the signature typer reads (its `__signature__`) from quick's table of
    it, each parameter's default the body's own, as the quick path leaves it."""
    import inspect

    defaults = {name: p.default for name, p in inspect.signature(body).parameters.items()}

    def parameter(dest: str, annotation) -> inspect.Parameter:  # type: ignore[no-untyped-def]
        return inspect.Parameter(dest, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=defaults[dest],
                                 annotation=annotation)

    arguments = [parameter(arg.dest, _typer_argument(arg, str)) for arg in spec.arguments]
    if spec.rest is not None:
        arguments.append(parameter(spec.rest.dest, _typer_argument(spec.rest, Optional[list[str]])))
    options = [parameter(opt.dest, _typer_option(opt, optional=defaults[opt.dest] is None)) for opt in spec.options]

    def declare(command):  # type: ignore[no-untyped-def]
        command.__signature__ = inspect.Signature([*arguments, *options], return_annotation=int)
        return command

    return declare


WorkspaceOpt = _typer_option(quick.WORKSPACE)
StoreOpt = _typer_option(quick.STORE)
ActorOpt = _typer_option(quick.ACTOR)
JsonOpt = _typer_option(quick.JSON)
StagedOpt = _typer_option(quick.STAGED)
AllowSecretOpt = _typer_option(quick.ALLOW_SECRET)
AnchorOpt = _typer_option(quick.ANCHOR)
IdArg = Annotated[str, typer.Argument(metavar="ID", help="The note: its short id (or any unambiguous prefix of its id), or its number from before the conversion.", show_default=False)]
ReasonOpt = _typer_option(quick.MESSAGE)
RequiredReasonOpt = Annotated[str, typer.Option("--message", "-m", help="Why (required).", show_default=False)]
ExpiresOpt = _typer_option(quick.EXPIRES)
OnOpt = _typer_option(quick.ON)
WhenPathOpt = _typer_option(quick.WHEN_PATH)
WhenRunOpt = _typer_option(quick.WHEN_RUN)
ToOpt = _typer_option(quick.TO)
DueOpt = _typer_option(quick.DUE)
ScopeOpt = _typer_option(quick.SCOPE)
SessionOpt = _typer_option(quick.SESSION)
RestsOnOpt = _typer_option(quick.RESTS_ON)
AnswersOpt = _typer_option(quick.ANSWERS)
TtlOpt = _typer_option(quick.TTL)


def _no_allowance_for_loads(allow_secret: bool) -> None:
    """A loaded event's id is the hash of its bytes: no allowance can be added to it, so
    `qem verify` would name an allowed secret for ever.  Refused, naming the way that works."""
    if allow_secret:
        raise errors.BadInput("--allow-secret cannot be recorded on loaded events (an event's id is the hash of its"
                              " bytes), so `qem verify` would name the secret on every run; nothing was written",
                              hint="load without the secret, then write that note by hand: `qem add TEXT --allow-secret`")


def _answer(workspace_dir, store_dir, read, as_json: bool = False) -> int:  # type: ignore[no-untyped-def]
    """Open the memory, run one read on it (qem_edit.reads.answers, query, context) and print its
    answer: every read command is this over one library call."""
    _, store = shell.open_saying_notices(workspace_dir, store_dir)
    with store:
        return shell.show_answer(read(store), as_json)


def _print_version(value: bool) -> None:
    if value:
        from .. import __version__

        print(f"qem {__version__}")
        raise typer.Exit()


@app.callback()
def _qem(
    version: Annotated[bool, typer.Option("--version", help="Print qem's version and exit.", is_eager=True, callback=_print_version)] = False,
) -> None:
    """qem: an agent's memory as an append-only event log."""


# -- store ---------------------------------------------------------------------------------


@app.command()
def init(workspace_dir: WorkspaceOpt = None, store_dir: StoreOpt = None) -> int:
    """Create the memory (idempotent): the log directories, their .gitignore, the memory's id.

    Example: qem init --workspace ~/project
    """
    from ..mirror.gitstage import stage_written
    from ..system import workspace as ws

    place = ws.resolve(workspace_dir, store_dir)
    with Store.open(place.store_name, create=True) as store:
        print(store.started or f"memory already exists: {place.store_path}")
        notices = stage_written(store, place)
    for notice in notices:
        say(notice)
    return 0


@app.command()
@_declared_by(quick.ADD, shell.add)
def add(**params) -> int:  # type: ignore[no-untyped-def]
    """Add a note and print its id (and say so when a note in force has the same text).

    Example: qem add "Run tests inside the venv" --kind directive --priority high
    """
    return shell.add(**params)


@app.command()
def answer(
    note_id: IdArg,
    text: Annotated[str, typer.Argument(help="The answer's text; - reads it from standard input.", show_default=False)],
    kind: Annotated[str, typer.Option("--kind", "-k", help="The answer's kind: " + ", ".join(KINDS))] = "finding",
    priority: Annotated[str, typer.Option("--priority", "-p", help="high, medium or low.")] = "medium",
    as_json: JsonOpt = False,
    allow_secret: AllowSecretOpt = False,
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
    actor: ActorOpt = None,
) -> int:
    """Answer a request: a new note pointing at it (the request is not changed); print its id.

    Example: qem answer k3f9 "The migration ran; 0 rows lost"
    """
    return shell.add(text, kind, priority, "agent", as_json, allow_secret, workspace_dir=workspace_dir,
                     store_dir=store_dir, actor=actor, answers=note_id)


@app.command()
def supersede(
    note_id: IdArg,
    text: Annotated[str, typer.Argument(help="The successor's text; - reads standard input.", show_default=False)],
    reason: ReasonOpt = None,
    kind: Annotated[Optional[str], typer.Option("--kind", "-k", help="The successor's kind (default: the old note's).", show_default=False)] = None,
    priority: Annotated[Optional[str], typer.Option("--priority", "-p", help="The successor's priority (default: the old note's).", show_default=False)] = None,
    as_json: JsonOpt = False,
    allow_secret: AllowSecretOpt = False,
    anchor: Annotated[Optional[list[str]], typer.Option("--anchor", metavar="PATH", help="A file or folder the successor is about (repeatable; default: the old note's, their content read now).", show_default=False)] = None,
    no_anchors: Annotated[bool, typer.Option("--no-anchors", help="The successor is about no file.")] = False,
    expires: Annotated[Optional[str], typer.Option("--expires", help="The successor's end (default: the old note's): a date (YYYY-MM-DD) or a UTC time; none: no end. An end already past expires the successor in the same write.", show_default=False)] = None,
    ttl: Annotated[Optional[str], typer.Option("--ttl", help="The successor's end as a time to live from now: a number and h, d or w (30d).", show_default=False)] = None,
    on: OnOpt = None,
    when_path: WhenPathOpt = None,
    when_run: WhenRunOpt = None,
    no_triggers: Annotated[bool, typer.Option("--no-triggers", help="The successor declares no trigger (default: the old note's, unless --on, --when-path or --when-run are given).")] = False,
    rests_on: Annotated[Optional[list[str]], typer.Option("--rests-on", metavar="ID", help="A note the successor rests on (repeatable; default: the old note's bases still in force, not flagged stale).", show_default=False)] = None,
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
    actor: ActorOpt = None,
) -> int:
    """Replace a note with a successor (the old text stays in the log); print the new id.

    Example: qem supersede 12 "Release the lock after the restart" -m "order was wrong"
    """
    from ..writes import acts, replies

    body = shell.text_arg(text)
    if no_anchors and anchor:
        raise errors.BadInput("give --anchor or --no-anchors, not both")
    anchors = [] if no_anchors else anchor
    given = acts.declared(on, when_path, when_run)
    if no_triggers and given:
        raise errors.BadInput("give --on/--when-path/--when-run or --no-triggers, not both")
    triggers = () if no_triggers else given or None
    answer = shell.act(workspace_dir, store_dir, actor,
                       lambda h, p, who: replies.superseded(h, acts.supersede(
                           h, p, note_id, body, reason, who, kind, priority, allow_secret=allow_secret,
                           anchors=anchors, cwd=Path.cwd(), expires=expires, ttl=ttl, triggers=triggers,
                           rests_on=rests_on)),
                       create=False)
    return shell.show_written(answer, as_json)


@app.command()
def share(
    note_id: IdArg,
    reason: ReasonOpt = None,
    as_json: JsonOpt = False,
    allow_secret: AllowSecretOpt = False,
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
    actor: ActorOpt = None,
) -> int:
    """Make a private note a team note (committed with the code); the private one ends. Print the team note's id.

    Example: qem share k3f9 -m "the team needs this too"
    """
    from ..writes import replies

    answer = shell.act(workspace_dir, store_dir, actor,
                       lambda h, p, who: replies.shared(h, p, note_id, reason, who, allow_secret=allow_secret),
                       create=False)
    return shell.show_written(answer, as_json)


def _move(event_type: str, note_id: str, reason, workspace_dir, store_dir, actor) -> int:  # type: ignore[no-untyped-def]
    from ..writes import acts, replies

    return shell.show_written(shell.act(
        workspace_dir, store_dir, actor,
        lambda h, p, who: replies.moved(acts.move(h, p, event_type, note_id, reason, who)), create=False))


def _move_command(move: Move) -> None:
    """Register `qem VERB ID -m WHY` for a move made by its note's id and a reason alone, as
    vocabulary.MOVES describes it (its help, and whether the reason is required)."""

    def command(note_id: IdArg, reason: ReasonOpt = None, workspace_dir: WorkspaceOpt = None, store_dir: StoreOpt = None,
                actor: ActorOpt = None) -> int:
        return _move(move.event, note_id, reason, workspace_dir, store_dir, actor)

    # (annotations are names here, which typer looks up: the reason's is given as the option itself)
    command.__annotations__["reason"] = RequiredReasonOpt if move.needs_reason else ReasonOpt
    command.__name__ = command.__qualname__ = move.verb
    required = " (a reason is required)" if move.needs_reason else ""
    app.command(move.command, help=f"{move.says}{required}.\n\nExample: {move.example}")(command)


def _move_commands() -> None:
    """A command for each move made by its note's id and a reason alone (vocabulary.MOVES says
    which), where `qem --help` lists them."""
    for move in READING_ORDER:
        if move.says and move.verb != "expire":  # (qem expire takes --due too: _expire_command)
            _move_command(move)


_move_commands()


def _expire(note_id: Annotated[Optional[str], typer.Argument(metavar="[ID]", help="The note (not with --due).", show_default=False)] = None,
            reason: ReasonOpt = None,
            due: Annotated[bool, typer.Option("--due", help="Expire every note in force past its end, now, in one check-in.")] = False,
            as_json: JsonOpt = False, workspace_dir: WorkspaceOpt = None, store_dir: StoreOpt = None,
            actor: ActorOpt = None) -> int:
    """`qem expire ID` is the move's command; `qem expire --due`, the sweep of every note past its end."""
    if due:
        return _sweep(note_id, reason, as_json, workspace_dir, store_dir, actor)
    if note_id is None:
        raise errors.BadInput("expire what? name a note (qem expire ID), or expire every note past its end: qem expire --due")
    return _move("expired", note_id, reason, workspace_dir, store_dir, actor)


def _expire_command() -> None:
    """`qem expire`: the move's command as vocabulary.MOVES describes it, with `--due` beside the
    note's id."""
    move = MOVE_BY_VERB["expire"]
    app.command(move.command, help=f"{move.says}; with --due, every note in force past its end (its `expires`),"
                                   f" in one check-in.\n\nExample: {move.example}; qem expire --due")(_expire)


_expire_command()


def _sweep(note_id, reason, as_json: bool, workspace_dir, store_dir, actor) -> int:  # type: ignore[no-untyped-def]
    """`qem expire --due`: qem_edit.writes.expiry.sweep, shown as an answer."""
    from ..writes.expiry import sweep

    if note_id is not None or reason is not None:
        raise errors.BadInput("--due expires every note past its end, with its end as the reason: give no ID or -m")
    return shell.show_answer(shell.act(workspace_dir, store_dir, actor, sweep, create=False), as_json)


@app.command()
def forget(
    note_id: IdArg,
    reason: RequiredReasonOpt = "",
    yes: Annotated[bool, typer.Option("--yes", help="Confirm: the text is erased for good.")] = False,
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
    actor: ActorOpt = None,
) -> int:
    """Erase a note's text from the log for good, leaving a content-free tombstone.

    Example: qem forget 77 -m "contained a credential" --yes
    """
    from ..writes import acts

    acts.reason_for("forgotten", reason)
    if not yes:
        raise errors.BadInput(f"forget erases note #{note_id}'s text for good; add --yes to confirm")
    from ..writes import replies

    return shell.show_written(shell.act(
        workspace_dir, store_dir, actor, lambda h, p, who: replies.moved(acts.forget(h, p, note_id, reason, who)),
        create=False))


# -- reading -------------------------------------------------------------------------------


AtOpt = _typer_option(quick.AT)


@app.command()
def show(note_id: IdArg, as_json: JsonOpt = False, at: AtOpt = None, workspace_dir: WorkspaceOpt = None, store_dir: StoreOpt = None) -> int:
    """Show one note (as it is, or as it was --at a date or git revision).

    Example: qem show 12 --json
    """
    from ..reads import answers

    return _answer(workspace_dir, store_dir, lambda store: answers.show(store, note_id, at), as_json)


@app.command()
def context(
    budget: Annotated[int, typer.Option("--budget", metavar="TOKENS", help="Tokens the whole answer may take, directives included, counted as characters / 4 (0: no limit); a directive is shown whole or left out, and the last line counts what was left out.")] = 2000,
    fmt: Annotated[str, typer.Option("--format", help="markdown or json.")] = "markdown",
    skip: Annotated[int, typer.Option("--skip", metavar="N", help="Leave out the first N notes of the order, directives first (what did not fit a budget).")] = 0,
    at: AtOpt = None,
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
) -> int:
    """What an agent reads at session start: the directives in force in full, then one
    line per other note in force, in that order within a token budget.

    Example: qem context --budget 1500
    """
    from ..reads.context import FORMATS, build

    errors.choice(fmt, FORMATS, "format")
    return _answer(workspace_dir, store_dir, lambda store: build(store, budget, at, skip), fmt == "json")


@app.command()
def deliver(
    moment: Annotated[str, typer.Argument(metavar="MOMENT", help="start, compact, prompt, edit, read or shell.", show_default=False)],
    path: Annotated[Optional[list[str]], typer.Option("--path", metavar="PATH", help="The file an edit or a read touches (repeatable): from the current directory.", show_default=False)] = None,
    command: Annotated[Optional[str], typer.Option("--command", metavar="COMMAND", help="The shell command about to run.", show_default=False)] = None,
    prompt: Annotated[Optional[str], typer.Option("--prompt", metavar="TEXT", help="The prompt; - reads it from standard input.", show_default=False)] = None,
    budget: Annotated[int, typer.Option("--budget", metavar="CHARS", help="Characters the whole answer may take (0: no limit); the last line counts what was left out.")] = 10_000,
    skip: Annotated[int, typer.Option("--skip", metavar="N", help="Leave out the first N notes of the order (what did not fit a budget).")] = 0,
    as_json: JsonOpt = False,
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
) -> int:
    """What a moment of an agent's session triggers, in the order a hook gives it (no
    session: nothing is left out as given before).  `qem hook` gives the same to a harness.

    Example: qem deliver edit --path src/index/build.py
    """
    from ..base.triggers import from_cwd
    from ..reads import delivery, tiers
    from ..system.workspace import work_top

    errors.choice(moment, MOMENTS, "moment")
    words = shell.text_arg(prompt) if prompt is not None else ""

    def read(store):  # type: ignore[no-untyped-def]
        top = work_top(store.root)
        asked = delivery.Moment(moment, from_cwd(path or [], str(Path.cwd()), str(top)), command or "", words,
                                str(top))
        if path and not asked.paths:
            raise errors.BadInput(f"--path {path[0]}: not in the work tree at {top}")
        if asked.problem():
            raise errors.BadInput(f"qem deliver {asked.problem()}")
        return tiers.deliver(store, asked, budget, skip)

    return _answer(workspace_dir, store_dir, read, as_json)


@app.command()
def hook(
    harness: Annotated[str, typer.Argument(metavar="HARNESS", help="claude, codex or gemini.", show_default=False)],
    event: Annotated[str, typer.Argument(metavar="EVENT", help="The harness's own event name (SessionStart, PreToolUse, ...).", show_default=False)],
    workspace_dir: Annotated[Optional[str], typer.Option("--workspace", "-w", metavar="DIR", help="The memory's workspace, a folder from the top of the git work tree holding the hook's working directory (default: found from that directory up).", show_default=False)] = None,
) -> int:
    """Answer one of an agent harness's hooks: its input on stdin, exactly its output
    contract on stdout; never blocks the agent (`qem setup` writes the hooks).

    Example: echo '{"session_id": "s", "cwd": ".", "source": "startup"}' | qem hook claude SessionStart
    """
    from .hookrun import main as answer  # `qem` itself starts it without this module (qem_edit/__main__.py)

    return answer([harness, event] + (["-w", workspace_dir] if workspace_dir else []))


@app.command()
def setup(
    harness: Annotated[str, typer.Argument(metavar="HARNESS", help="claude, codex or gemini.", show_default=False)],
    check: Annotated[bool, typer.Option("--check", help="Change nothing; exit 1 when the settings are missing or out of date, naming what.")] = False,
    remove: Annotated[bool, typer.Option("--remove", help="Take qem's hooks and MCP server out of the settings: qem's whole server entry, its env and other keys too (other entries stay).")] = False,
    ask_to_record: Annotated[bool, typer.Option("--ask-to-record", help="Also the Stop hook: once a session, when it recorded no note, the agent is asked to record what a future session needs (it stays until --no-ask-to-record or --remove).")] = False,
    no_ask_to_record: Annotated[bool, typer.Option("--no-ask-to-record", help="Take qem's Stop hook out (a run without --ask-to-record leaves it as it is).")] = False,
    command: Annotated[str, typer.Option("--command", metavar="CMD", help="How the hooks run qem (default: qem, found on the PATH).")] = "qem",
    hold: Annotated[bool, typer.Option("--hold", help="Hold a call before an edit or a command whose notes were not given yet (the default): `[delivery] hold = true` in .qem/config.toml.")] = False,
    no_hold: Annotated[bool, typer.Option("--no-hold", help="Never hold a call: the notes come as context, which the model reads after the call ran (`[delivery] hold = false` in .qem/config.toml, for every harness).")] = False,
    plugin: Annotated[Optional[Path], typer.Option("--plugin", metavar="DIR", help="Write the same hooks and MCP server as a plugin in DIR instead (Claude Code: a marketplace holding it; Codex: a plugin; Gemini CLI: an extension), for every project.", show_default=False)] = None,
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
) -> int:
    """Write the project's shared settings for an agent harness: qem's hooks (memory
    delivered at session start, at each prompt, before edits and commands, after a
    compaction) and its MCP server, merged into what is there; a second run changes nothing.

    Example: qem setup claude; qem setup claude --plugin ~/qem-plugins
    """
    from ..system.workspace import resolve
    from . import setup as setting_up

    if hold and no_hold:
        raise errors.BadInput("--hold and --no-hold do not go together: the first holds a call whose notes were not"
                              " given yet, the second never holds one")
    if plugin is not None and (hold or no_hold):
        flag = "--no-hold" if no_hold else "--hold"
        raise errors.BadInput(f"{flag} sets a project's memory (its .qem/config.toml), and a plugin serves every"
                              f" project: run `qem setup {harness} {flag}` in the project")
    if plugin is not None:
        from . import plugin as plugins

        return plugins.run(harness, plugin, check=check, remove=remove, ask_to_record=ask_to_record, command=command)

    place = resolve(workspace_dir, store_dir)
    return setting_up.run(harness, place, check=check, remove=remove, ask_to_record=ask_to_record, command=command,
                          no_ask_to_record=no_ask_to_record, hold=True if hold else False if no_hold else None)


@app.command("list")
def list_(
    kind: Annotated[Optional[str], typer.Option("--kind", "-k", help="Only this kind.", show_default=False)] = None,
    state: Annotated[Optional[str], typer.Option("--state", "-s", help="Only this state: " + ", ".join(STATES), show_default=False)] = None,
    as_json: JsonOpt = False,
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
) -> int:
    """List notes in the projection's order (kind, then id).

    Example: qem list --kind gotcha --state active
    """
    from ..reads import answers

    errors.choice(kind, KINDS, "kind")
    errors.choice(state, STATES, "state")
    return _answer(workspace_dir, store_dir, lambda store: answers.notes(store, kind, state), as_json)


@app.command()
def log(
    note_id: Annotated[Optional[str], typer.Argument(metavar="[ID]", help="Only this note's events.", show_default=False)] = None,
    as_json: JsonOpt = False,
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
) -> int:
    """Show the event log (all of it, or one note's), in the order every clone agrees on.

    Example: qem log 12
    """
    from ..reads import answers

    return _answer(workspace_dir, store_dir, lambda store: answers.log(store, note_id), as_json)


@app.command()
@_declared_by(quick.VERIFY, shell.verify)
def verify(**params) -> int:  # type: ignore[no-untyped-def]
    """Check the log, the index and MEMORY.md (exit 1 on a problem); list open disputes
    and drift nobody flagged.

    Example: qem verify --fail-on-disputes --fail-on-drift
    """
    return shell.verify(**params)


@app.command()
def dump(
    file: Annotated[Optional[Path], typer.Argument(help="Where to write (default: standard output).", show_default=False)] = None,
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
) -> int:
    """Write the whole log as JSON Lines, one event a line, with created notes' texts (docs/DUMP.md).

    Example: qem dump backup.jsonl
    """
    from ..system.files import write_atomic
    from ..transfer.dump import dump_lines

    _, store = shell.open_saying_notices(workspace_dir, store_dir)
    with store:  # streamed, a line at a time
        lines = (line.encode("utf-8") for line in dump_lines(store))
        if file is None or str(file) == "-":
            sys.stdout.flush()
            sys.stdout.buffer.writelines(lines)
            sys.stdout.buffer.flush()
        else:
            write_atomic(file, lines)
    return 0


@app.command()
def load(
    file: Annotated[Path, typer.Argument(help="A JSON Lines log written by `qem dump` (- for standard input).", show_default=False)],
    allow_secret: AllowSecretOpt = False,
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
) -> int:
    """Add a dumped log to the memory, checking every line first (all or nothing).

    Example: qem load fixtures/corpus-749.jsonl
    """
    from ..mirror.export import auto_export
    from ..transfer.dump import load_staged, stage_dump

    _no_allowance_for_loads(allow_secret)
    if str(file) == "-":
        from .shell import stdin

        staged = stage_dump(stdin("the log to load"), str(file))
    else:
        try:
            source = open(file, "rb")
        except OSError as exc:
            raise errors.BadInput(f"cannot read {file}: {exc.strerror}") from None
        with source:
            try:
                staged = stage_dump(source, str(file))
            except OSError as exc:
                raise errors.BadInput(f"cannot read {file}: {exc.strerror}") from None
    from .opening import open_memory, unmade

    with staged:
        place, store, notices = open_memory(workspace_dir, store_dir, write=True, create=True)
        started_as = store.memory_id() if store.started else None
        try:
            with store:
                count = load_staged(store, staged)
                for notice in notices + auto_export(store, place):
                    # a new memory takes the dump's id: the notice names the id it keeps
                    say(notice.replace(started_as, store.memory_id()) if notice == store.started else notice)
                print(f"loaded {count} new events ({staged.count - count} already here); {store.count()} notes")
                from ..base.times import utc_now
                from ..writes.expiry import due_notice

                if (due := due_notice(store, utc_now())) is not None:
                    say(due)
        except BaseException:
            unmade(store)  # a refused load into a new folder leaves no memory behind
            raise
    return 0


import_app = _typer(
    help="Import another tool's memory: a vectr store (each note with its history), or markdown a team keeps"
         " (CLAUDE.md, AGENTS.md, MEMORY.md, Claude Code's auto-memory) proposed as notes to review.",
    no_args_is_help=True,
)
app.add_typer(import_app, name="import")


@import_app.callback()
def _import() -> None:
    """Import another tool's memory."""


@import_app.command("vectr")
def import_(
    path: Annotated[Path, typer.Argument(metavar="STORE.db", help="vectr's SQLite store (working_context.sqlite).", show_default=False)],
    workspace_name: Annotated[Optional[str], typer.Option("--workspace-name", help="The vectr workspace to import (its path, or the path's last part); needed when the file holds several.", show_default=False)] = None,
    allow_secret: AllowSecretOpt = False,
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
) -> int:
    """Import a vectr store: each note with its history; print what was imported, mapped
    and skipped (importing again adds nothing).

    Example: qem import vectr ~/.cache/vectr/0a1b2c3d4e5f/working_context.sqlite
    """
    from ..mirror.export import auto_export
    from ..system.anchors import place_tree
    from ..transfer.vectr import import_vectr, prepare
    from .opening import unmade

    _no_allowance_for_loads(allow_secret)
    prepared = prepare(path, workspace_name)  # the vectr store read, mapped and checked before anything is opened
    place, store = shell.open_saying_notices(workspace_dir, store_dir, write=True)
    try:
        with store:
            report = import_vectr(store, prepared, place_tree(place))
            for notice in auto_export(store, place):
                say(notice)
            _out(report.text())
    except BaseException:
        unmade(store)  # a refused import into a new folder leaves no memory behind
        raise
    return 0


@import_app.command("markdown")
def import_markdown(
    files: Annotated[list[Path], typer.Argument(metavar="FILE...", help="Markdown files: CLAUDE.md, AGENTS.md, a MEMORY.md kept by hand, Claude Code's auto-memory files.", show_default=False)],
    path: Annotated[Optional[Path], typer.Option("--path", help="Write the proposals here (default: a kept checkout under .qem/checkouts/); a file there already is written over only as `qem checkout --path` writes one.", show_default=False)] = None,
    force: Annotated[bool, typer.Option("--force", help="Write the proposals over --path FILE whatever it holds (its edits are lost).")] = False,
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
) -> int:
    """Propose each bullet or paragraph of markdown files as a note, its kind guessed, in a
    checkout for a person to review and check in; nothing reaches the log before that, and a
    text some note already has is not proposed again.

    Example: qem import markdown CLAUDE.md AGENTS.md; qem checkin -m "imported CLAUDE.md"
    """
    from ..transfer.mdimport import import_markdown as propose
    from ..transfer.mdimport import read_files

    read = read_files(files)  # every file read and checked before the memory is opened
    place, store = shell.open_saying_notices(workspace_dir, store_dir, write=True)
    with store:
        _out(propose(store, place, read, path, force).text())
    return 0


@app.command()
def pack(workspace_dir: WorkspaceOpt = None, store_dir: StoreOpt = None) -> int:
    """Gather loose log files into packs (writes do it by themselves past 1,000 loose files).

    Example: qem pack
    """
    from ..mirror.gitstage import stage_written

    place, store = shell.open_saying_notices(workspace_dir, store_dir, write=True, create=False)
    with store:
        before, after = store.pack()
        notices = stage_written(store, place)
    print(f"packed: {before} log files before, {after} now")
    for notice in notices:
        say(notice)
    return 0


@app.command()
def migrate(workspace_dir: WorkspaceOpt = None, store_dir: StoreOpt = None) -> int:
    """Convert a store from before memory lived in git (.qem/memory.db) into the log.

    Example: qem migrate
    """
    from ..system import workspace as ws
    from ..transfer.migrate import migrate as run_migrate

    place = ws.resolve(workspace_dir, store_dir)
    print(run_migrate(place))
    return 0


# -- honest answers ------------------------------------------------------------------------


@app.command()
def status(note_id: IdArg, as_json: JsonOpt = False, workspace_dir: WorkspaceOpt = None, store_dir: StoreOpt = None) -> int:
    """Is this note current?  yes, no, or unknown, with the reason.

    Example: qem status 12
    """
    from ..reads import answers

    return _answer(workspace_dir, store_dir, lambda store: answers.status(store, note_id), as_json)


@app.command()
def owed(
    to: Annotated[Optional[str], typer.Option("--to", metavar="NAME", help="Only what NAME owes.", show_default=False)] = None,
    late: Annotated[bool, typer.Option("--late", help="Only what is past its deadline.")] = False,
    at: Annotated[Optional[str], typer.Option("--at", metavar="DATE|REV", help="As the memory was at a date or UTC time (late as of then), or as committed at a git revision (late as of now).", show_default=False)] = None,
    as_json: JsonOpt = False,
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
) -> int:
    """What is owed, by whom, and what is late: every request in force not answered yes,
    the latest first, after the scope read.

    Example: qem owed --to alice --late
    """
    from ..reads import owed as owing

    return _answer(workspace_dir, store_dir, lambda store: owing.build(store, to, late, at), as_json)


@app.command(context_settings={"ignore_unknown_options": True, "help_option_names": ["-h", "--help"]})
def query(
    filters: Annotated[Optional[list[str]], typer.Argument(help="KEY=VALUE filters (text~SUBSTRING for text, anchor~FOLDER for a folder's anchors).", show_default=False)] = None,
    events: Annotated[bool, typer.Option("--events", help="Filter the event log instead of notes.")] = False,
    as_json: JsonOpt = False,
    count: Annotated[bool, typer.Option("--count", help="Print only the number of matches on stdout (the scope line goes to stderr).")] = False,
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
) -> int:
    """Exact filters over headers, answered with the scope that was scanned.

    \b
    Note filters: kind state priority provenance actor since until supersedes
                  current=yes|no|unknown disputed=yes|no text~SUBSTRING
                  to=NAME due<DATE answered=yes|no|unknown|not-owed
                  anchor=PATH anchor~FOLDER (paths from the top of the work tree)
    Event filters (--events): type note actor since until checkin

    Example: qem query --events type=revoked actor=alice since=2026-10-01
    """
    from ..reads import query as q

    parsed = q.parse_filters(filters or [], events)
    return _answer(workspace_dir, store_dir, lambda store: q.answer(store, parsed, events, count), as_json)


@app.command()
def dispute(
    a: Annotated[str, typer.Argument(metavar="A", help="One note.", show_default=False)],
    b: Annotated[str, typer.Argument(metavar="B", help="The note that disagrees with it.", show_default=False)],
    reason: RequiredReasonOpt = "",
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
    actor: ActorOpt = None,
) -> int:
    """Record that two notes disagree (neither is edited); print the dispute's id.

    Example: qem dispute k3f9 m2n8 -m "they say opposite things about the lock"
    """
    from ..writes import acts, replies

    return shell.show_written(shell.act(
        workspace_dir, store_dir, actor, lambda h, p, who: replies.disputed(acts.dispute(h, p, a, b, reason, who))))


@app.command()
def rule(
    what: Annotated[str, typer.Argument(metavar="DISPUTE|NOTE", help="A dispute's id, a note whose concurrent changes disagree, or a note several notes supersede (a fork).", show_default=False)],
    keep: Annotated[str, typer.Option("--keep", help="For a dispute, the note that stands (the other is revoked); for a note's concurrent changes, the side that stands, as its DISPUTED marker shows it; for a fork, the successor that stands (the others are revoked).", show_default=False)],
    reason: RequiredReasonOpt = "",
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
    actor: ActorOpt = None,
) -> int:
    """Settle a disagreement: a dispute between notes, a note's concurrent changes, or a fork.

    Example: qem rule 9xq1ab --keep m2n8 -m "measured: the lock is released after"
    """
    from ..writes import acts, replies

    return shell.show_written(shell.act(
        workspace_dir, store_dir, actor,
        lambda h, p, who: replies.ruled(acts.rule(h, p, what, keep, reason, who), what, keep)))


@app.command("mcp")
def mcp_(actor: Annotated[Optional[str], typer.Option("--actor", help="Who writes (default: the client's name from its clientInfo, else QEM_ACTOR or the login name).", show_default=False)] = None,
         workspace_dir: WorkspaceOpt = None, store_dir: StoreOpt = None) -> int:
    """Serve the memory to an agent over MCP (stdio); needs `pip install 'qem-edit[mcp]'`.

    Example: qem mcp --workspace ~/project
    """
    if sys.stdin is None or sys.stdout is None:  # (the shell closed one: `<&-`)
        raise errors.BadInput("qem mcp talks over standard input and output, and one of them is closed")
    from .mcp_server import Memory, serve

    return serve(Memory(workspace_dir, store_dir, actor))


# The shells `qem completion` writes a script for: typer's own scripts, each asking `qem`
# itself for the words (`_QEM_COMPLETE` set, see `main`), so the completion follows the commands.
COMPLETION_SHELLS = ("bash", "zsh", "fish")


@app.command("completion")
def completion(shell_name: Annotated[str, typer.Argument(metavar="SHELL", help="bash, zsh or fish.", show_default=False)]) -> int:
    """Print the completion script for a shell: the subcommands and their options.

    \b
    bash: eval "$(qem completion bash)"   (in ~/.bashrc)
    zsh:  eval "$(qem completion zsh)"    (in ~/.zshrc, after compinit)
    fish: qem completion fish | source    (in ~/.config/fish/config.fish)

    Example: qem completion bash
    """
    from typer.completion import get_completion_script

    errors.choice(shell_name, COMPLETION_SHELLS, "shell")
    print(get_completion_script(prog_name="qem", complete_var=_COMPLETE_VAR, shell=shell_name))
    return 0


_COMPLETE_VAR = "_QEM_COMPLETE"


def _completing() -> bool:
    """Whether this run answers a shell's completion script: typer's shells' words, which
    it gives only once its completion classes are registered (`add_completion` is off, so
    that an ordinary run never imports them)."""
    if not os.environ.get(_COMPLETE_VAR):
        return False
    from typer.completion import completion_init

    completion_init()
    return True


# -- the mirror ----------------------------------------------------------------------------


FiltersArg = _typer_argument(quick.FILTERS, Optional[list[str]])


@app.command("export")
@_declared_by(quick.EXPORT, shell.export)
def export_(**params) -> int:  # type: ignore[no-untyped-def]
    """Render the store to a byte-stable MEMORY.md (untouched when nothing changed).

    With filters (as `qem query` takes them) and --stdout, print only the matching notes.

    Example: qem export --check; qem export --at 2026-08-01 --stdout; qem export --stdout kind=gotcha
    """
    return shell.export(**params)


# -- editing -------------------------------------------------------------------------------

KindsOpt = Annotated[Optional[list[str]], typer.Option("--kind", "-k", help="Only this kind (repeatable).", show_default=False)]
ActiveOpt = Annotated[bool, typer.Option("--active", help="Only notes in force (active or stale).")]
YesOpt = _typer_option(quick.YES)
MassOpt = _typer_option(quick.MASS)


@app.command()
def edit(
    filters: FiltersArg = None,
    kind: KindsOpt = None,
    active: ActiveOpt = False,
    reason: ReasonOpt = None,
    yes: YesOpt = False,
    resume: Annotated[Optional[str], typer.Option("--resume", help="Reopen a kept edit: its id, or the latest when no id follows (`qem checkouts` lists them).", show_default=False)] = None,
    mass: MassOpt = False,
    allow_secret: AllowSecretOpt = False,
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
    actor: ActorOpt = None,
) -> int:
    """Edit memory in $EDITOR; the edit is checked in as events, three-way.

    Filters (as `qem query` takes them) check out only the notes they match, and the
    check-in touches no other note.

    Example: qem edit --kind gotcha -m "cleanup after the v2 migration"; qem edit kind=gotcha text~lock
    """
    from ..system import workspace as ws
    from .terminal import run_edit

    if filters and resume is not None:
        raise errors.BadInput("--resume reopens a kept edit as it was checked out: give it no filters")
    place, store = shell.open_saying_notices(workspace_dir, store_dir, write=True)
    with store:
        selection = _selection(store, kind, active, filters)
        return shell.checked_in(run_edit(store, place, selection, reason, yes, resume, ws.actor(actor), mass,
                                    allow_secret=allow_secret))


@app.command()
def checkout(
    filters: FiltersArg = None,
    path: Annotated[Optional[Path], typer.Option("--path", help="Write the checkout here (default: a private directory under .qem/checkouts/); a file there already is written over only when it is an earlier checkout unchanged, or MEMORY.md as qem renders it.", show_default=False)] = None,
    kind: KindsOpt = None,
    active: ActiveOpt = False,
    force: Annotated[bool, typer.Option("--force", help="Write the checkout over --path FILE whatever it holds (its edits are lost).")] = False,
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
) -> int:
    """Write an editable checkout and print its path; check it in with `qem checkin`.

    Example: qem checkout --kind directive --path /tmp/directives.md; qem checkout kind=gotcha text~lock
    """
    from ..writes.kept_edits import write_checkout

    place, store = shell.open_saying_notices(workspace_dir, store_dir)
    with store:
        print(write_checkout(store, place, _selection(store, kind, active, filters), path, force))
    return 0


@app.command()
@_declared_by(quick.CHECKIN, shell.checkin)
def checkin(**params) -> int:  # type: ignore[no-untyped-def]
    """Check an edited checkout (or a hand-edited MEMORY.md) in as events; print the new
    notes' ids.

    Example: qem checkin --path MEMORY.md -m "fixed the lock note" --yes
    """
    return shell.checkin(**params)


@app.command("checkouts")
def checkouts_(
    discard: Annotated[Optional[list[str]], typer.Option("--discard", help="Remove this kept edit (repeatable); a file written by `qem checkout --path` stays, only its record goes.", show_default=False)] = None,
    discard_all: Annotated[bool, typer.Option("--discard-all", help="Remove every kept edit.")] = False,
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
) -> int:
    """List the kept edits (oldest first) with their age and what checking each in would do.

    Example: qem checkouts; qem checkouts --discard 16-1a2b3c4d
    """
    from ..writes.checkin import summary_of
    from ..writes.kept_edits import find_checkout, kept

    place, store = shell.open_saying_notices(workspace_dir, store_dir)
    with store:
        if discard or discard_all:
            doomed = kept(place) if discard_all else [find_checkout(place, which) for which in discard or []]
            for checkout in doomed:
                checkout.discard()
                say(f"discarded the kept edit {checkout.id} ({checkout.file})")
            return 0
        for checkout in kept(place):
            _out(f"{checkout.id}\t{_age(checkout.directory)}\t{checkout.file}\t{summary_of(store, checkout)}")
    return 0


def _age(path: Path) -> str:
    import time

    seconds = max(0, int(time.time() - path.stat().st_mtime))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return f"{seconds} s ago"


_selection = shell.selection


# -- review: memory changes between revisions, readable log diffs ---------------------------------


@app.command("diff")
def diff_(
    revs: Annotated[Optional[list[str]], typer.Argument(metavar="[REV [REV]]", help="Compare REV (default HEAD) with the working tree, or the first REV with the second.", show_default=False)] = None,
    fmt: Annotated[str, typer.Option("--format", help="text, markdown (a pull-request comment) or json.")] = "text",
    stat: Annotated[bool, typer.Option("--stat", help="Only the counts per note kind and event type.")] = False,
    max_chars: Annotated[int, typer.Option("--max-chars", metavar="N", help="markdown: at most N characters, cut at a change, the last line saying how many were left out and how to see them (GitHub's comments take 65536; 0: no limit).")] = 0,
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
) -> int:
    """What memory learned between two revisions, and the notes about the code they change (exit 1: memory changed).

    Example: qem diff origin/main HEAD --format markdown
    """
    from ..reads.diff import memory_diff
    from ..reads.diff_text import DiffAnswer
    from ..system import workspace as ws

    errors.choice(fmt, ("text", "markdown", "json"), "format")
    if max_chars < 0 or (max_chars and fmt != "markdown"):
        raise errors.BadInput(f"--max-chars {max_chars}: a number of characters for --format markdown (0: no limit)")
    place = ws.resolve(workspace_dir, store_dir)
    found = memory_diff(place.store_path, revs or [], place.mirror_path())
    return shell.show_answer(DiffAnswer(found, fmt, stat, max_chars), fmt == "json")


@app.command()
def hooks(
    action: Annotated[str, typer.Argument(metavar="install", help="install: make git diff and git log -p show the log one line per event.", show_default=False)],
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
) -> int:
    """Set git up for this repository's memory (the log's readable diffs).

    Example: qem hooks install
    """
    from ..mirror.textconv import install
    from ..system import workspace as ws

    errors.choice(action, ("install",), "hooks action")
    for line in install(ws.resolve(workspace_dir, store_dir).store_path):
        print(line)
    return 0


@app.command("check-secrets")
def check_secrets(
    files: Annotated[Optional[list[Path]], typer.Argument(help="Log files under .qem/ (the pre-commit hook passes those a commit adds).", show_default=False)] = None,
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
) -> int:
    """Fail (exit 1) when a log file given holds a secret no person allowed: the
    pre-commit hook `qem-secrets` runs it on the files a commit adds.

    Example: qem check-secrets .qem/texts/*
    """
    from ..storage.secrets import files_problems

    _, store = shell.open_saying_notices(workspace_dir, store_dir)
    with store:
        problems = files_problems(store, files or [])
    for problem in problems:
        print(problem)
    if problems:
        say(f"{len(problems)} secret(s) in what is committed; forget the note (`qem forget ID -m WHY --yes`),"
            " and if a commit already holds it, purge it from git history (docs/SHARING.md)")
        return errors.EXIT_DIFFERENT
    return 0


# -- qem anchors: the files and folders notes are about ---------------------------------------

anchors_app = _typer(
    help="The files and folders notes are anchored to (`--anchor PATH` on add and supersede): which notes are, which"
         " could be, and drift from what a note recorded.",
    no_args_is_help=True,
)
app.add_typer(anchors_app, name="anchors")


@anchors_app.callback()
def _anchors() -> None:
    """The files and folders notes are about (their anchors)."""


@anchors_app.command("list")
def anchors_list(
    path: Annotated[Optional[str], typer.Argument(metavar="[PATH]", help="Only this path and, for a folder, what is inside it (from the top of the work tree).", show_default=False)] = None,
    as_json: JsonOpt = False,
    workspace_dir: WorkspaceOpt = None,
    store_dir: StoreOpt = None,
) -> int:
    """The notes in force and what they are anchored to: a line per note and path (the
    path, its object id's first 12 digits, the note), by path.

    Example: qem anchors list src/daemon
    """
    from ..reads import anchor_reads
    from ..system.anchors import named_path

    folder = named_path(path, f"anchors list {path}") if path is not None else None
    return _answer(workspace_dir, store_dir, lambda store: anchor_reads.listed(store, folder), as_json)


@anchors_app.command("suggest")
def anchors_suggest(as_json: JsonOpt = False, workspace_dir: WorkspaceOpt = None, store_dir: StoreOpt = None) -> int:
    """The notes in force whose text names, in backticks, a file or folder of the work
    tree they are not anchored to, and the command that would anchor them (nothing is
    anchored here).

    Example: qem anchors suggest --json
    """
    from ..reads import anchor_reads
    from ..system.anchors import place_tree

    place, store = shell.open_saying_notices(workspace_dir, store_dir)
    with store:
        return shell.show_answer(anchor_reads.suggested(store, place_tree(place)), as_json)


@anchors_app.command("check")
@_declared_by(quick.ANCHORS_CHECK, shell.anchors_check)
def anchors_check(**params) -> int:  # type: ignore[no-untyped-def]
    """List the notes in force whose anchored content is not what they recorded: changed,
    deleted, or moved (the same content at one other path). Exit 0 when nothing drifted,
    1 when something did (listed, or with --flag written).

    Example: qem anchors check --staged --flag
    """
    return shell.anchors_check(**params)


@app.command("log-textconv", hidden=True)
def log_textconv(file: Annotated[str, typer.Argument(help="A log file (git passes a copy).", show_default=False)]) -> int:
    """What git runs to show a log file one line per event (set up by `qem hooks install`)."""
    from ..mirror.textconv import main as textconv

    return textconv(file)


# -- the one exit --------------------------------------------------------------------------


def _click_exceptions() -> tuple[type, type, type]:
    """(ClickException, Exit, Abort) of the click that typer runs on.

    typer >= 0.28 vendors click as `typer._click` (with Exit/Abort in `typer.exceptions`);
    catching the real `click`'s classes there misses every usage error, which then
    escapes as a traceback with exit 1 instead of a message with exit 2.
    """
    try:
        from typer._click.exceptions import ClickException
        from typer.exceptions import Abort, Exit
    except ImportError:
        from click.exceptions import Abort, ClickException, Exit
    return ClickException, Exit, Abort


def _pipe_safe(callback):  # type: ignore[no-untyped-def]
    """A command whose closed stdout ends it quietly: click would turn EPIPE into exit 1."""

    @functools.wraps(callback)
    def run(*args, **kwargs):  # type: ignore[no-untyped-def]
        try:
            return callback(*args, **kwargs)
        except BrokenPipeError:
            raise shell.PipeClosed() from None

    return run


def _command(argv: list[str]):  # type: ignore[no-untyped-def]
    """The click command to run `argv`, and the arguments and name to run it with.

    Building every subcommand costs typer tens of milliseconds (it inspects each
    signature), which a pre-commit hook would pay on every commit; so a run of one known
    subcommand builds only that one (a group's, as `qem anchors list`: only that group).
    Anything else (no subcommand, `qem --help`, an unknown name) gets the whole group, and
    its usual messages.
    """
    name = argv[0] if argv else None
    groups = [group.typer_instance for group in app.registered_groups]
    for info in [*app.registered_commands, *(info for group in groups for info in group.registered_commands)]:
        if not hasattr(info.callback, "__wrapped__"):
            info.callback = _pipe_safe(info.callback)
    for info in app.registered_commands:
        if name == (info.name or info.callback.__name__.replace("_", "-")):  # type: ignore[union-attr]
            single = _typer()
            single.registered_commands = [info]
            return typer.main.get_command(single), argv[1:], f"qem {name}"
    for group in app.registered_groups:  # a group (qem anchors ...): only its commands are built
        if name == group.name:
            return typer.main.get_command(_one_of(group.typer_instance, argv[1:])), argv[1:], f"qem {name}"
    return typer.main.get_command(app), argv, "qem"


def _one_of(group: typer.Typer, argv: list[str]) -> typer.Typer:
    """The group as it stands, with only the command `argv` names when it names one (a
    hook runs `qem anchors check`: the group's other commands are not built)."""
    named = [info for info in group.registered_commands if argv and info.name == argv[0]]
    if not named:
        return group
    single = _typer()
    single.registered_callback, single.registered_commands = group.registered_callback, named
    return single


# Options whose value may be left out, and what they then mean (click's optional values
# are not reachable through typer): `qem edit --resume` resumes the latest kept edit.
_OPTIONAL_VALUES = {("edit", "--resume"): "last"}


def _with_optional_values(argv: list[str]) -> list[str]:
    out = list(argv)
    for (name, option), value in _OPTIONAL_VALUES.items():
        if not out or out[0] != name:
            continue
        for i in range(len(out) - 1, 0, -1):
            if out[i] == option and (i + 1 == len(out) or out[i + 1].startswith("-")):
                out.insert(i + 1, value)
    return out


def main(argv: list[str] | None = None) -> None:
    ClickException, ClickExit, ClickAbort = _click_exceptions()
    argv = sys.argv[1:] if argv is None else argv
    # a completion's words come from the whole group, whatever the line typed so far
    command, args, prog = _command([] if _completing() else _with_optional_values(argv))

    def run() -> object:
        try:
            return command.main(args=args, prog_name=prog, standalone_mode=False)
        except ClickExit as exc:
            return exc.exit_code
        except ClickAbort:
            print("\nqem: interrupted", file=sys.stderr)
            return errors.EXIT_INTERRUPTED
        except ClickException as exc:
            exc.show()
            return errors.EXIT_INPUT

    sys.exit(shell.guarded(run))


if __name__ == "__main__":
    main()
