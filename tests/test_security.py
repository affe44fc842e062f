"""Security: private checkouts, no writing through planted links, no shell injection, and
note text written nowhere but the memory (its log and local index), the mirror and the
checkouts; a forgotten text gone from every file qem wrote, the log included.

Everything here runs the real CLI in child processes, as a user (or an attacker who can
plant files in a workspace, e.g. in a cloned repository) would meet it.
"""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from _reliability import no_traceback, python_env, record, verify
from builders import add, store_path
from conftest import run_qem

from qem_edit.storage.store import Store

SECRET = "zq-SECRET-7f3a91c2"


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def seed(ws: Path, *texts: str) -> list[str]:
    """A memory in workspace `ws` holding `texts` (task notes); their short ids."""
    (ws / ".qem").mkdir(parents=True, exist_ok=True)
    with Store.open(store_path(ws), create=True) as store:
        made = [add(store, text, "task", actor="seeder", at=None) for text in texts]
        return [store.note(n).shown for n in made]


def qem_with_umask(umask: str, *args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    command = f"umask {umask}; exec {shlex.quote(sys.executable)} -m qem_edit " + " ".join(map(shlex.quote, args))
    return subprocess.run(["sh", "-c", command], cwd=cwd, capture_output=True, text=True, env=python_env(env))


def editor(tmp_path: Path, body: str, name: str = "editor.py") -> str:
    """A QEM_EDITOR command running `body` on the file (`text` in, `text` out)."""
    script = tmp_path / name
    script.write_text(
        "import sys, json, os\npath = sys.argv[-1]\ntext = open(path, encoding='utf-8').read()\n"
        + body + "\nopen(path, 'w', encoding='utf-8').write(text)\n"
    )
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


# -- private checkouts -------------------------------------------------------------------------------


@pytest.mark.parametrize("umask", ["000", "022", "077"])
def test_checkouts_are_private_whatever_the_umask(ws, tmp_path, umask):
    (note,) = seed(ws, "a note")
    done = qem_with_umask(umask, "checkout", cwd=ws)
    assert done.returncode == 0, done.stderr
    edit = Path(done.stdout.strip())
    checkouts = ws / ".qem" / "checkouts"
    assert mode(checkouts) == 0o700
    assert mode(edit.parent) == 0o700
    for f in edit.parent.iterdir():
        assert mode(f) == 0o600, f"{f.name} is {oct(mode(f))}"
    # a kept edit (a conflict) stays private too
    edit.write_text(edit.read_text().replace("a note", "a changed note"))
    assert run_qem("revoke", note, "-m", "meanwhile", cwd=ws).returncode == 0
    done = qem_with_umask(umask, "checkin", "--path", str(edit), "-m", "x", "--yes", cwd=ws)
    assert done.returncode == 3, done.stderr
    for f in edit.parent.iterdir():
        assert mode(f) == 0o600, f"{f.name} is {oct(mode(f))}"
    # `checkout --path` writes a private file as well
    mine = ws / "mine.md"
    assert qem_with_umask(umask, "checkout", "--path", str(mine), cwd=ws).returncode == 0
    assert mode(mine) == 0o600
    record(f"test_checkouts_are_private_whatever_the_umask[{umask}]", "checks", 1)


def test_export_keeps_the_mirror_mode_the_user_chose(ws):
    seed(ws, "a note")
    assert run_qem("export", cwd=ws).returncode == 0
    mirror = ws / "MEMORY.md"
    mirror.chmod(0o600)
    assert run_qem("add", "another", "--kind", "task", cwd=ws).returncode == 0
    assert run_qem("export", cwd=ws).returncode == 0
    assert "another" in mirror.read_text()
    assert mode(mirror) == 0o600, "export widened a mirror the user had made private"
    mirror.unlink()
    assert qem_with_umask("077", "export", cwd=ws).returncode == 0
    assert mode(mirror) == 0o600, "a new mirror ignores the umask"


# -- planted links ------------------------------------------------------------------------------------


def outside_file(tmp_path: Path) -> tuple[Path, bytes]:
    victim = tmp_path / "outside" / "victim.txt"
    victim.parent.mkdir()
    victim.write_bytes(b"do not touch\n")
    return victim, victim.read_bytes()


def test_a_link_at_the_mirror_path_is_not_followed(ws, tmp_path):
    seed(ws, "a note")
    victim, before = outside_file(tmp_path)
    (ws / "MEMORY.md").symlink_to(victim)
    done = run_qem("export", cwd=ws)
    assert done.returncode == 2 and "symbolic link" in done.stderr
    # with auto-export on, the write stands and the link is reported, not followed
    config = ws / ".qem" / "config.toml"
    config.write_text("[export]\nauto = true\n\n" + config.read_text())  # (keeping the memory's id)
    done = run_qem("add", "written anyway", "--kind", "task", cwd=ws)
    assert done.returncode == 0 and "symbolic link" in done.stderr
    done = run_qem("checkin", "--path", str(ws / "MEMORY.md"), "-m", "x", "--yes", cwd=ws)
    assert done.returncode == 2
    assert victim.read_bytes() == before and (ws / "MEMORY.md").is_symlink()
    no_traceback(done.stderr)


def snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


@pytest.mark.parametrize("planted", ["MEMORY.md", "base.md", "session.json", "the checkout", "checkouts"])
def test_links_planted_in_the_checkout_are_not_followed(ws, tmp_path, planted):
    seed(ws, "a note", "another note")
    victim, before = outside_file(tmp_path)
    done = run_qem("checkout", cwd=ws)
    edit = Path(done.stdout.strip())
    edit.write_text(edit.read_text().replace("a note", "a changed note"))
    kept = edit.parent
    if planted == "the checkout":
        real = tmp_path / "outside" / "real-checkout"
        kept.rename(real)
        kept.symlink_to(real)
        before_dir = snapshot(real)
    elif planted == "checkouts":
        real = tmp_path / "outside" / "real-checkouts"
        kept.parent.rename(real)
        kept.parent.symlink_to(real)
        before_dir = snapshot(real)
    else:
        (kept / planted).unlink()
        (kept / planted).symlink_to(victim)
    commands = [["checkin", "-m", "x", "--yes"], ["edit", "--resume", "last", "-m", "x", "--yes"], ["checkout"]]
    if planted not in ("the checkout", "checkouts"):
        # (a --path through a linked directory names a file there on purpose: qem writes the
        # file it is told to, and refuses only a link in the file's own place)
        commands.append(["checkin", "--path", str(edit), "-m", "x", "--yes"])
    for args in commands:
        done = run_qem(*args, cwd=ws, env={"QEM_EDITOR": "true"})
        no_traceback(done.stderr)
        assert victim.read_bytes() == before, f"`qem {' '.join(args)}` wrote through the {planted} link"
    if planted in ("the checkout", "checkouts"):
        assert snapshot(real) == before_dir, "a linked directory was written in"
    with Store.open(store_path(ws)) as store:
        assert verify(store) == []
    record(f"test_links_planted_in_the_checkout_are_not_followed[{planted}]", "checks", len(commands))


# -- shell metacharacters --------------------------------------------------------------------------------

NASTY = "w $(touch pwned1) `touch pwned2`; touch pwned3 & 'q\" | touch pwned4 #"


def pwned(*roots: Path) -> list[Path]:
    """Files a smuggled `touch pwnedN` made: anywhere under the test's directory (where
    every qem and editor here runs), or in the directory pytest runs in."""
    return [p for root in roots for p in root.rglob("pwned*")] + list(Path.cwd().glob("pwned*"))


def test_paths_and_editor_commands_with_metacharacters(tmp_path):
    ws = tmp_path / NASTY
    ws.mkdir()
    seed(ws, "$(touch pwned5) note", "`touch pwned6` note")
    tools = tmp_path / "ed it $(touch pwned7) dir"
    tools.mkdir()
    script = tools / "my editor;`touch pwned8`.py"
    script.write_text(
        "import sys, json\npath = sys.argv[-1]\n"
        "open(path + '.argv', 'w').write(json.dumps(sys.argv[1:-1]))\n"
        "text = open(path, encoding='utf-8').read()\n"
        "text = text.replace('## Tasks\\n', '## Tasks\\n\\n- added via $(touch pwned9) editor\\n', 1)\n"
        "open(path, 'w', encoding='utf-8').write(text)\n"
    )
    # the editor command is shell (as git's core.editor): quoting in it is honoured
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} --flag 'a b;c' \"$(echo ok)\""
    done = run_qem("edit", "-m", "$(touch pwned10)", "--yes", cwd=ws, env={"QEM_EDITOR": command})
    assert pwned(tmp_path) == [], "a shell ran something it was not asked to"
    assert done.returncode == 0, done.stderr
    argv_files = list((ws / ".qem").rglob("*.argv"))
    assert not argv_files  # the checkout went away after the check-in, with its files
    with Store.open(store_path(ws)) as store:
        texts = {n.text for n in store.notes()}
        reasons = {e.reason for e in store.events() if e.checkin}
    assert "added via $(touch pwned9) editor" in texts
    assert reasons == {"$(touch pwned10)"}
    # the file path reached the editor as one argument, whatever it holds
    done = run_qem("checkout", cwd=ws)
    path = Path(done.stdout.strip())
    done = run_qem("edit", "-m", "x", "--yes", cwd=ws, env={"QEM_EDITOR": command + " >/dev/null"})
    assert done.returncode == 0, done.stderr
    for args in (["export"], ["checkin", "--path", str(ws / "MEMORY.md"), "-m", "x", "--yes"],
                 ["dump", str(ws / "dump $(touch pwned11).jsonl")],
                 ["add", "`touch pwned12`", "--kind", "task", "--store", str(store_path(ws))]):
        done = run_qem(*args, cwd=ws)
        assert done.returncode == 0, (args, done.stderr)
    assert pwned(tmp_path) == [], "a shell ran something it was not asked to"
    record("test_paths_and_editor_commands_with_metacharacters", "checks", 1)


