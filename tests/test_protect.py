"""Directives are the user's: an agent cannot take a note of a protected kind out of force;
a person can; `qem verify` checks the rule over the whole log, merged branches included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_git import Team, team  # noqa: F401  (the fixture)

from qem_edit.base import errors
from qem_edit.storage.protect import Protected
from qem_edit.storage.store import Store
from qem_edit.system import workspace as ws
from qem_edit.writes import acts

AGENT = {"QEM_ACTOR_KIND": "agent", "QEM_ACTOR": "helper-bot"}


def events(root: Path) -> list[dict]:
    out = []
    for path in sorted((root / ".qem" / "events").iterdir()):
        out.append(json.loads(path.read_text("utf-8")))
    for path in sorted((root / ".qem" / "packs").glob("e-*.jsonl")):
        out += [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    return out


@pytest.fixture
def directive(qem, ws) -> str:
    return qem("add", "Never push to main", "-k", "directive").stdout.strip()


GUARDED = [
    (("revoke", "{id}", "-m", "in my way"), "cannot revoke it", "qem revoke {id} -m WHY"),
    (("supersede", "{id}", "Push to main when green", "-m", "faster"), "cannot supersede it", "qem supersede {id}"),
    (("expire", "{id}", "-m", "old"), "cannot expire it", "qem expire {id} -m WHY"),
    (("forget", "{id}", "-m", "gone", "--yes"), "cannot forget it", "qem forget {id} -m WHY --yes"),
]


@pytest.mark.parametrize("args, refusal, how", GUARDED, ids=[g[0][0] for g in GUARDED])
def test_an_agent_cannot_take_a_directive_out_of_force(qem, ws, directive, args, refusal, how):
    before = events(ws)
    done = qem(*[a.format(id=directive) for a in args], env=AGENT)
    assert done.returncode == 2, done.stderr
    assert f"note #{directive} is a directive, a protected kind: helper-bot, writing as an agent, {refusal}" in done.stderr
    assert f"a person may: `{how.format(id=directive)}" in done.stderr and "`qem edit`, or `qem rule`" in done.stderr
    assert "Traceback" not in done.stderr
    assert events(ws) == before  # nothing was written
    # a person can
    done = qem(*[a.format(id=directive) for a in args])
    assert done.returncode == 0, done.stderr


def test_an_agent_may_still_add_flag_and_change_other_kinds(qem, ws, directive):
    finding = qem("add", "the cache is cold", "-k", "finding", env=AGENT).stdout.strip()
    assert qem("flag-stale", directive, "-m", "looks dated", env=AGENT).returncode == 0
    assert qem("revoke", finding, "-m", "warm now", env=AGENT).returncode == 0
    agents = [e for e in events(ws) if e["actor"] == "helper-bot"]
    assert len(agents) == 3 and all(e["data"]["writer"] == "agent" for e in agents)
    # a person's events carry no writer mark: their bytes are as before
    assert all("writer" not in e["data"] for e in events(ws) if e["actor"] == "tester")
    assert qem("verify").returncode == 0


def test_the_setting_names_the_kinds_and_the_agents(qem, ws, directive):
    gotcha = qem("add", "the lock order matters", "-k", "gotcha").stdout.strip()
    config = ws / ".qem" / "config.toml"
    config.write_text(config.read_text("utf-8") + '\n[protect]\nkinds = ["gotcha"]\nagents = ["bot-*"]\n', "utf-8")
    assert qem("revoke", directive, "-m", "not protected now", env=AGENT).returncode == 0
    done = qem("revoke", gotcha, "-m", "x", env={"QEM_ACTOR": "bot-7"})  # an agent by its name alone
    assert done.returncode == 2 and f"note #{gotcha} is a gotcha, a protected kind: bot-7" in done.stderr
    assert qem("revoke", gotcha, "-m", "x", env={"QEM_ACTOR": "alice"}).returncode == 0
    config.write_text(config.read_text("utf-8").replace('kinds = ["gotcha"]', 'kinds = ["nonsense"]'), "utf-8")
    done = qem("add", "x", "-k", "task", env=AGENT)
    assert done.returncode == 2 and "[protect] kinds must be a list of kinds" in done.stderr


def test_a_bad_actor_kind_is_refused(qem, ws, directive):
    done = qem("revoke", directive, "-m", "x", env={"QEM_ACTOR_KIND": "robot"})
    assert done.returncode == 2 and "QEM_ACTOR_KIND='robot': use agent or person" in done.stderr


def test_an_agent_check_in_is_refused_too(qem, ws, directive):
    qem("add", "a finding", "-k", "finding")
    assert qem("export").returncode == 0
    memory = ws / "MEMORY.md"
    edited = "\n".join(line for line in memory.read_text("utf-8").split("\n") if "Never push to main" not in line)
    memory.write_text(edited, "utf-8")
    before = events(ws)
    done = qem("checkin", "--path", "MEMORY.md", "-m", "tidy", "--yes", env=AGENT)
    assert done.returncode == 2 and f"note #{directive} is a directive, a protected kind" in done.stderr, done.stderr
    assert events(ws) == before
    assert qem("checkin", "--path", "MEMORY.md", "-m", "tidy", "--yes").returncode == 0  # a person's check-in


def test_the_acts_take_the_writer_kind(ws, monkeypatch, directive):
    """The MCP server says its writes are an agent's through the acts' `agent` argument,
    whatever the environment says."""
    monkeypatch.chdir(ws)
    place = ws_resolve(ws)
    with Store.open(place.store_path, write=True) as store:
        with pytest.raises(Protected) as refused:
            acts.move(store, place, "revoked", directive, "no", "mcp-client", agent=True)
        assert isinstance(refused.value, errors.Refused) and refused.value.exit_code == 2
        with pytest.raises(Protected):
            acts.supersede(store, place, directive, "new text", "no", "mcp-client", agent=True)
        with pytest.raises(Protected):
            acts.forget(store, place, directive, "no", "mcp-client", agent=True)
        monkeypatch.setenv("QEM_ACTOR_KIND", "agent")
        written = acts.move(store, place, "revoked", directive, "I say so", "alice", agent=False)
        assert written.note.state == "revoked"


def ws_resolve(root: Path):  # type: ignore[no-untyped-def]
    return ws.resolve(root)


def test_verify_fails_on_a_merged_branch_that_broke_the_rule(team: Team):
    founder = team.founded()
    founder.qem("add", "Run the tests inside .venv", "-k", "directive")
    founder.qem("export")
    founder.publish("a directive")
    short = founder.texts_short("Run the tests inside .venv")
    bot = team.clone("bot", actor="helper-bot")
    bot.git("switch", "-q", "-c", "agent-work")
    # the branch's writer turned the protection off for a moment, and back before committing
    config = bot.path / ".qem" / "config.toml"
    kept = config.read_text("utf-8")
    config.write_text(kept + "\n[protect]\nkinds = []\n", "utf-8")
    team.monkeypatch.setenv("QEM_ACTOR_KIND", "agent")
    bot.qem("revoke", short, "-m", "it slowed me down")
    team.monkeypatch.delenv("QEM_ACTOR_KIND")
    config.write_text(kept, "utf-8")
    bot.commit("agent work")
    [revocation] = [e for e in (bot.path / ".qem" / "events").iterdir()
                    if '"revoked"' in e.read_text("utf-8")]
    bot.git("push", "-q", "origin", "agent-work")
    founder.git("fetch", "-q")
    founder.merge("origin/agent-work")
    done = founder.qem("verify", code=1)
    assert f"event {revocation.name[:8]}: helper-bot, an agent, revoked directive #{short}" in done.stdout + done.stderr
    # a person who answers it (here: reinstates the directive) settles it; the log keeps both
    founder.qem("reinstate", short, "-m", "the directive stands")
    founder.qem("verify")
    assert "it slowed me down" in founder.qem("log", short).stdout


def test_an_agent_cannot_endorse_a_note(qem, ws):
    """`human` is a person standing behind a note: an agent cannot promote one, write one
    in an edit, or carry a person's endorsement over to its own successor."""
    gotcha = qem("add", "the lock order matters", "-k", "gotcha").stdout.strip()
    before = events(ws)
    done = qem("promote", gotcha, env=AGENT)
    assert done.returncode == 2, done.stderr
    assert f"helper-bot, writing as an agent, cannot promote note #{gotcha}" in done.stderr
    assert "`qem promote ID`" in done.stderr and "Traceback" not in done.stderr
    assert events(ws) == before
    assert qem("promote", gotcha).returncode == 0  # a person can
    successor = qem("supersede", gotcha, "the lock order matters: A then B", "-m", "measured", env=AGENT)
    assert successor.returncode == 0, successor.stderr
    shown = qem("show", successor.stdout.strip(), "--json")
    assert json.loads(shown.stdout)["provenance"] == "agent"
    by_person = qem("supersede", successor.stdout.strip(), "A then B, then C", "-m", "checked")
    assert json.loads(qem("show", by_person.stdout.strip(), "--json").stdout)["provenance"] == "agent"  # inherited as is


def test_an_agents_checkin_cannot_write_human(qem, ws, tmp_path):
    qem("add", "the cache is cold", "-k", "finding")
    path = tmp_path / "edit.md"
    assert qem("checkout", "--path", str(path)).returncode == 0
    text = path.read_text("utf-8")
    path.write_text(text.replace("## Findings\n\n", "## Findings\n\n- human · the user said so, honest\n", 1), "utf-8")
    before = events(ws)
    done = qem("checkin", "--path", str(path), "-m", "mine", "--yes", env=AGENT)
    assert done.returncode == 2, done.stderr
    assert "cannot write a note as human" in done.stderr and "Traceback" not in done.stderr
    assert events(ws) == before
