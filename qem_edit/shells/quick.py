"""The commands run on every turn, parsed without the command-line framework.

The commands an agent, a script or a hook runs again and again, started without the
command-line framework: importing typer is most of a start-up, as long again as the write
itself.

`run` takes `qem add`, `qem checkin` and the commands the pre-commit hooks run (`qem export`,
`qem verify`, `qem anchors check`) when their arguments are plain (the options below, each once or
repeated as typer takes them, `--opt value` or `--opt=value`, `-k value`, `--` before a
text that starts with a dash) and runs qem_edit.shells.shell's body, as the command under typer
runs it; anything else (`--help`, an unknown or malformed option, a missing argument)
returns None and typer parses the line, with its usual messages.  The table of options
are held to typer's own declaration of each command by tests/test_quick.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, NamedTuple


class Opt(NamedTuple):
    names: tuple[str, ...]  # the option's spellings
    dest: str  # the body's parameter
    takes: str  # "value" (the last one given wins), "many" (repeatable: a list), "flag" (True when given)
    convert: Callable[[str], object] = str


class Spec(NamedTuple):
    arguments: tuple[str, ...]  # the positional parameters, in order, all required
    required: tuple[str, ...]  # options that must be given
    options: tuple[Opt, ...]  # (an option not given takes the body's own default)
    rest: str | None = None  # a parameter taking every positional word after `arguments` (a list; none given: its default)


# what every write command takes: where the memory is, who writes, JSON out, a secret allowed
_WHERE = (Opt(("--workspace", "-w"), "workspace_dir", "value", Path), Opt(("--store",), "store_dir", "value", Path),
          Opt(("--actor",), "actor", "value"))
_JSON, _ALLOW_SECRET = Opt(("--json",), "as_json", "flag"), Opt(("--allow-secret",), "allow_secret", "flag")

ADD = Spec(
    arguments=("text",),
    required=("kind",),
    options=(
        Opt(("--kind", "-k"), "kind", "value"),
        Opt(("--priority", "-p"), "priority", "value"),
        Opt(("--provenance",), "provenance", "value"),
        _JSON, _ALLOW_SECRET,
        Opt(("--anchor",), "anchor", "many"),
        Opt(("--expires",), "expires", "value"),
        Opt(("--ttl",), "ttl", "value"),
        Opt(("--on",), "on", "many"),
        Opt(("--when-path",), "when_path", "many"),
        Opt(("--when-run",), "when_run", "many"),
        Opt(("--to",), "to", "value"),
        Opt(("--due",), "due", "value"),
        Opt(("--answers",), "answers", "value"),
        Opt(("--scope",), "scope", "value"),
        Opt(("--session",), "session", "value"),
        Opt(("--rests-on",), "rests_on", "many"),
        *_WHERE,
    ),
)

CHECKIN = Spec(
    arguments=(),
    required=(),
    options=(
        Opt(("--path",), "path", "value", Path),
        Opt(("--message", "-m"), "reason", "value"),
        Opt(("--yes", "-y"), "yes", "flag"),
        Opt(("--dry-run",), "dry_run", "flag"),
        _JSON,
        Opt(("--allow-mass-change",), "mass", "flag"),
        _ALLOW_SECRET,
        *_WHERE,
    ),
)


_STAGED = Opt(("--staged",), "staged", "flag")
_PLACE = (Opt(("--workspace", "-w"), "workspace_dir", "value", Path), Opt(("--store",), "store_dir", "value", Path))

EXPORT = Spec(
    arguments=(),
    required=(),
    options=(
        Opt(("--path",), "path", "value", Path),
        Opt(("--check",), "check", "flag"),
        Opt(("--diff",), "diff", "flag"),
        Opt(("--stdout",), "stdout", "flag"),
        Opt(("--force",), "force", "flag"),
        Opt(("--at",), "at", "value"),
        _STAGED,
        *_PLACE,
    ),
    rest="filters",
)

VERIFY = Spec(
    arguments=(),
    required=(),
    options=(
        Opt(("--repair",), "repair", "flag"),
        Opt(("--fail-on-disputes",), "fail_on_disputes", "flag"),
        Opt(("--fail-on-drift",), "fail_on_drift", "flag"),
        Opt(("--fail-on-late",), "fail_on_late", "flag"),
        _STAGED,
        Opt(("--base",), "base", "value"),
        _JSON,
        *_PLACE,
    ),
)

ANCHORS_CHECK = Spec(
    arguments=(),
    required=(),
    options=(
        _STAGED,
        Opt(("--rev",), "rev", "value"),
        Opt(("--flag",), "flag", "flag"),
        _JSON,
        *_WHERE,
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
    values.update(zip(spec.arguments, positional))
    if len(positional) > len(spec.arguments):
        values[spec.rest] = positional[len(spec.arguments):]  # type: ignore[index]
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
    return guarded(lambda: body(**params))
