"""The `qem` command's entry: each way in started with no more imports than it needs.

The `qem` command: `qem hook` answered without the command-line framework (it runs
before every file edit an agent makes, so its start-up is the floor's), the quick commands
(qem_edit.shells.quick: `qem add` with plain arguments) likewise, every other command by
qem_edit.shells.cli."""

import sys


def main() -> None:
    if sys.argv[1:2] == ["hook"]:
        from .shells.hookrun import main as hook

        sys.exit(hook(sys.argv[2:]))
    from .shells.quick import run

    code = run(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from .shells.cli import main as command

    command()


if __name__ == "__main__":
    main()
