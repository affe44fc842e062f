"""Triggers: when a note is delivered to an agent, declared on the note and kept by every
way in (CLI, a check-in of MEMORY.md, MCP, a load, a file from another clone), and the
exact matches qem_edit.base.triggers makes of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from builders import planted_created
from conftest import run_qem

from qem_edit.base.replay import Note
from qem_edit.base.triggers import (
    bundle_why,
    command_matches,
    covering_anchors,
    moments,
    path_matches,
    prompt_paths,
    prompt_words,
    relative,
    term_in,
    terms_of,
    trigger_data,
    triggers_of,
)


def _note(kind: str = "gotcha", priority: str = "medium", triggers: tuple = ()) -> Note:
    return Note("n" * 26, kind, priority, "x", "agent", "2026-07-27T10:00:00Z", "a", triggers=triggers)


# -- the matches, pure -------------------------------------------------------------------------


@pytest.mark.parametrize("pattern, path, matches", [
    ("src/index/**", "src/index/build.py", True),
    ("src/index/**", "src/index/deep/er/x.py", True),
    ("src/index/**", "src/indexer/x.py", False),
    ("src/index", "src/index/x.py", True),  # no glob: that path or anything under it
    ("src/index", "src/index", True),
    ("src/index", "src/indexer", False),
    ("*.py", "a.py", True),
    ("*.py", "src/a.py", False),  # * stays within one part
    ("**/*.py", "src/a.py", True),
    ("**/*.py", "a.py", True),
    ("src/**/test_*.py", "src/a/b/test_x.py", True),
    ("src/**/test_*.py", "src/test_x.py", True),
    ("src/?.py", "src/a.py", True),
    ("src/?.py", "src/ab.py", False),
    ("src/[ab].py", "src/b.py", True),
    ("src/[!ab].py", "src/b.py", False),
    ("SRC/*.py", "src/a.py", False),  # case-sensitive
])
def test_a_path_pattern_matches_whole_paths_by_parts(pattern: str, path: str, matches: bool) -> None:
    assert path_matches(pattern, path) is matches


@pytest.mark.parametrize("pattern, command, matches", [
    ("pytest*", "pytest -q tests", True),
    ("pytest*", "cd app && pytest -q", True),
    ("pytest*", "FOO=1 BAR=2 pytest", True),
    ("pytest*", "python -m pytest", False),
    ("*pytest*", "python -m pytest", True),
    ("pytest*", "echo pytest", False),
    ("git push*", "git commit -m x; git push origin main", True),
    ("git push*", "git pushx", True),
    ("git push", "git push origin", False),
    ("make ?", "make a | tee log", True),
    ("alembic*", "ls\nalembic upgrade head", True),
])
def test_a_command_pattern_matches_any_simple_command_of_the_line(pattern: str, command: str, matches: bool) -> None:
    assert command_matches(pattern, command) is matches


def test_terms_are_backticked_spans_without_spaces_keyed_by_their_longest_word() -> None:
    text = "Use `Store.write` then `render_item()`; not `qem export` (a command) nor `x` or ``."
    assert terms_of(text) == [("Store", "Store.write"), ("render_item", "render_item()")]
    assert term_in("Store.write", "why does Store.write hang?")
    assert not term_in("Store.write", "MyStore.write hangs")  # inside a longer identifier
    assert not term_in("Store.write", "Store.writes")
    assert term_in(".env", "the app.env file")  # a term starting with punctuation has no boundary there


def test_a_prompt_names_paths_as_paths_from_the_top() -> None:
    assert prompt_paths("fix ./src/lock.py, then /top/docs/a.md. And README", "/top") == {"src/lock.py", "docs/a.md"}
    assert prompt_paths("see /elsewhere/a.py", "/top") == set()


_PROMPT_TEXT = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())) \
    | st.text(alphabet="ab_9./-@+~ \n`:,é\u00b2\u0663") | st.text()


@settings(max_examples=500)
@given(_PROMPT_TEXT)
def test_a_prompt_s_words_and_paths_are_what_their_patterns_find(prompt: str) -> None:
    """prompt_words and prompt_paths split the prompt's bytes, sparing every prompt a regular
    expression engine: the words `[A-Za-z0-9_]+` finds, the tokens `[A-Za-z0-9_.@+~/-]*[A-Za-z0-9_]`
    finds (each read as a path), over any text (lone surrogates, digits beyond ASCII among it)."""
    import re

    assert prompt_words(prompt) == set(re.findall(r"[A-Za-z0-9_]+", prompt))
    tokens = [t for t in re.findall(r"[A-Za-z0-9_.@+~/-]*[A-Za-z0-9_]", prompt) if "/" in t or "." in t]
    for top in (None, "/top"):
        assert prompt_paths(prompt, top) == {p for p in (relative(t, top) for t in tokens) if p}


@given(_PROMPT_TEXT)
def test_a_drive_letter_path_is_absolute_as_its_pattern_says(path: str) -> None:
    """anchor_path_problem reads a path that starts with a drive (`C:` alone, or followed by a slash
    or a backslash) as absolute, as the pattern `[A-Za-z]:(?:/|\\\\|\\Z)` it replaced did."""
    import re

    from qem_edit.base.stored_form import anchor_path_problem

    for candidate in (path, "C" + path, "C:" + path, "z:/" + path, "C:\\" + path, path[:1] + ":" + path[1:],
                      path[:1] + ":\\" + path[1:]):
        absolute = bool(candidate) and (candidate.startswith("/") or re.match(r"[A-Za-z]:(?:/|\\|\Z)", candidate))
        assert (anchor_path_problem(candidate) == "an absolute path; name it from the top of the work tree") \
            == bool(absolute), candidate


def test_a_kind_fires_by_its_bundle_unless_the_note_declares_its_own_moments() -> None:
    assert moments(_note("directive")) == ("start", "compact")
    assert moments(_note("task", "high")) == ("start",)
    assert moments(_note("task", "low")) == ()
    assert moments(_note("gotcha")) == ()
    assert moments(_note("directive", triggers=(("on", "edit"),))) == ("edit",)
    assert moments(_note("gotcha", triggers=(("path", "src/**"),))) == ()  # a pattern adds, it does not replace


def test_an_anchor_covers_its_path_and_every_path_under_it() -> None:
    assert covering_anchors("src/index/build.py") == ["src", "src/index", "src/index/build.py"]
    assert covering_anchors("README.md") == ["README.md"]


def test_a_bundle_says_why_it_fired_in_a_person_s_words() -> None:
    assert bundle_why("directive", "low") == "every directive, at start and after compaction"
    assert bundle_why("task", "high") == "every high task, at start"


def test_a_trigger_s_stored_form_is_sorted_lists_by_name_and_reads_back() -> None:
    pairs = (("run", "pytest*"), ("on", "start"), ("path", "src/**"), ("on", "edit"), ("on", "start"))
    data = trigger_data(pairs)
    assert data == {"on": ["edit", "start"], "path": ["src/**"], "run": ["pytest*"]}
    assert triggers_of({"triggers": data}) == (("on", "edit"), ("on", "start"), ("path", "src/**"), ("run", "pytest*"))
    assert triggers_of({"triggers": {"on": ["start", "edit"]}}) == ()  # unsorted: not the stored form


# -- declared on every way in --------------------------------------------------------------------


def _created(ws: Path, note: str) -> dict:
    events = [json.loads(line) for line in run_qem("dump", cwd=ws).stdout.splitlines()[1:]]
    return next(e for e in events if e["id"].startswith(note) and e["type"] == "created")


def test_the_cli_declares_triggers_and_memory_md_shows_them(qem, ws: Path) -> None:
    made = qem("add", "Migrations go through `make migrate`", "-k", "gotcha", "--when-run", "alembic*",
               "--when-path", "db/**", "--on", "start", "--when-run", "alembic*")
    assert made.returncode == 0, made.stderr
    note = made.stdout.strip()
    assert _created(ws, note)["data"]["triggers"] == {"on": ["start"], "path": ["db/**"], "run": ["alembic*"]}
    assert qem("export").returncode == 0
    text = (ws / "MEMORY.md").read_text()
    assert f"· Migrations go through `make migrate`\n  @on: start\n  @when-path: db/**\n  @when-run: alembic*\n" in text
    shown = qem("show", note).stdout
    assert "on start\nwhen-path db/**\nwhen-run alembic*" in shown


@pytest.mark.parametrize("option, value, words", [
    ("--on", "never", "unknown moment 'never'; use start, compact, prompt, edit, read, shell"),
    ("--when-path", "../up", "a path with an empty, `.` or `..` part"),
    ("--when-path", "/abs/*.py", "an absolute path"),
    ("--when-path", ".qem/**", "inside .qem/"),
    ("--when-path", "src/a**/x", "`**` stands for whole folders"),
    ("--when-run", " pytest", "spaces at its ends"),
    ("--when-run", "x" * 201, "keep it under 200"),
])
def test_a_bad_trigger_is_refused_naming_it_and_nothing_is_written(qem, ws: Path, option: str, value: str,
                                                                     words: str) -> None:
    assert qem("add", "first", "-k", "gotcha").returncode == 0
    before = sorted(p.name for p in (ws / ".qem" / "events").iterdir())
    bad = qem("add", "a note", "-k", "gotcha", option, value)
    assert bad.returncode == 2
    assert words in bad.stderr and "Traceback" not in bad.stderr
    assert sorted(p.name for p in (ws / ".qem" / "events").iterdir()) == before


def test_a_supersession_keeps_the_triggers_unless_told(qem, ws: Path) -> None:
    note = qem("add", "Run the suite before pushing", "-k", "directive", "--when-run", "git push*").stdout.strip()
    kept = qem("supersede", note, "Run the whole suite before pushing", "-m", "wording").stdout.strip()
    assert _created(ws, kept)["data"]["triggers"] == {"run": ["git push*"]}
    moved = qem("supersede", kept, "Run it", "--on", "start", "-m", "when").stdout.strip()
    assert _created(ws, moved)["data"]["triggers"] == {"on": ["start"]}
    cleared = qem("supersede", moved, "Run it always", "--no-triggers", "-m", "no trigger").stdout.strip()
    assert "triggers" not in _created(ws, cleared)["data"]
    both = qem("supersede", cleared, "x", "--no-triggers", "--on", "start", "-m", "x")
    assert both.returncode == 2 and "not both" in both.stderr


def test_an_edit_of_memory_md_declares_changes_and_refuses_triggers_by_line(qem, ws: Path) -> None:
    note = qem("add", "The lock is held in `Store.write`", "-k", "gotcha").stdout.strip()
    assert qem("checkout", "--path", "edit.md").returncode == 0
    edit = ws / "edit.md"
    text = edit.read_text().replace("held in `Store.write`\n", "held in `Store.write`\n  @when-path: qem_edit/storage/store.py\n")
    text = text.replace("## Tasks\n", "## Tasks\n\n- Rebuild the index\n  @on: never\n  @on: start\n  @on: start\n")
    edit.write_text(text)
    refused = qem("checkin", "--path", "edit.md", "-m", "x", "--yes")
    assert refused.returncode != 0
    lines = {n + 1: line for n, line in enumerate(text.split("\n"))}
    never = next(n for n, line in lines.items() if line == "  @on: never")
    assert f"line {never}: @on: unknown moment 'never'" in refused.stderr
    assert f"line {never + 2}: @on: start is named twice (also on line {never + 1})" in refused.stderr
    edit.write_text(text.replace("  @on: never\n", "").replace("  @on: start\n  @on: start\n", "  @on: start\n"))
    done = qem("checkin", "--path", "edit.md", "-m", "triggers", "--yes")
    assert done.returncode == 0, done.stderr
    assert "+ @when-path: qem_edit/storage/store.py" in done.stderr
    notes = [json.loads(line) for line in qem("dump").stdout.splitlines()[1:]]
    created = [e for e in notes if e["type"] == "created" and e["data"].get("triggers")]
    assert sorted(json.dumps(e["data"]["triggers"]) for e in created) == [
        '{"on": ["start"]}', '{"path": ["qem_edit/storage/store.py"]}']
    assert qem("show", note).stdout.splitlines()[0].endswith("superseded")


def test_a_trigger_line_a_text_holds_is_escaped_so_it_stays_text(qem, ws: Path) -> None:
    note = qem("add", "first line\n@on: start", "-k", "gotcha").stdout.strip()
    assert qem("export").returncode == 0
    assert "  \\@on: start" in (ws / "MEMORY.md").read_text()
    assert "triggers" not in _created(ws, note)["data"]


def test_mcp_tools_declare_triggers(ws: Path) -> None:
    import asyncio

    from test_mcp import ok, session

    async def script() -> tuple:
        async with session(ws) as s:
            added = (await ok(s, "add", text="Never hand-edit `schema.sql`", kind="gotcha",
                              on=["edit"], when_path=["db/**"], when_run=["psql*"])).structured_content
            kept = (await ok(s, "supersede", id=added["short"],
                             text="Never hand-edit `schema.sql`; use make")).structured_content
            changed = (await ok(s, "supersede", id=kept["short"], text="Use make", when_run=[])).structured_content
            return added, kept, changed

    added, kept, changed = asyncio.run(script())
    assert _created(ws, added["id"][:8])["data"]["triggers"] == {"on": ["edit"], "path": ["db/**"], "run": ["psql*"]}
    assert _created(ws, kept["id"][:8])["data"]["triggers"] == {"on": ["edit"], "path": ["db/**"], "run": ["psql*"]}
    assert "triggers" not in _created(ws, changed["id"][:8])["data"]


def test_mcp_refuses_a_bad_trigger_in_the_cli_words(ws: Path) -> None:
    import asyncio

    from test_mcp import failed, session

    async def script() -> str:
        async with session(ws) as s:
            return await failed(s, "add", text="x", kind="gotcha", when_path=["../x"])

    assert "--when-path '../x': path pattern '../x': a path with an empty" in asyncio.run(script())


def test_a_load_carries_triggers_and_refuses_bad_ones(qem, ws: Path, tmp_path: Path) -> None:
    qem("add", "Deploys go through `make deploy`", "-k", "directive", "--when-run", "kubectl*")
    dumped = qem("dump").stdout
    other = tmp_path / "other"
    other.mkdir()
    (tmp_path / "log.jsonl").write_text(dumped)
    assert run_qem("load", str(tmp_path / "log.jsonl"), cwd=other).returncode == 0
    assert run_qem("deliver", "shell", "--command", "kubectl apply", cwd=other).stdout.count("make deploy") == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text(dumped.replace('"run": ["kubectl*"]', '"run": ["kubectl*"], "when": ["x"]'))
    third = tmp_path / "third"
    third.mkdir()
    refused = run_qem("load", str(bad), cwd=third)
    assert refused.returncode == 2 and "unknown trigger 'when'" in refused.stderr


@pytest.mark.parametrize("data, problem", [
    ({"triggers": {"on": ["never"]}}, "unknown moment 'never'"),
    ({"triggers": {"path": ["../x"]}}, "path pattern '../x'"),
    ({"triggers": {"run": ["b", "a"]}}, "must be sorted"),
    ({"triggers": {"run": []}}, "a list of 1 to 20 values"),
    ({"triggers": []}, "triggers must be a non-empty"),
])
def test_a_clones_file_with_bad_triggers_is_set_aside_and_named(qem, ws: Path, data: dict, problem: str) -> None:
    assert qem("add", "mine", "-k", "gotcha").returncode == 0
    planted = planted_created(ws / ".qem", "Theirs", "gotcha", **data)
    listed = qem("list")
    assert "Theirs" not in listed.stdout and "mine" in listed.stdout
    verify = qem("verify")
    assert verify.returncode != 0 and planted in verify.stdout + verify.stderr
    assert problem in verify.stdout + verify.stderr


def test_triggers_on_an_event_that_is_not_a_creation_are_set_aside(qem, ws: Path) -> None:
    note = qem("add", "mine", "-k", "gotcha").stdout.strip()
    full = json.loads(qem("show", note, "--json").stdout)["id"]
    from qem_edit.base import ids
    from qem_edit.storage.logtree import canonical

    event = canonical({"v": 1, "type": "stale_flagged", "note": full, "at": "2026-07-27T10:00:00Z", "actor": "mallory",
                       "reason": "x", "checkin": None, "clock": 9, "prev": [full],
                       "data": {"triggers": {"on": ["start"]}}})
    name = ids.content_id(event)
    (ws / ".qem" / "events" / name).write_bytes(event)
    verify = qem("verify")
    assert f"events/{name}" in verify.stdout + verify.stderr
    assert "a stale_flagged event carries no triggers" in verify.stdout + verify.stderr
    assert qem("show", note).stdout.splitlines()[0].endswith("active")


def test_the_tool_schemas_name_the_moments(ws: Path) -> None:
    from qem_edit.base.vocabulary import MOMENTS
    from qem_edit.shells.mcp_server import TOOLS

    add = next(t for t in TOOLS if t.name == "add")
    assert add.properties["on"]["items"]["enum"] == list(MOMENTS)
    assert {"on", "when_path", "when_run"} <= set(next(t for t in TOOLS if t.name == "supersede").properties)


def test_help_names_the_trigger_options() -> None:
    out = subprocess.run([sys.executable, "-m", "qem_edit", "add", "--help"], capture_output=True, text=True).stdout
    assert "--when-path" in out and "--when-run" in out and "--on" in out


def test_a_hostile_command_pattern_cannot_make_a_hook_backtrack() -> None:
    """A clone's note may declare any pattern: `*a` repeated against a long line of `a`s
    is the backtracking case of a regex; the match answers at once (a regex would not end)."""
    assert command_matches("*a" * 100 + "b", "a" * 20_000) is False
    assert command_matches("*a" * 100, "a" * 20_000) is True


def test_deliver_json_says_why_each_note_was_given(tmp_path: Path) -> None:
    """`qem deliver --json` names, for each note given, the reason the hook's line says:
    its kind's bundle, its own moment, its path or command pattern, the term a prompt
    names, or a request owed and late, which comes first."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    for text, extra in (("Plain directive", ["-k", "directive"]), ("Declared start", ["-k", "finding", "--on", "start"]),
                        ("Path gotcha", ["-k", "gotcha", "--when-path", "src/**"]),
                        ("Run gotcha", ["-k", "gotcha", "--when-run", "make*"]),
                        ("Run `make-build` first", ["-k", "gotcha"]),
                        ("A late request", ["-k", "task", "--to", "bob", "--due", "2026-01-01"])):
        assert run_qem("add", text, *extra, cwd=tmp_path).returncode == 0, text

    def why(*argv: str) -> list[tuple[str, str]]:
        done = run_qem("deliver", *argv, "--json", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return [(g["text"], g["why"]) for g in json.loads(done.stdout)["given"]]

    late = ("A late request", "late, not answered yet (`qem owed --late` says by how long)")
    assert why("start") == [late, ("Plain directive", "every directive, at start and after compaction"),
                            ("Declared start", "on start")]
    assert why("edit", "--path", "src/a.py") == [("Path gotcha", "when-path src/**")]
    assert why("shell", "--command", "make test") == [("Run gotcha", "when-run make*")]
    assert why("prompt", "--prompt", "should I run make-build here?") == [
        late, ("Run `make-build` first", "the prompt names `make-build`")]
