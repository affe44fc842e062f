"""Subagents get memory: SubagentStart (Claude Code and Codex, both with
`additionalContext`) gives a subagent what a session's start gives, and each context window
has a ledger of its own (a hook fired inside a subagent carries `agent_id`), so each is
given each note once and neither takes the other's.  Real hook input on stdin; Codex's
input and output checked against its published schemas (tests/contracts/codex/)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_qem
from test_hooks import claude, codex, project  # noqa: F401 - the fixture


def ids(said: str) -> set[str]:
    return {line[4:line.index("]")] for line in said.split("\n") if line.startswith("- [#")}


def test_a_claude_subagent_starts_with_the_directives_and_high_tasks_once(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    main = claude(top, "SessionStart", source="startup")
    start = {project[k] for k in ("rule", "rule2", "task")}
    assert ids(main) == start
    sub = claude(top, "SubagentStart", agent_id="a1", agent_type="Explore")
    assert sub.startswith("# Project memory (qem), at the start of this session") and ids(sub) == start
    assert claude(top, "SubagentStart", agent_id="a1", agent_type="Explore") == ""  # once a window
    assert ids(claude(top, "SubagentStart", agent_id="a2", agent_type="Plan")) == start  # another window
    assert claude(top, "SessionStart", source="resume") == ""  # the main thread's ledger untouched


def test_a_subagent_s_tool_never_takes_the_main_thread_s_notes_nor_the_reverse(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    lock = {"file_path": str(top / "src/lock.py")}
    in_sub = claude(top, "PreToolUse", agent_id="a1", agent_type="general-purpose", held=True, tool_name="Edit",
                    tool_input=lock)
    assert project["lock"] in ids(in_sub)
    assert claude(top, "PreToolUse", agent_id="a1", agent_type="general-purpose", tool_name="Edit",
                  tool_input=lock) == ""  # once in the subagent's window
    in_main = claude(top, "PreToolUse", held=True, tool_name="Edit", tool_input=lock)
    assert project["lock"] in ids(in_main)  # the subagent did not take it
    assert claude(top, "PreToolUse", tool_name="Edit", tool_input=lock) == ""
    other = claude(top, "PreToolUse", agent_id="a2", agent_type="general-purpose", held=True, tool_name="Edit",
                   tool_input=lock)
    assert project["lock"] in ids(other)  # nor did the main thread


def test_codex_subagents_meet_its_schemas_and_have_windows_of_their_own(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    codex(top, "SessionStart", source="startup")
    sub = codex(top, "SubagentStart", agent_id="019a-child", agent_type="default")  # input and reply schema-checked
    assert ids(sub) == {project[k] for k in ("rule", "rule2", "task")}
    patch = "*** Begin Patch\n*** Update File: src/lock.py\n@@\n-    pass\n+    return\n*** End Patch\n"
    child = codex(top, "PreToolUse", agent_id="019a-child", agent_type="default", tool_name="apply_patch",
                  tool_use_id="u1", tool_input={"command": patch})
    assert project["lock"] in ids(child)
    root = codex(top, "PreToolUse", tool_name="apply_patch", tool_use_id="u2", tool_input={"command": patch})
    assert project["lock"] in ids(root)


def test_a_session_s_end_takes_its_subagents_ledgers_with_it(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    claude(top, "SessionStart", source="startup")
    claude(top, "SubagentStart", agent_id="a1", agent_type="Explore")
    claude(top, "SubagentStart", agent_id="a2", agent_type="Plan")
    claude(top, "SubagentStart", session="other", agent_id="b1", agent_type="Explore")
    sessions = top / ".qem" / "sessions"
    assert len(list(sessions.glob("*.json"))) == 5  # two sessions, three subagents
    claude(top, "SessionEnd", reason="prompt_input_exit")
    assert len(list(sessions.glob("*.json"))) == 2  # the other session and its subagent stay
    assert ids(claude(top, "SubagentStart", session="other", agent_id="b1", agent_type="Explore")) == set()


def test_a_subagent_s_window_is_its_own_whatever_session_id_its_hooks_carry(project) -> None:  # type: ignore[no-untyped-def]
    top = project["top"]
    codex(top, "SubagentStart", session="root-thread", agent_id="child-thread", agent_type="default")
    again = codex(top, "SubagentStart", session="child-thread", agent_id="child-thread", agent_type="default")
    assert again == ""  # one context window, given once, whichever thread's id names the session


def test_setup_writes_the_subagent_hook_where_the_harness_has_one(tmp_path: Path) -> None:
    from builders import code_repository

    top = code_repository(tmp_path / "s", {"a.py": "x\n"})
    assert run_qem("init", cwd=top).returncode == 0
    for harness, settings in (("claude", ".claude/settings.json"), ("codex", ".codex/hooks.json")):
        assert run_qem("setup", harness, cwd=top).returncode == 0
        [group] = json.loads((top / settings).read_text())["hooks"]["SubagentStart"]
        assert "matcher" not in group and group["hooks"][0]["command"] == f"qem hook {harness} SubagentStart"
    assert run_qem("setup", "gemini", cwd=top).returncode == 0
    assert "SubagentStart" not in json.loads((top / ".gemini/settings.json").read_text())["hooks"]
