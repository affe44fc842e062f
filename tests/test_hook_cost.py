"""What the hooks spare themselves: config.toml read without tomllib where it is what
`qem` writes (qem_edit.system.workspace.plain_config), a short input hashed without OpenSSL
(qem_edit.base.ids.sha256_hex), and what the commit hooks import on a commit that touches no
memory and a harness's hooks on an edit and a session's start."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import run_qem
from hypothesis import example, given
from hypothesis import strategies as st

from qem_edit.base.ids import ALPHABET, ID_LENGTH, SMALL, is_id, is_prefix, sha256_hex
from qem_edit.base.shown import visible
from qem_edit.system.files import name_within, path_name
from qem_edit.system.workspace import COMMITS_NAME, _is_comment, _memory_id, plain_config

PLAIN = [
    "",
    "\n\n",
    "# only a comment\n",
    '[memory]\n# names this memory in MEMORY.md\'s header; made once, committed with the log\nid = "yc55cpabg730"\n',
    '[memory]\nid = "yc55cpabg730"',
    '  [memory]  \n\tid = "abc123"\t\n\n# after\n',
    "[memory]\n",
    "# a comment with a tab\there\n[memory]\n",
]

NOT_PLAIN = [
    '[memory]\nid = "abc"\n[export]\npath = "docs/MEMORY.md"\n',
    '[memory]\nid = "abc" # trailing comment\n',
    'id = "abc"\n',  # a key outside the table
    '[memory]\nid = "abc"\nid = "def"\n',  # a key twice: tomllib's error
    "[memory]\n[memory]\n",
    '[memory]\r\nid = "abc"\r\n',
    '[memory]\nid = "ABC"\n',
    "[memory]\nid = 'abc'\n",
    '[memory]\nid="abc"\n',
    "# a comment with a control character \x01\n",
    '[delivery]\nhold = false\n',
    '[memory]\nid = "abc"\n[delivery]\nhold = "no"\n',
]


@pytest.mark.parametrize("text", PLAIN)
def test_a_plain_config_reads_as_tomllib_reads_it(text: str) -> None:
    assert plain_config(text) == tomllib.loads(text)


@pytest.mark.parametrize("text", NOT_PLAIN)
def test_anything_else_is_left_to_tomllib(text: str) -> None:
    assert plain_config(text) is None


@given(st.text(alphabet=st.sampled_from(list('#id = "az09AZ\t\x00\x01\x1f\x7f\x80é')), max_size=16))
@example("# a comment\x7f")
@example("#\x1f")
@example('id = "a"')
@example('id = ""')
def test_a_plain_config_s_lines_are_read_as_their_patterns_read_them(line: str) -> None:
    """A comment and the memory's id line are told without compiling a pattern, exactly
    as the patterns they replace told them."""
    assert _is_comment(line) == bool(re.fullmatch(r"#[^\x00-\x08\x0a-\x1f\x7f]*", line))
    found = re.fullmatch(r'id = "([0-9a-z]+)"', line)
    assert _memory_id(line) == (found[1] if found else None)


@given(st.text(alphabet=st.sampled_from(["a", "b", "\n", "\t", "\x00", "\x1b", "\x7f", "\x85", "\x9f", "\xa0", "é",
                                         "\u2028", "\u200b", "\ud800", " "])) | st.text())
def test_a_text_is_shown_as_its_pattern_showed_it(text: str) -> None:
    """`visible` leaves a text without a control character as it is, without compiling its
    pattern, and writes out each control as the pattern does."""
    assert visible(text) == re.sub("[\x00-\x08\x0b-\x1f\x7f-\x9f]", lambda m: f"\\x{ord(m[0]):02x}", text)


@given(st.lists(st.sampled_from(["/", ".", "a", "b", " ", "..", "\n"]), max_size=12).map("".join))
def test_a_folder_is_named_as_pathlib_names_it(path: str) -> None:
    """The workspace's folders, kept as strings, are named as pathlib names them (a
    Workspace's `root` and `store_path` are those strings as Paths)."""
    from pathlib import PurePosixPath

    assert path_name(path) == str(PurePosixPath(path))


@given(st.lists(st.sampled_from(["a", "b", "..", ".", "link", "out"]), max_size=5),
       st.lists(st.sampled_from(["a", "b", "..", ".", "link"]), max_size=3))
