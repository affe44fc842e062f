"""Before means before: a note due at an edit or a command reaches the model before the
action takes effect.

What a hook gives as context before a tool reaches the model beside the tool's result,
after the tool ran (seen in Claude Code and Codex); a deny is read before.  So the first
call a note is due at, when the note was not given whole in this context window (at the
start, with a prompt, at a read of the file), is held: denied through the harness's own
contract (Claude Code's and Codex's `permissionDecision: "deny"`, Gemini CLI's BeforeTool
`decision: "deny"`), the reason carrying the notes; the same call made again passes.  The
hook input here is each harness's own (Codex's checked against its published input
schema), and each deny against the harness's output contract.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from builders import add
from conftest import run_qem
from test_hooks import CLAUDE_DENY, claude, codex_schema, gemini, hook, project, reply_of  # noqa: F401 (a fixture)

from qem_edit.base.harness import shell_files
from qem_edit.storage.store import Store
from qem_edit.system import files, ledger

HELD = "qem held this call, before it ran, so that you read the notes below first"
AGAIN = "make the same call again now"
# google-gemini/gemini-cli docs/hooks/reference.md, "BeforeTool": `decision: "deny"` stops the
# tool, and `reason` is sent to the agent as the tool's error.
GEMINI_DENY = {"type": "object", "additionalProperties": False, "required": ["decision", "reason"],
               "properties": {"decision": {"const": "deny"}, "reason": {"type": "string", "minLength": 1}}}
PATCH = "*** Begin Patch\n*** Update File: src/lock.py\n@@\n-    pass\n+    return\n*** End Patch\n"


def edit_of(top: Path, path: str) -> dict:
    return {"tool_name": "Edit", "tool_input": {"file_path": str(top / path), "old_string": "pass",
                                                 "new_string": "return"}}


def codex_reply(top: Path, event: str, session: str, **payload: object) -> tuple[str, str]:
    """A Codex hook's reply, as Codex reads it: ("", "") nothing, ("context", text), or
    ("deny", reason); the input is one Codex sends and the output meets its schema and its
    parser's rules (codex-rs/hooks/src/engine/output_parser.rs: a deny needs a non-empty
    reason; no continue, stopReason or suppressOutput)."""
    data = {"session_id": session, "transcript_path": None, "cwd": str(top), "hook_event_name": event,
            "model": "gpt-5", "permission_mode": "default", "turn_id": "t1", **payload}
    jsonschema.validate(data, codex_schema(event, "input"))
    done = hook(top, "codex", event, data)
    assert done.returncode == 0, done.stderr
    if not done.stdout:
        return "", ""
    reply = json.loads(done.stdout)
    jsonschema.validate(reply, codex_schema(event, "output"))
    assert set(reply) == {"hookSpecificOutput"}
    specific = reply["hookSpecificOutput"]
    if "permissionDecision" in specific:
        assert set(specific) == {"hookEventName", "permissionDecision", "permissionDecisionReason"}
        assert specific["permissionDecision"] == "deny" and specific["permissionDecisionReason"].strip()
        return "deny", specific["permissionDecisionReason"]
    assert set(specific) == {"hookEventName", "additionalContext"}
    return "context", specific["additionalContext"]


# -- Claude Code -----------------------------------------------------------------------------------


def test_an_edit_whose_notes_were_not_given_is_held_and_the_same_call_again_passes(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    done = hook(top, "claude", "PreToolUse", {"session_id": "s1", **edit_of(top, "src/lock.py")})
    reply = json.loads(done.stdout)
    jsonschema.validate(reply, CLAUDE_DENY)  # the hook's only output: the deny, exit 0
    reason = reply["hookSpecificOutput"]["permissionDecisionReason"]
    assert reason.startswith(HELD) and AGAIN in reason and "not an error" in reason
    assert "# Project memory (qem), before this edit" in reason
    assert f"- [#{project['lock']}] gotcha/medium · agent-recorded, verify · anchored to src/lock.py\n" \
           "  Release the lock before the restart" in reason  # whole
    assert claude(top, "PreToolUse", **edit_of(top, "src/lock.py")) == ""  # the same call made again passes
    write = {"tool_name": "Write", "tool_input": {"file_path": str(top / "src/lock.py"), "content": ""}}
    assert claude(top, "PreToolUse", **write) == ""  # nothing is held twice
    assert claude(top, "PreToolUse", **edit_of(top, "README.md")) == ""  # nothing due: never held


def test_a_command_is_held_before_it_runs_in_either_shell(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    run = {"tool_name": "Bash", "tool_input": {"command": "alembic upgrade head", "description": "migrate"}}
    reason = claude(top, "PreToolUse", held=True, **run)
    assert "# Project memory (qem), before this command" in reason and f"[#{project['migrate']}]" in reason
    assert "when-run alembic*" in reason and AGAIN in reason
    assert claude(top, "PreToolUse", **run) == ""
    assert claude(top, "PreToolUse", tool_name="Bash", tool_input={"command": "ls -la"}) == ""
    both = claude(top, "PreToolUse", session="b2", held=True, tool_name="Bash",
                  tool_input={"command": "cat src/lock.py && alembic upgrade head"})
    assert both.index(f"[#{project['migrate']}]") < both.index(f"[#{project['lock']}]")  # the command's own first
    assert "# Project memory (qem), before this command" in both
    power = {"tool_name": "PowerShell", "tool_input": {"command": "alembic upgrade head"}}
    assert f"[#{project['migrate']}]" in claude(top, "PreToolUse", session="p1", held=True, **power)


def test_notes_given_whole_earlier_in_the_window_hold_nothing(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    push = run_qem("add", "Push only with the release tag", "-k", "directive", "--when-run", "git push*",
                   cwd=top).stdout.strip()
    start = claude(top, "SessionStart", source="startup")
    assert f"[#{push}]" in start
    assert claude(top, "PreToolUse", tool_name="Bash", tool_input={"command": "git push origin main"}) == ""
    named = claude(top, "UserPromptSubmit", prompt="Fix the restart bug in src/lock.py")
    assert f"[#{project['lock']}]" in named
    assert claude(top, "PreToolUse", **edit_of(top, "src/lock.py")) == ""  # given with the prompt


def test_a_new_window_after_a_compaction_holds_again_once(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    assert f"[#{project['lock']}]" in claude(top, "PreToolUse", held=True, **edit_of(top, "src/lock.py"))
    assert claude(top, "PreToolUse", **edit_of(top, "src/lock.py")) == ""
    claude(top, "PreCompact", trigger="auto", custom_instructions="")
    claude(top, "SessionStart", source="compact")
    assert f"[#{project['lock']}]" in claude(top, "PreToolUse", held=True, **edit_of(top, "src/lock.py"))
    assert claude(top, "PreToolUse", **edit_of(top, "src/lock.py")) == ""


def test_a_read_is_never_held_and_gives_what_the_edit_would(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    every_edit = run_qem("add", "Run the formatter after every edit", "-k", "operational", "--on", "edit",
                         cwd=top).stdout.strip()
    every_read = run_qem("add", "Generated files say so in their first line", "-k", "finding", "--on", "read",
                         cwd=top).stdout.strip()
    done = hook(top, "claude", "PreToolUse", {"session_id": "r1", "tool_name": "Read",
                                              "tool_input": {"file_path": str(top / "src/lock.py")}})
    channel, read = reply_of(done, "PreToolUse")
    assert channel == "context"
    for note in (project["lock"], every_edit, every_read):
        assert f"[#{note}]" in read
    assert claude(top, "PreToolUse", session="r1", **edit_of(top, "src/lock.py")) == ""  # read, then edit: no hold


def test_a_call_whose_notes_do_not_fit_is_held_once_and_the_rest_go_as_context(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    from qem_edit.base.decisions import NewNote
    from qem_edit.system.anchors import blob_oid

    anchor = (("src/lock.py", blob_oid((top / "src" / "lock.py").read_bytes())),)
    with Store.open(top / ".qem") as store:
        for i in range(60):
            new = NewNote("gotcha", "medium", "agent", f"Lock rule {i:03d}: " + "y" * 300, anchors=anchor)
            store.write(lambda tx: tx.create(new, "tester"))
    held = claude(top, "PreToolUse", held=True, **edit_of(top, "src/lock.py"))
    assert len(held) <= 10_000 and "more notes did not fit" in held.rsplit("\n", 1)[1]
    rest = claude(top, "PreToolUse", **edit_of(top, "src/lock.py"))  # the same call again passes
    assert rest.startswith("# Project memory (qem), before this edit") and "Lock rule" in rest
    shown = {line.split("]")[0] for text in (held, rest) for line in text.split("\n") if line.startswith("- [#")}
    assert not {line.split("]")[0] for line in held.split("\n") if line.startswith("- [#")} & \
        {line.split("]")[0] for line in rest.split("\n") if line.startswith("- [#")}  # nothing given twice
    assert len(shown) > 30


# -- Codex ------------------------------------------------------------------------------------------


def test_codex_reads_with_cat_then_patches_without_a_hold(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    channel, read = codex_reply(top, "PreToolUse", "c1", tool_name="Bash", tool_use_id="u1",
                                tool_input={"command": "cat src/lock.py"})
    assert channel == "context" and "\n  Release the lock before the restart" in read
    assert codex_reply(top, "PreToolUse", "c1", tool_name="apply_patch", tool_use_id="u2",
                       tool_input={"command": PATCH}) == ("", "")
    channel, text = codex_reply(top, "PreToolUse", "c2", tool_name="Bash", tool_use_id="u3",
                                tool_input={"command": "sed -n '1,40p' src/lock.py | nl"})
    assert channel == "context" and f"[#{project['lock']}]" in text


def test_codex_patch_by_tool_or_by_shell_heredoc_is_held_like_an_edit(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    channel, reason = codex_reply(top, "PreToolUse", "c3", tool_name="apply_patch", tool_use_id="u1",
                                  tool_input={"command": PATCH})
    assert channel == "deny" and reason.startswith(HELD) and f"[#{project['lock']}]" in reason
    assert codex_reply(top, "PreToolUse", "c3", tool_name="apply_patch", tool_use_id="u2",
                       tool_input={"command": PATCH}) == ("", "")
    heredoc = f"apply_patch <<'PATCH'\n{PATCH}PATCH\n"
    channel, reason = codex_reply(top, "PreToolUse", "c4", tool_name="Bash", tool_use_id="u3",
                                  tool_input={"command": heredoc})
    assert channel == "deny" and "before this command" in reason and "\n  Release the lock before the restart" in reason
    assert codex_reply(top, "PreToolUse", "c4", tool_name="Bash", tool_use_id="u4",
                       tool_input={"command": heredoc}) == ("", "")
    channel, reason = codex_reply(top, "PreToolUse", "c4", tool_name="Bash", tool_use_id="u5",
                                  tool_input={"command": "alembic upgrade head"})
    assert channel == "deny" and f"[#{project['migrate']}]" in reason


# -- Gemini CLI ------------------------------------------------------------------------------------


def test_gemini_holds_before_the_tool_and_gives_reads_whole_after_them(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    write = {"tool_name": "write_file", "tool_input": {"file_path": str(top / "src/lock.py"), "content": "x"}}
    held = gemini(top, "BeforeTool", **write)
    jsonschema.validate(held, GEMINI_DENY)
    assert held["reason"].startswith(HELD) and f"[#{project['lock']}]" in held["reason"]
    assert gemini(top, "BeforeTool", **write) == {}  # the same call again runs
    assert gemini(top, "AfterTool", **write, tool_response={"llmContent": "ok"}) == {}  # given at the hold
    many = gemini(top, "AfterTool", session="g2", tool_name="read_many_files",
                  tool_input={"include": ["src/lock.py", "src/**/*.md"]}, tool_response={"llmContent": "..."})
    assert "\n  Release the lock before the restart" in many["hookSpecificOutput"]["additionalContext"]
    replace = {"tool_name": "replace", "tool_input": {"file_path": str(top / "src/lock.py"), "old_string": "pass",
                                                      "new_string": "return"}}
    assert gemini(top, "BeforeTool", session="g2", **replace) == {}  # read first: nothing to hold
    shell = gemini(top, "BeforeTool", session="g2", tool_name="run_shell_command",
                   tool_input={"command": "alembic upgrade head"})
    jsonschema.validate(shell, GEMINI_DENY)
    assert gemini(top, "BeforeTool", session="g3", tool_name="read_file",
                  tool_input={"file_path": str(top / "src/lock.py")}) == {}  # a read is never held
    after = gemini(top, "AfterTool", session="g4", **write, tool_response={"llmContent": "ok"})
    assert "decision" not in after  # after the tool, a deny would only hide its result: the notes go as context
    assert f"[#{project['lock']}]" in after["hookSpecificOutput"]["additionalContext"]


# -- never on a failure; off for a project -----------------------------------------------------------


def test_a_damaged_ledger_holds_nothing_in_its_window(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    claude(top, "SessionStart", session="d", source="startup")
    [book] = (top / ".qem" / "sessions").glob("*.json")
    book.write_text('{"v":1,"epoch":"x","given":{}}')
    said = claude(top, "PreToolUse", session="d", **edit_of(top, "src/lock.py"))  # context, not a hold
    assert f"[#{project['lock']}]" in said
    other = {"tool_name": "Write", "tool_input": {"file_path": str(top / "src/index/a.py"), "content": ""}}
    assert f"[#{project['index']}]" in claude(top, "PreToolUse", session="d", **other)


def test_a_store_that_cannot_be_read_or_a_ledger_lock_that_times_out_holds_nothing(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    state = top / ".qem"
    sessions = state / "sessions"
    sessions.mkdir(exist_ok=True)
    with files.locked(sessions / f"{ledger._name('claude:t1')}.lock", 1.0):  # another hook of the session, stuck
        done = hook(top, "claude", "PreToolUse", {"session_id": "t1", **edit_of(top, "src/lock.py")})
    assert (done.returncode, done.stdout) == (0, b"") and b"qem hook:" in done.stderr
    assert claude(top, "PreToolUse", session="t1", held=True, **edit_of(top, "src/lock.py"))  # nothing recorded


@pytest.mark.parametrize("fails", ["open", "read"])
def test_a_memory_that_fails_to_open_or_to_read_holds_nothing(project, monkeypatch, fails: str) -> None:  # type: ignore[no-untyped-def]
    from qem_edit.base import errors
    from qem_edit.base.harness import CLAUDE
    from qem_edit.reads import delivery
    from qem_edit.shells import hookrun

    def broken(*args: object, **kwargs: object) -> object:
        raise errors.StoreUnwritable("the disk went away") if fails == "open" else OSError(5, "I/O error")

    monkeypatch.setattr(Store, "open", broken) if fails == "open" else monkeypatch.setattr(delivery, "hits", broken)
    top = project["top"]
    raw = json.dumps({"session_id": "f1", "cwd": str(top), **edit_of(top, "src/lock.py")}).encode()
    assert hookrun.run(CLAUDE, "PreToolUse", raw) == ("", 0)
    monkeypatch.undo()
    assert f"[#{project['lock']}]" in claude(top, "PreToolUse", session="f1", held=True, **edit_of(top, "src/lock.py"))


def test_a_ledger_that_cannot_be_written_holds_nothing(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    (top / ".qem" / "sessions").write_text("not a folder")
    done = hook(top, "claude", "PreToolUse", {"session_id": "w", **edit_of(top, "src/lock.py")})
    assert (done.returncode, done.stdout) == (0, b"")


def test_holding_is_turned_off_and_on_for_a_project_by_setup(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    off = run_qem("setup", "claude", "--no-hold", cwd=top)
    assert off.returncode == 0, off.stderr
    assert "[delivery]\nhold = false\n" in (top / ".qem" / "config.toml").read_text()
    assert "hold" in off.stdout and "config.toml" in off.stdout
    said = claude(top, "PreToolUse", session="o1", **edit_of(top, "src/lock.py"))  # as context, after the tool
    assert said.startswith("# Project memory (qem), before this edit") and f"[#{project['lock']}]" in said
    assert run_qem("setup", "claude", "--check", cwd=top).returncode == 0  # the setting is not a hook's
    assert "holding is off" in run_qem("setup", "codex", cwd=top).stdout  # a plain run says which it is
    on = run_qem("setup", "claude", "--hold", cwd=top)
    assert on.returncode == 0, on.stderr
    assert f"[#{project['lock']}]" in claude(top, "PreToolUse", session="o2", held=True, **edit_of(top, "src/lock.py"))
    assert "holding is on" in run_qem("setup", "claude", cwd=top).stdout
    both = run_qem("setup", "claude", "--hold", "--no-hold", cwd=top)
    assert both.returncode == 2 and "--hold and --no-hold" in both.stderr


def test_a_hold_setting_that_is_not_true_or_false_holds_nothing_and_is_named(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    config = top / ".qem" / "config.toml"
    config.write_text(config.read_text() + '\n[delivery]\nhold = "no"\n')
    said = claude(top, "PreToolUse", session="b1", **edit_of(top, "src/lock.py"))
    assert f"[#{project['lock']}]" in said  # the notes go as context
    assert "[delivery] hold" in (top / ".qem" / "sessions" / "hooks.log").read_text()
    added = run_qem("add", "Another note", "-k", "finding", cwd=top)
    assert added.returncode == 2 and "[delivery] hold must be true or false" in added.stderr


@pytest.mark.parametrize("tool, words", [("Read", '"additionalContext"'), ("Edit", '"permissionDecision": "deny"')])
def test_a_hook_imports_no_toml_reader_to_hold_or_not(project, tool: str, words: str) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    run_qem("setup", "claude", "--hold", cwd=top)  # `[delivery] hold = true`, as qem writes it
    data = json.dumps({"session_id": "i1", "cwd": str(top), "hook_event_name": "PreToolUse", "tool_name": tool,
                       "tool_input": {"file_path": str(top / "src/lock.py")}})
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "qem_edit", "hook", "claude", "PreToolUse"],
                          input=data, capture_output=True, text=True, cwd=top)
    assert done.returncode == 0 and "Release the lock" in done.stdout and words in done.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time")}
    assert "tomllib" not in imported and "typer" not in imported


# -- what a shell command reads and edits ---------------------------------------------------------


@pytest.mark.parametrize("command, reads, edits", [
    ("cat src/lock.py", ("src/lock.py",), ()),
    ("sed -n '1,80p' src/lock.py | head -20", ("src/lock.py",), ()),
    ('grep -n "a|b" src/lock.py src/x.py && rg foo', ("src/lock.py", "src/x.py"), ()),
    ("rg -n --glob '*.py' release src/lock.py", ("src/lock.py",), ()),
    ("grep -e one -e two README.md", ("README.md",), ()),
    ("cd src && nl -ba lock.py", ("src/lock.py",), ()),
    ("head -n 5 a.py; tail -20 b.py 2>/dev/null", ("a.py", "b.py"), ()),
    ("less README.md", ("README.md",), ()),
    ("LC_ALL=C sudo cat /etc/hosts", ("/etc/hosts",), ()),
    ("sed -i 's/a/b/' src/lock.py", (), ("src/lock.py",)),
    ("apply_patch <<'PATCH'\n*** Begin Patch\n*** Update File: src/lock.py\n@@\n-a\n+b\n*** Add File: new.py\n+x\n"
     "*** Delete File: old.py\n*** End Patch\nPATCH", (), ("src/lock.py", "new.py", "old.py")),
    ("cat $(ls) *.py ~/x", (), ()),
    ('echo "unclosed', (), ()),
    ("git show HEAD:src/lock.py", (), ()),
    ("cat <<EOF > out.txt\ncat src/lock.py\nEOF", (), ()),  # a here-document's body is not a command
])
def test_the_files_a_shell_command_reads_and_edits(command: str, reads: tuple, edits: tuple) -> None:
    assert shell_files(command) == (reads, edits)


# -- what has ended --------------------------------------------------------------------------------


def test_a_note_past_its_end_is_given_marked_never_as_in_force_and_holds_nothing(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    then = {"QEM_NOW": "2026-01-05T10:00:00Z"}
    ended = run_qem("add", "The lock is patched until the January release", "-k", "gotcha", "--anchor",
                    "src/lock.py", "--ttl", "2d", cwd=top, env=then).stdout.strip()
    live = run_qem("add", "Migrations are frozen this week", "-k", "operational", "--when-run", "make migrate*",
                   "--expires", "2099-01-01", cwd=top, env=then).stdout.strip()
    mark = "PAST ITS END 2026-01-07T10:00:00Z (not in force; `qem expire --due` expires it)"
    read = claude(top, "PreToolUse", tool_name="Read", tool_input={"file_path": str(top / "src/lock.py")})
    assert f"- [#{ended}] gotcha/medium · agent-recorded, verify · {mark} · anchored to src/lock.py" in read
    # A held edit is held for a note in force, never for one past its end alone:
    assert claude(top, "PreToolUse", session="e1", held=True, **edit_of(top, "src/lock.py"))  # the lock note
    run_qem("revoke", project["lock"], "-m", "fixed", cwd=top)
    said = claude(top, "PreToolUse", session="e2", **edit_of(top, "src/lock.py"))  # context, not a hold
    assert f"[#{ended}]" in said and mark in said
    deliver = json.loads(run_qem("deliver", "edit", "--path", "src/lock.py", "--json", cwd=top).stdout)
    [given] = [g for g in deliver["given"] if g["short"] == ended]
    assert (given["expires"], given["past_end"]) == ("2026-01-07T10:00:00Z", True)
    shell = json.loads(run_qem("deliver", "shell", "--command", "make migrate", "--json", cwd=top).stdout)
    assert [(g["expires"], g["past_end"]) for g in shell["given"]] == [("2099-01-01T00:00:00Z", False)]
    status = run_qem("status", ended, cwd=top).stdout
    assert f"#{ended} current: no (PAST ITS END 2026-01-07T10:00:00Z: not in force;" in status
    data = json.loads(run_qem("status", ended, "--json", cwd=top).stdout)
    assert (data["expires"], data["past_end"]) == ("2026-01-07T10:00:00Z", True)
    assert run_qem("status", live, cwd=top).stdout.strip().endswith("; ends 2099-01-01T00:00:00Z")
    rule = run_qem("add", "Freeze merges during the audit", "-k", "directive", "--ttl", "2d", cwd=top,
                   env=then).stdout.strip()
    start = claude(top, "SessionStart", session="e4", source="startup")  # the two tiers mark it too
    assert f"- [#{rule}] directive/medium · {mark} · Freeze merges during the audit" in start
    listed = json.loads(run_qem("deliver", "start", "--json", cwd=top).stdout)["given"]
    assert [(g["expires"], g["past_end"]) for g in listed if g["short"] == rule] == [("2026-01-07T10:00:00Z", True)]
    assert all(g["past_end"] is False for g in listed if g["short"] != rule)
    assert run_qem("expire", "--due", cwd=top).returncode == 0
    assert f"[#{ended}]" not in claude(top, "PreToolUse", session="e3", tool_name="Read",
                                       tool_input={"file_path": str(top / "src/lock.py")})  # swept: gone
    assert f"[#{rule}]" not in claude(top, "SessionStart", session="e5", source="startup")


def test_no_hold_where_there_is_no_memory_or_its_table_cannot_be_edited_changes_nothing(project, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from builders import code_repository

    bare = code_repository(tmp_path / "bare", {"a.py": "x = 1\n"})
    done = run_qem("setup", "claude", "--no-hold", cwd=bare)
    assert done.returncode == 2 and "no memory at" in done.stderr and "Traceback" not in done.stderr
    assert not (bare / ".claude").exists() and not (bare / ".qem").exists()
    top = project["top"]
    config = top / ".qem" / "config.toml"
    config.write_text("delivery = { hold = true }\n" + config.read_text())  # an inline table: not edited as text
    before = config.read_bytes()
    done = run_qem("setup", "claude", "--no-hold", cwd=top)
    assert done.returncode == 2 and "cannot edit its [delivery] table" in done.stderr
    assert config.read_bytes() == before and not (top / ".claude").exists()
    plugin = run_qem("setup", "claude", "--plugin", str(tmp_path / "plugins"), "--no-hold", cwd=top)
    assert plugin.returncode == 2 and "a plugin serves every project" in plugin.stderr
    assert not (tmp_path / "plugins").exists()


@pytest.mark.parametrize("text", [
    "", '[memory]\nid = "x"\n', '[memory]\nid = "x"\n\n[delivery]\nhold = false\n', "[delivery]\nhold = true # on\n",
    "[delivery]\n  hold=false\n[export]\nauto = true\n", "delivery = { hold = false }\n", '[delivery]\nhold = "no"\n',
    "[delivery.x]\nhold = true\n[delivery]\nhold = false\n", "[memory]\ndelivery.hold = false\n",
    'x = """\n[delivery]\nhold = false\n"""\n', "[delivery]\nx = [\n  [1],\n]\nhold = false\n",
    "# delivery: off\n[delivery]\nhold = false\n", "[export]\nhold = 1\n",
])
def test_the_hold_setting_read_without_toml_is_what_toml_reads(text: str) -> None:
    """The hook reads a plain `[delivery] hold` without importing tomllib; whatever it
    reads so is what TOML reads, and anything else it leaves to TOML."""
    import tomllib

    from qem_edit.reads.session import _plain_hold

    plain = _plain_hold(text)
    delivery = tomllib.loads(text).get("delivery", {})
    if plain is not None:
        assert plain == (delivery.get("hold", True) if isinstance(delivery, dict) else None)
    assert plain is not None or "delivery" in text  # the plain forms are read plainly


_SPACE = st.sampled_from(["", " ", "  ", "\t", "\u00a0", "\u2003", "\x0c", "\x1f", "x", "."])
_END = st.sampled_from(["", "#", "# on", "#]", "x", "]", "=", "true"])
_TABLE_LINE = st.tuples(_SPACE, st.just("["), _SPACE, st.sampled_from(["delivery", "x-_1", "a.b", "a b", "", "é", "hold"]),
                        _SPACE, st.just("]"), _SPACE, _END).map("".join)
_HOLD_LINE = st.tuples(_SPACE, st.sampled_from(["hold", "holds"]), _SPACE, st.just("="), _SPACE,
                       st.sampled_from(["true", "false", "True", "tru", "falsey"]), _SPACE, _END).map("".join)
_PIECES = st.lists(st.sampled_from([" ", "\t", "\u00a0", "[", "]", "hold", "=", "true", "false", "#", "x", "\r\n"]),
                   max_size=12).map("".join)


@settings(max_examples=1000)
@given(_TABLE_LINE | _HOLD_LINE | _PIECES | st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())))
def test_a_config_line_is_read_as_its_pattern_reads_it(text: str) -> None:
    """The hook reads a `[table]` line and a `hold = true|false` line as the patterns it
    replaced read them (`\\s` any of str.strip's spaces), with no regular expression engine."""
    import re

    from qem_edit.reads.session import _hold_line, _table

    for line in text.splitlines():
        header = re.fullmatch(r"\s*\[\s*([A-Za-z0-9_-]+)\s*\]\s*(?:#.*)?", line)
        hold = re.fullmatch(r"\s*hold\s*=\s*(true|false)\s*(?:#.*)?", line)
        assert _table(line) == (header[1] if header else None), line
        assert _hold_line(line) == (hold[1] == "true" if hold else None), line
