"""`qem hook HARNESS EVENT`: memory delivered through each harness's own hooks, at the
moment it matters, in exactly the harness's output contract.

The contracts: Codex publishes a JSON Schema for every hook event's input and output
(tests/contracts/codex/, from openai/codex `codex-rs/hooks/schema/generated/`): every
input here is checked against its schema, every output qem prints too.  Claude Code and
Gemini CLI publish no schema for hook output; their documented shapes are written out
below as schemas, with the page each is read from (docs/AGENTS.md cites them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema
import pytest
from builders import add, code_repository
from conftest import run_qem

from qem_edit.storage.store import Store

CONTRACTS = Path(__file__).parent / "contracts"

# https://code.claude.com/docs/en/hooks, "JSON output" and "SessionStart/UserPromptSubmit/PreToolUse/SubagentStart
# decision control": context goes in hookSpecificOutput.additionalContext, with the event's name.
CLAUDE_CONTEXT = {
    "type": "object", "additionalProperties": False, "required": ["hookSpecificOutput"],
    "properties": {"hookSpecificOutput": {
        "type": "object", "additionalProperties": False, "required": ["hookEventName", "additionalContext"],
        "properties": {"hookEventName": {"enum": ["SessionStart", "UserPromptSubmit", "PreToolUse", "SubagentStart"]},
                       "additionalContext": {"type": "string", "maxLength": 10_000}}}},
}
# Same page, "PreToolUse decision control": `permissionDecision: "deny"` stops the tool, and
# `permissionDecisionReason` is shown to the model.
CLAUDE_DENY = {
    "type": "object", "additionalProperties": False, "required": ["hookSpecificOutput"],
    "properties": {"hookSpecificOutput": {
        "type": "object", "additionalProperties": False,
        "required": ["hookEventName", "permissionDecision", "permissionDecisionReason"],
        "properties": {"hookEventName": {"const": "PreToolUse"}, "permissionDecision": {"const": "deny"},
                       "permissionDecisionReason": {"type": "string", "minLength": 1}}}},
}
# Same page, "Stop and SubagentStop": `decision: "block"` with the reason the agent is given.
CLAUDE_STOP = {"type": "object", "additionalProperties": False, "required": ["decision", "reason"],
               "properties": {"decision": {"const": "block"}, "reason": {"type": "string", "minLength": 1}}}
# google-gemini/gemini-cli packages/core/src/hooks/types.ts (HookOutput, getAdditionalContext):
# stdout is JSON; additionalContext a string under hookSpecificOutput; {} is no context.
GEMINI_OUTPUT = {
    "type": "object", "additionalProperties": False,
    "properties": {"hookSpecificOutput": {
        "type": "object", "additionalProperties": False, "required": ["hookEventName", "additionalContext"],
        "properties": {"hookEventName": {"type": "string"}, "additionalContext": {"type": "string"}}},
        "decision": {"enum": ["deny"]}, "reason": {"type": "string"}},
}
CODEX_FILES = {"SessionStart": "session-start", "SubagentStart": "subagent-start",
               "UserPromptSubmit": "user-prompt-submit", "PreToolUse": "pre-tool-use",
               "PreCompact": "pre-compact", "Stop": "stop", "SessionEnd": "session-end"}
CODE = {
    "src/lock.py": "def release():\n    pass\n",
    "src/index/build.py": "def build():\n    pass\n",
    "db/migrate.py": "x = 1\n",
    "README.md": "# app\n",
}


def codex_schema(event: str, side: str) -> dict:
    return json.loads((CONTRACTS / "codex" / f"{CODEX_FILES[event]}.command.{side}.schema.json").read_text("utf-8"))


@pytest.fixture
def project(tmp_path: Path) -> dict[str, object]:
    """A git repository with a memory: two directives, a high and a low task, a gotcha
    anchored to src/lock.py, one declaring a path pattern, one a command pattern, one
    naming a term in backticks."""
    from qem_edit.base.decisions import NewNote
    from qem_edit.system.anchors import blob_oid

    top = code_repository(tmp_path / "app", CODE)
    lock = (("src/lock.py", blob_oid(CODE["src/lock.py"].encode())),)
    notes = {
        "rule": NewNote("directive", "high", "agent", "Run the tests inside .venv"),
        "rule2": NewNote("directive", "medium", "agent", "Never push to main"),
        "task": NewNote("task", "high", "agent", "Finish the index rebuild"),
        "later": NewNote("task", "low", "agent", "Someday tidy the docs"),
        "lock": NewNote("gotcha", "medium", "agent", "Release the lock before the restart", anchors=lock),
        "index": NewNote("gotcha", "medium", "agent", "The index builder holds the write lock",
                         triggers=(("path", "src/index/**"),)),
        "migrate": NewNote("operational", "medium", "agent", "Migrations go through make migrate",
                           triggers=(("run", "alembic*"),)),
        "term": NewNote("finding", "medium", "agent", "`Store.write` retries three times"),
    }
    assert run_qem("init", cwd=top).returncode == 0  # the memory as the CLI starts one
    made = {}
    with Store.open(top / ".qem") as store:  # written in one process: the CLI's ways in have tests of their own
        for key, new in notes.items():
            made[key] = store.note(store.write(lambda tx: tx.create(new, "tester")).id).shown
    return {"top": top, **made}


def hook(top: Path, harness: str, event: str, payload: dict, *, raw: bytes | None = None,
         cwd: Path | None = None) -> subprocess.CompletedProcess:
    data = raw if raw is not None else json.dumps({"cwd": str(top), "hook_event_name": event, **payload}).encode()
    return subprocess.run([sys.executable, "-m", "qem_edit", "hook", harness, event], input=data,
                          capture_output=True, cwd=cwd or top, timeout=60)


def reply_of(done: subprocess.CompletedProcess, event: str) -> tuple[str, str]:
    """What a Claude Code reply does, checked against its shape: ("", "") for nothing,
    ("context", text), or ("deny", the reason) for a held call."""
    assert done.returncode == 0, done.stderr
    if not done.stdout:
        return "", ""
    reply = json.loads(done.stdout)
    assert reply["hookSpecificOutput"]["hookEventName"] == event
    if "permissionDecision" in reply["hookSpecificOutput"]:
        jsonschema.validate(reply, CLAUDE_DENY)
        return "deny", reply["hookSpecificOutput"]["permissionDecisionReason"]
    jsonschema.validate(reply, CLAUDE_CONTEXT)
    return "context", reply["hookSpecificOutput"]["additionalContext"]


def context_of(done: subprocess.CompletedProcess, event: str) -> str:
    """The context a Claude Code reply gives (\"\" for none), the reply checked: not a hold."""
    channel, text = reply_of(done, event)
    assert channel != "deny", text
    return text


def claude(top: Path, event: str, session: str = "s1", held: bool = False, **payload: object) -> str:
    """The context a Claude Code hook gives; with `held`, the reason of the hold it must be."""
    base = {"session_id": session, "transcript_path": f"/home/u/.claude/projects/app/{session}.jsonl"}
    done = hook(top, "claude", event, {**base, **payload})
    if not held:
        return context_of(done, event)
    channel, text = reply_of(done, event)
    assert channel == "deny", (channel, text)
    return text


# -- Claude Code ----------------------------------------------------------------------------------


def test_a_session_start_gives_the_directives_and_high_tasks_in_order(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    said = claude(top, "SessionStart", source="startup")
    assert said.startswith("# Project memory (qem), at the start of this session\n\n")
    order = [project[k] for k in ("rule", "rule2", "task")]
    assert [said.index(f"[#{n}]") for n in order] == sorted(said.index(f"[#{n}]") for n in order)
    for absent in ("later", "lock", "index", "migrate", "term"):
        assert f"[#{project[absent]}]" not in said
    assert said.count("Recorded by an agent unless marked") == 1  # the default provenance said once
    assert said.count("Every directive") == 1 and said.count("at start") == 2  # each reason once, its group's
    assert ("## Every directive, at start and after compaction (2)\n\n"
            f"- [#{project['rule']}] directive/high · Run the tests inside .venv\n"
            f"- [#{project['rule2']}] directive/medium · Never push to main\n\n"
            "## Every high task, at start (1)\n\n"
            f"- [#{project['task']}] task/high · Finish the index rebuild") in said


def test_a_note_comes_once_a_session_and_again_after_a_compaction(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    assert claude(top, "SessionStart", source="startup")
    assert claude(top, "SessionStart", source="resume") == ""
    assert claude(top, "UserPromptSubmit", prompt="hello") == ""
    assert claude(top, "PreCompact", trigger="auto", custom_instructions="") == ""
    again = claude(top, "SessionStart", source="compact")
    assert again.startswith("# Project memory (qem), again after the compaction")
    assert f"[#{project['rule']}]" in again and f"[#{project['rule2']}]" in again
    assert f"[#{project['task']}]" not in again  # a high task comes at the start only
    assert claude(top, "UserPromptSubmit", prompt="next") == ""
    other = claude(top, "SessionStart", session="s2", source="startup")
    assert f"[#{project['rule']}]" in other  # another session has its own ledger


def test_a_harness_without_a_post_compaction_start_gets_it_at_the_next_prompt(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    claude(top, "SessionStart", source="startup")
    claude(top, "PreCompact", trigger="manual", custom_instructions="keep it short")
    said = claude(top, "UserPromptSubmit", prompt="go on")
    assert said.startswith("# Project memory (qem), for this prompt") and f"[#{project['rule']}]" in said


def test_a_read_gives_the_notes_of_its_file_whole_and_the_edit_after_it_nothing(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    read = claude(top, "PreToolUse", tool_name="Read", tool_input={"file_path": str(top / "src/lock.py")})
    assert read.startswith("# Project memory (qem), with this read (what an edit of the file would give)")
    assert f"[#{project['lock']}] gotcha/medium" in read and "anchored to src/lock.py" in read
    assert "\n  Release the lock before the restart" in read and "qem show" not in read  # whole
    edit = claude(top, "PreToolUse", tool_name="Edit",
                  tool_input={"file_path": str(top / "src/lock.py"), "old_string": "pass", "new_string": "return"})
    assert edit == ""  # given whole at the read: nothing to hold, nothing to say again
    assert claude(top, "PreToolUse", tool_name="Write", tool_input={"file_path": str(top / "src/lock.py"),
                                                                    "content": ""}) == ""
    deep = claude(top, "PreToolUse", held=True, tool_name="Write",
                  tool_input={"file_path": str(top / "src/index/new/x.py"), "content": ""})
    assert f"[#{project['index']}]" in deep and "when-path src/index/**" in deep
    assert claude(top, "PreToolUse", tool_name="Edit", tool_input={"file_path": str(top / "README.md")}) == ""
    assert claude(top, "PreToolUse", tool_name="Edit", tool_input={"file_path": "/elsewhere/src/lock.py"}) == ""


def test_a_folder_anchor_covers_the_files_under_it(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    folder = run_qem("add", "Everything in db is generated", "-k", "gotcha", "--anchor", "db", cwd=top).stdout.strip()
    said = claude(top, "PreToolUse", held=True, tool_name="Edit", tool_input={"file_path": str(top / "db/migrate.py")})
    assert f"[#{folder}]" in said and "anchored to db" in said


def test_a_shell_command_gives_the_notes_whose_pattern_it_matches(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    assert claude(top, "PreToolUse", tool_name="Bash", tool_input={"command": "ls -la"}) == ""
    said = claude(top, "PreToolUse", held=True, tool_name="Bash", tool_input={"command": "cd db && alembic upgrade head"})
    assert f"[#{project['migrate']}]" in said and "when-run alembic*" in said


def test_a_prompt_gives_the_notes_it_names(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    said = claude(top, "UserPromptSubmit", prompt="Why does Store.write hang when src/lock.py changes?")
    assert f"[#{project['term']}]" in said and "the prompt names `Store.write`" in said
    assert f"[#{project['lock']}]" in said and "the prompt names src/lock.py" in said
    assert claude(top, "UserPromptSubmit", session="s9", prompt="MyStore.write is fine") == ""


def test_a_note_changed_after_it_was_given_is_given_again_as_its_change(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    claude(top, "SessionStart", source="startup")
    assert run_qem("revoke", project["rule2"], "-m", "pushing to main is fine now", cwd=top).returncode == 0
    new = run_qem("supersede", project["rule"], "Run the tests inside .venv with -x", "-m", "faster",
                  cwd=top).stdout.strip()
    said = claude(top, "UserPromptSubmit", prompt="go")
    assert "Changed since given earlier in this session:" in said
    assert f"- [#{project['rule2']}] is now revoked (pushing to main is fine now): Never push to main" in said
    assert f"- [#{project['rule']}] was superseded by [#{new}] (faster); now:\n  Run the tests inside .venv with -x" in said
    assert claude(top, "UserPromptSubmit", prompt="again") == ""  # said once


def test_the_budget_holds_and_the_last_line_names_the_command_that_lists_the_rest(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    with Store.open(top / ".qem") as store:
        for i in range(150):
            add(store, f"Rule {i:03d}: " + "x" * 90, "directive")
    said = claude(top, "SessionStart", source="startup")
    assert len(said) <= 10_000
    last = said.rsplit("\n", 1)[1]
    assert last.startswith("… ") and "of them directives" in last and "`qem deliver start --skip=" in last
    command = last.split("`")[1].split()
    rest = run_qem(*command[1:], "--budget", "0", cwd=top).stdout
    shown = [line for line in said.split("\n") if line.startswith("- [#")]
    listed = [line for line in rest.split("\n") if line.startswith("- [#")]
    everything = [line for line in run_qem("deliver", "start", "--budget", "0", cwd=top).stdout.split("\n")
                  if line.startswith("- [#")]
    assert shown + listed == everything  # nothing lost, nothing twice
    assert int(last.split()[1].replace(",", "")) == len(listed)


# -- Codex ------------------------------------------------------------------------------------------


def codex(top: Path, event: str, session: str = "c1", **payload: object) -> str:
    schema = codex_schema(event, "input")
    data = {"session_id": session, "transcript_path": None, "cwd": str(top), "hook_event_name": event, **payload}
    if "model" in schema["properties"]:
        data["model"] = "gpt-5"
    for key in schema["required"]:  # what Codex always sends
        data.setdefault(key, {"permission_mode": "default", "turn_id": "t1"}.get(key))
    jsonschema.validate(data, schema)  # the input is one Codex sends
    done = hook(top, "codex", event, data)
    assert done.returncode == 0, done.stderr
    if not done.stdout:
        return ""
    assert not done.stdout.lstrip().startswith(b"[")
    reply = json.loads(done.stdout)
    jsonschema.validate(reply, codex_schema(event, "output"))
    specific = reply.get("hookSpecificOutput", {})
    return specific.get("additionalContext") or specific.get("permissionDecisionReason") or reply.get("reason", "")


def test_codex_replies_meet_its_published_schemas(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    start = codex(top, "SessionStart", source="startup")
    assert f"[#{project['rule']}]" in start and len(start.encode()) <= 10_000
    patch = ("*** Begin Patch\n*** Update File: src/lock.py\n@@\n-    pass\n+    return\n"
             "*** Add File: src/index/extra.py\n+x = 1\n*** End Patch\n")
    edit = codex(top, "PreToolUse", tool_name="apply_patch", tool_use_id="u1", tool_input={"command": patch})
    assert f"[#{project['lock']}]" in edit and f"[#{project['index']}]" in edit
    shell = codex(top, "PreToolUse", tool_name="Bash", tool_use_id="u2", tool_input={"command": "alembic upgrade head"})
    assert f"[#{project['migrate']}]" in shell
    assert codex(top, "PreCompact", trigger="auto") == ""
    assert f"[#{project['rule']}]" in codex(top, "SessionStart", source="compact")
    prompt = codex(top, "UserPromptSubmit", prompt="does Store.write retry?")
    assert f"[#{project['term']}]" in prompt
    assert codex(top, "SessionEnd", reason="other") == ""


def test_codex_moves_a_patch_named_path(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    patch = "*** Begin Patch\n*** Update File: README.md\n*** Move to: src/lock.py\n@@\n-a\n+b\n*** End Patch\n"
    said = codex(top, "PreToolUse", tool_name="apply_patch", tool_use_id="u1", tool_input={"command": patch})
    assert f"[#{project['lock']}]" in said


# -- Gemini CLI ------------------------------------------------------------------------------------


def gemini(top: Path, event: str, session: str = "g1", **payload: object) -> dict:
    data = {"session_id": session, "transcript_path": "", "cwd": str(top), "hook_event_name": event,
            "timestamp": "2026-12-02T10:00:00Z", **payload}
    done = hook(top, "gemini", event, data)
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)  # always JSON: plain text would be shown to the user
    jsonschema.validate(reply, GEMINI_OUTPUT)
    return reply


def test_gemini_gets_json_always_and_context_where_its_contract_takes_it(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    start = gemini(top, "SessionStart", source="startup")
    assert f"[#{project['rule']}]" in start["hookSpecificOutput"]["additionalContext"]
    assert gemini(top, "BeforeAgent", prompt="hello") == {}
    read = gemini(top, "AfterTool", tool_name="read_file", tool_input={"file_path": str(top / "src/lock.py")},
                  tool_response={"llmContent": "def release()"})
    said = read["hookSpecificOutput"]["additionalContext"]
    assert "with this read" in said and "\n  Release the lock before the restart" in said  # whole: edits come next
    shell = gemini(top, "AfterTool", tool_name="run_shell_command", tool_input={"command": "alembic history"})
    assert f"[#{project['migrate']}]" in shell["hookSpecificOutput"]["additionalContext"]
    assert gemini(top, "SessionEnd", reason="exit") == {}


# -- never blocking the agent --------------------------------------------------------------------


@pytest.mark.parametrize("harness, event, nothing", [("claude", "SessionStart", b""), ("codex", "SessionStart", b""),
                                                     ("gemini", "SessionStart", b"{}\n")])
def test_failures_say_nothing_the_harness_would_misread_and_log_why(project, tmp_path: Path, harness: str,
                                                                     event: str, nothing: bytes) -> None:
    top = project["top"]
    for raw, why in ((b"not json", "qem hook: the hook's input is not JSON (Expecting value: line 1, column 1)"),
                     (b'{"a": 1,\n "b"}', "the hook's input is not JSON (Expecting ':' delimiter: line 2, column 5)"),
                     (b"[1, 2]", "qem hook: the hook's input is JSON but not an object (a list): nothing given"),
                     (b"[" * 100_000, "qem hook: the hook's input is not JSON (nested too deeply): nothing given"),
                     (b'{"session_id": "s", "cwd": "/", "source": "startup"}', None),
                     (b"\xff\xfe", "qem hook: the hook's input is not UTF-8 (byte 0): nothing given")):
        done = hook(top, harness, event, {}, raw=raw)
        assert (done.returncode, done.stdout) == (0, nothing), (raw, done)
        if why:
            assert why in done.stderr.decode() and "Error" not in done.stderr.decode(), done.stderr
    bare = tmp_path / "bare"
    bare.mkdir()
    none = hook(bare, harness, event, {"session_id": "s", "source": "startup"})
    assert (none.returncode, none.stdout) == (0, nothing)
    assert not (bare / ".qem").exists()  # a hook never starts a memory


def test_an_unreadable_memory_or_a_merge_in_progress_never_blocks(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    index = top / ".qem" / "index.db"
    index.write_bytes(b"this is not sqlite" * 100)
    said = claude(top, "SessionStart", source="startup")
    assert f"[#{project['rule']}]" in said  # a damaged index is rebuilt from the log
    (top / ".qem" / "events").chmod(0o000)
    try:
        done = hook(top, "claude", "UserPromptSubmit", {"session_id": "s1", "prompt": "x"})
        if os.geteuid() != 0:  # root reads through any mode
            assert (done.returncode, done.stdout) == (0, b"")
            assert "qem hook:" in done.stderr.decode()
            assert "UserPromptSubmit" in (top / ".qem" / "sessions" / "hooks.log").read_text()
    finally:
        (top / ".qem" / "events").chmod(0o755)
    mirror = top / "MEMORY.md"
    mirror.write_text("<<<<<<< HEAD\n- a\n=======\n- b\n>>>>>>> other\n")
    assert claude(top, "UserPromptSubmit", session="s5", prompt="Store.write?")  # reads the log, not the mirror


def test_stdout_holds_only_the_contract_even_with_notices(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    (top / ".qem" / "config.toml").write_text((top / ".qem" / "config.toml").read_text() + "\n[export]\nauto = true\n")
    done = hook(top, "codex", "SessionStart", {"session_id": "n1", "source": "startup", "transcript_path": None,
                                               "model": "m", "permission_mode": "default"})
    assert done.returncode == 0
    jsonschema.validate(json.loads(done.stdout), codex_schema("SessionStart", "output"))


def test_an_empty_memory_says_nothing(tmp_path: Path) -> None:
    top = code_repository(tmp_path / "e", {"a.py": "x\n"})
    assert run_qem("init", cwd=top).returncode == 0
    assert claude(top, "SessionStart", source="startup") == ""
    assert gemini(top, "SessionStart", source="startup") == {}


def test_the_argument_errors_are_named(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    wrong = hook(top, "cursor", "SessionStart", {})
    assert wrong.returncode == 2 and b"not a hook qem answers" in wrong.stderr
    unknown = hook(top, "claude", "PostToolUse", {"session_id": "s"})
    assert (unknown.returncode, unknown.stdout) == (0, b"")
    assert b"Claude Code has no PostToolUse hook qem answers" in unknown.stderr


# -- the ledger ------------------------------------------------------------------------------------


def test_the_ledger_is_private_ignored_by_git_and_goes_with_the_session(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    claude(top, "SessionStart", source="startup")
    sessions = top / ".qem" / "sessions"
    ledgers = list(sessions.glob("*.json"))
    assert len(ledgers) == 1 and ledgers[0].stat().st_mode & 0o777 == 0o600
    assert sessions.stat().st_mode & 0o777 == 0o700
    assert "s1" not in ledgers[0].name  # named by a hash of the session id
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=top,
                            capture_output=True, text=True).stdout
    assert "sessions" not in status
    subprocess.run(["git", "add", "-A"], cwd=top, check=True)
    staged = subprocess.run(["git", "diff", "--cached", "--name-only"], cwd=top, capture_output=True, text=True).stdout
    assert "sessions" not in staged
    claude(top, "SessionEnd", reason="prompt_input_exit")
    assert list(sessions.glob("*.json")) == []


def test_old_sessions_are_swept_at_a_start_once_an_hour(project) -> None:  # type: ignore[no-untyped-def]
    """A start sweeps the ledgers untouched for MAX_AGE_DAYS, and the oldest past
    MAX_SESSIONS, where no start swept in the last SWEEP_EVERY_S: a start looks at one
    file's time, not at the folder's every ledger."""
    from qem_edit.system import ledger

    top = project["top"]
    sessions = top / ".qem" / "sessions"

    def ledger_of(key: str) -> Path:
        return Path(ledger._file(ledger.folder(top / ".qem"), key))

    def an_hour_on() -> None:
        hour_ago = time.time() - ledger.SWEEP_EVERY_S - 1
        os.utime(sessions / ledger.SWEPT, (hour_ago, hour_ago))

    claude(top, "SessionStart", session="old", source="startup")
    old = next(sessions.glob("*.json"))
    claude(top, "SessionStart", session="new", source="startup")  # (swept: the folder's first sweep)
    past = time.time() - 15 * 86400
    os.utime(old, (past, past))
    claude(top, "SessionStart", session="newer", source="startup")
    assert old.exists()  # (the last start swept a moment ago)
    an_hour_on()
    claude(top, "SessionStart", session="newest", source="startup")
    assert not old.exists() and len(list(sessions.glob("*.json"))) == 3

    for i in range(ledger.MAX_SESSIONS + 5):  # the oldest first, a second apart
        with ledger.session(top / ".qem", f"claude:many{i}") as book:
            book.give("n1", True, "e1")
        made = ledger_of(f"claude:many{i}")
        os.utime(made, (past + 86400 * 10 + i, past + 86400 * 10 + i))
    claude(top, "SessionStart", session="more", source="startup")
    assert len(list(sessions.glob("*.json"))) == ledger.MAX_SESSIONS + 9  # (swept within the hour: not again)
    an_hour_on()
    claude(top, "SessionStart", session="last", source="startup")
    left = list(sessions.glob("*.json"))
    assert ledger.MAX_SESSIONS <= len(left) <= ledger.MAX_SESSIONS + 1
    assert not ledger_of("claude:many0").exists() and ledger_of(f"claude:many{ledger.MAX_SESSIONS + 4}").exists()


def test_hooks_of_one_session_side_by_side_give_each_note_once(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    files = [str(top / "src/lock.py")] * 4 + [str(top / "src/index/build.py")] * 4

    def edit(path: str) -> tuple[str, str]:
        base = {"session_id": "s1", "tool_name": "Edit", "tool_input": {"file_path": path}}
        return reply_of(hook(top, "claude", "PreToolUse", base), "PreToolUse")

    with ThreadPoolExecutor(8) as pool:
        said = list(pool.map(edit, files))
    assert sum(f"[#{project['lock']}]" in text for _, text in said) == 1
    assert sum(f"[#{project['index']}]" in text for _, text in said) == 1
    assert sorted(channel for channel, _ in said) == [""] * 6 + ["deny"] * 2  # one held call a file


# -- the Stop hook (opt-in) ------------------------------------------------------------------------


def test_stop_asks_once_only_when_the_session_wrote_no_note(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    claude(top, "SessionStart", source="startup")
    first = hook(top, "claude", "Stop", {"session_id": "s1", "stop_hook_active": False})
    reply = json.loads(first.stdout)
    jsonschema.validate(reply, CLAUDE_STOP)
    assert "record it now with the qem MCP tool `add`" in reply["reason"] and "gotcha" in reply["reason"]
    assert hook(top, "claude", "Stop", {"session_id": "s1", "stop_hook_active": False}).stdout == b""  # once
    assert hook(top, "claude", "Stop", {"session_id": "s2", "stop_hook_active": True}).stdout == b""  # loop guard
    claude(top, "SessionStart", session="s3", source="startup")
    assert run_qem("add", "The cache is warm after boot", "-k", "finding", cwd=top).returncode == 0
    assert hook(top, "claude", "Stop", {"session_id": "s3", "stop_hook_active": False}).stdout == b""
    codex_reply = json.loads(hook(top, "codex", "Stop", {"session_id": "c9", "turn_id": "t", "stop_hook_active": False,
                                                          "transcript_path": None, "model": "m",
                                                          "permission_mode": "default",
                                                          "last_assistant_message": None}).stdout)
    jsonschema.validate(codex_reply, codex_schema("Stop", "output"))
    gemini_reply = gemini(top, "AfterAgent", session="g9", prompt="x", prompt_response="y", stop_hook_active=False)
    assert gemini_reply["decision"] == "deny" and gemini_reply["reason"]


# -- a user's own words ----------------------------------------------------------------------------


def test_a_note_the_user_typed_is_user_stated_without_the_agent_passing_anything(project) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    from test_mcp import failed, ok, session

    top = project["top"]
    claude(top, "UserPromptSubmit", session="u1", prompt="Please remember:  the staging database resets every night at 2am.")

    async def script() -> tuple:
        async with session(top) as s:
            typed = (await ok(s, "add", text="the staging database resets every night at 2am", kind="gotcha")).structured_content
            own = (await ok(s, "add", text="The staging database is shared with QA", kind="finding")).structured_content
            quoted = (await ok(s, "add", text="Staging resets every night at 2am.", kind="gotcha",
                               user_quote="resets every night at 2am")).structured_content
            refused = await failed(s, "add", text="Staging resets every night at 3am.", kind="gotcha",
                                   user_quote="resets every night at 3am")
            return typed, own, quoted, refused

    typed, own, quoted, refused = asyncio.run(script())
    assert typed["provenance"] == "user-stated"  # found whole in what the user typed, spaces aside
    assert own["provenance"] == "agent"
    assert quoted["provenance"] == "user-stated"
    assert "user_quote is not in what the user typed" in refused
    assert run_qem("query", "text~3am", cwd=top).stdout.count("[#") == 0  # the refusal wrote nothing


def test_a_memory_in_a_subfolder_is_found_by_the_hooks_setup_writes(tmp_path: Path) -> None:
    top = code_repository(tmp_path / "mono", {"app/src/lock.py": "x = 1\n", "README.md": "# mono\n"})
    app = top / "app"
    note = run_qem("add", "The app's lock is held across restarts", "-k", "gotcha", "--anchor", "src/lock.py",
                   "-w", ".", cwd=app).stdout.strip()  # the memory is the subfolder's
    assert (app / ".qem").is_dir() and not (top / ".qem").exists()
    assert run_qem("setup", "claude", cwd=app).returncode == 0
    settings = json.loads((top / ".claude" / "settings.json").read_text())
    command = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert command.endswith("hook claude PreToolUse -w app")
    assert json.loads((top / ".mcp.json").read_text())["mcpServers"]["qem"]["args"] == ["mcp", "-w", "app"]
    for session, where in enumerate((top, app, app / "src", top / ".git" / ".." / "app")):  # wherever the agent is
        payload = json.dumps({"session_id": f"m{session}", "cwd": str(where), "hook_event_name": "PreToolUse",
                              "tool_name": "Edit", "tool_input": {"file_path": str(app / "src" / "lock.py")}})
        done = subprocess.run([sys.executable, "-m", "qem_edit", *command.split()[1:]], input=payload, cwd=where,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        said = json.loads(done.stdout)["hookSpecificOutput"]["permissionDecisionReason"]  # held: not given yet
        assert f"[#{note}]" in said, (where, done.stderr)
    outside = json.dumps({"session_id": "m9", "cwd": str(tmp_path), "hook_event_name": "PreToolUse",
                          "tool_name": "Edit", "tool_input": {"file_path": str(app / "src" / "lock.py")}})
    done = subprocess.run([sys.executable, "-m", "qem_edit", *command.split()[1:]], input=outside, cwd=tmp_path,
                          capture_output=True, text=True, env={**os.environ, "CLAUDE_PROJECT_DIR": str(top)})
    reply = json.loads(done.stdout)["hookSpecificOutput"]  # left the tree: found from the project's folder
    assert f"[#{note}]" in reply.get("permissionDecisionReason", reply.get("additionalContext", "")), done.stderr
    assert run_qem("setup", "claude", "--check", cwd=app).returncode == 0


def test_a_hook_finds_its_memory_through_a_link_and_dot_dot(tmp_path: Path) -> None:
    """A working directory (or CLAUDE_PROJECT_DIR) spelled `LINK/..` is the folder above
    where the link leads, as the kernel reads it, not the folder above the link's own; a
    memory named `QEM_STORE=D/.qem/.` outside any git tree is the one in D, its work tree D
    (a hook names folders as strings: qem_edit.system.workspace)."""
    top = code_repository(tmp_path / "app", {"src/a.py": "x = 1\n"})
    assert run_qem("add", "a.py breaks unless x is 1", "-k", "gotcha", "--anchor", "src/a.py", cwd=top).returncode == 0
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "L").symlink_to(top / "src")
    edit = {"tool_name": "Edit", "tool_input": {"file_path": str(top / "src" / "a.py")}}
    for session, where, env in (("d1", f"{tmp_path}/out/L/..", {}),
                                ("d2", str(tmp_path), {"CLAUDE_PROJECT_DIR": f"{tmp_path}/out/L/.."})):
        data = json.dumps({"session_id": session, "cwd": where, "hook_event_name": "PreToolUse", **edit})
        done = subprocess.run([sys.executable, "-m", "qem_edit", "hook", "claude", "PreToolUse"], input=data,
                              cwd=tmp_path, capture_output=True, text=True, env={**os.environ, **env})
        assert "a.py breaks unless x is 1" in done.stdout, (where, env, done.stderr)
    plain = tmp_path / "plain"  # no git: the work tree is the memory's folder's parent
    (plain / "src").mkdir(parents=True)
    (plain / "src" / "a.py").write_text("x = 1\n")
    assert run_qem("add", "a.py breaks unless x is 1", "-k", "gotcha", "--anchor", "src/a.py", cwd=plain).returncode == 0
    data = json.dumps({"session_id": "d3", "cwd": str(plain), "hook_event_name": "PreToolUse",
                       "tool_name": "Edit", "tool_input": {"file_path": str(plain / "src" / "a.py")}})
    done = subprocess.run([sys.executable, "-m", "qem_edit", "hook", "claude", "PreToolUse"], input=data, cwd=plain,
                          capture_output=True, text=True, env={**os.environ, "QEM_STORE": f"{plain}/.qem/."})
    assert "a.py breaks unless x is 1" in done.stdout, done.stderr


@pytest.mark.parametrize("path", ["/a", "a", "/", ".", "", "a/b/.", "a/..", "/x/.qem/.", "/x/.qem/", "x//y", "./a",
                                  "../a/b", "a/./b/", "/a/b/c", "..", "../..", "a/b/../c/./", "//a", "//", "///a/b"])
def test_a_folder_is_held_by_the_folder_pathlib_names(path: str) -> None:
    from qem_edit.system.files import parent_name

    assert parent_name(path) == str(Path(path).parent)


def test_a_hook_that_finds_no_memory_says_why(tmp_path: Path) -> None:
    top = code_repository(tmp_path / "mono", {"app/a.py": "x = 1\n", "web/b.py": "y = 2\n"})
    assert run_qem("init", "-w", "app", cwd=top).returncode == 0
    payload = json.dumps({"session_id": "n", "cwd": str(top / "web"), "hook_event_name": "SessionStart",
                          "source": "startup"})
    wrong = subprocess.run([sys.executable, "-m", "qem_edit", "hook", "claude", "SessionStart", "-w", "nowhere"],
                           input=payload, cwd=top / "web", capture_output=True, text=True)
    assert (wrong.returncode, wrong.stdout) == (0, "")
    assert f"qem hook: no memory at {top / 'nowhere' / '.qem'} (-w nowhere from the work tree's top {top})" \
           in wrong.stderr
    none = subprocess.run([sys.executable, "-m", "qem_edit", "hook", "claude", "SessionStart"],
                          input=payload, cwd=top / "web", capture_output=True, text=True)
    assert (none.returncode, none.stdout) == (0, "") and "qem hook: no memory at" in none.stderr
    from_app = json.dumps({"session_id": "n", "cwd": str(top / "app"), "hook_event_name": "SessionStart",
                           "source": "startup"})
    near = subprocess.run([sys.executable, "-m", "qem_edit", "hook", "claude", "SessionStart", "-w", "app/app"],
                          input=from_app, cwd=top / "app", capture_output=True, text=True)
    assert "no memory at" in near.stderr  # and in the hooks log of the memory found from there
    assert "-w app/app from the work tree's top" in (top / "app" / ".qem" / "sessions" / "hooks.log").read_text()


# -- what a clone's commit or a damaged file cannot do -----------------------------------------------


def test_a_committed_link_in_place_of_the_ledgers_folder_is_refused_and_nothing_behind_it_touched(
        project, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    elsewhere = tmp_path / "conf"
    elsewhere.mkdir()
    for i in range(3):
        (elsewhere / f"s{i}.json").write_text("{}")
        os.utime(elsewhere / f"s{i}.json", (time.time() - 30 * 86400,) * 2)
    (top / ".qem" / "sessions").symlink_to(elsewhere)
    for source in ("startup", "resume"):
        done = hook(top, "claude", "SessionStart", {"session_id": "v", "source": source})
        assert (done.returncode, done.stdout) == (0, b"")
        assert b"not a private directory" in done.stderr
    assert sorted(p.name for p in elsewhere.iterdir()) == ["s0.json", "s1.json", "s2.json"]
    hook(top, "claude", "SessionEnd", {"session_id": "v", "reason": "other"})
    assert sorted(p.name for p in elsewhere.iterdir()) == ["s0.json", "s1.json", "s2.json"]


def test_a_committed_gitignore_in_the_ledgers_folder_never_lets_a_prompt_into_git(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    sessions = top / ".qem" / "sessions"
    sessions.mkdir()
    (sessions / ".gitignore").write_text("# ignores nothing\n")
    claude(top, "UserPromptSubmit", session="p", prompt="my password is hunter2")
    subprocess.run(["git", "add", "-A"], cwd=top, check=True)
    staged = subprocess.run(["git", "diff", "--cached", "--name-only"], cwd=top, capture_output=True, text=True).stdout
    assert ".json" not in staged and ".lock" not in staged


def test_a_note_too_long_for_the_budget_is_given_as_its_line_and_hides_nothing(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    big = run_qem("add", "Aaa the whole release checklist\n" + "H" * 11_000, "-k", "directive", "-p", "high",
                  cwd=top).stdout.strip()
    said = claude(top, "SessionStart", source="startup")
    assert f"- [#{big}] directive/high · Aaa the whole release checklist …\n" in said  # its line: more in `qem show`
    assert f"[#{project['rule']}]" in said and f"[#{project['task']}]" in said  # what comes after it is given
    assert len(said) <= 10_000 and "did not fit" not in said and "HHH" not in said
    edit = claude(top, "PreToolUse", held=True, tool_name="Edit", tool_input={"file_path": str(top / "src/lock.py")})
    assert f"[#{big}]" not in edit  # not due at an edit: a line given is not given again


def test_a_change_is_said_in_a_line_whatever_the_successor_s_length(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    claude(top, "PreToolUse", held=True, tool_name="Edit", tool_input={"file_path": str(top / "src/lock.py")})
    new = run_qem("supersede", project["lock"], "Release it later\n" + "Z" * 12_000, "-m", "bigger",
                  cwd=top).stdout.strip()
    said = claude(top, "UserPromptSubmit", prompt="go")
    assert f"- [#{project['lock']}] was superseded by [#{new}] (bigger); now:\n  Release it later (`qem show {new}`)" in said
    assert len(said) < 1_000


def test_paths_through_a_link_or_with_dots_find_their_notes(project, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    link = tmp_path / "link"
    link.symlink_to(top)
    via_link = claude(top, "PreToolUse", session="l1", held=True, cwd=str(link), tool_name="Edit",
                      tool_input={"file_path": str(link / "src" / "lock.py")})
    assert f"[#{project['lock']}]" in via_link
    dotted = claude(top, "PreToolUse", session="l2", held=True, tool_name="Edit",
                    tool_input={"file_path": str(top / "src" / ".." / "src" / "lock.py")})
    assert f"[#{project['lock']}]" in dotted


def test_the_cut_line_s_command_runs_from_anywhere(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    from qem_edit.base.decisions import NewNote
    from qem_edit.system.anchors import blob_oid

    anchor = (("src/lock.py", blob_oid((top / "src" / "lock.py").read_bytes())),)
    with Store.open(top / ".qem") as store:
        for i in range(60):
            new = NewNote("gotcha", "medium", "agent", f"Lock rule {i:03d}: " + "y" * 200, anchors=anchor)
            store.write(lambda tx: tx.create(new, "tester"))
    (top / "sub").mkdir()
    said = claude(top, "PreToolUse", held=True, cwd=str(top / "sub"), tool_name="Edit",
                  tool_input={"file_path": str(top / "src" / "lock.py")})
    command = said.rsplit("\n", 1)[1].split("`")[1]
    assert f"--path={top}/src/lock.py" in command
    listed = shell_run(command, top / "sub")
    assert listed.count("- [#") > 0


def shell_run(command: str, cwd: Path) -> str:
    bin_dir = str(Path(sys.executable).parent)
    done = subprocess.run(["sh", "-c", command], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_closed_stdin_a_damaged_ledger_and_a_lone_surrogate_say_nothing_and_exit_0(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    closed = subprocess.run([sys.executable, "-m", "qem_edit", "hook", "claude", "SessionStart"], cwd=top,
                            stdin=subprocess.DEVNULL, capture_output=True)
    assert (closed.returncode, closed.stdout) == (0, b"") and b"Traceback" not in closed.stderr
    shut = subprocess.run(f"{sys.executable} -m qem_edit hook claude SessionStart <&-", shell=True, cwd=top,
                          capture_output=True)
    assert (shut.returncode, shut.stdout) == (0, b"") and b"Traceback" not in shut.stderr
    claude(top, "SessionStart", session="d", source="startup")
    [ledger] = (top / ".qem" / "sessions").glob("*.json")
    ledger.write_text('{"v":1,"epoch":1e400,"given":{}}')
    assert f"[#{project['rule']}]" in claude(top, "SessionStart", session="d", source="resume")  # a new ledger
    raw = b'{"session_id": "x", "cwd": "' + str(top).encode() + b'", "prompt": "why \\ud800 Store.write"}'
    done = hook(top, "claude", "UserPromptSubmit", {}, raw=raw)
    assert done.returncode == 0 and b"Store.write" in done.stdout


def test_a_ledger_is_not_synced_and_one_a_power_cut_tore_reads_as_new(project, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A ledger is replaced atomically without an fsync (a hook pays none), but for a
    compaction's new epoch, whose loss would leave its notes taken for given; a file a power
    cut left empty or cut short is read as a new ledger that knows it lost its epoch."""
    from qem_edit.system import ledger

    top = project["top"]
    with ledger.session(top / ".qem", "claude:t"):
        pass  # (the ledgers' folder and its .gitignore made: written once, synced)
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", synced.append)
    with ledger.session(top / ".qem", "claude:t") as book:
        book.give("n1", True, "e1")
    assert synced == [] and ledger.peek(top / ".qem", "claude:t").given == {"n1": [0, True, "e1"]}
    with ledger.session(top / ".qem", "claude:t") as book:
        book.compacted()
    assert len(synced) == 2  # (the file and its folder)
    synced.clear()
    [path] = (top / ".qem" / "sessions").glob("*.json")
    whole = path.read_bytes()
    for torn in (b"", whole[:len(whole) // 2]):
        path.write_bytes(torn)
        book = ledger.peek(top / ".qem", "claude:t")
        assert book is not None and book.given == {} and not book.may_hold()


def test_a_lock_interrupted_anywhere_in_its_taking_is_let_go(tmp_path: Path) -> None:
    """A Ctrl-C that lands on any line of taking a lock (files.locked) or a ledger
    (ledger.session), before or after the lock was taken, leaves it free once raised: a
    long-lived process (the MCP server) goes on and takes it again."""
    import fcntl

    from qem_edit.system import files, ledger

    def free(path: Path) -> bool:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        finally:
            os.close(fd)

    codes = {files.locked.__enter__.__code__, ledger.session.__enter__.__code__}
    for taking, lock in ((lambda: files.locked(tmp_path / "a.lock", 1), tmp_path / "a.lock"),
                         (lambda: ledger.session(tmp_path, "claude:k"), None)):
        at = 0
        while True:
            at += 1
            seen = 0

            def tracer(frame, event, arg):  # type: ignore[no-untyped-def]
                nonlocal seen
                if frame.f_code in codes:
                    if event == "line":
                        seen += 1
                        if seen == at:
                            raise KeyboardInterrupt
                    return tracer
                return None
            sys.settrace(tracer)
            try:
                with taking():  # (not held here: a manager cut off is let go as it goes)
                    sys.settrace(None)
                finished = True
            except KeyboardInterrupt:
                finished = False
            finally:
                sys.settrace(None)
            held = [lock] if lock is not None else list((tmp_path / "sessions").glob("*.lock"))  # (none: not made yet)
            assert all(free(path) for path in held), (at, finished)
            if finished:
                break
        assert at > 3  # (every line was tried)


def test_one_session_id_under_two_harnesses_is_two_sessions(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    assert f"[#{project['rule']}]" in claude(top, "SessionStart", session="same", source="startup")
    assert f"[#{project['rule']}]" in codex(top, "SessionStart", session="same", source="startup")


@pytest.mark.parametrize("args, words", [
    (("edit",), "qem deliver edit needs --path"),
    (("shell",), "qem deliver shell needs --command"),
    (("prompt",), "qem deliver prompt needs --prompt"),
    (("start", "--command", "ls"), "qem deliver start takes no --command"),
    (("edit", "--path", "/etc/passwd"), "--path /etc/passwd: not in the work tree"),
    (("start", "--budget", "-1"), "--budget -1"),
])
def test_deliver_names_what_a_moment_needs(project, args: tuple, words: str) -> None:  # type: ignore[no-untyped-def]
    done = run_qem("deliver", *args, cwd=project["top"])
    assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("planted", ["folder", "link"])
def test_a_sweep_mark_that_is_not_a_file_is_no_mark_and_breaks_no_start(  # type: ignore[no-untyped-def]
        project, tmp_path: Path, planted: str) -> None:
    """A `.swept` that is a folder or a link (a clone's, or a hand's) marks no sweep: every
    start sweeps, as before the mark, says nothing on stderr and logs nothing, and the
    session notes of swept sessions are ended."""
    from qem_edit.system import ledger

    top = project["top"]
    sessions = top / ".qem" / "sessions"
    claude(top, "SessionStart", session="old", source="startup")
    old = next(sessions.glob("*.json"))
    (sessions / ledger.SWEPT).unlink(missing_ok=True)
    if planted == "folder":
        (sessions / ledger.SWEPT).mkdir()
    else:
        (tmp_path / "elsewhere").write_text("")
        (sessions / ledger.SWEPT).symlink_to(tmp_path / "elsewhere")
    past = time.time() - 15 * 86400
    os.utime(old, (past, past))
    done = hook(top, "claude", "SessionStart", {"session_id": "new", "source": "startup"})
    assert done.returncode == 0 and done.stderr == b"" and not old.exists()
    assert not (sessions / "hooks.log").exists()
    assert (tmp_path / "elsewhere").read_text() == "" if planted == "link" else (sessions / ledger.SWEPT).is_dir()