def test_a_path_from_the_top_is_named_as_pathlib_names_it(tmp_path_factory, parts: list[str], top: list[str]) -> None:
    """`name_within` (the memory's folder and MEMORY.md from the work tree's top, for the
    commit hooks) answers what `Path(path).resolve().relative_to(Path(top).resolve())`
    answered, links resolved; None where pathlib refused."""
    root = tmp_path_factory.mktemp("tree")
    (root / "a" / "b").mkdir(parents=True)
    (root / "out").mkdir()
    (root / "a" / "link").symlink_to(root / "out")
    path, above = os.path.join(root, "a", *parts), os.path.join(root, "a", *top)
    try:
        expected: str | None = Path(path).resolve().relative_to(Path(above).resolve()).as_posix()
    except ValueError:
        expected = None
    assert name_within(above, path) == expected


@pytest.mark.parametrize("size", [0, 1, 55, 56, 64, 1000, SMALL - 1, SMALL, SMALL + 1, 3 * SMALL])
def test_sha256_hex_is_sha256(size: int) -> None:
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    assert sha256_hex(data) == hashlib.sha256(data).hexdigest()


@given(st.text(alphabet=st.sampled_from(ALPHABET + "ilouILOUZ0-_ \n\u0661\u00e9"), max_size=30)
       | st.text(alphabet=ALPHABET, min_size=ID_LENGTH - 1, max_size=ID_LENGTH + 1).map(lambda t: t + "\n" * (len(t) % 2)))
def test_an_id_is_checked_as_its_pattern_checked_it(text: str) -> None:
    """`is_id` and `is_prefix` read an id's alphabet without compiling a pattern at import,
    and take exactly what the patterns did."""
    assert is_id(text) == bool(re.match(rf"[{ALPHABET}]{{{ID_LENGTH}}}\Z", text))
    assert is_prefix(text) == bool(re.match(rf"[{ALPHABET}]+\Z", text))


def test_what_tomllib_refuses_is_refused_as_before(tmp_path: Path) -> None:
    assert run_qem("add", "a note", "-k", "task", cwd=tmp_path).returncode == 0
    config = tmp_path / ".qem" / "config.toml"
    config.write_text(config.read_text() + 'id = "twice"\n')
    listed = run_qem("export", cwd=tmp_path)
    assert listed.returncode == 2 and "config.toml is not valid TOML" in listed.stderr
    assert "Traceback" not in listed.stderr
    config.write_text('[export]\nauto = "yes"\n')
    listed = run_qem("export", cwd=tmp_path)
    assert listed.returncode == 2 and "[export] auto must be true or false" in listed.stderr


def test_a_configured_mirror_path_is_still_read(tmp_path: Path) -> None:
    assert run_qem("add", "a note", "-k", "task", cwd=tmp_path).returncode == 0
    config = tmp_path / ".qem" / "config.toml"
    config.write_text(config.read_text() + '\n[export]\npath = "docs/MEM.md"\n')
    (tmp_path / "docs").mkdir()
    assert run_qem("export", cwd=tmp_path).returncode == 0
    assert (tmp_path / "docs" / "MEM.md").is_file() and not (tmp_path / "MEMORY.md").exists()


