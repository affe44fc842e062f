"""When the model reads what qem's hooks give, proved in the real harness binaries: the
pinned Claude Code and Codex (tests/_harness_bins.py) run a session against a scripted
model server on 127.0.0.1 (tests/_model_server.py) that replays tool calls and records
every request, in order.  A text the model reads "before" an action is in a request the
server received before the action took effect: before the request that carries the
action's result, and before a counter script standing in for the command ran.

The first tests show the recorder measures timing, with a plain hook of the test's own
beside qem's: a PreToolUse's context arrives only with the tool's result (after the tool
ran), and a deny's reason arrives as the call's error result, the tool not run, the same
call made again passing.  The rest hold qem to "before means before" (issue 34).

Every test here is marked `harness` (`-m harness` selects them, `-m "not harness"` leaves
them out); each runs one or two sessions of a few seconds.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _harness_drive import Project, claude, codex, counter, first_with, project, runs_of, texts
from _model_server import AGAIN, last_result

pytestmark = pytest.mark.harness

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fixtures" / "corpus-749.jsonl"
GOTCHA = "Never hold the pool lock across an await"
DIRECTIVE = "Run the test suite with -n 0 on this machine"
ALEMBIC = "Dry-run alembic with --sql before upgrading the shared database"
CONTEXT_MARK, DENY_MARK = "CALIBRATION-CONTEXT-4417", "CALIBRATION-DENY-8830"
CALIBRATE = r'''
import json, pathlib, sys
data = json.load(sys.stdin)
given = data.get("tool_input") or {}
command = str(given.get("command") or given.get("cmd") or "")
out = None
if "probe-context" in command:
    out = {"hookEventName": "PreToolUse", "additionalContext": "CALIBRATION-CONTEXT-4417"}
held = pathlib.Path(sys.argv[1])
if "probe-deny" in command and not held.exists():
    held.write_text("held")
    out = {"hookEventName": "PreToolUse", "permissionDecision": "deny",
           "permissionDecisionReason": "CALIBRATION-DENY-8830: the same call may be made again"}
if out:
    print(json.dumps({"hookSpecificOutput": out}))
'''


def memory(made: Project, harness: str) -> None:
    """The project's memory: an anchored gotcha, a directive, a note due when alembic runs;
    and `qem setup HARNESS` with the whole path of the qem the suite runs."""
    made.sh("qem", "add", GOTCHA, "--kind", "gotcha", "--anchor", "src/lock.py")
    made.sh("qem", "add", DIRECTIVE, "--kind", "directive")
    made.sh("qem", "add", ALEMBIC, "--kind", "operational", "--when-run", "alembic*")
    made.sh("qem", "setup", harness, "--command", str(Path(sys.executable).parent / "qem"))


def calibration_hook(made: Project, harness: str) -> None:
    """A PreToolUse hook of the test's own on the shell tool, beside qem's."""
    script = made.work.parent / "calibrate.py"
    script.write_text(CALIBRATE)
    handler = {"type": "command", "command": f"{sys.executable} {script} {made.work.parent / 'held'}", "timeout": 30}
    group = {"matcher": "Bash", "hooks": [handler]}
    if harness == "claude":
        (made.work / ".claude").mkdir(exist_ok=True)
        (made.work / ".claude" / "settings.local.json").write_text(json.dumps({"hooks": {"PreToolUse": [group]}}))
    else:
        path = made.work / ".codex" / "hooks.json"
        doc = json.loads(path.read_text())
        doc["hooks"].setdefault("PreToolUse", []).append(group)
        path.write_text(json.dumps(doc))


def shell(harness: str, command: str) -> tuple:
    return ("tool", "Bash", {"command": command}) if harness == "claude" else \
        ("tool", "exec_command", {"cmd": command, "login": False})


def session(made: Project, harness: str, prompt: str, steps: list, **how):  # type: ignore[no-untyped-def]
    run = (claude if harness == "claude" else codex)(made, prompt, steps, **how)
    assert run.done.returncode == 0, run.done.stderr[-2000:]
    assert run.server.turns, f"no turn reached the server: {run.done.stderr[-2000:]}"
    return run


def result_at(run, marker: str) -> int:  # type: ignore[no-untyped-def]
    """The turn whose request carries, as its last tool result, a result holding `marker`."""
    at = next((i for i, r in enumerate(run.server.turns) if marker in last_result(r.body)[0]), None)
    assert at is not None, f"no tool result holding {marker!r}: {[last_result(r.body) for r in run.server.turns]}"
    return at


# --- the harnesses are there: installed when missing, never skipped in CI -----------------

@pytest.mark.parametrize("ci", ["true", ""])
def test_a_harness_that_cannot_be_installed_fails_under_ci_and_skips_elsewhere(tmp_path, monkeypatch, ci):
    import _harness_bins

    monkeypatch.setattr(_harness_bins, "PREFIX", tmp_path / "harnesses")  # nothing installed there
    monkeypatch.setenv("PATH", str(tmp_path))  # and no npm to install it with
    monkeypatch.setenv("CI", ci)
    _harness_bins._installed.cache_clear()
    outcome = pytest.fail.Exception if ci else pytest.skip.Exception
    with pytest.raises(outcome, match="codex 0.171.0 unavailable: npm is not on PATH"):
        _harness_bins.harness_bin("codex")
    _harness_bins._installed.cache_clear()


# --- the recorder measures timing (a plain hook beside qem's) -----------------------------

@pytest.mark.parametrize("harness", ["claude", "codex"])
def test_a_session_starts_with_the_directives_in_the_first_request(tmp_path, harness):
    made = project(tmp_path)
    memory(made, harness)
    run = session(made, harness, "tidy up the module", [])
    assert first_with(run.server, DIRECTIVE) == 0
    assert first_with(run.server, "tidy up the module") == 0


@pytest.mark.parametrize("harness", ["claude", "codex"])
def test_a_pretooluse_context_arrives_with_the_result_after_the_tool_ran(tmp_path, harness):
    made = project(tmp_path)
    memory(made, harness)
    calibration_hook(made, harness)
    runs = counter(made, "probe-context")
    run = session(made, harness, "check the service", [[shell(harness, "probe-context")]])
    after = result_at(run, "probe-context ran")
    assert first_with(run.server, CONTEXT_MARK) == after  # with the result, not before the call
    assert len(runs_of(runs)) == 1
    assert run.server.turns[after - 1].at < runs_of(runs)[0] < run.server.turns[after].at


@pytest.mark.parametrize("harness", ["claude", "codex"])
def test_a_deny_reason_is_the_calls_error_result_and_the_same_call_again_passes(tmp_path, harness):
    made = project(tmp_path)
    memory(made, harness)
    calibration_hook(made, harness)
    runs = counter(made, "probe-deny")
    run = session(made, harness, "check the service", [[shell(harness, "probe-deny")], AGAIN])
    held = first_with(run.server, DENY_MARK)
    assert held is not None, texts(run.server)[-3000:]
    text, error = last_result(run.server.turns[held].body)
    assert DENY_MARK in text and error  # the reason is the call's (error) result
    ran = result_at(run, "probe-deny ran")  # made again, it ran
    assert held < ran
    assert len(runs_of(runs)) == 1
    assert run.server.turns[held].at < runs_of(runs)[0] < run.server.turns[ran].at


def test_codex_runs_qems_hooks_without_a_clamping_warning(tmp_path):
    made = project(tmp_path)
    memory(made, "codex")
    run = session(made, "codex", "tidy up the module", [])
    assert "hook: SessionStart Completed" in run.done.stderr  # the hooks ran
    assert "clamping" not in run.done.stderr, run.done.stderr


# --- Codex's trust of the hooks, as Codex records it and as `qem setup codex` reports it ---

def trust_records(made: Project) -> str:
    """`[hooks.state]` entries for every hook in the project's .codex/hooks.json, as
    /hooks in Codex records a person's trust (the hashes are qem's reading of Codex's: the
    real binary running the hooks is what shows them right)."""
    from qem_edit.system.codextrust import handler_hash, label

    path = made.work / ".codex" / "hooks.json"
    out = []
    for event, groups in json.loads(path.read_text())["hooks"].items():
        for g, group in enumerate(groups):
            for h, handler in enumerate(group["hooks"]):
                key = json.dumps(f"{path}:{label(event)}:{g}:{h}")
                out.append(f"[hooks.state.{key}]\ntrusted_hash = \"{handler_hash(event, group.get('matcher'), handler)}\"\n")
    return "\n".join(out)


def setup_check(made: Project, config: str, trusted: bool = True, code: int = 0) -> str:
    project_trust = f'[projects.{json.dumps(str(made.work))}]\ntrust_level = "trusted"\n\n' if trusted else ""
    (made.codex_home / "config.toml").write_text(project_trust + config)
    env = dict(made.env(), CODEX_HOME=str(made.codex_home))
    done = subprocess.run([str(Path(sys.executable).parent / "qem"), "setup", "codex", "--check", "--command",
                           str(Path(sys.executable).parent / "qem")], cwd=made.work, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == code, done.stdout + done.stderr  # 0: the files are as qem writes them
    return done.stdout


def test_codex_runs_qems_hooks_once_trusted_and_setup_check_says_which_are_not(tmp_path):
    made = project(tmp_path)
    memory(made, "codex")
    hooks = made.work / ".codex" / "hooks.json"
    n = sum(len(group["hooks"]) for groups in json.loads(hooks.read_text())["hooks"].values() for group in groups)
    said = setup_check(made, "", trusted=False)
    assert "the project is not trusted" in said and f"{n} of qem's {n} hooks are not trusted" in said and "/hooks" in said
    said = setup_check(made, "")
    assert "the project is not trusted" not in said and f"{n} of qem's {n} hooks are not trusted" in said
    run = session(made, "codex", "tidy up the module", [], bypass_trust=False)
    assert "hook: SessionStart" not in run.done.stderr and first_with(run.server, DIRECTIVE) is None  # silently

    records = trust_records(made)
    assert setup_check(made, records).strip() == \
        f"in place: qem's hooks and MCP server for Codex (.codex/hooks.json, .codex/config.toml)\n" \
        f"Codex trusts this project and qem's {n} hooks ({made.codex_home / 'config.toml'})"
    run = session(made, "codex", "tidy up the module", [], bypass_trust=False, config=records)
    assert "hook: SessionStart Completed" in run.done.stderr and first_with(run.server, DIRECTIVE) == 0

    doc = json.loads(hooks.read_text())
    doc["hooks"]["UserPromptSubmit"][0]["hooks"][0]["timeout"] = 20  # a hook changed since it was trusted
    hooks.write_text(json.dumps(doc))
    said = setup_check(made, records, code=1)
    assert "qem's hook for UserPromptSubmit differs" in said
    assert f"1 of qem's {n} hooks is not trusted (1 of them changed since trusted)" in said
    run = session(made, "codex", "tidy up the module", [], bypass_trust=False, config=records)
    assert "hook: SessionStart Completed" in run.done.stderr
    assert "hook: UserPromptSubmit" not in run.done.stderr  # the changed one Codex no longer runs


# --- before means before (issue 34): what the model reads before an action takes effect ---

PATCH = "apply_patch <<'PATCH'\n*** Begin Patch\n*** Update File: src/lock.py\n@@\n-x = 1\n+x = 2\n*** End Patch\nPATCH"


def edit(harness: str, made: Project, tool: str = "Edit") -> tuple:
    path = str(made.work / "src" / "lock.py")
    if harness == "codex":
        return shell(harness, PATCH)
    if tool == "Write":
        return ("tool", "Write", {"file_path": path, "content": "x = 2\n"})
    return ("tool", "Edit", {"file_path": path, "old_string": "x = 1", "new_string": "x = 2"})


def edited(run, harness: str) -> int:  # type: ignore[no-untyped-def]
    """The turn that reports the edit's success to the model."""
    return result_at(run, "updated successfully" if harness == "claude" else "Success. Updated the following files")


