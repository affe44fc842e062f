"""The harnesses that run the hooks `qem setup claude` writes without being Claude Code:
VS Code's agent hooks and Cursor both load `.claude/settings.json`.  Each is answered by
its own documented contract, or told on stderr and in the hooks log why nothing was given.

- VS Code: https://code.visualstudio.com/docs/agent-customization/hooks ("Common input
  fields": `timestamp`, `cwd`, `sessionId`, `hookEventName`, `transcript_path`; Claude Code
  compatibility: matchers ignored, tools named as VS Code names them, inputs in camelCase)
  and https://code.visualstudio.com/docs/agents/reference/hooks-reference (per event:
  `hookSpecificOutput.additionalContext` at SessionStart, PreToolUse, SubagentStart;
  UserPromptSubmit takes the common output only).
- Cursor: https://cursor.com/docs/reference/third-party-hooks (it loads the Claude Code
  settings and maps the hook names to its own) and https://cursor.com/docs/hooks (its input:
  `conversation_id`, `generation_id`, `workspace_roots`, `cursor_version`; `additional_context`
  at its session start).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
from test_hooks import hook, project  # noqa: F401 - the fixture

# The reference page's SessionStart / PreToolUse / SubagentStart output, with its common fields.
VSCODE_CONTEXT = {
    "type": "object", "additionalProperties": False, "required": ["hookSpecificOutput"],
    "properties": {"continue": {"type": "boolean"}, "stopReason": {"type": "string"},
                   "systemMessage": {"type": "string"},
                   "hookSpecificOutput": {
                       "type": "object", "additionalProperties": False,
                       "required": ["hookEventName", "additionalContext"],
                       "properties": {"hookEventName": {"enum": ["SessionStart", "PreToolUse", "SubagentStart"]},
                                      "additionalContext": {"type": "string"}}}},
}


# The reference page's PreToolUse output: `permissionDecision: "deny"` stops the tool, with its reason.
VSCODE_DENY = {
    "type": "object", "additionalProperties": False, "required": ["hookSpecificOutput"],
    "properties": {"hookSpecificOutput": {
        "type": "object", "additionalProperties": False,
        "required": ["hookEventName", "permissionDecision", "permissionDecisionReason"],
        "properties": {"hookEventName": {"const": "PreToolUse"}, "permissionDecision": {"const": "deny"},
                       "permissionDecisionReason": {"type": "string", "minLength": 1}}}},
}


def vscode(top: Path, event: str, session: str = "vs-1", **payload: object) -> subprocess.CompletedProcess:
    data = {"timestamp": "2026-12-05T10:30:00.000Z", "cwd": str(top), "sessionId": session, "hookEventName": event,
            "transcript_path": f"/home/u/.vscode/transcripts/{session}.json", **payload}
    return hook(top, "claude", event, {}, raw=json.dumps(data).encode())


def context(done: subprocess.CompletedProcess, event: str) -> str:
    assert done.returncode == 0, done.stderr
    if not done.stdout:
        return ""
    reply = json.loads(done.stdout)
    jsonschema.validate(reply, VSCODE_CONTEXT)
    assert reply["hookSpecificOutput"]["hookEventName"] == event
    return reply["hookSpecificOutput"]["additionalContext"]


def held(done: subprocess.CompletedProcess) -> str:
    """The reason of a held call (the notes of an edit or a command not given yet)."""
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)
    jsonschema.validate(reply, VSCODE_DENY)
    return reply["hookSpecificOutput"]["permissionDecisionReason"]


def test_vscode_s_session_start_and_subagents_are_answered(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    said = context(vscode(top, "SessionStart", source="new"), "SessionStart")
    assert f"[#{project['rule']}]" in said and f"[#{project['task']}]" in said
    assert context(vscode(top, "SessionStart", source="new"), "SessionStart") == ""  # its ledger: once a session
    sub = context(vscode(top, "SubagentStart", agent_id="subagent-456", agent_type="Plan"), "SubagentStart")
    assert f"[#{project['rule']}]" in sub


def test_vscode_s_tools_by_their_own_names_and_camel_case_inputs(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    lock = str(top / "src" / "lock.py")
    read = context(vscode(top, "PreToolUse", tool_name="read_file", tool_use_id="t1",
                          tool_input={"filePath": lock, "startLine": 1, "endLine": 20}), "PreToolUse")
    assert "\n  Release the lock before the restart" in read  # a read: whole, what the edit would give
    edit = context(vscode(top, "PreToolUse", tool_name="replace_string_in_file", tool_use_id="t2",
                          tool_input={"filePath": lock, "oldString": "pass", "newString": "return"}), "PreToolUse")
    assert edit == ""  # read first: nothing to hold
    many = held(vscode(top, "PreToolUse", session="vs-2", tool_name="multi_replace_string_in_file",
                       tool_use_id="t3", tool_input={"replacements": [
                           {"filePath": str(top / "src/index/build.py"), "oldString": "a", "newString": "b"},
                           {"filePath": lock, "oldString": "c", "newString": "d"}]}))
    assert "before this edit" in many and f"[#{project['index']}]" in many and f"[#{project['lock']}]" in many
    shell = held(vscode(top, "PreToolUse", session="vs-3", toolName="run_in_terminal", tool_use_id="t4",
                        toolInput={"command": "alembic upgrade head", "isBackground": False}))
    assert f"[#{project['migrate']}]" in shell  # camelCase field names read too
    other = vscode(top, "PreToolUse", session="vs-3", tool_name="semantic_search", tool_input={"query": "lock"})
    assert (other.returncode, other.stdout) == (0, b"")  # its matcher ignored: every tool comes, most say nothing


def test_vscode_s_prompt_takes_no_context_and_the_hook_says_so(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    done = vscode(top, "UserPromptSubmit", prompt="Why does Store.write hang?")
    assert (done.returncode, done.stdout) == (0, b"")
    words = "VS Code reads no context at UserPromptSubmit (https://code.visualstudio.com/docs/agents/reference/hooks-reference)"
    assert words in done.stderr.decode()
    assert words in (top / ".qem" / "sessions" / "hooks.log").read_text()
    both = vscode(top, "UserPromptSubmit", session_id="vs-1", prompt="Store.write?")  # snake_case beside it
    assert (both.returncode, both.stdout) == (0, b"") and words in both.stderr.decode()
    said = context(vscode(top, "PreToolUse", tool_name="read_file", tool_input={"filePath": str(top / "README.md")}),
                   "PreToolUse")
    assert said == ""  # and nothing was marked given by it


def test_cursor_s_session_start_is_answered_in_its_own_field(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    data = {"conversation_id": "conv-123", "generation_id": "gen-456", "workspace_roots": [str(top)],
            "hook_event_name": "sessionStart", "cursor_version": "2.0.77", "model": "gpt-5",
            "is_background_agent": False, "composer_mode": "agent"}
    done = hook(top, "claude", "SessionStart", {}, raw=json.dumps(data).encode(), cwd=top / "src")
    reply = json.loads(done.stdout)
    assert reply["additional_context"] == reply["hookSpecificOutput"]["additionalContext"]
    assert f"[#{project['rule']}]" in reply["additional_context"]
    tool = {**data, "hook_event_name": "preToolUse", "tool_name": "Edit", "tool_input": {"file_path": "src/lock.py"}}
    done = hook(top, "claude", "PreToolUse", {}, raw=json.dumps(tool).encode())
    assert (done.returncode, done.stdout) == (0, b"")
    assert "Cursor reads no context at PreToolUse (https://cursor.com/docs/reference/third-party-hooks)" \
           in done.stderr.decode()


def test_input_with_no_session_id_is_named(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    done = hook(top, "claude", "SessionStart", {}, raw=json.dumps({"cwd": str(top), "source": "startup"}).encode())
    assert (done.returncode, done.stdout) == (0, b"")
    assert "hook input without a session id (session_id, VS Code's sessionId, Cursor's conversation_id)" \
           in done.stderr.decode()
    assert "without a session id" in (top / ".qem" / "sessions" / "hooks.log").read_text()
