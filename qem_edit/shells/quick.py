"""The commands run on every turn, parsed without the command-line framework.

The commands an agent, a script or a hook runs again and again, started without the
command-line framework: importing typer is most of a start-up, as long again as the write
itself.

`run` takes `qem add`, `qem checkin` and the commands the pre-commit hooks run (`qem export`,
`qem verify`, `qem anchors check`) when their arguments are plain (the options below, each once or
repeated as typer takes them, `--opt value` or `--opt=value`, `-k value`, `--` before a
text that starts with a dash) and runs qem_edit.shells.shell's body, as the command under typer
runs it; anything else (`--help`, an unknown or malformed option, a missing argument)
returns None and typer parses the line, with its usual messages.  Each table below is its
command's one declaration: qem_edit.shells.cli builds typer's command from it (its help text
too), so the two parse alike.
"""

from __future__ import annotations

from collections.abc import Callable

from ..base.records import Record
from ..base.vocabulary import KINDS

TYPE_CHECKING = False  # typing's flag, without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from pathlib import Path


def as_path(text: str) -> Path:
    """An option's value as a path (pathlib imported only where one is given: the commit
    hooks name none, and pathlib, with the re, enum and urllib.parse it imports, is a third
    of their start-up; qem_edit.shells.cli declares it to typer as `Path`)."""
    from pathlib import Path

    return Path(text)


class Opt(Record):
    names: tuple[str, ...]  # the option's spellings
    dest: str  # the body's parameter
    takes: str  # "value" (the last one given wins), "many" (repeatable: a list), "flag" (True when given)
    convert: Callable[[str], object] = str
    # what `--help` shows (qem_edit.shells.cli builds typer's option from these, so the two cannot part)
    help: str = ""
    metavar: str | None = None
    show_default: bool = False


class Arg(Record):
    dest: str  # the body's parameter
    help: str


class Spec(Record):
    arguments: tuple[Arg, ...]  # the positional parameters, in order, all required
    required: tuple[str, ...]  # options that must be given
    options: tuple[Opt, ...]  # (an option not given takes the body's own default)
    rest: Arg | None = None  # a parameter taking every positional word after `arguments` (a list; none given: its default)


# what every write command takes: where the memory is, who writes, JSON out, a secret allowed
WORKSPACE = Opt(("--workspace", "-w"), "workspace_dir", "value", as_path, help=(
    "Workspace directory (default: QEM_WORKSPACE, the nearest ancestor holding .qem/, the top of the git work tree,"
    " or the current directory)."))
STORE = Opt(("--store",), "store_dir", "value", as_path, help=(
    "The memory directory: its log and index (default: QEM_STORE, or <workspace>/.qem)."))
ACTOR = Opt(("--actor",), "actor", "value", help="Who writes (default: QEM_ACTOR, or the login name).")
JSON = Opt(("--json",), "as_json", "flag", help="Print JSON for scripts.", show_default=True)
ALLOW_SECRET = Opt(("--allow-secret",), "allow_secret", "flag", show_default=True, help=(
    "Write a text that holds a credential (cloud key, token, private key, password in a URL) all the same: it"
    " reaches every clone and stays in git history. A person's choice; an agent's is refused."))
_WHERE = (WORKSPACE, STORE, ACTOR)

# what a note declares: its files, its end, its moments and triggers, its request, its scope, its bases
ANCHOR = Opt(("--anchor",), "anchor", "many", metavar="PATH", help=(
    "A file or folder the note is about (repeatable): from the current directory, or from the top of the work tree"
    " when run outside it; its git object id now is recorded."))
EXPIRES = Opt(("--expires",), "expires", "value", help=(
    "The note's end: a date (YYYY-MM-DD, its start, UTC) or a UTC time (YYYY-MM-DDTHH:MM:SSZ); none: no end."
    " `qem expire --due` expires it then; an end already past is recorded, and the note expired in the same write."))
TTL = Opt(("--ttl",), "ttl", "value", help=(
    "The note's end as a time to live from now: a number and h, d or w (30d). Default: its kind's [expiry] in"
    " .qem/config.toml."))
ON = Opt(("--on",), "on", "many", metavar="MOMENT", help=(
    "A moment the note is delivered to an agent at (repeatable; replaces its kind's default): start, compact,"
    " prompt, edit, read, shell."))
WHEN_PATH = Opt(("--when-path",), "when_path", "many", metavar="PATTERN", help=(
    "Deliver the note before an agent edits a matching file (repeatable): a path from the top of the work tree,"
    " * ? [..] within a part, ** for folders (src/index/**)."))