@pytest.mark.parametrize("framework", [False, True])
def test_the_commit_hooks_import_nothing_a_quiet_commit_does_not_use(tmp_path: Path, framework: bool) -> None:
    """On a commit that touches no memory, a memory `verify --staged` sealed (a note in
    force anchored: the drift check runs): the commit hooks answer as before, importing no
    dataclasses (and the inspect it brings), no tomllib, no OpenSSL (hashlib), not the
    MEMORY.md grammar (they render nothing), no command-line framework, and neither json nor
    signal's enums nor threading, nor what is owed (no request is in force: none is late),
    nor a hash's module (the seal is compared as it is), nor a write's decisions (no drift);
    answered in full, no pathlib either, nor the re, enum,
    fnmatch and urllib.parse it imports, nor shlex, nor contextlib (the workspace's folders
    are named as strings: qem_edit.system.workspace; the renderings' contexts are made with
    contextlib only when one is asked for: qem_edit.mirror.export.lazily_managed).  The probe unloads those first, since an editable
    install's finder loads pathlib and re as the interpreter starts.  The same run by the
    pre-commit framework (`framework`: PRE_COMMIT=1, nothing set aside in its cache), where
    qem-export (`export --staged`, in full too) looks for a person's unstaged edits first."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    if framework:
        (tmp_path / "pre-commit-home").mkdir()
        env |= {"PRE_COMMIT": "1", "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert run_qem("add", "a note", "-k", "task", cwd=tmp_path).returncode == 0
    (tmp_path / "other.py").write_text("b = 1\n")
    assert run_qem("add", "other.py keeps b first", "-k", "gotcha", "--anchor", "other.py", cwd=tmp_path).returncode == 0
    assert run_qem("export", cwd=tmp_path).returncode == 0
    (tmp_path / "code.py").write_text("a = 1\n")
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run(["git", "commit", "-qm", "m", "--no-verify"], cwd=tmp_path, check=True, env=env)
    assert run_qem("verify", "--staged", cwd=tmp_path).returncode == 0  # the seal
    (tmp_path / "code.py").write_text("a = 2\n")
    subprocess.run(["git", "add", "code.py"], cwd=tmp_path, check=True)
    unused = ("typer", "click", "dataclasses", "inspect", "typing", "tomllib", "hashlib", "_hashlib",
              "qem_edit.renderer.format", "sqlite3", "datetime", "subprocess", "json", "signal", "threading",
              "pathlib", "re", "enum", "fnmatch", "urllib.parse", "ipaddress", "shlex", "contextlib",
              "qem_edit.reads.owed", "qem_edit.base.owing",  # (no request in force: none late, none read)
              "_sha256", "_sha2", "qem_edit.base.decisions", "qem_edit.base.times")  # (the seal compared as it is; no drift, no write)
    # answered from what they answered last (qem_edit.mirror.answered): nothing of the standard
    # library the interpreter had not loaded as it started but `select` (git waited for within
    # its time, answered.PATIENCE_S), and none of qem's store
    unused_kept = (*unused, "_sqlite3", "qem_edit.storage.store", "qem_edit.shells.quick")
    unloaded = ("pathlib", "re", "enum", "fnmatch", "urllib.parse", "ipaddress", "shlex", "contextlib")
    for argv, said in ((["verify", "--staged"], "ok: the log replays cleanly to 2 notes"),
                       (["export", "--check", "--staged"], ""),
                       (["export", "--staged"], "unchanged:"),
                       (["anchors", "check", "--staged"], "no anchor drifted"),
                       (["anchors", "check", "--staged", "--flag"], "no anchor drifted")):
        for kept, absent in ((False, unused), (True, unused_kept)):
            if not kept:
                (tmp_path / ".qem" / COMMITS_NAME).unlink(missing_ok=True)  # (the command in full)
            probe = (f"import sys\nfor name in {unloaded!r}:\n    sys.modules.pop(name, None)\n"
                     f"sys.argv = ['qem', *{argv!r}]; started = set(sys.modules)\n"
                     "from qem_edit.__main__ import main\n"
                     "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
                     f"print(code, sorted(m for m in {absent!r} if m in sys.modules and m not in started))")
            done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, env=env)
            assert done.stdout.strip().splitlines()[-1] == "0 []", (argv, kept, done.stdout, done.stderr)
            assert said in done.stdout + done.stderr, (argv, done.stdout, done.stderr)


@pytest.mark.parametrize("event", ["PreToolUse", "SessionStart"])
def test_a_harness_hook_imports_nothing_its_moment_does_not_use(tmp_path: Path, event: str) -> None:
    """A Claude Code hook (an Edit with nothing due; a session's start) answers as before
    without loading verify's reads, the query's selection, or the cores' spread (the index
    imports it only when a build spreads), nor what only a build, a dispute, a request or
    `qem context` reads (the progress line, the rivals' words, the answers' verdicts,
    context's module), and with the cycle collector off (qem_edit.__main__)."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert run_qem("add", "keep the tests fast", "-k", "directive", cwd=tmp_path).returncode == 0
    given = {"session_id": "s1", "hook_event_name": event, "cwd": str(tmp_path)}
    given |= ({"tool_name": "Edit", "tool_input": {"file_path": str(tmp_path / "x.py")}} if event == "PreToolUse"
              else {"source": "startup"})
    unused = ("qem_edit.storage.verify_reads", "qem_edit.storage.selection", "qem_edit.system.cores", "typing",
              "qem_edit.base.shown", "qem_edit.base.resolver", "qem_edit.base.owing", "qem_edit.reads.context",
              "sqlite3", "datetime", "subprocess")  # (SQLite's own module, not the package around it: qem_edit.system.db)
    unused += ("qem_edit.reads.tiers",) if event == "PreToolUse" else ()  # (nothing to fit: no fitting loaded)
    probe = (f"import gc, sys; sys.argv = ['qem', 'hook', 'claude', {event!r}]\n"
             "from qem_edit.__main__ import main\ncode = 0\n"
             "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
             f"print(code, sorted(m for m in {unused!r} if m in sys.modules), gc.isenabled())")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, input=json.dumps(given),
                          capture_output=True, text=True)
    assert done.stdout.strip().splitlines()[-1] == "0 [] False", (done.stdout, done.stderr)
    if event == "SessionStart":
        assert "keep the tests fast" in done.stdout, done.stdout