def test_editor_gets_the_file_as_one_argument(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    seed(ws, "a note")
    out = tmp_path / "argv.json"
    script = tmp_path / "ed.py"
    script.write_text(f"import sys, json\njson.dump(sys.argv[1:], open({str(out)!r}, 'w'))\n")
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} --flag 'a b;c'"
    done = run_qem("edit", "-m", "x", "--yes", cwd=ws, env={"QEM_EDITOR": command})
    assert done.returncode == 0, done.stderr
    import json

    argv = json.loads(out.read_text())
    assert argv[:2] == ["--flag", "a b;c"] and len(argv) == 3
    assert argv[2].endswith("/MEMORY.md") and "/.qem/checkouts/" in argv[2]


# -- where note text goes -----------------------------------------------------------------------------------


def test_note_text_goes_only_to_store_mirror_and_checkouts(tmp_path):
    """A full session with secrets in note texts, reasons and edits: no file but the
    memory (its log and its local index), the mirror and the kept checkouts holds one; and
    the two secrets then forgotten (one in a loose text file, one in a pack of texts with
    another note's) are gone from every file qem wrote: the log (the text file deleted, the
    pack written again without it), the index and its write-ahead log, the mirror, export's
    private copy, the kept checkouts."""
    home, tmpdir, ws, tools = (tmp_path / d for d in ("home", "tmp", "ws", "tools"))
    for d in (home, tmpdir, ws, tools):
        d.mkdir()
    env = {"HOME": str(home), "TMPDIR": str(tmpdir), "XDG_CACHE_HOME": str(home / ".cache"),
           "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local"),
           "QEM_ACTOR": "alice", "PYTHONDONTWRITEBYTECODE": "1"}
    (ws / ".qem").mkdir()
    (ws / ".qem" / "config.toml").write_text("[export]\nauto = true\n")

    def qem(*args: str, **extra: str) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "-m", "qem_edit", *args], cwd=ws, capture_output=True,
                              text=True, env=python_env({**env, **extra}))
        no_traceback(done.stderr)
        return done

    assert qem("add", f"{SECRET}-1 in a note", "--kind", "gotcha").returncode == 0
    second = qem("add", "multi\nline " + f"{SECRET}-2", "--kind", "task").stdout.strip()
    script = tools / "ed.py"
    script.write_text(
        "import os, sys\npath = sys.argv[-1]\ntext = open(path, encoding='utf-8').read()\n"
        f"text = text.replace('{SECRET}-1 in', '{SECRET}-3 in')\n"
        f"text = text.replace('## Tasks\\n', '## Tasks\\n\\n- {SECRET}-4 added\\n', 1)\n"
        "open(path, 'w', encoding='utf-8').write(text)\n"
    )
    editor_cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"
    assert qem("edit", "-m", f"{SECRET}-5 reason", "--yes", QEM_EDITOR=editor_cmd).returncode == 0
    for args in (["export"], ["list"], ["show", second], ["log"], ["dump"], ["query", f"text~{SECRET}"],
                 ["verify"], ["export", "--check"], ["export", "--diff"], ["status", second]):
        assert qem(*args).returncode in (0, 1)
    # a check-in that conflicts: the edit is kept (in a checkout, where it belongs)
    path = Path(qem("checkout").stdout.strip())
    path.write_text(path.read_text().replace(f"{SECRET}-3 in", f"{SECRET}-6 in"))
    with Store.open(store_path(ws)) as store:
        (edited,) = [n.shown for n in store.notes() if n.text.startswith(f"{SECRET}-3")]
        (fourth,) = [n.shown for n in store.notes() if n.text.startswith(f"{SECRET}-4")]
    memory = ws / ".qem"
    packed = [p for p in (memory / "packs").glob("t-*") if f"{SECRET}-4".encode() in p.read_bytes()]
    assert len(packed) == 1 and f"{SECRET}-3".encode() in packed[0].read_bytes()  # the check-in's texts: one pack
    assert qem("flag-stale", edited, "-m", f"{SECRET}-7").returncode == 0
    assert qem("checkin", "--path", str(path), "-m", "x", "--yes").returncode == 3
    assert qem("forget", second, "-m", "cleanup", "--yes").returncode == 0
    assert qem("forget", fourth, "-m", "cleanup", "--yes").returncode == 0
    assert not packed[0].exists(), "the pack holding a forgotten text was not written again"
    # a hand-edited mirror that conflicts: copied to a kept checkout, too
    mirror = ws / "MEMORY.md"
    mirror.write_text(mirror.read_text().replace("## Tasks\n", f"## Tasks\n\n- {SECRET}-8\n", 1))
    assert qem("checkin", "--path", str(mirror), "-m", "x", "--yes").returncode == 0

    # (mirror-base.md: export's private copy of what it last wrote, 0600, never committed)
    allowed = [memory / "checkouts", mirror] + [memory / n for n in ("events", "texts", "packs", "index.db",
                                                                     "index.db-wal", "index.db-shm", "mirror-base.md")]
    assert mode(memory / "mirror-base.md") == 0o600
    forgotten = [f"{SECRET}-2".encode(), f"{SECRET}-4".encode()]
    leaks, kept_forgotten, scanned = [], [], 0
    for root in (home, tmpdir, ws):
        for f in root.rglob("*"):
            if not f.is_file():
                continue
            data = f.read_bytes()
            for secret in forgotten:
                if secret in data or secret.decode().encode("utf-16-le") in data:
                    kept_forgotten.append((f, secret))
            if any(f == a or a in f.parents for a in allowed):
                continue
            scanned += 1
            if SECRET.encode() in data or SECRET.encode("utf-16-le") in data:
                leaks.append(f)
    assert leaks == [], f"note text written outside the memory, mirror and checkouts: {leaks}"
    assert kept_forgotten == [], f"a forgotten text is still in files qem wrote: {kept_forgotten}"
    kept = list((memory / "checkouts").rglob("*"))
    assert kept, "the conflicting edit should be kept"
    in_log = b"".join(p.read_bytes() for d in ("texts", "packs") for p in (memory / d).iterdir())
    assert f"{SECRET}-3".encode() in in_log and f"{SECRET}-1".encode() in in_log  # the others stay
    with Store.open(store_path(ws)) as store:
        assert verify(store) == []
    record("test_note_text_goes_only_to_store_mirror_and_checkouts", "files scanned", scanned)
