"""`qem setup HARNESS`: qem's hooks and MCP server merged into a harness's project settings.

Every test runs against real files in a real git repository, most of them holding the
user's own settings next to qem's: those must come out as they went in (compared parsed,
in order), a second run must leave every byte and mtime alone, --check must write nothing,
--remove must take out only qem's entries, and a file qem cannot read as what it should
be must leave every file of the harness as it was.  What is written is checked against
the harnesses' published settings schemas (tests/contracts/), and Codex's hooks.json,
which has none, against its exact shape.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import REPO, run_qem

from qem_edit.base import errors
from qem_edit.base.harness import HARNESSES
from qem_edit.shells import setup
from qem_edit.system.workspace import Workspace

CONTRACTS = REPO / "tests" / "contracts"
QEM = str(Path(sys.executable).parent / "qem")  # the venv's, by its whole path: no PATH warning
FILES = {"claude": (".claude/settings.json", ".mcp.json"), "codex": (".codex/hooks.json", ".codex/config.toml"),
         "gemini": (".gemini/settings.json",)}
CLAUDE_EVENTS = ["SessionStart", "UserPromptSubmit", "PreToolUse", "SubagentStart", "PreCompact", "SessionEnd"]


@pytest.fixture
def top(tmp_path: Path) -> Path:
    """A git repository's work tree (the project qem's settings go into)."""
    root = tmp_path / "project"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def place(top: Path) -> Workspace:
    return Workspace(root=top, store_path=top / ".qem")


def run(top: Path, harness: str = "claude", **options) -> int:  # type: ignore[no-untyped-def]
    options.setdefault("command", QEM)
    return setup.run(harness, place(top), **options)


def put(top: Path, rel: str, content) -> Path:  # type: ignore[no-untyped-def]
    path = top / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else
                     (content if isinstance(content, str) else json.dumps(content, indent=4)).encode())
    return path


def read(top: Path, rel: str):  # type: ignore[no-untyped-def]
    return json.loads((top / rel).read_text("utf-8"))


def state(top: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under the project (git's own aside): its bytes and mtime."""
    return {p.relative_to(top).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(top.rglob("*")) if p.is_file() and ".git" not in p.relative_to(top).parts}


def handler(command: str, harness: str = "claude", event: str = "SessionStart") -> dict:
    out = {"type": "command", "command": f"{command} hook {harness} {event}"}
    if harness == "gemini":
        out["name"] = "qem"
    out["timeout"] = (10_000 if harness == "gemini" else 10) * (12 if event == "SessionStart" else 1)
    if (harness, event) == ("codex", "SessionEnd"):
        out["timeout"] = 3  # Codex clamps a SessionEnd hook to 3 s (and warns when it is longer)
    return out


def claude_hooks(command: str = QEM, stop: bool = False) -> dict:
    """What qem writes into an empty `.claude/settings.json`'s hooks, spelled out."""
    matchers = {"SessionStart": "startup|resume|clear|compact|fork",
                "PreToolUse": "Edit|MultiEdit|Write|NotebookEdit|Read|Bash|PowerShell"}
    events = CLAUDE_EVENTS + (["Stop"] if stop else [])
    return {event: [({"matcher": matchers[event]} if event in matchers else {})
                    | {"hooks": [handler(command, "claude", event)]}] for event in events}


def validate(doc: dict, schema_path: Path) -> None:
    import jsonschema

    schema = json.loads(schema_path.read_text("utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    assert cls.__name__ == {"http://json-schema.org/draft-07/schema#": "Draft7Validator",
                            "https://json-schema.org/draft/2020-12/schema": "Draft202012Validator"}[schema["$schema"]]
    cls.check_schema(schema)
    cls(schema).validate(doc)


# -- writing, merging ------------------------------------------------------------------------------


def test_claude_into_an_empty_project(top: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert run(top) == 0
    assert read(top, ".claude/settings.json") == {"hooks": claude_hooks()}
    assert read(top, ".mcp.json") == {"mcpServers": {"qem": {"command": QEM, "args": ["mcp"]}}}
    assert (top / ".mcp.json").read_text("utf-8") == json.dumps(read(top, ".mcp.json"), indent=2) + "\n"
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "wrote .claude/settings.json: hooks " + ", ".join(CLAUDE_EVENTS)
    assert lines[1] == "wrote .mcp.json: MCP server qem"
    assert lines[-1].startswith(f"the hooks run `{QEM} hook claude EVENT`; check one with: echo '{{")
    assert lines[-1].endswith(f"| {QEM} hook claude SessionStart")


def test_the_sample_in_the_last_line_runs(top: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert run_qem("add", "use tabs", "-k", "directive", cwd=top).returncode == 0
    run(top)
    sample = capsys.readouterr().out.splitlines()[-1].split("check one with: ")[1]
    done = subprocess.run(sample, shell=True, cwd=top, capture_output=True, text=True)
    assert done.returncode == 0
    assert "use tabs" in json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]


USER_SETTINGS = {
    "$schema": "https://json.schemastore.org/claude-code-settings.json",
    "permissions": {"allow": ["Bash(npm test)"], "deny": []},
    "hooks": {
        "PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "prettier --write"}]}],
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh", "timeout": 5},
                                          {"type": "command", "command": "/usr/local/bin/qem hook claude PreToolUse"},
                                          {"type": "command", "command": "notqem hook claude PreToolUse"}]},
            {"matcher": "Read", "hooks": [{"type": "command", "command": "echo qem hook-like"}]},
        ],
        "SessionStart": [{"hooks": [{"type": "command", "command": "qem hook claude SessionStart", "timeout": 99}]},
                         {"matcher": "compact", "hooks": [{"type": "command", "command": "./after-compact.sh"}]}],
        "Notification": [],
    },
    "model": "opus",
}


