"""`qem setup HARNESS --plugin DIR`: qem's hooks and MCP server as a plugin, checked by each
harness's own tools (pinned, installed from npm by tests/_harness_bins.py) and holding what
`qem setup HARNESS` writes into a project, byte for byte where the shapes are the same.

- Claude Code: `claude plugin validate --strict` passes the marketplace and the plugin, and
  lists the hooks and the server `qem setup claude` writes; the plugin installs from the
  marketplace, and a real session's first request holds the directives its hooks gave.
- Codex publishes no validator or schema for a plugin's manifest (codex-rs/core-plugins
  reads it leniently, warning and dropping what it cannot use), so the real Codex is the
  check: it adds the marketplace, installs the plugin, and a session's first request holds
  the directives the plugin's hooks gave.
- Gemini CLI: `gemini extensions validate` passes the extension (it checks the manifest),
  and the hooks and server meet Gemini CLI's published settings schema (tests/contracts/);
  the extension installs and lists its MCP server.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _harness_bins import harness_bin
from _harness_drive import Project, claude, codex, first_with, project
from conftest import run_qem

pytestmark = pytest.mark.harness

QEM = str(Path(sys.executable).parent / "qem")
CONTRACTS = Path(__file__).resolve().parent / "contracts"
DIRECTIVE = "Run the test suite with -n 0 on this machine"


def plugin(directory: Path, harness: str, *more: str) -> subprocess.CompletedProcess:
    return run_qem("setup", harness, "--plugin", str(directory), "--command", QEM, *more)


def settings(tmp_path: Path, harness: str) -> Path:
    """A project where `qem setup HARNESS` wrote its settings: what a plugin must hold."""
    work = tmp_path / "settings"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    done = run_qem("setup", harness, "--command", QEM, cwd=work)
    assert done.returncode == 0, done.stderr
    return work


def validate(path: Path) -> dict:
    done = subprocess.run([str(harness_bin("claude")), "plugin", "validate", "--strict", "--json", str(path)],
                          capture_output=True, text=True, timeout=120, env=offline(path.parent))
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["success"], done.stdout
    assert not report["manifest"]["errors"] and not report["manifest"]["warnings"], report["manifest"]
    return report


def offline(home: Path) -> dict[str, str]:
    import os

    return dict(os.environ, HOME=str(home), CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1",
                NO_COLOR="1")


def test_the_claude_plugin_passes_claude_plugin_validate_strict_and_holds_what_setup_writes(tmp_path: Path) -> None:
    market = tmp_path / "market"
    done = plugin(market, "claude")
    assert done.returncode == 0, done.stderr
    assert f"claude plugin marketplace add {market}" in done.stdout
    validate(market)  # the marketplace
    report = validate(market / "plugins" / "qem")  # the plugin
    work = settings(tmp_path, "claude")
    hooks = json.loads((work / ".claude" / "settings.json").read_text())["hooks"]
    given = [(event, group.get("matcher"), handler["command"])
             for event, groups in hooks.items() for group in groups for handler in group["hooks"]]
    listed = [(h["event"], h.get("matcher"), h["command"]) for h in report["provides"]["hooks"]]
    assert listed == given and len(given) >= 5
    server = json.loads((work / ".mcp.json").read_text())["mcpServers"]["qem"]
    assert [(s["name"], s["target"], s["args"]) for s in report["provides"]["mcpServers"]] == \
        [("qem", server["command"], server["args"])]
    # and the files themselves are setup's: the same groups, timeouts included
    assert json.loads((market / "plugins/qem/hooks/hooks.json").read_text())["hooks"] == hooks
    assert json.loads((market / "plugins/qem/.mcp.json").read_text())["mcpServers"] == {"qem": server}


def test_a_second_run_changes_nothing_check_names_what_differs_and_other_plugins_stay(tmp_path: Path) -> None:
    market = tmp_path / "market"
    (market / ".claude-plugin").mkdir(parents=True)
    theirs = {"name": "tools", "source": "./plugins/tools", "description": "the team's own"}
    (market / ".claude-plugin" / "marketplace.json").write_text(json.dumps(
        {"name": "team", "owner": {"name": "the team"}, "plugins": [theirs]}))
    assert plugin(market, "claude").returncode == 0
    doc = json.loads((market / ".claude-plugin" / "marketplace.json").read_text())
    assert doc["name"] == "team" and doc["owner"] == {"name": "the team"}
    assert [p["name"] for p in doc["plugins"]] == ["tools", "qem"] and doc["plugins"][0] == theirs
    files = {p: p.stat().st_mtime_ns for p in market.rglob("*") if p.is_file()}
    again = plugin(market, "claude")
    assert again.returncode == 0 and "up to date" in again.stdout
    assert {p: p.stat().st_mtime_ns for p in market.rglob("*") if p.is_file()} == files
    assert plugin(market, "claude", "--check").returncode == 0
    (market / "plugins/qem/hooks/hooks.json").write_text("{}\n")
    checked = plugin(market, "claude", "--check")
    assert checked.returncode == 1 and "plugins/qem/hooks/hooks.json: differs from what qem writes" in checked.stdout
    refused = plugin(market, "claude", "--remove")
    assert refused.returncode == 2 and "--remove does not go with --plugin" in refused.stderr


def memory_without_settings(tmp_path: Path) -> Project:
    """A project with a directive in its memory and no harness settings of qem's: what the
    session is given comes from the plugin alone."""
    made = project(tmp_path)
    made.sh(QEM, "add", DIRECTIVE, "--kind", "directive")
    assert not (made.work / ".claude").exists() and not (made.work / ".codex").exists()
    return made


def test_claude_installs_the_plugin_from_its_marketplace_and_its_hooks_start_the_session(tmp_path: Path) -> None:
    made = memory_without_settings(tmp_path)
    market = tmp_path / "market"
    assert plugin(market, "claude").returncode == 0
    binary = str(harness_bin("claude"))
    env = dict(made.env(), CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1")
    for argv in (["plugin", "marketplace", "add", str(market)], ["plugin", "install", "qem@qem"]):
        done = subprocess.run([binary, *argv], cwd=made.work, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    run = claude(made, "tidy up the module", [])
    assert run.done.returncode == 0, run.done.stderr[-2000:]
    assert first_with(run.server, DIRECTIVE) == 0


def test_codex_installs_the_plugin_from_its_marketplace_and_its_hooks_start_the_session(tmp_path: Path) -> None:
    made = memory_without_settings(tmp_path)
    market = tmp_path / "market"
    assert plugin(market, "claude").returncode == 0  # one folder can serve both harnesses
    assert plugin(market, "codex").returncode == 0
    binary = str(harness_bin("codex"))
    env = dict(made.env(), CODEX_HOME=str(made.codex_home))
    for argv in (["plugin", "marketplace", "add", str(market)], ["plugin", "add", "qem@qem"], ["plugin", "list"]):
        done = subprocess.run([binary, *argv], cwd=made.work, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    assert f"qem@qem  installed, enabled  0.1.0    {market / 'plugins' / 'qem-codex'}" in done.stdout
    installed = (made.codex_home / "config.toml").read_text()  # the marketplace and the plugin, as Codex recorded them
    run = codex(made, "tidy up the module", [], config=installed)
    assert run.done.returncode == 0, run.done.stderr[-2000:]
    assert first_with(run.server, DIRECTIVE) == 0


def test_the_gemini_extension_passes_gemini_extensions_validate_and_the_published_schema(tmp_path: Path) -> None:
    from test_setup import validate as against

    extension = tmp_path / "extension"
    assert plugin(extension, "gemini").returncode == 0
    binary = str(harness_bin("gemini"))
    env = offline(tmp_path)
    done = subprocess.run([binary, "extensions", "validate", str(extension)], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0 and "successfully validated" in done.stdout + done.stderr, done.stderr
    manifest = json.loads((extension / "gemini-extension.json").read_text())
    hooks = json.loads((extension / "hooks" / "hooks.json").read_text())["hooks"]
    against({"hooks": hooks, "mcpServers": manifest["mcpServers"]}, CONTRACTS / "gemini" / "settings.schema.json")
    written = json.loads((settings(tmp_path, "gemini") / ".gemini" / "settings.json").read_text())
    assert hooks == written["hooks"] and manifest["mcpServers"] == written["mcpServers"]
    installed = subprocess.run([binary, "extensions", "install", str(extension), "--consent"], input="y\n",
                               capture_output=True, text=True, timeout=120, env=env)
    said = installed.stdout + installed.stderr
    assert installed.returncode == 0 and 'Extension "qem" installed successfully and enabled' in said, said
    listed = subprocess.run([binary, "extensions", "list"], capture_output=True, text=True, timeout=120, env=env)
    assert "✓ qem (0.1.0)" in listed.stdout + listed.stderr and "MCP servers:\n  qem" in listed.stdout + listed.stderr
