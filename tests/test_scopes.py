"""Scopes: a private note stays in its clone, a session note holds for its agent session.

Real git across clones with a bare origin, the real pre-commit framework re-rendering
MEMORY.md at each commit, the commit habits people have; real `qem` processes; the hooks
fed Claude Code's and Codex's own input on stdin, with their `session_id`.  A private
or session note must never reach a commit or a push, whatever the habit, and a fresh
clone of the origin holds none of them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_qem
from test_commit_habits import HOOKS, commits, copied, make_commit, origin_and_clone
from test_precommit import git, git_env, local_hooks, pre_commit

pytest.importorskip("pre_commit")
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

TEAM = "The release branch is cut on Thursdays"
PRIVATE = "My scratch estimate: the migration takes 2 days"
SESSION = "Working assumption for this exercise: the cache is cold"
TEAM2 = "Deploys need two approvals"


def qem(cwd: Path, *args: str, env: dict | None = None):  # type: ignore[no-untyped-def]
    return run_qem(*args, cwd=cwd, env=env, timeout=120)


def short_of(done) -> str:  # type: ignore[no-untyped-def]
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A bare origin and a clone with one team note committed and pushed, MEMORY.md
    tracked, the pre-commit hooks installed (they re-render MEMORY.md at each commit)."""
    base = tmp_path_factory.mktemp("scopes")
    return base, origin_and_clone(base, TEAM, "decision")


@pytest.fixture
def team(template, tmp_path) -> tuple[Path, Path, dict[str, str]]:
    return copied(*template, tmp_path)


def everything_committed(origin: Path, env: dict[str, str]) -> str:
    """Every blob any ref of the origin reaches, as text (what a push published)."""
    listed = git("rev-list", "--objects", "--all", cwd=origin, env=env).stdout.split()
    kinds = subprocess.run(["git", "cat-file", "--batch-check=%(objectname) %(objecttype)"], cwd=origin, env=env,
                           input="\n".join(listed), capture_output=True, text=True, check=True).stdout
    blobs = [line.split()[0] for line in kinds.splitlines() if line.endswith(" blob")]
    return "\n".join(git("cat-file", "-p", b, cwd=origin, env=env).stdout for b in blobs)


HABITS = {
    "add -A && commit": [["add", "-A"], ["commit", "-m", "work"]],
    "commit -am": [["commit", "-am", "work"]],
    "add .": [["add", "."], ["commit", "-m", "work"]],
    "add MEMORY.md": [["add", "MEMORY.md"], ["commit", "-m", "work"]],
    "add .qem": [["add", ".qem", "MEMORY.md"], ["commit", "-m", "work"]],
}


