"""The `qem` command's entry: each way in started with no more imports than it needs.

The `qem` command: `qem hook` answered without the command-line framework (it runs
before every file edit an agent makes, so its start-up is the floor's), the quick commands
(qem_edit.shells.quick: `qem add` with plain arguments) likewise, the commit hooks from what
they answered last where nothing it rests on moved (qem_edit.mirror.answered), every other
command by qem_edit.shells.cli.

The cycle collector is off while a command starts: starting makes tens of thousands of
objects (modules, functions, classes, constants) and no garbage cycle, yet the collector,
left on, walks them all again and again as they accumulate (about 2 ms of a hook's 40).
A hook keeps it off: it ends in milliseconds and frees what it makes as it goes (even
one that builds a fresh clone's whole index peaks at the memory it does with the
collector on: docs/PERFORMANCE.md).  Every other command turns it back on once started,
with what starting made set aside (`gc.freeze`: it lives as long as the process), so
the collections of a long command never walk it."""

import gc
import sys


def main() -> None:
    gc.disable()
    if sys.argv[1:2] == ["hook"]:
        from .shells.hookrun import main as hook

        sys.exit(hook(sys.argv[2:]))
    if sys.argv[1:2] in (["verify"], ["export"], ["anchors"]):  # a commit hook: its answer may be kept
        from .mirror.answered import answer

        kept = answer(sys.argv[1:])
        if kept is not None:
            sys.exit(kept)
    from .shells.quick import run

    gc.freeze()
    gc.enable()
    code = run(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from .shells.cli import main as command

    command()


if __name__ == "__main__":
    main()