def test_no_hook_loads_what_its_moment_does_not_use(tmp_path: Path) -> None:
    """No hook of a session, quiet or read in full, loads pathlib (and the urllib.parse and
    ipaddress it imports: about 3 ms of each hook's start-up): a hook names its memory's
    folder as a string (qem_edit.system.workspace); nor contextlib (0.4 ms: the context
    managers a hook uses are classes); nor, but for a command it reads, shlex; nor the UTF-16
    codec; nor json (JSON is read and written by qem_edit.base.cjson), nor, but for a command,
    re and the enum it loads (about 5 ms with json: a pattern a hook may use is compiled where
    it is used, the prompt's words and the hold setting are read without one); nor, where it
    reads no index, collections and functools.  The probe unloads them first, since an editable install's finder loads pathlib
    and contextlib as the interpreter starts; a start that ends a clone's session notes (a
    write) may load them, and is not among these."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "app.py").write_text("a = 1\n")
    assert run_qem("add", "keep the tests fast", "-k", "directive", cwd=tmp_path).returncode == 0
    assert run_qem("add", "app.py holds the loop", "-k", "gotcha", "--anchor", "app.py", cwd=tmp_path).returncode == 0
    edit = {"tool_name": "Edit", "tool_input": {"file_path": str(tmp_path / "app.py"), "old_string": "a", "new_string": "b"}}
    # (event, its input, what it says, whether it reads the index: SQLite's module loads functools, and that collections)
    calls = [("SessionStart", {"source": "startup"}, "keep the tests fast", True),  # read in full
             ("SessionStart", {"source": "startup", "session_id": "s2"}, "keep the tests fast", False),  # the kept start
             ("PreToolUse", edit, "app.py holds the loop", True),  # held, the note its reason
             ("PreToolUse", edit, "", False),  # given already: nothing due (the digest)
             ("PreToolUse", {"tool_name": "Bash", "tool_input": {"command": "make test"}}, "", False),
             ("UserPromptSubmit", {"prompt": "go on"}, "", False),
             ("SubagentStart", {"agent_id": "a1", "agent_type": "explore"}, "keep the tests fast", True),
             ("Stop", {}, "", True),
             ("SessionEnd", {"reason": "exit"}, "", False)]
    for event, extra, said, reads_index in calls:
        given = {"session_id": "s1", "hook_event_name": event, "cwd": str(tmp_path), **extra}
        bash = extra.get("tool_name") == "Bash"  # (a command is read by shlex, which loads re and enum)
        unused = ("pathlib", "urllib.parse", "ipaddress", "contextlib", "encodings.utf_16_le", "json",
                  *(("shlex", "re", "enum") if not bash else ()),
                  *(("collections", "functools") if not reads_index and not bash else ()))
        probe = (f"import sys\nfor name in {unused!r}:\n    sys.modules.pop(name, None)\n"
                 f"sys.argv = ['qem', 'hook', 'claude', {event!r}]\n"
                 "from qem_edit.__main__ import main\ncode = 0\n"
                 "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
                 f"print(code, sorted(m for m in {unused!r} if m in sys.modules))")
        done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, input=json.dumps(given),
                              capture_output=True, text=True)
        assert done.stdout.strip().splitlines()[-1] == "0 []", (event, extra, done.stdout, done.stderr)
        assert said in done.stdout and "qem hook:" not in done.stderr, (event, done.stdout, done.stderr)


@given(st.text())
def test_a_command_is_quoted_as_shlex_quotes_it(word: str) -> None:
    """qem_edit.reads.delivery.quoted, which spares a reply shlex, writes what shlex.quote writes."""
    import shlex

    from qem_edit.reads.delivery import quoted

    assert quoted(word) == shlex.quote(word)


@given(st.text(alphabet="aZ09._:-/ é\n", max_size=205) | st.text())
def test_a_session_s_word_for_the_shell_is_what_its_pattern_took(session: str) -> None:
    """qem_edit.shells.hookrun.shell_word (QEM_SESSION written for Claude Code's shell, unquoted)
    takes what `[A-Za-z0-9._:-]{1,200}` fully matches, with no regular expression engine."""
    import re

    from qem_edit.shells.hookrun import shell_word

    for text in (session, session * 40, session[:1] * 200, session[:1] * 201):
        assert shell_word(text) == bool(re.fullmatch(r"[A-Za-z0-9._:-]{1,200}", text)), text


@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())))
def test_a_length_in_utf16_units_is_what_the_codec_counts(text: str) -> None:
    """qem_edit.base.harness.utf16_units (Claude Code's measure) counts what UTF-16 encodes,
    lone surrogates and characters past U+FFFF among them, without the codec."""
    from qem_edit.base.harness import utf16_units

    assert utf16_units(text) == len(text.encode("utf-16-le", "surrogatepass")) // 2


def test_an_add_imports_nothing_a_write_does_not_use(tmp_path: Path) -> None:
    """`qem add` with MEMORY.md and the config.toml `qem` writes: the note is written and
    the mirror patched, with no tomllib (the config is plain: the protect rule, the memory's
    id and the settings are read without it), no command-line framework, no dataclasses,
    and none of the grammar only a reader of MEMORY.md needs compiled; the cycle collector
    is on again once the command started (only a hook keeps it off: qem_edit.__main__)."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert run_qem("add", "a first note", "-k", "task", cwd=tmp_path).returncode == 0
    assert run_qem("export", cwd=tmp_path).returncode == 0
    unused = ("typer", "click", "dataclasses", "inspect", "typing", "tomllib", "sqlite3", "datetime", "subprocess")
    probe = ("import gc, sys; sys.argv = ['qem', 'add', 'a second note', '-k', 'gotcha']\n"
             "from qem_edit.__main__ import main\ncode = 0\n"
             "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
             "grammar = vars(sys.modules['qem_edit.renderer.format'])\n"
             f"print(code, sorted(m for m in {unused!r} if m in sys.modules),"
             " sorted(n for n in ('HEADER_RE', 'ITEM_RE', 'REQUEST_MARKERS') if n in grammar), gc.isenabled())")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert done.stdout.strip().splitlines()[-1] == "0 [] [] True", (done.stdout, done.stderr)
    assert "a second note" in (tmp_path / "MEMORY.md").read_text("utf-8")


@given(st.text(alphabet=st.sampled_from(
    list("abcXYZ019_@%+=:,./-") + [" ", "'", '"', "$", "é", "\u0130", "\u212a", "٣", "\n", "*"])))
def test_a_command_of_mostly_plain_words_is_quoted_as_shlex_quotes_it(word: str) -> None:
    """The same over words mostly of what a shell reads as itself (where any text rarely
    lands), with characters `\\w` takes beyond ASCII among them."""
    import shlex

    from qem_edit.reads.delivery import quoted

    assert quoted(word) == shlex.quote(word)


def test_ctrl_c_is_caught_where_python_s_own_handler_is_in_place() -> None:
    """`guarded` sets qem's SIGINT handler (a Ctrl-C that ends an SQLite statement is still
    said as an interruption) in the main thread where Python's own is in place, read through
    signal's C module: not over a handler someone else set or a SIGINT ignored, and not from
    another thread (where signals cannot be set), which it leaves without failing."""
    import signal
    import threading

    from qem_edit.shells.shell import catch_interrupts
    from qem_edit.system import db

    before = signal.getsignal(signal.SIGINT)
    try:
        for given, after in ((signal.default_int_handler, db.on_interrupt), (signal.SIG_IGN, signal.SIG_IGN),
                             (print, print)):
            signal.signal(signal.SIGINT, given)
            catch_interrupts()
            assert signal.getsignal(signal.SIGINT) is after
        signal.signal(signal.SIGINT, signal.default_int_handler)
        failed: list[BaseException] = []

        def in_a_thread() -> None:
            try:
                catch_interrupts()
            except BaseException as exc:  # noqa: BLE001 - any failure there is the test's
                failed.append(exc)
        thread = threading.Thread(target=in_a_thread)
        thread.start()
        thread.join()
        assert not failed and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)