@pytest.mark.parametrize("habit", list(HABITS))
def test_private_and_session_notes_never_reach_a_commit_or_a_push(team, habit: str) -> None:
    """Whatever the habit, with the hooks re-rendering MEMORY.md: the team note is
    committed and pushed, the private and session notes are in no commit, no pushed blob
    (their texts, their ids), and a fresh clone has none of them; this clone keeps them."""
    work, origin, env = team
    before = commits(work, env)
    private = short_of(qem(work, "add", PRIVATE, "--kind", "finding", "--scope", "private"))
    session = short_of(qem(work, "add", SESSION, "--kind", "finding", "--scope", "session", "--session", "s-42"))
    assert qem(work, "add", TEAM2, "--kind", "directive").returncode == 0
    ids = {json.loads(qem(work, "show", n, "--json", env={"QEM_SESSION": "s-42"}).stdout)["id"] for n in (private, session)}
    HABITS_RUN = HABITS[habit]
    for step in HABITS_RUN:
        done = subprocess.run(["git", *step], cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    assert commits(work, env) == before + 1
    git("push", "-q", "origin", "main", cwd=work, env=env)
    published = everything_committed(origin, env)
    assert TEAM2 in published
    for secret in (PRIVATE, SESSION, *ids):
        assert secret not in published, (habit, secret)
    assert PRIVATE not in (work / "MEMORY.md").read_text("utf-8")
    untracked = git("status", "--porcelain", "--ignored", cwd=work, env=env).stdout
    assert ".qem/private/" in untracked and "!! .qem/private/" in untracked  # ignored, never untracked-and-addable
    listed = qem(work, "list", env={"QEM_SESSION": "s-42"}).stdout
    assert PRIVATE in listed and SESSION in listed and TEAM2 in listed
    fresh = origin.parent / "fresh"
    git("clone", "-q", str(origin), str(fresh), cwd=origin.parent, env=env)
    assert not (fresh / ".qem" / "private").exists()
    seen = qem(fresh, "list", env={"QEM_SESSION": "s-42"})
    assert seen.returncode == 0 and TEAM2 in seen.stdout and TEAM in seen.stdout
    assert PRIVATE not in seen.stdout and SESSION not in seen.stdout
    assert qem(fresh, "export", "--check").returncode == 0
    verified = qem(fresh, "verify", "--json")
    assert verified.returncode == 0 and json.loads(verified.stdout)["notes"] == 2, verified.stdout


def test_a_memory_that_stages_nothing_still_commits_no_private_note(team) -> None:
    """With `[git] stage = false`, `git add -A` is what stages the log: the private
    folder ignores itself, so it stays out."""
    work, origin, env = team
    settings = work / ".qem" / "config.toml"
    settings.write_text(settings.read_text("utf-8") + "\n[git]\nstage = false\n", "utf-8")
    assert qem(work, "add", PRIVATE, "--kind", "finding", "--scope", "private").returncode == 0
    assert qem(work, "add", TEAM2, "--kind", "directive").returncode == 0
    git("add", "-A", cwd=work, env=env)
    done = git("commit", "-m", "work", cwd=work, env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    git("push", "-q", "origin", "main", cwd=work, env=env)
    published = everything_committed(origin, env)
    assert TEAM2 in published and PRIVATE not in published


def test_git_clean_keeps_private_notes_and_the_index_reads_them_again(team) -> None:
    work, _, env = team
    assert qem(work, "add", PRIVATE, "--kind", "finding", "--scope", "private").returncode == 0
    git("clean", "-fdq", cwd=work, env=env)
    (work / ".qem" / "index.db").unlink()
    assert PRIVATE in qem(work, "list").stdout


def test_share_makes_a_private_note_a_team_note_that_travels(team) -> None:
    """`qem share ID`: a team note of the same text is committed and pushed (no pointer
    to the private one); the private note ends, superseded by it, here alone."""
    work, origin, env = team
    private = short_of(qem(work, "add", PRIVATE, "--kind", "finding", "--scope", "private"))
    shared = short_of(qem(work, "share", private))
    assert "superseded" in qem(work, "status", private).stdout + qem(work, "show", private).stdout
    assert qem(work, "share", shared).returncode == 2  # a team note is shared already
    done = make_commit(work, env, "commit -am")
    assert done.returncode == 0, done.stdout + done.stderr
    git("push", "-q", "origin", "main", cwd=work, env=env)
    fresh = origin.parent / "fresh"
    git("clone", "-q", str(origin), str(fresh), cwd=origin.parent, env=env)
    listed = qem(fresh, "list").stdout
    assert PRIVATE in listed and f"#{shared}" in listed
    private_id = json.loads(qem(work, "show", private, "--json").stdout)["id"]
    assert private_id not in everything_committed(origin, env)
    assert qem(fresh, "verify").returncode == 0


def test_a_private_note_is_checked_for_secrets_as_every_write(tmp_path) -> None:
    (tmp_path / ".git").mkdir()
    done = qem(tmp_path, "add", "token ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "--kind", "finding",
               "--scope", "private")
    assert done.returncode != 0 and ("secret" in done.stderr.lower() or "credential" in done.stderr.lower()), done.stderr
    assert not (tmp_path / ".qem" / "private" / "events").exists() or not any(
        (tmp_path / ".qem" / "private" / "events").iterdir())


def test_a_session_note_needs_a_session(tmp_path) -> None:
    """Plain CLI, no session known: refused, naming how to give one; nothing written."""
    (tmp_path / ".git").mkdir()
    assert qem(tmp_path, "add", TEAM, "--kind", "finding").returncode == 0
    done = qem(tmp_path, "add", SESSION, "--kind", "finding", "--scope", "session", env={"QEM_SESSION": ""})
    assert done.returncode == 2, done.stderr
    assert "--session ID" in done.stderr and "QEM_SESSION" in done.stderr
    assert SESSION not in qem(tmp_path, "list").stdout
    bad = qem(tmp_path, "add", SESSION, "--kind", "finding", "--scope", "session", "--session", "two words")
    assert bad.returncode == 2 and "session" in bad.stderr
    wrong = qem(tmp_path, "add", SESSION, "--kind", "finding", "--scope", "elsewhere")
    assert wrong.returncode == 2 and "scope" in wrong.stderr


def test_a_dump_carries_no_private_or_session_note_and_a_load_refuses_one(tmp_path) -> None:
    (tmp_path / "a" / ".git").mkdir(parents=True)
    a = tmp_path / "a"
    assert qem(a, "add", TEAM, "--kind", "finding").returncode == 0
    assert qem(a, "add", PRIVATE, "--kind", "finding", "--scope", "private").returncode == 0
    assert qem(a, "add", SESSION, "--kind", "finding", "--scope", "session", "--session", "s1").returncode == 0
    dumped = qem(a, "dump").stdout
    assert TEAM in dumped and PRIVATE not in dumped and SESSION not in dumped
    # a line claiming a private scope, made by hand: refused, naming the line; nothing loaded
    from qem_edit.base import ids
    from qem_edit.base.replay import Event
    from qem_edit.storage.logtree import TextRecord, event_object

    record = TextRecord("", "k" * 26, PRIVATE)
    data = {"kind": "finding", "priority": "medium", "provenance": "agent", "supersedes": None,
            "text": record.digest, "nonce": "n" * 26, "short": 4, "scope": "private"}
    event = Event("", "", "created", "2026-01-01T00:00:00Z", "someone", None, None, data, 99, ())
    obj = event_object(event)
    from qem_edit.storage.logtree import canonical

    obj = {"id": ids.content_id(canonical(obj)), **obj, "text": {"key": record.key, "text": PRIVATE}}
    (tmp_path / "b" / ".git").mkdir(parents=True)
    b = tmp_path / "b"
    assert qem(b, "add", TEAM2, "--kind", "finding").returncode == 0
    dump = dumped.splitlines()[0] + "\n" + json.dumps(obj) + "\n"
    (tmp_path / "dump.jsonl").write_text(dump, "utf-8")
    done = run_qem("load", str(tmp_path / "dump.jsonl"), cwd=b)
    assert done.returncode == 2 and "dump.jsonl:2:" in done.stderr and "private note" in done.stderr, done.stderr
    assert PRIVATE not in qem(b, "list").stdout


def test_a_committed_file_claiming_a_private_scope_is_set_aside(team, tmp_path) -> None:
    """Another clone commits a private note's event by force (`git add -f`): every clone
    that pulls it sets the file aside, named, and never reads it as its own."""
    work, origin, env = team
    assert qem(work, "add", PRIVATE, "--kind", "finding", "--scope", "private").returncode == 0
    [event] = list((work / ".qem" / "private" / "events").iterdir())
    shutil.copy(event, work / ".qem" / "events" / event.name)
    git("add", "-f", ".qem/events", cwd=work, env=env)
    git("commit", "-q", "--no-verify", "-m", "forced", cwd=work, env=env)
    git("push", "-q", "origin", "main", cwd=work, env=env)
    fresh = origin.parent / "fresh"
    git("clone", "-q", str(origin), str(fresh), cwd=origin.parent, env=env)
    listed = qem(fresh, "list")
    assert PRIVATE not in listed.stdout and "(text missing" not in listed.stdout
    assert f"events/{event.name}" in listed.stderr and "set aside" in listed.stderr, listed.stderr
    verified = qem(fresh, "verify")
    said = verified.stdout + verified.stderr
    assert verified.returncode != 0 and event.name in said and "never travel" in said, said


def test_a_private_folder_committed_by_force_fails_verify_on_both_sides(team, tmp_path) -> None:
    """`git add -f .qem/private`: the writer's `qem verify` fails naming each file and the
    git command that untracks them, and so does every clone that pulls the commit (where
    the files land in its own private folder)."""
    work, origin, env = team
    assert qem(work, "add", PRIVATE, "--kind", "finding", "--scope", "private").returncode == 0
    assert qem(work, "verify").returncode == 0
    git("add", "-f", ".qem/private", cwd=work, env=env)
    staged = qem(work, "verify", "--staged")  # the qem-verify commit hook refuses the commit
    assert staged.returncode == 1 and "private file tracked by git" in staged.stdout + staged.stderr
    git("commit", "-q", "--no-verify", "-m", "forced", cwd=work, env=env)
    git("push", "-q", "origin", "main", cwd=work, env=env)
    for clone in (work, origin.parent / "pulled"):
        if clone != work:
            git("clone", "-q", str(origin), str(clone), cwd=origin.parent, env=env)
        verified = qem(clone, "verify")
        said = verified.stdout + verified.stderr
        assert verified.returncode == 1, said
        assert "private file tracked by git" in said and "git rm -r --cached .qem/private" in said, said


# -- session notes through the hooks ---------------------------------------------------------------


def hook(top: Path, harness: str, event: str, payload: dict, env: dict | None = None) -> subprocess.CompletedProcess:
    data = json.dumps({"cwd": str(top), "hook_event_name": event, **payload}).encode()
    import os

    full = {**os.environ, **(env or {})}
    full.pop("QEM_SESSION", None)
    return subprocess.run([sys.executable, "-m", "qem_edit", "hook", harness, event], input=data, env=full,
                          capture_output=True, cwd=top, timeout=60)


def claude(top: Path, event: str, session: str, env: dict | None = None, **payload: object) -> str:
    base = {"session_id": session, "transcript_path": f"/home/u/.claude/projects/app/{session}.jsonl"}
    done = hook(top, "claude", event, {**base, **payload}, env)
    assert done.returncode == 0, done.stderr
    if not done.stdout:
        return ""
    return json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]


def codex(top: Path, event: str, session: str, **payload: object) -> str:
    import jsonschema
    from test_hooks import codex_schema

    schema = codex_schema(event, "input")
    data = {"session_id": session, "transcript_path": None, "cwd": str(top), "hook_event_name": event, **payload}
    if "model" in schema["properties"]:
        data["model"] = "gpt-5"
    for key in schema["required"]:
        data.setdefault(key, {"permission_mode": "default", "turn_id": "t1"}.get(key))
    jsonschema.validate(data, schema)
    done = hook(top, "codex", event, data)
    assert done.returncode == 0, done.stderr
    if not done.stdout:
        return ""
    reply = json.loads(done.stdout)
    return reply.get("hookSpecificOutput", {}).get("additionalContext", "")


@pytest.fixture
def app(tmp_path) -> Path:
    from builders import code_repository

    top = code_repository(tmp_path / "app", {"src/lock.py": "x = 1\n"})
    assert qem(top, "add", TEAM, "--kind", "directive").returncode == 0
    return top


def test_a_session_note_is_given_in_its_session_only_and_ends_with_it(app, tmp_path) -> None:
    """Claude Code: SessionStart sets QEM_SESSION for the agent's shell (CLAUDE_ENV_FILE);
    the note the agent adds there is given at that session's next start-like moment, never
    to another session, counted by no read outside it, and ended at SessionEnd."""
    env_file = tmp_path / "claude-env"
    start = claude(app, "SessionStart", "sess-a", env={"CLAUDE_ENV_FILE": str(env_file)}, source="startup")
    assert TEAM in start
    assert "export QEM_SESSION=sess-a" in env_file.read_text("utf-8")
    added = qem(app, "add", SESSION, "--kind", "directive", "--scope", "session", env={"QEM_SESSION": "sess-a"})
    note = short_of(added)
    mine = claude(app, "SessionStart", "sess-a", source="compact")
    assert SESSION in mine and "this session" in mine
    other = claude(app, "SessionStart", "sess-b", source="startup")
    assert TEAM in other and SESSION not in other
    # reads outside the session do not count it: list, query, context, status
    outside = {"QEM_SESSION": ""}
    assert SESSION not in qem(app, "list", env=outside).stdout
    assert SESSION not in qem(app, "query", "current=yes", env=outside).stdout
    assert SESSION not in qem(app, "context", env=outside).stdout
    status = qem(app, "status", note, env=outside)
    assert status.returncode != 0 and "another agent session" in status.stderr
    inside = {"QEM_SESSION": "sess-a"}
    assert "current: yes" in qem(app, "status", note, env=inside).stdout
    assert SESSION in qem(app, "query", "current=yes", env=inside).stdout
    # the session ends: its note is ended by an event, and no session is given it again
    claude(app, "SessionEnd", "sess-a", reason="prompt_input_exit")
    shown = qem(app, "show", note, env=inside).stdout
    assert "expired" in shown and "its session ended" in shown
    assert SESSION not in claude(app, "SessionStart", "sess-a", source="resume")


def test_codex_session_notes_and_the_sweep_of_ended_sessions(app) -> None:
    """Codex: a note of Codex session c-1 is given there, not in c-2; a session whose
    ledger is gone without a SessionEnd (swept) has its notes ended when a session starts."""
    codex(app, "SessionStart", "c-1", source="startup")
    assert qem(app, "add", SESSION, "--kind", "directive", "--scope", "session", "--session", "c-1").returncode == 0
    assert SESSION in codex(app, "SessionStart", "c-1", source="clear")
    assert SESSION not in codex(app, "SessionStart", "c-2", source="startup")
    assert SESSION in qem(app, "list", env={"QEM_SESSION": "c-1"}).stdout  # c-1's ledger is still there
    from qem_edit.system import ledger

    state = app / ".qem"
    for entry in (state / ledger.FOLDER).iterdir():  # c-1's ledger swept as stale
        if entry.name.endswith(".json") and ledger.exists(state, "codex:c-1") and \
                entry.name.startswith(ledger._name("codex:c-1")):
            entry.unlink()
    codex(app, "SessionStart", "c-3", source="startup")
    listed = qem(app, "list", env={"QEM_SESSION": "c-1"}).stdout
    assert "expired" in listed.split(SESSION)[0].splitlines()[-1]


def test_mcp_add_takes_a_scope_and_a_session_as_the_cli_does(tmp_path) -> None:
    """The real MCP client: `add` with scope private is this clone's; scope session without
    a session is refused in the CLI's words (the server knows no session), nothing written;
    with one, the note is that session's."""
    import anyio
    from test_mcp import failed, ok, session

    ws = tmp_path / "ws"
    ws.mkdir()

    async def script(s):  # type: ignore[no-untyped-def]
        await ok(s, "add", text=PRIVATE, kind="finding", scope="private")
        refused = await failed(s, "add", text=SESSION, kind="finding", scope="session")
        await ok(s, "add", text=TEAM, kind="finding", scope="session", session="m-1")
        wrong = await failed(s, "add", text=TEAM2, kind="finding", scope="nowhere")
        return refused, wrong

    async def main():  # type: ignore[no-untyped-def]
        async with session(ws) as s:
            return await script(s)

    refused, wrong = anyio.run(main)
    assert "--session ID" in refused and "QEM_SESSION" in refused and "session" in refused
    assert "scope" in wrong
    assert not (ws / ".qem" / "events").exists() or not any((ws / ".qem" / "events").iterdir())
    listed = qem(ws, "list", env={"QEM_SESSION": ""}).stdout
    assert "(private) " + PRIVATE in listed and TEAM not in listed and SESSION not in listed
    assert "(this session) " + TEAM in qem(ws, "list", env={"QEM_SESSION": "m-1"}).stdout


@pytest.mark.parametrize("scope", [("--scope", "private"), ("--scope", "session", "--session", "s1")])
def test_a_check_in_of_memory_md_naming_a_private_note_is_refused(team, scope: tuple[str, ...]) -> None:
    """MEMORY.md is the team's rendering: a line naming a private or session note's id
    (pasted from `qem list`) is no item of it; the check-in is refused naming the line,
    nothing written, and the note stays as it was."""
    work, _, env = team
    private = short_of(qem(work, "add", PRIVATE, "--kind", "finding", *scope))
    memory = work / "MEMORY.md"
    text = memory.read_text("utf-8")
    memory.write_text(text.replace("## References", f"- [#{private}] 2026-12-05 · medium · agent · {PRIVATE}, edited"
                                   "\n\n## References"), "utf-8")
    done = qem(work, "checkin", "--path", "MEMORY.md", "-y")
    assert done.returncode == 2 and f"no note #{private}" in done.stderr and "line" in done.stderr, done.stderr
    assert "edited" not in qem(work, "list", env={"QEM_SESSION": "s1"}).stdout
    assert "events/" not in git("status", "--porcelain", cwd=work, env=env).stdout


def test_a_private_note_never_changes_a_team_notes_short_id(tmp_path, monkeypatch) -> None:
    """Short ids are the shortest unique prefixes: a private note sharing a team note's
    prefix must not lengthen the team note's (MEMORY.md would then differ from every other
    clone's rendering); the private note's own is unique here, and each short id names its
    note, in the index as written and as rebuilt."""
    from qem_edit.base import ids
    from qem_edit.base.decisions import NewNote
    from qem_edit.storage.store import Store

    (tmp_path / ".git").mkdir()
    monkeypatch.setenv("QEM_SHORT_LENGTH", "1")
    monkeypatch.setenv("QEM_SESSION", "")
    for i in range(200):  # a team note whose short id is one letter
        assert qem(tmp_path, "add", f"{TEAM} {i}", "--kind", "finding").returncode == 0
        with Store.open(tmp_path / ".qem") as store:
            [team_note] = store.notes(states=["active"])
        if len(team_note.shown) == 1:
            break
        assert qem(tmp_path, "revoke", team_note.shown, "-m", "not this one").returncode == 0
    assert qem(tmp_path, "export").returncode == 0
    rendered = (tmp_path / "MEMORY.md").read_bytes()
    with Store.open(tmp_path / ".qem", write=True) as store:
        for i in range(2000):  # until one would lengthen the team note's short id, were it counted
            new = NewNote("finding", "medium", "agent", f"{PRIVATE} {i}", scope="private")
            made = store.write(lambda tx: tx.create(new, "tester"))
            if ids.short_of(team_note.id, 1, [made.id]) != team_note.shown:
                break
        else:
            pytest.fail("no private note shared the team note's short id")
        private = store.note(made.id)
        assert store.note(team_note.id).shown == team_note.shown
        assert private.shown != team_note.shown and private.shown.startswith(team_note.shown)
        assert store.resolve(team_note.shown) == team_note.id and store.resolve(private.shown) == private.id
    assert qem(tmp_path, "export").returncode == 0
    assert (tmp_path / "MEMORY.md").read_bytes() == rendered
    written = qem(tmp_path, "verify")  # the index as written equals a fresh replay's, short ids and all
    assert written.returncode == 0, written.stdout + written.stderr
    (tmp_path / ".qem" / "index.db").unlink()
    assert qem(tmp_path, "export", "--check").returncode == 0
    listed = qem(tmp_path, "list").stdout
    assert f"#{team_note.shown}\t" in listed and f"#{private.shown}\t" in listed
    verified = qem(tmp_path, "verify")  # the index as written equals a fresh replay's, short ids and all
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_successor_holds_where_its_note_held(tmp_path) -> None:
    """`qem supersede` of a private note makes a private successor (in this clone's folder
    alone); of a session note, read outside its session, is refused as no note there."""
    (tmp_path / ".git").mkdir()
    private = short_of(qem(tmp_path, "add", PRIVATE, "--kind", "finding", "--scope", "private"))
    after = short_of(qem(tmp_path, "supersede", private, PRIVATE + ", revised"))
    shown = json.loads(qem(tmp_path, "show", after, "--json").stdout)
    assert shown["scope"] == "private" and shown["supersedes"]
    assert not any(shown["id"] in p.name for p in (tmp_path / ".qem" / "events").iterdir())
    assert (tmp_path / ".qem" / "private" / "events" / shown["id"]).is_file()
    session = short_of(qem(tmp_path, "add", SESSION, "--kind", "finding", "--scope", "session", "--session", "s9"))
    outside = qem(tmp_path, "supersede", session, "changed", env={"QEM_SESSION": "s8"})
    assert outside.returncode == 2 and "another agent session" in outside.stderr
    inside = qem(tmp_path, "supersede", session, "changed", env={"QEM_SESSION": "s9"})
    assert json.loads(qem(tmp_path, "show", short_of(inside), "--json", env={"QEM_SESSION": "s9"}).stdout)["session"] == "s9"


def test_owed_counts_a_session_request_only_in_its_session_and_codex_ends_it(app) -> None:
    """A request kept for Codex session c-7: `qem owed` lists it there, not outside; Codex's
    SessionEnd ends it (expired, its session ended), and then it is owed nowhere."""
    codex(app, "SessionStart", "c-7", source="startup")
    done = qem(app, "add", "Check the nightly build", "--kind", "task", "--to", "alice", "--scope", "session",
               "--session", "c-7")
    note = short_of(done)
    assert f"#{note}" in qem(app, "owed", env={"QEM_SESSION": "c-7"}).stdout
    assert f"#{note}" not in qem(app, "owed", env={"QEM_SESSION": "c-8"}).stdout
    assert f"#{note}" not in qem(app, "owed", env={"QEM_SESSION": ""}).stdout
    assert codex(app, "SessionEnd", "c-7", reason="other") == ""
    shown = json.loads(qem(app, "show", note, "--json", env={"QEM_SESSION": "c-7"}).stdout)
    assert shown["state"] == "expired" and shown["state_reason"] == "its session ended"
    assert f"#{note}" not in qem(app, "owed", env={"QEM_SESSION": "c-7"}).stdout


def test_the_sweep_of_notes_past_their_end_takes_every_sessions(tmp_path) -> None:
    """`qem expire --due`, run outside any session (CI, cron), expires a session note past
    its end too: its end holds whoever sweeps."""
    (tmp_path / ".git").mkdir()
    note = short_of(qem(tmp_path, "add", SESSION, "--kind", "finding", "--scope", "session", "--session", "zz",
                        "--ttl", "1h"))
    swept = qem(tmp_path, "expire", "--due", env={"QEM_NOW": "2099-01-01T00:00:00Z", "QEM_SESSION": ""})
    assert swept.returncode == 0 and f"#{note}" in swept.stdout, swept.stderr
    assert "expired" in qem(tmp_path, "show", note, env={"QEM_SESSION": "zz"}).stdout


def test_a_start_gives_its_notes_when_qem_session_cannot_be_set(app, tmp_path) -> None:
    """CLAUDE_ENV_FILE that cannot be written (a folder): logged, and the start's context
    given all the same."""
    (tmp_path / "env-dir").mkdir()
    start = claude(app, "SessionStart", "sess-z", env={"CLAUDE_ENV_FILE": str(tmp_path / "env-dir")}, source="startup")
    assert TEAM in start
    assert "env-dir" in (app / ".qem" / "sessions" / "hooks.log").read_text("utf-8")


def test_reads_as_of_a_date_leave_out_other_sessions_notes(tmp_path) -> None:
    (tmp_path / ".git").mkdir()
    assert qem(tmp_path, "add", SESSION, "--kind", "finding", "--scope", "session", "--session", "zz").returncode == 0
    assert SESSION not in qem(tmp_path, "context", "--at", "2099-01-01", env={"QEM_SESSION": ""}).stdout
    assert SESSION in qem(tmp_path, "context", "--at", "2099-01-01", env={"QEM_SESSION": "zz"}).stdout


@pytest.mark.parametrize("data, said", [
    ({"scope": "bogus"}, "scope 'bogus' is not one of"),
    ({"scope": "session"}, "a session note's session must be"),
    ({"scope": "private", "session": "s1"}, "a private note names no session"),
    ({}, "a team note's event in this clone's private folder"),
])
def test_a_private_folder_file_is_read_as_untrusted_input(tmp_path, data: dict, said: str) -> None:
    """What `.qem/private/` holds is checked as every log file is: a bad scope, a session
    note with no session, a team note's event there: set aside, named by `qem verify`."""
    from qem_edit.base import ids
    from qem_edit.base.replay import Event
    from qem_edit.storage.logtree import TextRecord, event_bytes

    (tmp_path / ".git").mkdir()
    assert qem(tmp_path, "add", TEAM, "--kind", "finding", "--scope", "private").returncode == 0
    record = TextRecord("", "k" * 26, PRIVATE)
    fields = {"kind": "finding", "priority": "medium", "provenance": "agent", "supersedes": None,
              "text": record.digest, "nonce": "n" * 26, "short": 4, **data}
    event = Event("", "", "created", "2026-01-01T00:00:00Z", "someone", None, None, fields, 99, ())
    raw = event_bytes(event)
    (tmp_path / ".qem" / "private" / "events" / ids.content_id(raw)).write_bytes(raw)
    listed = qem(tmp_path, "list")
    assert listed.returncode == 0 and TEAM in listed.stdout and PRIVATE not in listed.stdout
    assert "set aside" in listed.stderr and ids.content_id(raw) in listed.stderr
    verified = qem(tmp_path, "verify")
    assert verified.returncode != 0 and said in verified.stdout + verified.stderr, verified.stdout + verified.stderr


def test_a_private_answer_to_a_team_request_is_not_in_memory_md(team) -> None:
    """A request's item shows the answers that speak for it: never a private one (nor a
    session one), whose id no other clone holds; the commit carries neither."""
    work, origin, env = team
    request = short_of(qem(work, "add", "Who owns the nightly build?", "--kind", "task", "--to", "alice"))
    assert qem(work, "export").returncode == 0
    rendered = (work / "MEMORY.md").read_bytes()
    mine = short_of(qem(work, "add", PRIVATE, "--kind", "finding", "--answers", request, "--scope", "private"))
    assert qem(work, "export").returncode == 0
    assert (work / "MEMORY.md").read_bytes() == rendered and f"#{mine}" not in rendered.decode()
    done = make_commit(work, env, "commit -am")
    assert done.returncode == 0, done.stdout + done.stderr
    git("push", "-q", "origin", "main", cwd=work, env=env)
    assert PRIVATE not in everything_committed(origin, env)
    (work / ".qem" / "index.db").unlink()
    assert qem(work, "export", "--check").returncode == 0


def test_forgetting_a_private_note_asks_for_no_commit(tmp_path) -> None:
    """A private note was never committed: its forget says so, and asks for no commit of
    `.qem/` (a team note's forget still does)."""
    (tmp_path / ".git").mkdir()
    private = short_of(qem(tmp_path, "add", PRIVATE, "--kind", "finding", "--scope", "private"))
    team_note = short_of(qem(tmp_path, "add", TEAM, "--kind", "finding"))
    done = qem(tmp_path, "forget", private, "-m", "not wanted", "--yes")
    assert done.returncode == 0, done.stderr
    assert "commit .qem/" not in done.stderr and "history" not in done.stderr
    assert "private note" in done.stderr and "never committed" in done.stderr
    said = qem(tmp_path, "forget", team_note, "-m", "not wanted", "--yes").stderr
    assert "commit .qem/" in said


def test_status_names_a_private_or_session_notes_scope_in_one_line(tmp_path) -> None:
    """`qem status ID` says where a private or session note holds, as `show` does, in one
    line of its text and in its JSON; a team note's status says nothing of it."""
    (tmp_path / ".git").mkdir()
    private = short_of(qem(tmp_path, "add", PRIVATE, "--kind", "finding", "--scope", "private"))
    session = short_of(qem(tmp_path, "add", SESSION, "--kind", "finding", "--scope", "session", "--session", "s-7"))
    team_note = short_of(qem(tmp_path, "add", TEAM, "--kind", "finding"))
    mine = {"QEM_SESSION": "s-7"}
    said = qem(tmp_path, "status", private).stdout.splitlines()
    assert [line for line in said if line.startswith("scope ")] == \
        ["scope private: this clone only, never committed (`qem share ID` makes it a team note)"]
    said = qem(tmp_path, "status", session, env=mine).stdout.splitlines()
    assert [line for line in said if line.startswith("scope ")] == \
        ["scope session s-7: this agent session only, ended when it ends"]
    assert "scope" not in qem(tmp_path, "status", team_note).stdout
    data = json.loads(qem(tmp_path, "status", session, "--json", env=mine).stdout)
    assert (data["scope"], data["session"]) == ("session", "s-7")
    assert json.loads(qem(tmp_path, "status", private, "--json").stdout)["scope"] == "private"
    assert json.loads(qem(tmp_path, "status", team_note, "--json").stdout)["scope"] == "team"


def test_a_share_killed_between_its_writes_is_settled_by_sharing_again(team) -> None:
    """`qem share` writes the team note to the committed log, then ends the private one in
    `.qem/private/`: killed between the two, both are in force.  Sharing again ends the
    private one by the team note the first share made, says so, and makes no second team
    note; the commit and a fresh clone hold that one team note."""
    work, origin, env = team
    private = short_of(qem(work, "add", PRIVATE, "--kind", "finding", "--scope", "private"))
    killed = qem(work, "share", private, env={"QEM_FAULT": "write-before-local"})
    assert killed.returncode == -9, (killed.returncode, killed.stderr)
    both = [line.split("\t")[-2:] for line in qem(work, "list").stdout.splitlines() if PRIVATE in line]
    assert sorted(both) == [["active", "(private) " + PRIVATE], ["active", PRIVATE]], both
    again = qem(work, "share", private)
    shared = short_of(again)
    assert "no second team note" in again.stderr and f"#{shared}" in again.stderr
    lines = [line for line in qem(work, "list").stdout.splitlines() if PRIVATE in line and "\tactive\t" in line]
    assert lines == [f"#{shared}\tfinding\tmedium\tagent\tactive\t{PRIVATE}"], lines
    assert "superseded" in qem(work, "status", private).stdout
    assert json.loads(qem(work, "show", private, "--json").stdout)["superseded_by"] == \
        json.loads(qem(work, "show", shared, "--json").stdout)["id"]
    assert qem(work, "share", private).returncode == 2  # settled: nothing is left to share
    verified = qem(work, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    done = make_commit(work, env, "commit -am")
    assert done.returncode == 0, done.stdout + done.stderr
    git("push", "-q", "origin", "main", cwd=work, env=env)
    fresh = origin.parent / "fresh"
    git("clone", "-q", str(origin), str(fresh), cwd=origin.parent, env=env)
    assert [line for line in qem(fresh, "list").stdout.splitlines() if PRIVATE in line] == lines
    assert qem(fresh, "verify").returncode == 0


def test_mcp_share_makes_a_private_note_the_teams_as_the_cli_does(tmp_path) -> None:
    """The real MCP client: `share` answers the team note (its structured result, under
    its outputSchema, also as JSON text) naming the private note it supersedes; a team note
    or a private note shared already is refused in the CLI's words; a share killed between
    its writes is settled by `share` again, which says so and makes no second team note."""
    import anyio
    from test_mcp import failed, ok, session

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".git").mkdir()
    first = short_of(qem(ws, "add", PRIVATE, "--kind", "finding", "--scope", "private"))
    second = short_of(qem(ws, "add", SESSION, "--kind", "gotcha", "--scope", "private"))
    team_note = short_of(qem(ws, "add", TEAM, "--kind", "finding"))
    assert qem(ws, "share", second, env={"QEM_FAULT": "write-before-local"}).returncode == -9

    async def script(s):  # type: ignore[no-untyped-def]
        tools = {t.name: t for t in (await s.list_tools()).tools}
        shared = await ok(s, "share", id=first, reason="the team needs it")
        again = await failed(s, "share", id=first)
        team = await failed(s, "share", id=team_note)
        settled = await ok(s, "share", id=second)
        return tools["share"], shared, again, team, settled

    async def main():  # type: ignore[no-untyped-def]
        async with session(ws) as s:
            return await script(s)

    tool, shared, again, team, settled = anyio.run(main)
    assert tool.output_schema["required"] == ["id", "short", "kind", "state", "private"]
    assert tool.annotations.read_only_hint is False and tool.annotations.destructive_hint is True
    data = shared.structured_content
    assert json.loads(shared.content[1].text) == data
    assert (data["text"], data["kind"], data["scope"], data["state"]) == (PRIVATE, "finding", "team", "active")
    assert data["private"]["short"] == first and shared.content[0].text.startswith(f"#{data['short']} is the team's")
    assert json.loads(qem(ws, "show", first, "--json").stdout)["superseded_by"] == data["id"]
    assert f"was shared already: team note #{data['short']}" in again and "private note" in team and "team's already" in team
    assert settled.structured_content["private"]["short"] == second
    assert "no second team note" in settled.content[0].text
    in_force = [line for line in qem(ws, "list").stdout.splitlines() if "\tactive\t" in line]
    assert sorted(line.split("\t")[-1] for line in in_force) == sorted([PRIVATE, SESSION, TEAM]), in_force


def test_a_team_note_cannot_rest_on_a_private_note_but_a_private_one_can(tmp_path) -> None:
    """A committed event naming a note kept in one clone would leave every other clone a
    base it never sees: refused, nothing written; a private note may rest on one."""
    (tmp_path / ".git").mkdir()
    private = short_of(qem(tmp_path, "add", PRIVATE, "--kind", "finding", "--scope", "private"))
    before = sorted(p.name for p in (tmp_path / ".qem" / "events").iterdir())
    refused = qem(tmp_path, "add", "the total is 4 days", "--kind", "decision", "--rests-on", private)
    assert refused.returncode == 2 and f"#{private}" in refused.stderr and "private note" in refused.stderr
    assert sorted(p.name for p in (tmp_path / ".qem" / "events").iterdir()) == before
    kept = qem(tmp_path, "add", "my total is 4 days", "--kind", "decision", "--rests-on", private, "--scope", "private")
    assert kept.returncode == 0, kept.stderr


def _log_files(ws: Path) -> list[str]:
    return sorted(str(p.relative_to(ws)) for p in (ws / ".qem").rglob("*") if p.is_file() and "index" not in p.name)


@pytest.mark.parametrize("scope", [("--scope", "private"), ("--scope", "session", "--session", "s1")])
def test_a_team_note_cannot_answer_a_private_or_session_request_on_any_way_in(tmp_path, scope) -> None:
    """A team note's `answers` naming a note only this clone holds would be committed:
    refused on the CLI's add and answer and on MCP's add (from inside the session or out
    of it), nothing written; a note of the request's scope answers it."""
    from test_mcp import failed, serve

    (tmp_path / ".git").mkdir()
    request = short_of(qem(tmp_path, "add", "Who owns the nightly build?", "--kind", "task", "--to", "bob", *scope))
    before = _log_files(tmp_path)
    for env in ({}, {"QEM_SESSION": "s1"}):
        for args in (("answer", request, "alice does"), ("add", "alice does", "-k", "finding", "--answers", request)):
            refused = qem(tmp_path, *args, env=env)
            assert refused.returncode == 2 and f"cannot answer note #{request}" in refused.stderr, refused.stderr
            assert "nothing was written" in refused.stderr and "Traceback" not in refused.stderr
    said = serve(tmp_path, lambda s: failed(s, "add", text="alice does", kind="finding", answers=request))
    assert f"cannot answer note #{request}" in said
    assert _log_files(tmp_path) == before
    kept = qem(tmp_path, "add", "alice does", "-k", "finding", "--answers", request, *scope, env={"QEM_SESSION": "s1"})
    assert kept.returncode == 0, kept.stderr


def test_a_team_note_answering_a_private_request_never_reaches_a_fresh_clone(team) -> None:
    """The user's case: `qem answer` of a private request is refused, so a fresh clone of
    what was committed verifies and renders as the owner does."""
    work, origin, env = team
    request = short_of(qem(work, "add", "Private request", "--kind", "task", "--to", "bob", "--scope", "private"))
    assert qem(work, "answer", request, "Team answer").returncode == 2
    assert qem(work, "add", TEAM2, "--kind", "directive").returncode == 0
    assert make_commit(work, env, "add .").returncode == 0
    git("push", "-q", "origin", "main", cwd=work, env=env)
    fresh = origin.parent / "fresh"
    git("clone", "-q", str(origin), str(fresh), cwd=origin.parent, env=env)
    assert qem(fresh, "verify").returncode == 0 and qem(fresh, "export", "--check").returncode == 0


def test_share_keeps_team_pointers_and_drops_local_ones_and_says_a_share_was_done(tmp_path) -> None:
    """A shared private note answering a private request and resting on a team and a private
    note: the team note rests on the team note only and answers nothing; sharing it again
    names the team note that holds it; a session note is never shared."""
    (tmp_path / ".git").mkdir()
    base = short_of(qem(tmp_path, "add", TEAM, "--kind", "finding"))
    request = short_of(qem(tmp_path, "add", "Who owns it?", "--kind", "task", "--to", "bob", "--scope", "private"))
    mine = short_of(qem(tmp_path, "add", PRIVATE, "--kind", "finding", "--scope", "private"))
    answer = short_of(qem(tmp_path, "add", "I do", "--kind", "finding", "--scope", "private", "--answers", request,
                          "--rests-on", base, "--rests-on", mine))
    shared = short_of(qem(tmp_path, "share", answer))
    data = json.loads(qem(tmp_path, "show", shared, "--json").stdout)
    full_base = json.loads(qem(tmp_path, "show", base, "--json").stdout)["id"]
    assert (data["scope"], data["answers"], data["rests_on"]) == ("team", None, [full_base])
    again = qem(tmp_path, "share", answer)
    assert again.returncode == 2 and f"was shared already: team note #{shared}" in again.stderr
    session = short_of(qem(tmp_path, "add", SESSION, "--kind", "finding", "--scope", "session", "--session", "s1"))
    on_session = qem(tmp_path, "add", "x", "--kind", "finding", "--rests-on", session, env={"QEM_SESSION": "s1"})
    assert on_session.returncode == 2 and "a session note cannot be shared" in on_session.stderr
    assert "qem share" not in on_session.stderr
    refused = qem(tmp_path, "share", session, env={"QEM_SESSION": "s1"})
    assert refused.returncode == 2 and "a session note holds for its agent session only" in refused.stderr


def test_a_deleted_private_gitignore_is_put_back_by_any_write_and_the_memorys_names_the_folder(team) -> None:
    """Two guards keep `git add -A` off the private folder: its own `.gitignore` (put back by
    any write, a team one too) and the memory's `.gitignore` naming `/private/` (a new
    memory's from the start; a memory started before it, at its first write once it has
    private notes; never touched for a memory with none)."""
    work, origin, env = team
    assert "/private/" in (work / ".qem" / ".gitignore").read_text("utf-8").splitlines()
    assert git("status", "--porcelain", cwd=work, env=env).stdout == ""
    ignore = work / ".qem" / ".gitignore"
    ignore.write_text(ignore.read_text("utf-8").replace("/private/\n", ""), "utf-8")  # a memory started before the line
    git("commit", "-qam", "an older memory", cwd=work, env=env)
    assert qem(work, "add", TEAM2, "--kind", "directive").returncode == 0
    assert "/private/" not in ignore.read_text("utf-8"), "a memory with no private note keeps its .gitignore"
    assert qem(work, "add", PRIVATE, "--kind", "finding", "--scope", "private").returncode == 0
    (work / ".qem" / "private" / ".gitignore").unlink()
    assert qem(work, "add", "Deploys are on Tuesdays", "--kind", "directive").returncode == 0
    assert (work / ".qem" / "private" / ".gitignore").is_file()
    assert "/private/" in ignore.read_text("utf-8").splitlines()
    (work / ".qem" / "private" / ".gitignore").unlink()  # the memory's own line holds alone
    git("add", "-A", cwd=work, env=env)
    staged = git("diff", "--cached", "--name-only", cwd=work, env=env).stdout.split()
    assert ".qem/.gitignore" in staged and not any(name.startswith(".qem/private") for name in staged)


def test_owed_and_query_count_and_mark_only_the_notes_read_in_their_scope(tmp_path) -> None:
    """Outside session s1, `qem owed` and `qem query` count the same notes (another session's
    are not read); both mark a private or session note as `qem list` does."""
    (tmp_path / ".git").mkdir()
    s1 = {"QEM_SESSION": "s1"}
    assert qem(tmp_path, "add", "Who owns the build?", "--kind", "task", "--to", "bob").returncode == 0
    for text in ("Check the cache", "Check the queue"):
        assert qem(tmp_path, "add", text, "--kind", "task", "--to", "bob", "--scope", "session", env=s1).returncode == 0
    assert "of 1 notes read" in qem(tmp_path, "owed").stdout
    assert ": 1 notes / " in qem(tmp_path, "query", "to=bob").stdout
    assert "of 3 notes read" in qem(tmp_path, "owed", env=s1).stdout
    assert qem(tmp_path, "add", PRIVATE, "--kind", "task", "--to", "bob", "--scope", "private").returncode == 0
    for env, marked in (({}, ["(private) " + PRIVATE]), (s1, ["(private) " + PRIVATE, "(this session) Check the cache"])):
        owed, query = qem(tmp_path, "owed", env=env).stdout, qem(tmp_path, "query", "to=bob", env=env).stdout
        for line in marked:
            assert f"· {line}" in owed and f"\t{line}" in query, (owed, query)
        assert "· Who owns the build?" in owed and "\tWho owns the build?" in query  # a team note: no mark