@pytest.mark.parametrize("harness, tool", [("claude", "Edit"), ("claude", "Write"), ("codex", "apply_patch")])
def test_an_anchored_gotcha_reaches_the_model_before_the_edit_takes_effect(tmp_path, harness, tool):
    made = project(tmp_path)
    memory(made, harness)
    run = session(made, harness, "make the change we talked about", [[edit(harness, made, tool)], AGAIN])
    assert (made.work / "src" / "lock.py").read_text() == "x = 2\n"  # the edit went through, once
    told = first_with(run.server, GOTCHA)
    assert told is not None and told < edited(run, harness), "the gotcha reached the model with the edit's success"


@pytest.mark.parametrize("harness", ["claude", "codex"])
def test_the_when_run_note_reaches_the_model_before_the_command_runs(tmp_path, harness):
    made = project(tmp_path)
    memory(made, harness)
    runs = counter(made, "alembic")
    run = session(made, harness, "bring the database up to date", [[shell(harness, "alembic upgrade head")], AGAIN])
    told = first_with(run.server, ALEMBIC)
    assert told is not None, "the note never reached the model"
    assert len(runs_of(runs)) == 1  # held once, then run once
    assert run.server.turns[told].at < runs_of(runs)[0], "the note reached the model after alembic ran"


@pytest.mark.parametrize("harness", ["claude", "codex"])
def test_a_read_gives_the_files_notes_and_the_edit_after_it_is_not_held(tmp_path, harness):
    made = project(tmp_path)
    memory(made, harness)
    read = ("tool", "Read", {"file_path": str(made.work / "src" / "lock.py")}) if harness == "claude" else \
        shell(harness, "cat src/lock.py")
    run = session(made, harness, "make the change we talked about", [[read], [edit(harness, made)]])
    read_at = result_at(run, "x = 1")
    assert first_with(run.server, GOTCHA) == read_at  # with the read's result: before the edit is made
    assert (made.work / "src" / "lock.py").read_text() == "x = 2\n"  # the edit made once, not held
    assert edited(run, harness) == read_at + 1