WHEN_RUN = Opt(("--when-run",), "when_run", "many", metavar="PATTERN", help=(
    "Deliver the note before a matching shell command runs (repeatable): * any characters (pytest*)."))
TO = Opt(("--to",), "to", "value", metavar="NAME", help=(
    "Who owes it (a request): an actor, a person or an agent, one word. `qem owed` lists it until a note answers it."))
DUE = Opt(("--due",), "due", "value", metavar="DATE|TIME", help=(
    "The request's deadline: a date (YYYY-MM-DD, the end of that UTC day) or a UTC time; late after it. Not its end"
    " (--expires)."))
ANSWERS = Opt(("--answers",), "answers", "value", metavar="ID", help=(
    "The request this note answers (its id); the request itself is not changed."))
SCOPE = Opt(("--scope",), "scope", "value", metavar="SCOPE", help=(
    "Where the note holds: team (the default: committed, shared), private (this clone only, never committed;"
    " `qem share` makes it a team note) or session (the agent session that writes it; ended when it ends)."))
SESSION = Opt(("--session",), "session", "value", metavar="ID", help=(
    "The agent session of a --scope session note (default: $QEM_SESSION, which qem's SessionStart hook sets)."))
RESTS_ON = Opt(("--rests-on",), "rests_on", "many", metavar="ID", help=(
    "A note this one rests on (repeatable): when it is superseded, revoked, expired, forgotten or flagged stale,"
    " this note is flagged stale with it."))

ADD = Spec(
    arguments=(Arg("text", "The note's text; - reads it from standard input."),),
    required=("kind",),
    options=(
        Opt(("--kind", "-k"), "kind", "value", help="One of: " + ", ".join(KINDS)),
        Opt(("--priority", "-p"), "priority", "value", help="high, medium or low.", show_default=True),
        Opt(("--provenance",), "provenance", "value", show_default=True,
            help="auto, agent or user-stated (human takes `qem promote`)."),
        JSON, ALLOW_SECRET, ANCHOR, EXPIRES, TTL, ON, WHEN_PATH, WHEN_RUN, TO, DUE, ANSWERS, SCOPE, SESSION, RESTS_ON,
        *_WHERE,
    ),
)

# what a check-in and the commands the commit hooks run take besides
MESSAGE = Opt(("--message", "-m"), "reason", "value", help="Why.")
YES = Opt(("--yes", "-y"), "yes", "flag", help="Apply without asking.", show_default=True)
MASS = Opt(("--allow-mass-change",), "mass", "flag", show_default=True, help=(
    "Apply even when the check-in takes more than a quarter (and more than 5) of the checkout's live notes out of"
    " force; otherwise that is confirmed separately, even with --yes."))
STAGED = Opt(("--staged",), "staged", "flag", show_default=True, help=(
    "Judge what the next commit carries (the log and MEMORY.md in git's index), as the pre-commit hooks do."))
AT = Opt(("--at",), "at", "value", help=(
    "As the memory was at this UTC date or time (a date means its end), or as committed at this git revision."))
FILTERS = Arg("filters", "Note filters, as `qem query` takes them (kind=gotcha text~lock).")
_PLACE = (WORKSPACE, STORE)


def _flag(name: str, help: str) -> Opt:
    """A flag `--name` whose parameter is its name in snake case (shown with its default, as typer does)."""
    return Opt((name,), name.lstrip("-").replace("-", "_"), "flag", help=help, show_default=True)


CHECKIN = Spec(
    arguments=(),
    required=(),
    options=(
        Opt(("--path",), "path", "value", as_path, help="The edited file (default: the latest checkout, else MEMORY.md)."),
        MESSAGE, YES,
        _flag("--dry-run", "Print the plan on stdout and write nothing; exit 0 when there is nothing to change, 1 when"
                           " there is."),
        Opt(("--json",), "as_json", "flag", show_default=True,
            help="Print the plan (and, once applied, the new ids) as JSON."),
        MASS, ALLOW_SECRET, *_WHERE,
    ),
)

EXPORT = Spec(
    arguments=(),
    required=(),
    options=(
        Opt(("--path",), "path", "value", as_path, help="The mirror file (default: MEMORY.md at the workspace root)."),
        _flag("--check", "Write nothing; exit 0 if the file matches, 1 if not, and say why."),
        _flag("--diff", "Write nothing; print the unified diff export would make (exit 1 if any)."),
        _flag("--stdout", "Print the rendering; write no file."),
        _flag("--force", "Overwrite a MEMORY.md edited by hand (its edits are lost)."),
        AT, STAGED, *_PLACE,
    ),
    rest=FILTERS,
)

