"""Every field of every event is held to the secret rule, on every way in.

Not only a note's text: its reason, its triggers (`--when-run`, `--when-path`), its anchors'
paths, the writer's name, a dispute's and a ruling's reason, every key and value a vectr
import or a `qem load` carries.  The CLI (as a person and as an agent), a check-in's
`@when-run:` line, the MCP tools (the real client), `qem load`, `qem import vectr` refuse
it before anything is written, naming the field and never the secret; a clone's event
file holding one is named by `qem verify` and `qem check-secrets` and refused by the
pre-commit hook (a hostile branch merged from a second clone over a bare origin, then a
fresh clone).  A password in any URL is a secret whatever its characters; a placeholder
is not.  `qem forget` leaves no allowed text's secret in any file qem wrote.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import typing
from dataclasses import fields
from pathlib import Path

import anyio
import pytest
from conftest import FIXTURES, run_qem
from qem_edit.reconciler.plan import Content, Op, Plan
from test_cli import refused, snapshot
from test_mcp import failed, session
from test_precommit import git, git_env, local_hooks, pre_commit
from test_secrets import unguarded

from qem_edit.base.replay import Event
from qem_edit.storage import secrets
from qem_edit.storage.logtree import event_object

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
CURL = f"curl -H token:{TOKEN} https://api.example.com"
PG = "postgres://admin:S3cr3tP4ssw0rd!@db.internal:5432/app"
SHOWN_NEVER = (TOKEN, "a1B2c3D4e5F6", "S3cr3tP4ssw0rd", "Xk9#mQ2vL8pR", "p4ssw0rdLongish")

# URLs with credentials, whatever the password holds: each a secret
URL_SECRETS = [
    PG,
    "mysql://root:Xk9#mQ2vL8pR@10.0.0.5/db",
    "redis://:p4ssw0rdLongish@cache:6379",
    "mongodb+srv://u:p%40ss@cluster0.example.net/app",
    "amqp://guest:R4bb1tMQ-2026@rabbit.internal:5672/vhost",
    "https://user:hunter2pass@host",
    "see postgresql://svc:p@ss@db:5432/x for the replica",
]
# and what is not: no password, an empty one, a placeholder, a port before a query
URL_ORDINARY = [
    "postgres://localhost/db", "https://user@host", "postgres://user:@host", "postgres://localhost:5432/app",
    "postgres://app:${DB_PASSWORD}@db:5432/app", "postgres://app:<password>@db/app", "redis://:****@cache:6379",
    "mysql://root:$MYSQL_PASSWORD@db/x", "amqp://{{user}}:{{ pass }}@rabbit", "postgres://user:password@localhost/db",
    "https://example.com:8080?next=a@b.com", "Clone https://github.com/org/repo.git and mail ops@example.com.",
]


def never_shown(*outputs: str) -> None:
    out = "\n".join(outputs)
    assert not any(part in out for part in SHOWN_NEVER), out


def everything(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout + proc.stderr


# -- the rule: every string field, found from the event's shape ------------------------------------


def _string_fields(record: type) -> list[str]:
    """The fields of a NamedTuple or dataclass whose type can hold a string (str, a
    mapping, a tuple or list of them): a field added later is in this list by its type."""
    hints = typing.get_type_hints(record)
    return [name for name, hint in hints.items() if any(word in str(hint) for word in ("str", "Mapping", "tuple", "list"))]


def test_every_string_field_of_an_event_is_checked() -> None:
    """A secret put in each field of an event that can hold a string (read from Event's
    type hints) is found and named, never shown; the id is the hash of the stored form,
    which holds every other field."""
    base = Event("0" * 26, "1" * 26, "revoked", "2026-01-01T00:00:00Z", "alice", None, None, {}, 3, ())
    checked = _string_fields(Event)
    assert {"note", "type", "at", "actor", "reason", "checkin", "data", "prev"} <= set(checked)
    for name in checked:
        if name == "id":  # not stored: the hash of what is
            assert "id" not in event_object(base)
            continue
        value = {"data": {"triggers": {"run": [CURL]}}, "prev": (CURL,)}.get(name, CURL)
        found = secrets.event_problems(base._replace(**{name: value}))
        assert found, name
        assert all(TOKEN not in what for what, _ in found)
    deep = {"vectr": {"tags": ["ok", PG], "triggers": [{"command": CURL}]}, TOKEN: 1,
            "anchors": [{"path": "src/x.py", "oid": "a" * 40}, {"path": PG, "oid": "b" * 40}]}
    named = [what for what, _ in secrets.event_problems(base._replace(data=deep))]
    assert set(named) == {"the field data.vectr.tags[1]", "the field data.vectr.triggers[0].command",
                          "a key of data", "an anchor's path"}, named
    assert [what for what, _ in secrets.event_problems(base._replace(data={"triggers": {"run": [CURL]}}))] == [
        "the @when-run trigger (--when-run)"]
    assert secrets.event_problems(base) == [] and secrets.event_problems(base, "Run tests in the venv") == []


def test_every_field_of_a_check_in_item_is_checked() -> None:
    """The same for a check-in's items (every field of Content, and a marker's reason)."""
    from qem_edit.writes.checkin import _secret_errors

    for name in _string_fields(Content):
        value = ((("run", CURL),) if name == "triggers" else (CURL,)) if name in ("anchors", "triggers") else CURL
        content = Content(**{**{"kind": "task", "priority": "medium", "text": "x"}, name: value})
        plan = Plan(ops=[Op("create", None, 7, content)])
        [error] = _secret_errors(plan, allow_secret=name != "text")  # a person may allow the text alone
        assert error.line == 7 and "holds a secret (GitHub Token" in error.message, (name, error)
        assert TOKEN not in error.message
    assert _secret_errors(Plan(ops=[Op("create", None, 7, Content("task", "medium", CURL))]), allow_secret=True) == []
    assert _secret_errors(Plan(ops=[Op("revoke", "a" * 26, 3, None, CURL)]), allow_secret=True)
    assert {f.name for f in fields(Content)} == set(_string_fields(Content))  # each can hold a string: each checked


@pytest.mark.parametrize("text", URL_SECRETS)
def test_a_password_in_any_url_is_a_secret(text: str) -> None:
    assert [f.kind for f in secrets.scan(text)] == ["Basic Auth Credentials"]
    assert "S3cr3t" not in secrets.withheld(text) and secrets.WITHHELD in secrets.withheld(text)


@pytest.mark.parametrize("text", URL_ORDINARY)
def test_a_url_without_a_real_password_is_not(text: str) -> None:
    assert secrets.scan(text) == []
    assert secrets.withheld(text) == text


# -- the command line, a check-in, MCP, load ------------------------------------------------------------


def test_a_trigger_anchor_actor_or_reason_holding_a_secret_is_refused_on_the_command_line(qem, ws: Path) -> None:
    first = qem("add", "Run tests inside the venv", "--kind", "task").stdout.strip()
    other = qem("add", "Run tests outside the venv", "--kind", "task").stdout.strip()
    before = snapshot(ws)
    for env in ({}, {"QEM_ACTOR_KIND": "agent"}):
        done = qem("add", "Fetch the releases", "--kind", "task", "--when-run", CURL, env=env)
        refused(done, "the @when-run trigger (--when-run) holds a secret", "GitHub Token", "nothing was written")
        never_shown(everything(done))
    allowed = qem("add", "Fetch the releases", "--kind", "task", "--when-run", CURL, "--allow-secret")
    refused(allowed, "@when-run", "stays in the log for good", "no one may allow a secret there")
    cases = [
        (("add", "Fetch", "--kind", "task", "--when-path", PG), ()),
        (("add", "Fetch", "--kind", "task", "--anchor", PG), ()),
        (("add", "Fetch", "--kind", "task", "--actor", f"bot {TOKEN}"), ()),
        (("revoke", first, "-m", f"moved to {PG}"), ("the reason", "Basic Auth Credentials")),
        (("dispute", first, other, "-m", f"the key is {TOKEN}"), ("the reason", "GitHub Token")),
    ]
    for args, words in cases:
        done = qem(*args)
        refused(done, *words)
        never_shown(everything(done))
    assert snapshot(ws) == before


def test_a_check_in_s_when_run_line_with_a_secret_is_refused(qem, ws: Path, tmp_path: Path) -> None:
    assert qem("add", "Run tests inside the venv", "--kind", "task").returncode == 0
    edit = tmp_path / "edit.md"
    assert qem("checkout", "--path", str(edit)).returncode == 0
    lines = edit.read_text("utf-8").splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("- ") and "venv" in line)
    lines[at + 1:at + 1] = ["- Fetch the releases before a deploy", f"  @when-run: {CURL}"]
    edit.write_text("\n".join(lines) + "\n", "utf-8")
    before = snapshot(ws)
    for extra in ((), ("--allow-secret",), ("--json",)):
        done = qem("checkin", "--path", str(edit), "-m", "a trigger", "--yes", *extra)
        refused(done, f"line {at + 2}: its trigger line", "GitHub Token")
        never_shown(everything(done))
        if extra == ("--json",):  # the refused plan, as a script reads it: the item, its secret withheld
            [op] = json.loads(done.stdout)["operations"]
            assert op["triggers"] == [["run", f"curl -H token:{secrets.WITHHELD} https://api.example.com"]], op
    assert snapshot(ws) == before


def test_the_mcp_tools_refuse_a_secret_in_a_trigger_or_a_reason(ws: Path) -> None:
    first = run_qem("add", "Run tests inside the venv", "--kind", "task", cwd=ws).stdout.strip()
    before = snapshot(ws)

    async def main() -> list[str]:
        async with session(ws) as s:
            return [await failed(s, "add", text="Fetch the releases", kind="task", when_run=[CURL]),
                    await failed(s, "add", text="Fetch the releases", kind="task", when_path=[PG]),
                    await failed(s, "revoke", id=first, reason=f"the token was {TOKEN}")]

    texts = anyio.run(main)
    assert "the @when-run trigger (--when-run) holds a secret (GitHub Token" in texts[0], texts[0]
    assert "an agent cannot allow a secret" in texts[0]
    assert "the reason holds a secret (GitHub Token" in texts[2], texts[2]
    never_shown(*texts)
    assert snapshot(ws) == before


def test_load_refuses_a_dump_whose_trigger_holds_a_secret(qem, ws: Path, tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    assert unguarded("add", "Fetch the releases", "--kind", "task", "--when-run", CURL, cwd=source).returncode == 0
    dump = tmp_path / "dump.jsonl"
    assert run_qem("dump", str(dump), cwd=source).returncode == 0
    assert qem("add", "Already here", "--kind", "task").returncode == 0
    before = snapshot(ws)
    done = qem("load", str(dump))
    refused(done, "the @when-run trigger (--when-run) of event", "GitHub Token", "nothing was written")
    never_shown(everything(done))
    assert snapshot(ws) == before


# -- qem import vectr ------------------------------------------------------------------------------------


@pytest.mark.parametrize("column, value", [("triggers", json.dumps([{"command": CURL}])),
                                           ("tags", json.dumps(["deploy", TOKEN])),
                                           ("title", f"Deploy with {TOKEN}"),
                                           ("author_id", f"ci {PG}")])
def test_a_vectr_note_with_a_secret_in_any_column_is_refused_never_shown(qem, ws: Path, tmp_path: Path,
                                                                          column: str, value: str) -> None:
    vectr = tmp_path / "vectr.db"
    shutil.copyfile(FIXTURES / "vectr" / "vectr-store.db", vectr)
    with sqlite3.connect(vectr) as conn:
        conn.execute(f"UPDATE notes SET {column} = ? WHERE note_id = 56", (value,))
    assert qem("add", "Already here", "--kind", "task").returncode == 0
    before = snapshot(ws)
    done = qem("import", "vectr", str(vectr), "--workspace-name", "side-project")
    refused(done, f"vectr #56: {column} holds a secret", "nothing was imported")
    never_shown(everything(done))
    assert snapshot(ws) == before


def test_the_vectr_report_withholds_a_secret_of_a_note_it_does_not_import(qem, ws: Path, tmp_path: Path) -> None:
    vectr = tmp_path / "vectr.db"
    shutil.copyfile(FIXTURES / "vectr" / "vectr-store.db", vectr)
    with sqlite3.connect(vectr) as conn:  # a kind qem has not: skipped, and named with its kind
        conn.execute("UPDATE notes SET kind = ? WHERE note_id = 56", (f"x {TOKEN}",))
    done = qem("import", "vectr", str(vectr), "--workspace-name", "side-project")
    assert done.returncode == 0, done.stderr
    assert "vectr #56: not imported: kind" in done.stdout and secrets.WITHHELD in done.stdout, done.stdout
    never_shown(everything(done))


# -- a clone's files: a hostile branch merged ------------------------------------------------------------


def _hostile_branch(tmp_path: Path, env: dict[str, str]) -> tuple[Path, Path, str]:
    """A bare origin, our clone with a memory and the secrets hook, and a second clone that
    pushes a branch whose event file holds a token in a trigger (written by a qem without
    the guard); returns (origin, mine, the event file's name)."""
    origin, mine, theirs = tmp_path / "origin.git", tmp_path / "mine", tmp_path / "theirs"
    git("init", "-q", "--bare", "-b", "main", str(origin), cwd=tmp_path, env=env)
    git("clone", "-q", str(origin), str(mine), cwd=tmp_path, env=env)
    (mine / ".pre-commit-config.yaml").write_text(local_hooks("qem-secrets", "qem-verify"), "utf-8")
    assert run_qem("add", "Run tests inside the venv", "--kind", "task", cwd=mine).returncode == 0
    git("add", "-A", cwd=mine, env=env)
    git("commit", "-qm", "memory", cwd=mine, env=env)
    git("push", "-q", "origin", "main", cwd=mine, env=env)
    git("clone", "-q", str(origin), str(theirs), cwd=tmp_path, env=env)
    git("switch", "-qc", "fetch-releases", cwd=theirs, env=env)
    made = unguarded("add", "Fetch the releases before a deploy", "--kind", "task", "--when-run", CURL, cwd=theirs)
    assert made.returncode == 0, made.stderr
    added = git("status", "--porcelain", "--untracked-files=all", cwd=theirs, env=env).stdout
    [event] = [line.split()[-1] for line in added.splitlines() if ".qem/events/" in line]
    git("add", "-A", cwd=theirs, env=env)
    git("commit", "-qm", "a note with a trigger", "--no-verify", cwd=theirs, env=env)
    git("push", "-q", "origin", "fetch-releases", cwd=theirs, env=env)
    return origin, mine, event


def test_a_clone_s_event_holding_a_secret_is_named_and_refused(tmp_path: Path) -> None:
    env = git_env(tmp_path / "home")
    (tmp_path / "home").mkdir()
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    origin, mine, event = _hostile_branch(tmp_path, env)
    assert pre_commit("install", cwd=mine, env=env).returncode == 0
    git("fetch", "-q", "origin", cwd=mine, env=env)
    git("merge", "-q", "--no-ff", "--no-commit", "origin/fetch-releases", cwd=mine, env=env)
    verify = run_qem("verify", cwd=mine)
    assert verify.returncode == 1, everything(verify)
    [line] = [line for line in verify.stdout.splitlines() if "holds a secret" in line]
    assert "the @when-run trigger (--when-run) holds a secret, GitHub Token on line 1" in line, line
    assert event in line, line
    never_shown(everything(verify))
    check = run_qem("check-secrets", str(mine / event), cwd=mine)
    assert check.returncode == 1 and f"{event}: the @when-run trigger" in everything(check), everything(check)
    never_shown(everything(check))
    commit = git("commit", "-m", "merge the releases note", cwd=mine, env=env, check=False)
    assert commit.returncode == 1, everything(commit)
    assert "@when-run trigger" in everything(commit)
    never_shown(everything(commit))
    assert git("rev-list", "--count", "HEAD", cwd=mine, env=env).stdout.strip() == "1"
    git("merge", "--abort", cwd=mine, env=env)
    fresh = tmp_path / "fresh"  # a fresh clone of the branch: the same, named by verify
    git("clone", "-q", "-b", "fetch-releases", str(origin), str(fresh), cwd=tmp_path, env=env)
    again = run_qem("verify", cwd=fresh)
    assert again.returncode == 1 and "the @when-run trigger (--when-run) holds a secret" in again.stdout
    assert f"in {event}, added by commit " in again.stdout, again.stdout
    never_shown(everything(again))


# -- forgetting: nothing left in any file qem wrote ---------------------------------------------------------


def _files_holding(root: Path, needle: str) -> list[str]:
    out = []
    for path in root.rglob("*"):
        if path.is_file() and ".git" not in path.relative_to(root).parts[:1]:
            data = path.read_bytes()
            if needle.encode() in data or needle.encode("utf-16-le") in data:
                out.append(path.relative_to(root).as_posix())
    return out


def test_a_forgotten_note_s_secret_is_in_no_file_qem_wrote(tmp_path: Path) -> None:
    """A person allows a token in a note's text (the one field that may hold one), the note
    triggers on a command and is delivered to an agent's session (the ledger), a hook fails
    naming what it was given, the token withheld; forgotten, the token is in no file under
    the work tree but git's own: the log, packs, the index, MEMORY.md, the ledgers, the log."""
    env = git_env(tmp_path / "home")
    (tmp_path / "home").mkdir()
    proj = tmp_path / "proj"
    proj.mkdir()
    git("init", "-q", "-b", "main", cwd=proj, env=env)
    made = run_qem("add", f"Fetch releases with {TOKEN}", "--kind", "gotcha", "--when-run", "curl *",
                   "--allow-secret", cwd=proj)
    assert made.returncode == 0, made.stderr
    short = made.stdout.strip()
    assert run_qem("add", "Run tests inside the venv", "--kind", "task", cwd=proj).returncode == 0
    assert run_qem("pack", cwd=proj).returncode == 0
    hook = {"session_id": "s1", "cwd": str(proj), "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": "curl https://api.example.com"}}
    given = run_qem("hook", "claude", "PreToolUse", cwd=proj, input=json.dumps(hook))
    assert TOKEN in given.stdout, given.stdout + given.stderr  # delivered: the ledger names the note
    bad = run_qem("hook", "claude", f"Pre{TOKEN}", cwd=proj, input=json.dumps(hook))  # a failure naming its input
    assert bad.returncode == 0 and bad.stdout == "" and TOKEN not in bad.stderr, bad.stderr
    assert secrets.WITHHELD in bad.stderr, bad.stderr
    assert _files_holding(proj, TOKEN), "the note's text is in the log before it is forgotten"
    forgot = run_qem("forget", short, "-m", "held a token", "--yes", cwd=proj)
    assert forgot.returncode == 0, forgot.stderr
    assert _files_holding(proj, TOKEN) == []
    assert list((proj / ".qem" / "sessions").glob("*.json")), "a ledger was written"
    assert run_qem("verify", cwd=proj).returncode == 0


def test_verify_withholds_a_secret_a_malformed_file_would_have_it_quote(qem, ws: Path) -> None:
    """A clone's event file that no reader takes (an unknown type) is set aside and named by
    verify with why; the value its reason quotes is withheld."""
    from qem_edit.base import ids
    from qem_edit.storage.logtree import canonical

    assert qem("add", "Run tests inside the venv", "--kind", "task").returncode == 0
    bad = canonical({"v": 1, "type": f"x-{TOKEN}", "note": None, "at": "2026-01-01T00:00:00Z", "actor": "eve",
                     "reason": None, "checkin": None, "clock": 9, "prev": [], "data": {}})
    (ws / ".qem" / "events" / ids.content_id(bad)).write_bytes(bad)
    for args in (("verify",), ("verify", "--json")):
        done = qem(*args)
        assert done.returncode == 1, everything(done)
        assert "unknown event type" in done.stdout and secrets.WITHHELD in done.stdout, done.stdout
        never_shown(everything(done))