# --- a session's start misses no due note; a subagent starts with the directives ----------



def escaped(text: str) -> str:
    """`text` as it stands inside a request's JSON."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


@pytest.mark.parametrize("harness", ["claude", "codex"])
def test_every_due_note_of_the_749_note_corpus_is_in_the_first_request(tmp_path, harness):
    made = project(tmp_path)
    made.sh("qem", "load", str(CORPUS))
    made.sh("qem", "setup", harness, "--command", str(Path(sys.executable).parent / "qem"))
    due = json.loads(made.sh("qem", "deliver", "start", "--budget", "0", "--json").stdout)["given"]
    assert len(due) == 55 and sum(n["kind"] == "directive" for n in due) == 43
    run = session(made, harness, "tidy up the module", [])
    first = run.server.turns[0].text
    missing = [n["short"] for n in due if f"#{n['short']}" not in first]
    assert not missing, f"{len(missing)} of {len(due)} due notes are not in the first request: {missing}"
    directives = [n for n in due if n["kind"] == "directive"]
    assert [n["short"] for n in directives if escaped(n["text"].splitlines()[0]) not in first] == []


@pytest.mark.parametrize("harness", ["claude", "codex"])
def test_a_subagent_starts_with_the_directives(tmp_path, harness):
    made = project(tmp_path)
    memory(made, harness)
    task = "Survey the module layout and report"
    waited = []

    def answer(body):  # type: ignore[no-untyped-def]
        text = json.dumps(body, ensure_ascii=False)
        if task in text and "tidy up the module" not in text:  # the subagent's own turn
            return [("text", "The layout is flat.")]
        result = last_result(body)[0]
        if harness == "codex" and '"agent_id"' in result and not waited:  # Codex's main thread waits for it
            waited.append(result)
            return [("tool", "wait_agent", {"targets": [json.loads(result)["agent_id"]], "timeout_ms": 30000},
                     {"namespace": "multi_agent_v1"})]
        return None

    spawn = ("tool", "Agent", {"description": "survey", "prompt": task, "subagent_type": "general-purpose"}) \
        if harness == "claude" else ("tool", "spawn_agent", {"message": task}, {"namespace": "multi_agent_v1"})
    run = session(made, harness, "tidy up the module", [[spawn]], answer=answer)
    assert first_with(run.server, DIRECTIVE) == 0  # the main thread's
    sub = [r for r in run.server.turns if task in r.text and "tidy up the module" not in r.text]
    assert sub, "no request of the subagent reached the server"
    assert DIRECTIVE in sub[0].text, "the subagent started without the directives"


@pytest.mark.parametrize("harness", ["claude", "codex"])
def test_a_second_session_starts_from_the_reply_the_first_was_given(tmp_path, harness):
    """The first session's start is read in full and kept beside the index
    (qem_edit.reads.starts); the next session's start hook answers from it, and that answer
    is what the model reads in its first request (marked here, in the kept reply, to tell it
    from a full read)."""
    made = project(tmp_path)
    memory(made, harness)
    assert first_with(session(made, harness, "tidy up the module", []).server, DIRECTIVE) == 0
    kept = made.work / ".qem" / "index.db-starts.json"
    head, _, body = kept.read_bytes().partition(b"\n")
    entries = json.loads(body)
    key, = [k for k in entries if k.startswith(f"{harness}\0SessionStart\0")]
    entries[key]["reply"] = entries[key]["reply"].replace(DIRECTIVE, f"{DIRECTIVE} (KEPT-7731)")
    kept.write_bytes(head + b"\n" + json.dumps(entries).encode())
    second = session(made, harness, "tidy up the module again", [])
    assert first_with(second.server, f"{DIRECTIVE} (KEPT-7731)") == 0


WIDE = {"codex": "在提交之前务必运行完整的测试套件并检查所有警告信息，不要跳过任何失败的用例，也不要修改测试以使其通过。" * 3,
        "claude": "🚀✅📟" * 40}  # Codex counts UTF-8 bytes (a CJK character is 3), Claude Code UTF-16 units (an emoji 2)


@pytest.mark.parametrize("harness", ["claude", "codex"])
def test_a_session_start_fits_the_harness_in_its_own_unit_nothing_spilled(tmp_path, harness):
    """40 directives too long for the cap together: each is in the first request, or
    counted in qem's cut line; none is left in a file the harness spilled the rest to."""
    made = project(tmp_path)
    log = tmp_path / "wide.jsonl"  # in `qem dump`'s form, loaded at once (40 `qem add`s take seconds)
    log.write_text("".join(json.dumps(
        {"seq": i + 1, "note_id": i + 1, "type": "created", "at": "2026-05-04T08:00:00Z", "actor": "tester",
         "reason": None, "checkin": None, "data": {"kind": "directive", "priority": "medium", "provenance": "agent",
                                                   "text": f"rule {i:02d}: {WIDE[harness]}", "supersedes": None}},
        ensure_ascii=False) + "\n" for i in range(40)), encoding="utf-8")
    made.sh("qem", "load", str(log))
    made.sh("qem", "setup", harness, "--command", str(Path(sys.executable).parent / "qem"))
    first = session(made, harness, "tidy up the module", []).server.turns[0].text
    assert "saved to" not in first, "the harness spilled qem's context to a file"
    shown = sum(f"rule {i:02d}" in first for i in range(40))
    cut = re.search(r"(\d+) more notes? did not fit", first)
    assert shown + (int(cut.group(1)) if cut else 0) == 40