VERIFY = Spec(
    arguments=(),
    required=(),
    options=(
        _flag("--repair", "Rebuild the local index from the log first, if it disagrees."),
        _flag("--fail-on-disputes", "Fail on open disputes too (forks, disputes, concurrent changes)."),
        _flag("--fail-on-drift", "Fail on drift too: a note in force whose anchored file or folder changed, went or"
                                 " moved, and nobody flagged it (CI, after a commit made without the qem-anchors hook)."),
        _flag("--fail-on-late", "Fail on what is late too: a request in force past its deadline and not answered"
                                " (`qem owed --late`)."),
        STAGED,
        Opt(("--base",), "base", "value", metavar="REV", help=(
            "Name events the merge base of REV and HEAD holds that the log lacks (default: HEAD's).")),
        JSON, *_PLACE,
    ),
)

ANCHORS_CHECK = Spec(
    arguments=(),
    required=(),
    options=(
        _flag("--staged", "Judge what the commit being made changes: the anchors on the paths git's index changes"
                          " against HEAD, and their staged content (the pre-commit hook qem-anchors)."),
        Opt(("--rev",), "rev", "value", metavar="REV", help="Judge every anchor against what commit REV holds."),
        _flag("--flag", "Write what drift asks for, in one check-in: a changed or deleted anchor flags its note stale"
                        " (its reason names the path and what happened); a moved one re-anchors the note to where its"
                        " content went. Not with --rev."),
        JSON, *_WHERE,
    ),
)


def _body(name: str) -> Callable[..., int]:
    from . import shell

    return {"add": shell.add, "checkin": shell.checkin, "export": shell.export, "verify": shell.verify,
            "anchors check": shell.anchors_check}[name]


SPECS = {"add": ADD, "checkin": CHECKIN, "export": EXPORT, "verify": VERIFY, "anchors check": ANCHORS_CHECK}


def parse(spec: Spec, argv: list[str]) -> dict[str, object] | None:
    """The parameters `argv` gives the command (those it does not give keep the body's
    defaults), or None when it is not plain (typer then parses it, and says what is
    wrong)."""
    by_name = {name: opt for opt in spec.options for name in opt.names}
    values: dict[str, object] = {}
    given: set[str] = set()
    positional: list[str] = []
    i, options_end = 0, False
    while i < len(argv):
        token = argv[i]
        i += 1
        if options_end or token == "-" or not token.startswith("-"):
            positional.append(token)
            continue
        if token == "--":
            options_end = True
            continue
        name, eq, attached = token.partition("=") if token.startswith("--") else (token, "", "")
        opt = by_name.get(name)
        if opt is None:
            return None  # --help, an unknown option, -kVALUE: typer's to read
        if opt.takes == "flag":
            if eq:
                return None
            values[opt.dest] = True
        else:
            if not eq:
                if i >= len(argv):
                    return None
                attached = argv[i]
                i += 1
            value = opt.convert(attached)
            if opt.takes == "many":
                values[opt.dest] = [*(values.get(opt.dest) or []), value]  # type: ignore[misc]
            else:
                values[opt.dest] = value
        given.add(opt.dest)
    if len(positional) < len(spec.arguments) or any(dest not in given for dest in spec.required):
        return None
    if len(positional) > len(spec.arguments) and spec.rest is None:
        return None
    values.update(zip((arg.dest for arg in spec.arguments), positional))
    if len(positional) > len(spec.arguments):
        values[spec.rest.dest] = positional[len(spec.arguments):]  # type: ignore[union-attr]
    return values


def run(argv: list[str]) -> int | None:
    """Run `argv` (the words after `qem`) here when it is a quick command with plain
    arguments: its exit status; None: typer's to run."""
    name = " ".join(argv[:2]) if argv[:1] == ["anchors"] else argv[0] if argv else ""
    spec = SPECS.get(name)
    if spec is None:
        return None
    params = parse(spec, argv[len(name.split()):])
    if params is None:
        return None
    from .shell import guarded

    body = _body(name)
    keeping = _keeping(argv) if name in ("verify", "export", "anchors check") else None
    if keeping is None:
        return guarded(lambda: body(**params))
    from . import shell

    shell.opening_watched.append(keeping.opened)
    try:
        code = guarded(lambda: body(**params))
    except BaseException:
        keeping.let_go()
        raise
    finally:
        shell.opening_watched.remove(keeping.opened)
        keeping.restore()
    return keeping.finish(code)


def _keeping(argv: list[str]):  # type: ignore[no-untyped-def]
    """A commit hook's command whose answer may be kept (qem_edit.mirror.answered), what it
    prints recorded from now on; None for any other."""
    from ..mirror import answered

    here = answered.where(argv)
    return answered.Keeping(argv, here) if here is not None else None