def test_merge_keeps_every_other_entry_in_its_order(top: Path) -> None:
    put(top, ".claude/settings.json", USER_SETTINGS)
    put(top, ".mcp.json", {"mcpServers": {"db": {"command": "db-mcp", "args": ["--ro"]}}, "other": 1})
    assert run(top) == 0
    got, wanted = read(top, ".claude/settings.json"), claude_hooks()
    assert list(got) == list(USER_SETTINGS)
    assert {k: v for k, v in got.items() if k != "hooks"} == {k: v for k, v in USER_SETTINGS.items() if k != "hooks"}
    assert list(got["hooks"]) == ["PostToolUse", "PreToolUse", "SessionStart", "Notification",
                                  "UserPromptSubmit", "SubagentStart", "PreCompact", "SessionEnd"]
    mine = USER_SETTINGS["hooks"]
    assert got["hooks"]["PostToolUse"] == mine["PostToolUse"]
    assert got["hooks"]["Notification"] == []
    pre_bash = dict(mine["PreToolUse"][0], hooks=[mine["PreToolUse"][0]["hooks"][0], mine["PreToolUse"][0]["hooks"][2]])
    assert got["hooks"]["PreToolUse"] == [pre_bash, wanted["PreToolUse"][0], mine["PreToolUse"][1]]
    assert got["hooks"]["SessionStart"] == [wanted["SessionStart"][0], mine["SessionStart"][1]]
    for event in CLAUDE_EVENTS[1:]:
        if event != "PreToolUse":
            assert got["hooks"][event] == wanted[event]
    assert read(top, ".mcp.json") == {"mcpServers": {"db": {"command": "db-mcp", "args": ["--ro"]},
                                                     "qem": {"command": QEM, "args": ["mcp"]}}, "other": 1}
    assert list(read(top, ".mcp.json")) == ["mcpServers", "other"]


@pytest.mark.parametrize("harness, rel", [("claude", ".mcp.json"), ("gemini", ".gemini/settings.json")])
def test_qem_owns_only_command_and_args_of_its_server_entry(top: Path, harness: str, rel: str, capsys) -> None:  # type: ignore[no-untyped-def]
    entry = {"type": "stdio", "command": "old-qem", "env": {"QEM_ACTOR": "alice"}, "args": ["mcp"], "cwd": "sub",
             "timeout": 30000}
    put(top, rel, {"mcpServers": {"qem": entry, "db": {"command": "db-mcp"}}})
    assert run(top, harness, check=True) == 1
    assert f'{rel}: MCP server qem is {{"command": "old-qem", "args": ["mcp"]}}, not' in capsys.readouterr().out
    assert run(top, harness) == 0
    got = read(top, rel)["mcpServers"]
    assert list(got) == ["qem", "db"] and got["qem"] == dict(entry, command=QEM)
    assert list(got["qem"]) == list(entry)  # every key where it was
    assert "MCP server qem (its command and args; type, env, cwd, timeout kept)\n" in capsys.readouterr().out
    before = state(top)
    assert run(top, harness, check=True) == 0 and run(top, harness) == 0  # env and the rest are no difference
    assert state(top) == before
    assert run(top, harness, remove=True) == 0
    assert read(top, rel)["mcpServers"] == {"db": {"command": "db-mcp"}}
    assert "removed MCP server qem (the whole entry, type, env, cwd, timeout too)\n" in capsys.readouterr().out


def test_an_entry_without_command_or_args_gets_them_last(top: Path) -> None:
    put(top, ".mcp.json", {"mcpServers": {"qem": {"env": {"A": "1"}}}})
    run(top)
    assert list(read(top, ".mcp.json")["mcpServers"]["qem"].items()) == [("env", {"A": "1"}), ("command", QEM),
                                                                         ("args", ["mcp"])]


def test_qem_keeps_its_place_among_the_groups(top: Path) -> None:
    """qem's group is written where qem's was (Codex keys a hook's trust by its group's index)."""
    before = {"matcher": "Bash", "hooks": [{"type": "command", "command": "./a.sh"}]}
    after = {"matcher": "Bash", "hooks": [{"type": "command", "command": "./b.sh"}]}
    run(top, "codex")
    doc = read(top, ".codex/hooks.json")
    doc["hooks"]["PreToolUse"] = [before] + doc["hooks"]["PreToolUse"] + [after]
    put(top, ".codex/hooks.json", doc)
    run(top, "codex", command="/opt/other/qem")
    groups = read(top, ".codex/hooks.json")["hooks"]["PreToolUse"]
    assert groups[0] == before and groups[2] == after
    assert groups[1]["hooks"] == [handler("/opt/other/qem", "codex", "PreToolUse")]


@pytest.mark.parametrize("harness", sorted(FILES))
def test_a_second_run_changes_nothing(top: Path, harness: str, capsys) -> None:  # type: ignore[no-untyped-def]
    put(top, ".gitignore", "x\n")
    assert run(top, harness, ask_to_record=True) == 0
    first = state(top)
    assert set(first) == {".gitignore", *FILES[harness]}
    capsys.readouterr()
    assert run(top, harness, ask_to_record=True) == 0
    assert state(top) == first
    out = capsys.readouterr().out
    assert [f"unchanged {rel}" for rel in FILES[harness]] == out.splitlines()[:len(FILES[harness])]
    assert "nothing was changed" in out and "wrote" not in out
    assert run(top, harness, check=True, ask_to_record=True) == 0
    assert state(top) == first


