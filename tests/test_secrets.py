"""Credentials never reach the committed log, and a repeat of a note in force is named.

Every way in (the command line's add and supersede, a check-in, the MCP tools, `qem load`,
`qem import vectr`) refuses a text or a reason that holds a credential before anything is
written; a person may allow one (`--allow-secret`), an agent may not.  A secret that
arrived from a clone (written by a qem without the guard) is named by `qem verify` with the
commit that brought it, and the pre-commit hook refuses a commit that adds one.  Ordinary
text is never refused: the bundled corpus and a generated 74,900-note one are scanned
whole.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from builders import store_path
from conftest import CORPUS, FIXTURES, REPO, run_qem
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cli import refused, snapshot, verified
from test_mcp import failed, ok, session
from test_precommit import git, git_env, local_hooks, pre_commit

from qem_edit.storage import secrets
from qem_edit.storage.store import Store

# Well-known placeholder credentials (the vendors' documentation examples) and made-up ones
# in each issuer's shape: (text, kind the detector names, line)
CASES = [
    ("deploy with AKIAIOSFODNN7EXAMPLE / wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AWS Access Key", 1),
    ("the deploy key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
     "Private Key", 2),
    ("CI pushes with ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "GitHub Token", 1),
    ("gitlab: glpat-" + "x" * 20, "GitLab Token", 1),
    ("alerts bot: xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "Slack Token", 1),
    ("mirror at\nhttps://deploy:s3cr3tpass@git.example.com/repo.git", "Basic Auth Credentials", 2),
    ("billing: sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "Stripe Access Key", 1),
    ('in ~/.aws/credentials:\naws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"', "AWS Access Key", 2),
]
SECRET_PARTS = ("AKIAIOSFODNN7EXAMPLE", "BEGIN RSA", "ghp_a1B2", "glpat-xxx", "xoxb-1234", "s3cr3tpass", "sk_live_4e", "wJalrXUtn")
ORDINARY = [
    "Fixed in 3f2a9c1e4b5d6f7a8b9c0d1e2f3a4b5c6d7e8f90; see note k3f9 and #ab12cd.",
    "Run id 123e4567-e89b-12d3-a456-426614174000 failed; retry with `pytest -k lock`.",
    "The fixture is base64:\n```\nU29tZSBiYXNlNjQgdGV4dCB0aGF0IGlzIG5vdCBhIGtleSwganVzdCBkYXRh\nZm9yIGEgdGVzdA==\n```",
    "The AWS region is eu-west-1; ASIA is not a key prefix on its own.",
    "Clone https://github.com/org/repo.git and mail ops@example.com.",
]
UNGUARDED = ("import sys, qem_edit.storage.secrets as s; s.scan = lambda text: []; from qem_edit.shells.cli import main;"
             " main(sys.argv[1:])")


def unguarded(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """qem as a release without the guard would run (a clone's files come from anywhere)."""
    return subprocess.run([sys.executable, "-c", UNGUARDED, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def never_shown(proc: subprocess.CompletedProcess | str) -> None:
    out = proc if isinstance(proc, str) else proc.stdout + proc.stderr
    assert not any(part in out for part in SECRET_PARTS), out


# -- the guard on the way in ------------------------------------------------------------------


@pytest.mark.parametrize("text, kind, line", CASES)
def test_a_credential_is_refused_naming_its_kind_and_line_never_itself(qem, ws: Path, text: str, kind: str,
                                                                        line: int) -> None:
    assert qem("add", "Run tests inside the venv", "--kind", "directive").returncode == 0
    before = snapshot(ws)
    done = qem("add", text, "--kind", "task")
    refused(done, kind, f"line {line}", "nothing was written", "--allow-secret")
    never_shown(done)
    assert snapshot(ws) == before


def test_supersede_and_a_reason_are_guarded_too(qem, ws: Path) -> None:
    first = qem("add", "Deploy with the staging key", "--kind", "task").stdout.strip()
    before = snapshot(ws)
    refused(qem("supersede", first, CASES[0][0], "-m", "new key"), "AWS Access Key")
    refused(qem("revoke", first, "-m", "leaked " + CASES[2][0]), "the reason", "GitHub Token")
    assert snapshot(ws) == before


def test_a_person_may_allow_a_secret_an_agent_may_not(qem, ws: Path) -> None:
    assert qem("add", "Run tests inside the venv", "--kind", "task").returncode == 0
    before = snapshot(ws)
    for env in ({"QEM_ACTOR_KIND": "agent"}, {}):
        refused(qem("add", CASES[0][0], "--kind", "task", env=env), "AWS Access Key")
    refused(qem("add", CASES[0][0], "--kind", "task", "--allow-secret", env={"QEM_ACTOR_KIND": "agent"}),
            "agent", "cannot pass --allow-secret")
    assert snapshot(ws) == before
    done = qem("add", CASES[0][0], "--kind", "task", "--allow-secret")
    assert done.returncode == 0, done.stderr
    with Store.open(store_path(ws)) as s:
        [created] = [e for e in s.events() if e.type == "created" and e.note == s.resolve(done.stdout.strip())]
    assert created.data[secrets.ALLOWED] == "allowed"
    assert verified(ws) == []  # a person allowed it: verify and the hook let it through


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_never_refused(qem, text: str) -> None:
    done = qem("add", text, "--kind", "finding")
    assert done.returncode == 0, done.stderr


def test_a_checkin_with_a_secret_is_refused_by_the_edit_s_line(qem, ws: Path, tmp_path: Path) -> None:
    assert qem("add", "Run tests inside the venv", "--kind", "task").returncode == 0
    edit = tmp_path / "edit.md"
    assert qem("checkout", "--path", str(edit)).returncode == 0
    lines = edit.read_text("utf-8").splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("- ") and "venv" in line)
    lines.insert(at + 1, "- Rotate " + CASES[2][0].split()[-1] + " before Friday")
    edit.write_text("\n".join(lines) + "\n", "utf-8")
    before = snapshot(ws)
    done = qem("checkin", "--path", str(edit), "-m", "new task", "--yes")
    refused(done, f"line {at + 2}: this note's text holds a secret", "GitHub Token", "--allow-secret")
    never_shown(done)
    assert snapshot(ws) == before
    assert qem("checkin", "--path", str(edit), "-m", "new task", "--yes", "--allow-secret").returncode == 0
    assert verified(ws) == []


def test_load_and_import_refuse_a_secret_whole(qem, ws: Path, tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    assert unguarded("add", "Ordinary note", "--kind", "task", cwd=source).returncode == 0
    assert unguarded("add", CASES[4][0], "--kind", "task", cwd=source).returncode == 0
    dump = tmp_path / "dump.jsonl"
    assert run_qem("dump", str(dump), cwd=source).returncode == 0
    assert qem("add", "Already here", "--kind", "task").returncode == 0
    before = snapshot(ws)
    done = qem("load", str(dump))
    refused(done, "Slack Token", "line 1", "nothing was written")
    never_shown(done)
    assert snapshot(ws) == before
    vectr = tmp_path / "vectr.db"
    shutil.copyfile(FIXTURES / "vectr" / "vectr-store.db", vectr)
    with sqlite3.connect(vectr) as conn:
        conn.execute("UPDATE notes SET content = ? WHERE note_id = 56", (CASES[5][0],))
    refused(qem("import", "vectr", str(vectr), "--workspace-name", "side-project"), "Basic Auth Credentials")
    assert snapshot(ws) == before
    # an allowance cannot be recorded on a loaded event (its id is its bytes' hash): refused, naming the way
    refused(qem("load", str(dump), "--allow-secret"), "cannot be recorded on loaded events", "qem add TEXT --allow-secret")
    refused(qem("import", "vectr", str(vectr), "--allow-secret"), "cannot be recorded on loaded events")
    assert snapshot(ws) == before


# -- the detector: what reaches it, and no false positive ---------------------------------------


def _plugin_patterns() -> list[tuple[str, re.Pattern]]:
    out = []
    for detector in secrets._detectors():
        for pattern in detector.denylist:
            out.append((type(detector).__name__, pattern))
    return out


@pytest.mark.parametrize("name, pattern", _plugin_patterns(), ids=lambda v: v if isinstance(v, str) else "")
def test_the_precheck_lets_every_match_of_every_plugin_through(name: str, pattern: re.Pattern) -> None:
    """The pre-check only spares the detector's import: whatever a plugin's pattern
    matches, it lets through (hypothesis writes strings holding a match)."""
    plain = re.compile(pattern.pattern.replace("(?!\\w)", ""), pattern.flags)  # hypothesis has no lookahead

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_regex(plain))
    def check(text: str) -> None:
        if pattern.search(text):
            assert secrets.may_hold(text), (name, text)

    check()


def _texts(path: Path):  # type: ignore[no-untyped-def]
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            obj = json.loads(line)
            for text in (obj.get("data", {}).get("text"), obj.get("reason")):
                if text:
                    yield text


def test_no_false_positive_in_the_bundled_corpus(qem) -> None:
    flagged = [text[:60] for text in _texts(CORPUS) if secrets.scan(text)]
    assert flagged == []
    assert qem("load", str(CORPUS)).returncode == 0  # the README's first command


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("QEM_SOAK"), reason="the 74,900-note corpus runs with QEM_SOAK=N (the 749-note one always)")
def test_no_false_positive_in_a_generated_74900_note_corpus(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus-74900.jsonl"
    subprocess.run([sys.executable, str(REPO / "fixtures" / "generate.py"), "--notes", "74900", "-o", str(corpus)],
                   check=True, capture_output=True, timeout=600)
    scanned = flagged = 0
    for text in _texts(corpus):
        scanned += 1
        flagged += bool(secrets.scan(text))
    assert scanned > 74_900 and flagged == 0


# -- arrived from a clone ---------------------------------------------------------------------------


def test_verify_names_a_secret_a_clone_brought_with_its_commit(tmp_path: Path) -> None:
    env = git_env(tmp_path / "home")
    (tmp_path / "home").mkdir()
    origin, mine, theirs = tmp_path / "origin.git", tmp_path / "mine", tmp_path / "theirs"
    git("init", "-q", "--bare", "-b", "main", str(origin), cwd=tmp_path, env=env)
    git("clone", "-q", str(origin), str(theirs), cwd=tmp_path, env=env)
    assert run_qem("add", "Run tests inside the venv", "--kind", "task", cwd=theirs).returncode == 0
    git("add", "-A", cwd=theirs, env=env)
    git("commit", "-qm", "memory", cwd=theirs, env=env)
    made = unguarded("add", CASES[2][0], "--kind", "task", cwd=theirs)
    short = made.stdout.strip()
    git("add", "-A", cwd=theirs, env=env)
    git("commit", "-qm", "a note with a token", cwd=theirs, env=env)
    commit = git("rev-parse", "--short", "HEAD", cwd=theirs, env=env).stdout.strip()
    git("push", "-q", "origin", "main", cwd=theirs, env=env)
    git("clone", "-q", str(origin), str(mine), cwd=tmp_path, env=env)
    done = run_qem("verify", cwd=mine)
    assert done.returncode == 1, done.stdout + done.stderr
    [line] = [line for line in done.stdout.splitlines() if "secret" in line]
    assert f"note #{short}" in line and "GitHub Token on line 1" in line and commit in line, line
    never_shown(done)
    assert run_qem("forget", short, "-m", "held a token", "--yes", cwd=mine).returncode == 0
    assert run_qem("verify", cwd=mine).returncode == 0


def test_the_pre_commit_hook_refuses_a_commit_that_adds_a_secret(tmp_path: Path) -> None:
    env = git_env(tmp_path / "home")
    (tmp_path / "home").mkdir()
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    proj = tmp_path / "project"
    proj.mkdir()
    git("init", "-q", "-b", "main", cwd=proj, env=env)
    (proj / ".pre-commit-config.yaml").write_text(local_hooks("qem-secrets"), "utf-8")
    assert run_qem("add", "Run tests inside the venv", "--kind", "task", cwd=proj).returncode == 0
    assert run_qem("add", CASES[1][0], "--kind", "task", "--allow-secret", cwd=proj).returncode == 0
    assert pre_commit("install", cwd=proj, env=env).returncode == 0
    git("add", "-A", cwd=proj, env=env)
    first = git("commit", "-m", "ordinary notes, and a key a person allowed", cwd=proj, env=env, check=False)
    assert first.returncode == 0, first.stdout + first.stderr
    assert unguarded("add", CASES[0][0], "--kind", "task", cwd=proj).returncode == 0
    git("add", "-A", cwd=proj, env=env)
    second = git("commit", "-m", "a note with a cloud key", cwd=proj, env=env, check=False)
    assert second.returncode == 1, second.stdout + second.stderr
    assert "AWS Access Key on line 1" in second.stdout + second.stderr
    never_shown(second.stdout + second.stderr)
    assert git("rev-list", "--count", "HEAD", cwd=proj, env=env).stdout.strip() == "1"


# -- repeats ------------------------------------------------------------------------------------------


def test_a_repeat_of_a_note_in_force_is_named(qem, ws: Path) -> None:
    first = qem("add", "Run tests inside the venv", "--kind", "task").stdout.strip()
    again = qem("add", "Run tests inside the venv  \r\n\r\n", "--kind", "directive", "--json")
    assert again.returncode == 0, again.stderr
    data = json.loads(again.stdout)
    assert [r["short"] for r in data["repeats"]] == [first]
    assert f"repeats note #{first}" in again.stderr and f"qem revoke {data['short']}" in again.stderr
    other = qem("add", "Run tests outside the venv", "--kind", "task", "--json")
    assert json.loads(other.stdout)["repeats"] == [] and "repeats" not in other.stderr
    assert qem("revoke", first, "-m", "done").returncode == 0
    assert qem("revoke", data["short"], "-m", "done").returncode == 0
    third = qem("add", "Run tests inside the venv", "--kind", "task")
    assert third.returncode == 0 and "repeats" not in third.stderr  # no note in force has the text


def test_many_repeats_are_named_a_few_and_counted(qem, ws: Path) -> None:
    made = {qem("add", "Deploy on Tuesdays", "--kind", "decision").stdout.strip() for _ in range(5)}
    again = qem("add", "Deploy on Tuesdays", "--kind", "decision", "--json")
    shorts = [r["short"] for r in json.loads(again.stdout)["repeats"]]  # oldest first
    assert set(shorts) == made  # --json lists every one
    line = [l for l in again.stderr.splitlines() if "repeats note" in l][0]
    assert all(f"#{s}" in line for s in shorts[:3]) and "and 2 more" in line, line
    assert not any(f"#{s}," in line or f"#{s} " in line for s in shorts[3:]), line


def test_a_checkin_names_the_notes_its_new_items_repeat(qem, ws: Path, tmp_path: Path) -> None:
    first = qem("add", "Run tests inside the venv", "--kind", "task").stdout.strip()
    edit = tmp_path / "edit.md"
    assert qem("checkout", "--path", str(edit)).returncode == 0
    text = edit.read_text("utf-8")
    edit.write_text(text.replace("## Gotchas\n", "## Gotchas\n\n- Run tests inside the venv\n"), "utf-8")
    done = qem("checkin", "--path", str(edit), "-m", "again", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    [new] = data["created"]
    with Store.open(store_path(ws)) as s:
        assert data["repeats"] == {new: [s.resolve(first)]}
    assert f"repeats note #{first}" in done.stderr


# -- MCP, with the real client -----------------------------------------------------------------------


def test_the_mcp_tools_refuse_a_secret_and_return_a_repeat_s_id(ws: Path) -> None:
    assert run_qem("add", "Run tests inside the venv", "--kind", "task", cwd=ws).returncode == 0
    before = snapshot(ws)

    async def refusals(s) -> list[str]:  # type: ignore[no-untyped-def]
        return [await failed(s, "add", text=CASES[0][0], kind="task"),
                await failed(s, "add", text=CASES[3][0], kind="task", allow_secret=True)]

    async def main(script):  # type: ignore[no-untyped-def]
        async with session(ws) as s:
            return await script(s)

    texts = anyio.run(main, refusals)
    assert "AWS Access Key on line 1" in texts[0] and "an agent cannot allow a secret" in texts[0]
    assert "allow_secret" in texts[1]  # not an argument the tool takes
    never_shown("\n".join(texts))
    assert snapshot(ws) == before

    async def repeat(s) -> list:  # type: ignore[no-untyped-def]
        first = (await ok(s, "add", text="Pin orjson below 4", kind="gotcha")).structured_content
        second = (await ok(s, "add", text="Pin orjson below 4", kind="gotcha")).structured_content
        return [first, second]

    first, second = anyio.run(main, repeat)
    assert first["repeats"] == []
    assert second["repeats"] == [{"id": first["id"], "short": first["short"]}] and second["id"] != first["id"]
