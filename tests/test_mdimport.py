"""`qem import markdown`: the memory a team keeps in markdown proposed as notes in a
checkout that a person reviews and checks in.  The proposals of each fixture are in the
`.expected` file beside it (fixtures/import/); end to end with real git: nothing reaches
the log before the check-in, a second import proposes nothing, in a fresh clone too; qem's
own rendering and a file with a credential are refused, naming the file, never the secret."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import FIXTURES, run_qem

from qem_edit.transfer.mdimport import Skipped, guess_kind, proposals_of

CASES = FIXTURES / "import"
INPUTS = sorted(p.relative_to(CASES) for p in CASES.rglob("*.md"))


@pytest.mark.parametrize("name", INPUTS, ids=str)
def test_each_file_proposes_what_its_expected_file_says(name: Path) -> None:
    source = CASES / name
    got = [{"line": p.line, "kind": p.kind, "text": p.text}
           for p in proposals_of(source.name, source.read_text("utf-8"), Skipped())]
    expected = [json.loads(line) for line in (CASES / f"{name}.expected").read_text("utf-8").splitlines()]
    assert got == expected


@pytest.mark.parametrize("text, headings, kind", [
    ("Replace the retry loop", ["TODO"], "task"),
    ("TODO: ask ops for a database", [], "task"),
    ("Never commit `build/`", ["Code style"], "directive"),
    ("Always run `make lint` first", [], "directive"),
    ("Don't run migrations on staging", [], "gotcha"),
    ("Careful: the cache is per clone", ["Commands"], "gotcha"),
    ("The cache must be warm", ["Gotchas"], "gotcha"),  # a heading naming a kind outright wins over "must"
    ("We decided on SQLite", ["PR instructions"], "decision"),
    ("See https://example.com/runbook", ["TODO"], "reference"),
    ("`make test` runs the tests", [], "operational"),
    ("Two-space indentation", ["Project", "Code style"], "directive"),  # the nearest heading that hints
    ("The API lives in `src/api/`", ["Architecture"], "finding"),
    ("Redis holds the sessions", [], "finding"),
])
def test_the_kind_rules(text: str, headings: list[str], kind: str) -> None:
    assert guess_kind(text, headings) == kind


def test_a_checkbox_is_a_task_and_a_done_one_is_left_out() -> None:
    skipped = Skipped()
    got = proposals_of("TODO.md", "- [ ] wire the retry loop\n- [x] move CI\n", skipped)
    assert [(p.kind, p.text) for p in got] == [("task", "wire the retry loop")]
    assert skipped.done == 1


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def log_files(repo: Path) -> list[str]:
    return sorted(str(p.relative_to(repo)) for folder in ("events", "texts", "packs")
                  for p in (repo / ".qem" / folder).rglob("*") if p.is_file())


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "T")
    for name in ("CLAUDE.md", "AGENTS.md"):
        (root / name).write_bytes((CASES / name).read_bytes())
    git(root, "add", ".")
    git(root, "commit", "-qm", "the project's instructions")
    return root


def test_an_import_is_a_checkout_a_person_checks_in_and_a_second_import_proposes_nothing(repo: Path, tmp_path: Path) -> None:
    done = run_qem("import", "markdown", "CLAUDE.md", "AGENTS.md", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("proposed 29 notes (")
    assert "left out: 1 done tasks, 1 @path imports, 1 lines about the file itself" in done.stdout
    assert log_files(repo) == [] and run_qem("list", cwd=repo).stdout == ""  # nothing in the log yet
    [kept] = (repo / ".qem" / "checkouts").iterdir()
    review = (kept / "MEMORY.md").read_text("utf-8")
    assert "## Gotchas\n\n- The dev server caches templates; restart it after editing `templates/`.\n" in review
    assert "- Run a single test with:\n  ```sh\n  pytest tests/test_api.py -k login\n  ```\n" in review

    checked = run_qem("checkin", "-m", "imported CLAUDE.md and AGENTS.md", "--yes", cwd=repo)
    assert checked.returncode == 0, checked.stderr
    listed = run_qem("list", "--json", cwd=repo)
    notes = json.loads(listed.stdout)
    assert len(notes) == 29
    expected = [json.loads(line) for name in ("CLAUDE.md", "AGENTS.md")
                for line in (CASES / f"{name}.expected").read_text("utf-8").splitlines()]
    assert sorted((n["kind"], n["text"]) for n in notes) == sorted((e["kind"], e["text"]) for e in expected)
    assert {n["provenance"] for n in notes} == {"human"}  # a person checked them in

    again = run_qem("import", "markdown", "CLAUDE.md", "AGENTS.md", cwd=repo)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("nothing to propose from 2 files; left out: 29 already in memory")
    assert not list((repo / ".qem" / "checkouts").iterdir())

    # a teammate's clone knows them too, by their text
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "memory from CLAUDE.md and AGENTS.md")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    theirs = run_qem("import", "markdown", "CLAUDE.md", "AGENTS.md", cwd=clone)
    assert theirs.returncode == 0 and "29 already in memory" in theirs.stdout


def test_a_reviewed_file_lands_as_the_person_left_it(repo: Path) -> None:
    review = repo / "review.md"
    done = run_qem("import", "markdown", str(CASES / "MEMORY.md"), "--path", str(review), cwd=repo)
    assert done.returncode == 0, done.stderr
    assert f"check them in with `qem checkin --path {review} -m" in done.stdout
    text = review.read_text("utf-8")
    # the person drops the line about the file, and moves a finding to the gotchas
    text = text.replace("- Kept by hand; newest at the bottom of each section.\n", "")
    moved = "- `src/legacy/` is imported by the billing job; it is not dead code.\n"
    text = text.replace(moved, "").replace("## Gotchas\n\n", "## Gotchas\n\n" + moved)
    review.write_text(text, "utf-8")
    checked = run_qem("checkin", "--path", str(review), "-m", "imported MEMORY.md", "--yes", cwd=repo)
    assert checked.returncode == 0, checked.stderr
    notes = {n["text"]: n["kind"] for n in json.loads(run_qem("list", "--json", cwd=repo).stdout)}
    assert len(notes) == 7 and "Kept by hand; newest at the bottom of each section." not in notes
    assert notes["`src/legacy/` is imported by the billing job; it is not dead code."] == "gotcha"
    # importing again proposes only what the person left out
    again = run_qem("import", "markdown", str(CASES / "MEMORY.md"), cwd=repo)
    assert again.stdout.startswith("proposed 1 notes (1 finding)") and "7 already in memory" in again.stdout


def test_claude_code_auto_memory_one_note_a_file_and_its_index_left_out(repo: Path) -> None:
    files = sorted((CASES / "auto-memory").glob("*.md"))
    done = run_qem("import", "markdown", *map(str, files), cwd=repo)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("proposed 3 notes (1 directive, 1 finding, 1 reference) from 3 files;"
                                  " left out: 3 index lines linking to topic files")


def test_qem_s_own_rendering_is_refused(repo: Path) -> None:
    assert run_qem("add", "-k", "gotcha", "the cache is per clone", cwd=repo).returncode == 0
    assert run_qem("export", cwd=repo).returncode == 0
    before = log_files(repo)
    done = run_qem("import", "markdown", "MEMORY.md", cwd=repo)
    assert done.returncode == 2 and done.stdout == ""
    assert "MEMORY.md is qem's own rendering of a memory" in done.stderr
    assert "qem checkin --path MEMORY.md" in done.stderr
    assert log_files(repo) == before and not (repo / ".qem" / "checkouts").exists()


def test_a_secret_is_refused_naming_the_file_and_line_never_the_secret(repo: Path) -> None:
    key = "AKIA" + "Q3EGRTYJ7MZXPLWN"  # an AWS access key id's shape, made up
    lines = (CASES / "CLAUDE.md").read_text("utf-8").split("\n")
    lines.insert(9, f"- Deploy with the key {key} from the vault.")
    (repo / "CLAUDE.md").write_text("\n".join(lines), "utf-8")
    done = run_qem("import", "markdown", "AGENTS.md", "CLAUDE.md", cwd=repo)
    assert done.returncode == 2 and done.stdout == ""
    assert "CLAUDE.md holds a secret (AWS Access Key on line 10)" in done.stderr
    assert key not in done.stderr
    assert not (repo / ".qem").exists()  # nothing written, not even a memory


def test_bad_files_are_refused_by_name(repo: Path) -> None:
    (repo / "latin1.md").write_bytes(b"- caf\xe9 au lait\n")
    done = run_qem("import", "markdown", "CLAUDE.md", "latin1.md", cwd=repo)
    assert done.returncode == 2 and "latin1.md line 1: not UTF-8 text; nothing was imported" in done.stderr
    missing = run_qem("import", "markdown", "NOPE.md", cwd=repo)
    assert missing.returncode == 2 and "cannot read NOPE.md" in missing.stderr
    assert "Traceback" not in done.stderr + missing.stderr
    assert not (repo / ".qem").exists()