def test_a_file_holding_the_same_in_other_spacing_is_not_rewritten(top: Path) -> None:
    put(top, ".claude/settings.json", json.dumps({"hooks": claude_hooks()}, separators=(",", ":")))
    put(top, ".mcp.json", {"mcpServers": {"qem": {"args": ["mcp"], "command": QEM}}})
    before = state(top)
    assert run(top) == 0
    assert state(top) == before


def test_stop_is_written_only_when_asked_for_and_then_stays(top: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    run(top)
    assert "Stop" not in read(top, ".claude/settings.json")["hooks"]
    assert run(top, check=True) == 0
    run(top, ask_to_record=True)
    assert read(top, ".claude/settings.json")["hooks"] == claude_hooks(stop=True)
    assert "wrote .claude/settings.json: hooks Stop\n" in capsys.readouterr().out
    before = state(top)
    assert run(top, check=True) == 0  # the opt-in is not a difference
    assert run(top) == 0  # nor does a plain run take it out
    assert state(top) == before
    assert "nothing was changed" in capsys.readouterr().out
    assert run(top, check=True, no_ask_to_record=True) == 1
    out = capsys.readouterr().out
    assert ".claude/settings.json: a qem hook for Stop not asked for (--no-ask-to-record takes it out)" in out
    assert f"`qem setup claude --no-ask-to-record --command {QEM}` writes them" in out
    assert run(top, no_ask_to_record=True) == 0
    assert read(top, ".claude/settings.json")["hooks"] == claude_hooks()
    assert "wrote .claude/settings.json: removed hooks Stop\n" in capsys.readouterr().out
    assert run(top, check=True) == 0 and run(top, check=True, no_ask_to_record=True) == 0


@pytest.mark.parametrize("harness, event", [("claude", "Stop"), ("codex", "Stop"), ("gemini", "AfterAgent")])
def test_a_plain_run_leaves_the_stop_event_as_it_is(top: Path, harness: str, event: str) -> None:
    """Not refreshed either: only --ask-to-record writes qem's Stop hook, and a user's own
    handlers there stay; --remove takes qem's out."""
    rel = FILES[harness][0]
    run(top, harness, ask_to_record=True)
    doc = read(top, rel)
    mine = {"type": "command", "command": "./notify.sh"}
    doc["hooks"][event][0]["hooks"].append(mine)
    doc["hooks"][event][0]["hooks"][0]["timeout"] = 77
    put(top, rel, doc)
    assert run(top, harness) == 0 and run(top, harness, check=True) == 0
    assert read(top, rel)["hooks"][event] == doc["hooks"][event]
    assert run(top, harness, ask_to_record=True) == 0
    assert read(top, rel)["hooks"][event] == [{"hooks": [mine]}, {"hooks": [handler(QEM, harness, event)]}]
    assert run(top, harness, remove=True) == 0
    assert read(top, rel)["hooks"] == {event: [{"hooks": [mine]}]}


def test_ask_and_no_ask_to_record_do_not_go_together(top: Path) -> None:
    with pytest.raises(errors.BadInput, match="--ask-to-record and --no-ask-to-record do not go together"):
        run(top, ask_to_record=True, no_ask_to_record=True)
    assert state(top) == {}


def test_a_command_of_several_words(top: Path) -> None:
    command = f"{sys.executable} -m qem_edit"
    assert run(top, command=command) == 0
    hooks = read(top, ".claude/settings.json")["hooks"]
    assert hooks["SessionStart"][0]["hooks"] == [handler(command)]
    assert read(top, ".mcp.json")["mcpServers"]["qem"] == {"command": sys.executable, "args": ["-m", "qem_edit", "mcp"]}
    before = state(top)
    assert run(top, command=command) == 0
    assert state(top) == before
    assert run(top, command=QEM) == 0  # another command replaces qem's hooks, never adds to them
    assert read(top, ".claude/settings.json") == {"hooks": claude_hooks()}


def test_an_empty_file_is_an_empty_object_and_a_file_keeps_its_mode(top: Path) -> None:
    put(top, ".claude/settings.json", b"\n")
    put(top, ".mcp.json", {"mcpServers": {}}).chmod(0o600)
    assert run(top) == 0
    assert read(top, ".claude/settings.json") == {"hooks": claude_hooks()}
    assert (top / ".mcp.json").stat().st_mode & 0o777 == 0o600


def test_the_files_go_to_the_top_of_the_work_tree(top: Path) -> None:
    (top / "src").mkdir()
    assert setup.run("claude", Workspace(root=top / "src", store_path=top / ".qem"), command=QEM) == 0
    assert (top / ".claude/settings.json").is_file() and not (top / "src" / ".claude").exists()


# -- the harnesses' own contracts ----------------------------------------------------------------


def test_claude_settings_meet_the_published_schema(top: Path) -> None:
    put(top, ".claude/settings.json", USER_SETTINGS)
    run(top, ask_to_record=True)
    validate(read(top, ".claude/settings.json"), CONTRACTS / "claude" / "claude-code-settings.json")


def test_gemini_settings_meet_the_published_schema_and_keep_its_own(top: Path) -> None:
    mine = {"ui": {"theme": "Default"}, "hooksConfig": {"enabled": True},
            "hooks": {"BeforeTool": [{"matcher": "write_file", "hooks": [
                {"type": "command", "command": "./guard.sh", "name": "guard", "timeout": 5000}]}]},
            "mcpServers": {"db": {"command": "db-mcp"}}}
    put(top, ".gemini/settings.json", mine)
    assert run(top, "gemini", ask_to_record=True) == 0
    doc = read(top, ".gemini/settings.json")
    validate(doc, CONTRACTS / "gemini" / "settings.schema.json")
    assert doc["ui"] == {"theme": "Default"} and doc["hooksConfig"] == {"enabled": True}
    assert list(doc["hooks"])[:1] == ["BeforeTool"]
    assert doc["hooks"]["BeforeTool"] == mine["hooks"]["BeforeTool"] + [  # the user's group first, qem's own after it
        {"matcher": "^(write_file|replace|run_shell_command)$", "hooks": [handler(QEM, "gemini", "BeforeTool")]}]
    assert doc["hooks"]["AfterTool"] == [{"matcher": "^(read_file|read_many_files|write_file|replace|run_shell_command)$",
                                          "hooks": [handler(QEM, "gemini", "AfterTool")]}]
    assert doc["hooks"]["BeforeAgent"] == [{"hooks": [handler(QEM, "gemini", "BeforeAgent")]}]
    assert set(doc["hooks"]) == {h.event for h in HARNESSES["gemini"].hooks}
    assert doc["mcpServers"] == {"db": {"command": "db-mcp"}, "qem": {"command": QEM, "args": ["mcp"]}}


def test_gemini_settings_under_hooks_are_kept(top: Path) -> None:
    """Gemini CLI reads `hooks.enabled` (and `disabled`, `notifications`) as settings, not events."""
    put(top, ".gemini/settings.json", {"hooks": {"enabled": True, "disabled": ["lint"]}})
    assert run(top, "gemini") == 0
    assert list(read(top, ".gemini/settings.json")["hooks"])[:3] == ["enabled", "disabled", "SessionStart"]
    run(top, "gemini", remove=True)
    assert read(top, ".gemini/settings.json") == {"hooks": {"enabled": True, "disabled": ["lint"]}}


def test_codex_hooks_json_has_the_exact_shape(top: Path) -> None:
    assert run(top, "codex", ask_to_record=True) == 0
    matchers = {"SessionStart": "startup|resume|clear|compact", "PreToolUse": "apply_patch|Bash"}
    events = ["SessionStart", "UserPromptSubmit", "PreToolUse", "SubagentStart", "PreCompact", "SessionEnd", "Stop"]
    assert read(top, ".codex/hooks.json") == {"hooks": {
        event: [({"matcher": matchers[event]} if event in matchers else {})
                | {"hooks": [{"type": "command", "command": f"{QEM} hook codex {event}", "timeout": {"SessionStart": 120, "SessionEnd": 3}.get(event, 10)}]}]
        for event in events}}
    assert set(HARNESSES["codex"].hook(e).event for e in events) == set(events)
    text = (top / ".codex/config.toml").read_text("utf-8")
    assert text == f'[mcp_servers.qem]\ncommand = "{QEM}"\nargs = ["mcp"]\n'
    assert tomllib.loads(text) == {"mcp_servers": {"qem": {"command": QEM, "args": ["mcp"]}}}


def test_codex_keeps_a_description_and_other_events(top: Path) -> None:
    mine = {"description": "team hooks", "hooks": {"PostToolUse": [{"hooks": [{"type": "command", "command": "x"}]}]}}
    put(top, ".codex/hooks.json", mine)
    run(top, "codex")
    doc = read(top, ".codex/hooks.json")
    assert doc["description"] == "team hooks" and doc["hooks"]["PostToolUse"] == mine["hooks"]["PostToolUse"]


# -- Codex's config.toml, edited as text ----------------------------------------------------------

CONFIG = '''# my settings
model = "o3"  # the model

[mcp_servers.db]
command = "db-mcp"
args = ["--ro"]

[profiles.fast]
model = "o4-mini"
'''


def test_toml_the_table_is_appended_and_no_other_line_changes(top: Path) -> None:
    put(top, ".codex/config.toml", CONFIG)
    run(top, "codex")
    text = (top / ".codex/config.toml").read_text("utf-8")
    assert text == CONFIG + f'\n[mcp_servers.qem]\ncommand = "{QEM}"\nargs = ["mcp"]\n'
    put(top, ".codex/config.toml", CONFIG.rstrip("\n"))  # no newline at the end
    run(top, "codex")
    assert (top / ".codex/config.toml").read_text("utf-8").startswith(CONFIG + "\n[mcp_servers.qem]\n")


def test_toml_a_different_table_is_replaced_line_for_line(top: Path) -> None:
    old = ('[mcp_servers.qem]\r\ncommand = "qem-old"\r\nargs = []\r\n\r\n[mcp_servers.qem.env]\r\nA = "1"\r\n'
           '\r\n# the profiles\r\n')
    put(top, ".codex/config.toml", CONFIG.replace("\n", "\r\n").replace("[profiles.fast]", old + "[profiles.fast]"))
    assert run(top, "codex", check=True) == 1
    run(top, "codex")
    text = (top / ".codex/config.toml").read_bytes().decode("utf-8")
    table = old.replace('"qem-old"', f'"{QEM}"').replace("args = []", 'args = ["mcp"]')
    assert text == CONFIG.replace("\n", "\r\n").replace("[profiles.fast]", table + "[profiles.fast]")
    data = tomllib.loads(text)
    assert data["mcp_servers"] == {"db": {"command": "db-mcp", "args": ["--ro"]},
                                   "qem": {"command": QEM, "args": ["mcp"], "env": {"A": "1"}}}
    assert data["profiles"] == {"fast": {"model": "o4-mini"}} and data["model"] == "o3"
    before = state(top)
    run(top, "codex")
    assert state(top) == before


def test_toml_qem_owns_only_command_and_args_of_its_table(top: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Its other keys and its subtables stay, line for line; a value over several lines is
    replaced whole; a key that only looks like `command` inside another value is left."""
    old = ('[mcp_servers.qem]\n'
           '# qem, run from the venv\n'
           'command = "qem-old"  # the old one\n'
           'note = """\ncommand = "not a key"\n"""\n'
           'args = [\n  "mcp",\n  # the workspace\n  "-w", "x",\n]\n'
           'startup_timeout_sec = 20\n'
           '\n'
           '[mcp_servers.qem.env]\n'
           'QEM_ACTOR = "alice"\n'
           '\n')
    put(top, ".codex/config.toml", CONFIG.replace("[profiles.fast]", old + "[profiles.fast]"))
    assert run(top, "codex", check=True) == 1
    assert '.codex/config.toml: MCP server qem is {"command": "qem-old", "args": ["mcp", "-w", "x"]}, not' in \
        capsys.readouterr().out
    assert run(top, "codex") == 0
    new = old.replace('command = "qem-old"  # the old one\n', f'command = "{QEM}"\n').replace(
        'args = [\n  "mcp",\n  # the workspace\n  "-w", "x",\n]\n', 'args = ["mcp"]\n')
    text = (top / ".codex/config.toml").read_text("utf-8")
    assert text == CONFIG.replace("[profiles.fast]", new + "[profiles.fast]")
    assert tomllib.loads(text)["mcp_servers"]["qem"] == {"command": QEM, "args": ["mcp"], "startup_timeout_sec": 20,
                                                         "note": 'command = "not a key"\n', "env": {"QEM_ACTOR": "alice"}}
    assert "wrote .codex/config.toml: MCP server qem ([mcp_servers.qem]; note, startup_timeout_sec, env kept)" in \
        capsys.readouterr().out
    before = state(top)
    assert run(top, "codex", check=True) == 0 and run(top, "codex") == 0
    assert state(top) == before
    assert run(top, "codex", remove=True) == 0
    assert (top / ".codex/config.toml").read_text("utf-8") == CONFIG
    assert ("wrote .codex/config.toml: removed MCP server qem (the whole entry, note, startup_timeout_sec, env too:"
            " [mcp_servers.qem], [mcp_servers.qem.env])") in capsys.readouterr().out


@pytest.mark.parametrize("old, new", [
    # a table without command or args: they go after its last key (a last line without its newline gets one)
    ('[mcp_servers.qem]\nenabled = true', f'[mcp_servers.qem]\nenabled = true\ncommand = "{QEM}"\nargs = ["mcp"]\n'),
    ('[mcp_servers.qem]\nargs = ["mcp"]\n\n# end\n', f'[mcp_servers.qem]\nargs = ["mcp"]\ncommand = "{QEM}"\n\n# end\n'),
    # a key TOML reads as a date stays as it is
    ('[mcp_servers.qem]\nsince = 1979-05-27T07:32:00Z\ncommand = "old"\n',
     f'[mcp_servers.qem]\nsince = 1979-05-27T07:32:00Z\ncommand = "{QEM}"\nargs = ["mcp"]\n'),
    # only a subtable: qem's table goes before it
    ('x = 1\n\n[mcp_servers.qem.env]\nA = "1"\n',
     f'x = 1\n\n[mcp_servers.qem]\ncommand = "{QEM}"\nargs = ["mcp"]\n\n[mcp_servers.qem.env]\nA = "1"\n'),
])
def test_toml_command_and_args_are_added_where_missing(top: Path, old: str, new: str) -> None:
    put(top, ".codex/config.toml", old)
    assert run(top, "codex") == 0
    assert (top / ".codex/config.toml").read_text("utf-8") == new


def test_toml_remove_takes_out_only_the_table(top: Path) -> None:
    put(top, ".codex/config.toml", CONFIG)
    run(top, "codex")
    run(top, "codex", remove=True)
    assert (top / ".codex/config.toml").read_text("utf-8") == CONFIG + "\n"
    assert tomllib.loads((top / ".codex/config.toml").read_text("utf-8")) == tomllib.loads(CONFIG)


def test_toml_an_inline_mcp_servers_gets_advice_that_works(top: Path) -> None:
    """A [mcp_servers.qem] table next to an inline mcp_servers is not TOML: the advice is to
    turn the inline table into tables (or to add qem to it), and following either works."""
    inline = 'mcp_servers = { db = { command = "db" } }\n'
    put(top, ".codex/config.toml", inline)
    with pytest.raises(errors.BadInput) as refused:
        run(top, "codex")
    said = str(refused.value)
    assert said.startswith(".codex/config.toml: ") and "inline table" in said
    assert "Turn it into [mcp_servers.NAME] tables" in said and "add [mcp_servers.qem] by hand" not in said
    by_hand = said.split("add qem to it by hand (")[1].split(")")[0]
    assert by_hand == f'qem = {{ command = "{QEM}", args = ["mcp"] }}'
    put(top, ".codex/config.toml", inline.replace(" }\n", f", {by_hand} }}\n"))
    assert run(top, "codex", check=True) == 1  # the hooks are still missing, not the server
    put(top, ".codex/config.toml", '[mcp_servers.db]\ncommand = "db"\n')  # the other way
    assert run(top, "codex") == 0
    assert tomllib.loads((top / ".codex/config.toml").read_text("utf-8"))["mcp_servers"]["qem"]["command"] == QEM


@pytest.mark.parametrize("text, said", [
    ('model = "o3"\n[broken\n', "not valid TOML"),
    ('mcp_servers = "none"\n', "mcp_servers is not a table"),
    ('mcp_servers = { db = { command = "db" } }\n', "cannot edit its [mcp_servers.qem] table"),
    ('[[mcp_servers.qem]]\ncommand = "qem"\n', "mcp_servers.qem is not a table"),
    ('[mcp_servers]\nqem = { command = "old", args = [] }\n', "not written as a [mcp_servers.qem] table"),
])
def test_toml_qem_cannot_edit_is_refused_and_nothing_is_written(top: Path, text: str, said: str) -> None:
    put(top, ".codex/config.toml", text)
    before = state(top)
    with pytest.raises(errors.BadInput, match=r"\.codex/config\.toml") as refused:
        run(top, "codex")
    assert said in str(refused.value)
    assert state(top) == before  # hooks.json, valid and absent, is not written either


# -- --check ----------------------------------------------------------------------------------------


def test_check_writes_nothing_and_names_what_is_missing(top: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    put(top, ".mcp.json", {"mcpServers": {"qem": {"command": "old-qem", "args": ["mcp"]}}})
    before = state(top)
    assert run(top, check=True) == errors.EXIT_DIFFERENT
    assert state(top) == before
    out = capsys.readouterr().out.splitlines()
    missing = len(CLAUDE_EVENTS)
    assert [f".claude/settings.json: no qem hook for {e}" for e in CLAUDE_EVENTS] == out[:missing]
    assert out[missing].startswith(".mcp.json: MCP server qem is {\"command\": \"old-qem\"")
    assert out[-1] == f"`qem setup claude --command {QEM}` writes them"
    run(top)
    capsys.readouterr()
    assert run(top, check=True) == 0
    assert capsys.readouterr().out.startswith("in place: ")


def test_check_names_a_hook_that_differs(top: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    run(top)
    doc = read(top, ".claude/settings.json")
    doc["hooks"]["PreCompact"][0]["hooks"][0]["timeout"] = 60
    put(top, ".claude/settings.json", doc)
    capsys.readouterr()
    assert run(top, check=True) == 1
    assert capsys.readouterr().out.splitlines()[0].startswith(
        ".claude/settings.json: qem's hook for PreCompact differs from what qem writes")


# -- --remove -------------------------------------------------------------------------------------


def test_remove_takes_out_only_qem(top: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    put(top, ".claude/settings.json", USER_SETTINGS)
    put(top, ".mcp.json", {"mcpServers": {"db": {"command": "db-mcp"}}})
    run(top, ask_to_record=True)
    capsys.readouterr()
    assert run(top, remove=True) == 0
    got = read(top, ".claude/settings.json")
    mine = USER_SETTINGS["hooks"]
    pre_bash = dict(mine["PreToolUse"][0], hooks=[mine["PreToolUse"][0]["hooks"][0], mine["PreToolUse"][0]["hooks"][2]])
    assert got == dict(USER_SETTINGS, hooks={"PostToolUse": mine["PostToolUse"],
                                             "PreToolUse": [pre_bash, mine["PreToolUse"][1]],
                                             "SessionStart": [mine["SessionStart"][1]], "Notification": []})
    assert read(top, ".mcp.json") == {"mcpServers": {"db": {"command": "db-mcp"}}}
    out = capsys.readouterr().out
    assert "wrote .claude/settings.json: removed hooks " in out and "wrote .mcp.json: removed MCP server qem" in out
    before = state(top)
    assert run(top, remove=True) == 0
    assert state(top) == before
    assert "nothing was changed" in capsys.readouterr().out


@pytest.mark.parametrize("harness", sorted(FILES))
def test_remove_leaves_an_emptied_file_in_place_and_says_so(top: Path, harness: str, capsys) -> None:  # type: ignore[no-untyped-def]
    run(top, harness, ask_to_record=True)
    capsys.readouterr()
    run(top, harness, remove=True)
    for rel in FILES[harness]:
        assert (top / rel).read_text("utf-8") == ("" if rel.endswith(".toml") else "{}\n")
    assert "it is left holding" in capsys.readouterr().out


def test_remove_where_nothing_is_creates_nothing(top: Path) -> None:
    assert run(top, remove=True) == 0
    assert state(top) == {}


# -- refusals ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("harness, rel, content, said", [
    ("claude", ".claude/settings.json", '{\n  "hooks": {,\n}', "not valid JSON: Expecting property name enclosed"
                                                              " in double quotes at line 2, column 13"),
    ("claude", ".claude/settings.json", "[1, 2]", "holds an array, not an object"),
    ("claude", ".claude/settings.json", '{"hooks": []}', '"hooks" is an array, not an object'),
    ("claude", ".claude/settings.json", '{"hooks": {"Stop": {}}}', "hooks.Stop is an object, not a list"),
    ("claude", ".claude/settings.json", '{"hooks": {"Stop": ["x"]}}', "hooks.Stop[0] is a string, not a matcher group"),
    ("claude", ".mcp.json", '{"mcpServers": []}', '"mcpServers" is an array, not an object'),
    ("claude", ".mcp.json", b'{"a": "\xff"}', "is not UTF-8"),
    ("codex", ".codex/hooks.json", '{"hooks": {"PreToolUse": 3}}', "hooks.PreToolUse is a number, not a list"),
    ("gemini", ".gemini/settings.json", '{"hooks": {"AfterTool": [null]}}', "hooks.AfterTool[0] is null, not a matcher group"),
    ("gemini", ".gemini/settings.json", '{"mcpServers": "qem"}', '"mcpServers" is a string, not an object'),
    ("claude", ".claude/settings.json", '{"x": NaN}', "is not valid JSON: it holds NaN"),
    ("claude", ".mcp.json", '{"x": [Infinity]}', "is not valid JSON: it holds Infinity"),
    ("gemini", ".gemini/settings.json", '{"x": -Infinity}', "is not valid JSON: it holds -Infinity"),
    ("claude", ".mcp.json", '{"x": 1e400}', "holds the number 1e400, too large for qem to write back"),
    ("claude", ".claude/settings.json", '{"hooks": {}, "model": "x", "hooks": {"Stop": []}}',
     'holds the key "hooks" twice in one object'),
    ("codex", ".codex/hooks.json", '{"hooks": {"Stop": [{"matcher": "a", "hooks": [], "matcher": "b"}]}}',
     'holds the key "matcher" twice in one object'),
    ("claude", ".mcp.json", '{"mcpServers": {"qem": {"command": "q"}, "qem": {"command": "r"}}}',
     'holds the key "qem" twice'),
    ("claude", ".claude/settings.json", '{"model": "x" /* mine */}', "is not valid JSON"),  # Claude's: no comments
])
def test_a_malformed_file_is_refused_and_nothing_changes(top: Path, harness: str, rel: str, content, said: str) -> None:  # type: ignore[no-untyped-def]
    put(top, rel, content)
    before = state(top)
    with pytest.raises(errors.BadInput) as refused:
        run(top, harness)
    assert str(refused.value).startswith(rel) and said in str(refused.value), str(refused.value)
    assert state(top) == before  # the harness's other file, which would be written, is not either


def test_a_link_is_refused(top: Path) -> None:
    put(top, "shared.json", {})
    (top / ".claude").mkdir()
    (top / ".claude/settings.json").symlink_to(top / "shared.json")
    with pytest.raises(errors.BadInput) as refused:
        run(top)
    said = str(refused.value)
    assert said.startswith(f".claude/settings.json is a symbolic link (to {top / 'shared.json'}); qem writes only"
                           " regular files: replace the link with the file it points to, or run qem setup where the"
                           " real file is")
    assert "--path" not in said
    assert read(top, "shared.json") == {} and not (top / ".mcp.json").exists()


# Root may write any file (os.access says so), so a read-only file is known by its mode too.
def test_a_read_only_file_is_refused_before_anything_is_written(top: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    put(top, ".mcp.json", {"mcpServers": {}}).chmod(0o444)
    before = state(top)
    with pytest.raises(errors.BadInput) as refused:
        run(top)
    assert str(refused.value).startswith(".mcp.json is read-only;") and "chmod u+w .mcp.json" in str(refused.value)
    assert state(top) == before  # .claude/settings.json, to be written first, is not either
    assert run(top, check=True) == 1  # --check writes nothing: it reads a read-only file
    (top / ".mcp.json").chmod(0o644)
    run(top)
    (top / ".mcp.json").chmod(0o444)
    capsys.readouterr()
    assert run(top) == 0 and "unchanged .mcp.json" in capsys.readouterr().out  # a file already right is not written


def test_a_file_this_user_may_not_write_is_refused(top: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """os.access decides for a user other than root (its mode may let others write it)."""
    path = put(top, ".codex/hooks.json", {})
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, how, **kw: False if Path(p) == path else real_access(p, how, **kw))
    with pytest.raises(errors.BadInput, match=r"^\.codex/hooks\.json is read-only"):
        run(top, "codex")
    assert not (top / ".codex/config.toml").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write a file whatever its owner allows")
def test_a_file_of_another_mode_this_user_may_not_write_is_refused(top: Path) -> None:
    put(top, ".gemini/settings.json", {}).chmod(0o544)
    with pytest.raises(errors.BadInput, match="is read-only"):
        run(top, "gemini")


# -- Gemini CLI's settings, which may hold comments -------------------------------------------------

COMMENTED = '''{
  // the look
  "ui": {"theme": "Default"}, /* a block
  over lines */
  "url": "http://example.com/*not-a-comment*/", "path": "a//b"
}
'''


def test_gemini_settings_with_comments_are_refused_saying_why(top: Path) -> None:
    put(top, ".gemini/settings.json", COMMENTED)
    before = state(top)
    with pytest.raises(errors.BadInput) as refused:
        run(top, "gemini")
    said = str(refused.value)
    assert said.startswith(".gemini/settings.json has comments (// or /* */), which Gemini CLI allows and qem cannot"
                           " keep")
    assert f"`qem setup gemini --command {QEM} --check`" in said
    assert state(top) == before
    assert run(top, "gemini", check=True) == 1  # --check reads it: what is missing, not a refusal
    # the entries named in the refusal, added by hand, comments kept, are what --check wants
    entries = json.loads(said.split("--check`: ")[1].removesuffix("; qem changed nothing"))
    doc = json.loads(setup._without_comments(COMMENTED))
    text = COMMENTED.replace('"path": "a//b"', '"path": "a//b", "hooks": ' + json.dumps(entries["hooks"])
                             + ', "mcpServers": ' + json.dumps(entries["mcpServers"]))
    put(top, ".gemini/settings.json", text)
    assert run(top, "gemini", check=True) == 0
    before = state(top)
    assert run(top, "gemini") == 0  # nothing to write: no refusal
    assert state(top) == before
    assert doc["url"] == "http://example.com/*not-a-comment*/" and doc["path"] == "a//b"
    with pytest.raises(errors.BadInput, match="take qem's entries out by hand"):
        run(top, "gemini", remove=True)
    assert state(top) == before


def test_gemini_settings_with_comments_and_an_error_name_the_error(top: Path) -> None:
    put(top, ".gemini/settings.json", '{\n  // a comment\n  "a": 1,,\n}')
    with pytest.raises(errors.BadInput, match=r"^\.gemini/settings\.json is not valid JSON: .* at line 3, column 10"):
        run(top, "gemini")


def test_an_unknown_harness_and_check_with_remove_are_refused(top: Path) -> None:
    with pytest.raises(errors.BadInput, match="unknown harness 'cursor'; use one of: claude, codex, gemini"):
        run(top, "cursor")
    with pytest.raises(errors.BadInput, match="--check and --remove"):
        run(top, check=True, remove=True)
    with pytest.raises(errors.BadInput, match="--command"):
        run(top, command="  ")
    assert state(top) == {}


def test_a_command_not_on_the_path_is_written_with_a_warning(top: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert run(top, command="qem-not-installed-here") == 0
    err = capsys.readouterr().err
    assert err.startswith("qem: qem-not-installed-here is not on this PATH") and "--command /abs/path/to/qem" in err
    assert read(top, ".mcp.json")["mcpServers"]["qem"]["command"] == "qem-not-installed-here"
    run(top)
    assert capsys.readouterr().err == ""


# -- the real entry point -----------------------------------------------------------------------------


def test_the_command_line(top: Path) -> None:
    assert run_qem("add", "x", "-k", "directive", cwd=top).returncode == 0
    (top / "src").mkdir()
    first = run_qem("setup", "claude", "--command", QEM, cwd=top / "src")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("wrote .claude/settings.json: hooks SessionStart")
    assert read(top, ".claude/settings.json") == {"hooks": claude_hooks()}
    before = state(top)
    again = run_qem("setup", "claude", "--command", QEM, cwd=top)
    assert again.returncode == 0 and "nothing was changed" in again.stdout
    assert run_qem("setup", "claude", "--check", "--command", QEM, cwd=top).returncode == 0
    missing = run_qem("setup", "claude", "--check", "--ask-to-record", "--command", QEM, cwd=top)
    assert missing.returncode == 1 and ".claude/settings.json: no qem hook for Stop" in missing.stdout
    assert state(top) == before
    broken = b'{"hooks": {"Stop": [}'
    put(top, ".claude/settings.json", broken)
    put(top, ".mcp.json", b"{}")
    before = state(top)
    refused = run_qem("setup", "claude", "--command", QEM, cwd=top)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.startswith("qem: error: .claude/settings.json is not valid JSON:")
    assert "line 1, column 21" in refused.stderr
    assert state(top) == before and (top / ".claude/settings.json").read_bytes() == broken
    for bad in (["setup", "vim"], ["setup", "claude", "--check", "--remove"]):
        done = run_qem(*bad, cwd=top)
        assert done.returncode == 2 and done.stderr.startswith("qem: error: ")
    assert state(top) == before


def test_the_module_imports_nothing_slow_at_its_top() -> None:
    done = subprocess.run([sys.executable, "-c", "import sys, qem_edit.shells.setup; print(sorted(sys.modules))"],
                          capture_output=True, text=True, check=True, env=dict(os.environ))
    loaded = set(json.loads(done.stdout.replace("'", '"')))
    assert not loaded & {"qem_edit.reads.delivery", "qem_edit.storage.store", "tomllib", "shlex", "shutil", "typer", "sqlite3", "_sqlite3"}


def test_codex_setup_says_whether_codex_will_run_the_hooks_and_how_to_trust_them(top: Path, tmp_path, monkeypatch,
                                                                                   capsys) -> None:  # type: ignore[no-untyped-def]
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    assert run(top, "codex") == 0
    out = capsys.readouterr().out
    n = sum(not hook.opt_in for hook in HARNESSES["codex"].hooks)
    assert (f"Codex will not run qem's hooks yet: the project is not trusted ({codex_home / 'config.toml'} has no"
            f" trust_level = \"trusted\" for {top}); {n} of qem's {n} hooks are not trusted") in out
    assert "type /hooks and trust qem's hooks" in out
    assert out.splitlines()[-1].startswith("the hooks run ")  # the sample stays the last line
    (codex_home / "config.toml").write_text(f"[projects.{json.dumps(str(top.resolve()))}]\ntrust_level = \"trusted\"\n")
    assert run(top, "codex", check=True) == 0
    out = capsys.readouterr().out
    assert "the project is not trusted" not in out and f"{n} of qem's {n} hooks are not trusted" in out
    (codex_home / "config.toml").write_text("[projects\n")
    assert run(top, "codex", check=True) == 0
    assert f"Codex's trust of qem's hooks is unknown: {codex_home / 'config.toml'} could not be read" in \
        capsys.readouterr().out


def test_setup_says_when_the_mcp_server_it_names_cannot_start(top: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    # README's first command installs qem without the mcp extra: the entry setup writes would
    # fail in the harness, so setup says what to install; with the package, it says nothing
    import importlib.util

    real = importlib.util.find_spec
    assert run(top) == 0
    assert "needs the mcp package" not in capsys.readouterr().out
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a))
    assert run(top, "codex") == 0
    out = capsys.readouterr().out
    assert "`qem mcp`, which needs the mcp package" in out and "pip install 'qem-edit[mcp]'" in out
    assert out.splitlines()[-1].startswith("the hooks run ")  # the sample stays the last line
