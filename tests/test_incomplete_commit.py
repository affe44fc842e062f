"""Commits that carry only part of a memory, as real git habits make them, met in a
fresh clone; and a branch cut before the memory existed.

Where a write was not staged (a qem from before writes were staged, `[git] stage = false`,
or a `git reset`), `git commit -am` commits MEMORY.md but leaves a new note's log files
untracked; `git add MEMORY.md .qem/events` leaves its text behind.  Every other clone then holds a MEMORY.md
that shows a note (or a text) its log lacks: that is named as an incomplete commit (which
notes, which commit), never rendered over, and no command's advice deletes the line.
"""

from __future__ import annotations

from test_git import Clone, Team, team  # noqa: F401  (the fixture)


def incomplete(team: Team, text: str, *add: str) -> tuple[Clone, str, str]:
    """The founder adds `text` and commits with `git add ADD...` (none: `commit -am`),
    then pushes; the short id and the commit that changed MEMORY.md."""
    founder = team.founded("the first fact")
    short = founder.add(text, kind="gotcha")
    founder.git("reset", "-q")  # unstaged, as a qem before writes were staged left it (or `git reset`)
    if add:
        founder.git("add", *add)
        founder.git("commit", "-q", "-m", "a note, partly")
    else:
        founder.git("commit", "-q", "-am", "a note, partly")
    founder.git("push", "-q", "origin", "main")
    commit = founder.git("log", "-1", "--format=%h", "--", "MEMORY.md").stdout.strip()
    return founder, short, commit


def test_a_commit_without_a_notes_files_is_named_in_a_fresh_clone(team):
    founder, short, commit = incomplete(team, "the lock is taken before the index")
    assert founder.git("status", "--porcelain").stdout.count("?? .qem/") == 2  # left behind
    mate = team.clone("mate")
    committed = mate.memory_md()
    assert f"[#{short}]".encode() in committed
    check = mate.qem("export", "--check", code=1)
    said = check.stderr + check.stdout
    assert "incomplete commit" in said and f"#{short}" in said and commit in said, said
    assert "the lock is taken before the index" in said  # the item as MEMORY.md shows it
    assert "moved on" not in said and "git add .qem && git commit" in said and "--force" in said
    # following any advice given must not delete the note: export refuses, changing nothing
    refused = mate.qem("export", code=3)
    assert "incomplete commit" in refused.stderr and mate.memory_md() == committed
    verify = mate.qem("verify", code=1)
    assert f"#{short}" in verify.stdout and "incomplete commit" in verify.stdout
    # nor does checking in a hand edit of that file (the file rendered again would lose the line)
    edited = committed.replace(b"## References\n", b"## References\n\n- a reference added by hand\n")
    (mate.path / "MEMORY.md").write_bytes(edited)
    checkin = mate.qem("checkin", "--path", "MEMORY.md", "--yes", "-m", "by hand", code=3)
    assert "incomplete commit" in checkin.stderr and mate.memory_md() == edited
    assert "a reference added by hand" not in mate.qem("list").stdout
    mate.git("checkout", "--", "MEMORY.md")
    # a write here keeps the note's line too (auto-export refuses, the write stands)
    mate.add("written in the clone that lacks the note")
    assert mate.memory_md() == committed
    # the author follows the advice; the clone catches up and renders every note
    founder.git("add", ".qem")
    founder.git("commit", "-q", "-m", "the note's log files")
    founder.git("push", "-q", "origin", "main")
    mate.pull()
    mate.qem("export")
    assert f"[#{short}]".encode() in mate.memory_md()
    assert b"written in the clone that lacks the note" in mate.memory_md()
    mate.publish("the clone's note")
    fresh = team.clone("fresh")
    fresh.check()
    assert fresh.memory_md() == mate.memory_md()
    assert {n["text"] for n in fresh.notes()} >= {"the lock is taken before the index",
                                                  "written in the clone that lacks the note"}


def test_an_event_committed_without_its_text_is_text_missing_not_forgotten(team):
    founder, short, commit = incomplete(team, "never bump the schema by hand", "MEMORY.md", ".qem/events")
    mate = team.clone("mate")
    committed = mate.memory_md()
    shown = mate.qem("show", short).stdout
    assert "text missing from this commit" in shown and "forgotten" not in shown, shown
    assert commit in shown  # the commit that brought the note's event
    assert "(text missing from this commit)" in mate.qem("list").stdout
    # the rendering has no item for it: no tombstone for a note nobody forgot
    rendering = mate.qem("export", "--stdout").stdout
    assert "FORGOTTEN" not in rendering and f"[#{short}]" not in rendering
    verify = mate.qem("verify", code=1).stdout
    assert f"note #{short}:" in verify and "text missing from this commit" in verify
    check = " ".join(mate.qem("export", "--check", code=1).stderr.split())
    assert "text missing from this commit" in check and f"#{short}" in check and commit in check, check
    assert "never bump the schema by hand" in check and "moved on" not in check
    mate.qem("export", code=3)
    assert mate.memory_md() == committed  # the text's line is still there
    # the text arrives: the note is whole again, on every clone
    founder.git("add", ".qem")
    founder.git("commit", "-q", "-m", "the note's text")
    founder.git("push", "-q", "origin", "main")
    mate.pull()
    mate.check()
    assert "never bump the schema by hand" in mate.qem("show", short).stdout
    fresh = team.clone("fresh")
    fresh.check()
    assert fresh.memory_md() == mate.memory_md() == founder.memory_md()


def test_a_forgotten_note_still_renders_its_tombstone(team):
    founder = team.founded("a secret that was pasted by mistake")
    short = founder.texts_short("a secret that was pasted by mistake")
    founder.qem("forget", short, "-m", "a secret", "--yes")
    founder.qem("export")
    founder.publish("forget")
    fresh = team.clone("fresh")
    fresh.check()
    assert f"- [#{short}] FORGOTTEN".encode() in fresh.memory_md()
    shown = fresh.qem("show", short).stdout
    assert "forgotten: the text was erased" in shown and "missing" not in shown


# -- a branch cut before the memory existed --------------------------------------------------


COMMITTED = ("config.toml", ".gitignore", ".gitattributes")


def test_a_branch_from_before_the_memory_starts_the_same_memory(team):
    founder = team.founded("a fact on main")
    main_files = {name: founder.git("show", f"main:.qem/{name}").stdout for name in COMMITTED}
    founder.git("switch", "-q", "-c", "old", "HEAD~1")  # the commit before the memory
    assert not (founder.path / ".qem" / "config.toml").exists()
    assert (founder.path / ".qem" / "index.db").exists()  # git leaves the ignored files
    done = founder.qem("add", "a fact on the old branch", "-k", "finding")
    assert "index.db remembers" in done.stderr and "created a new memory" not in done.stderr, done.stderr
    for name, text in main_files.items():
        assert (founder.path / ".qem" / name).read_text("utf-8") == text, name
    assert "A  .qem/config.toml" in founder.git("status", "--porcelain").stdout  # staged
    founder.git("switch", "-q", "main")  # git takes the staged files, identical to main's
    founder.git("switch", "-q", "old")
    founder.commit("a note on the old branch")
    founder.git("switch", "-q", "main")
    merged = founder.git("merge", "--no-edit", "-q", "old", ok=False)
    assert merged.returncode == 0 and founder.conflicted() == [], merged.stdout + merged.stderr
    founder.qem("export")
    founder.publish("the old branch, merged")
    fresh = team.clone("fresh")
    fresh.check()
    assert {n["text"] for n in fresh.notes()} == {"a fact on main", "a fact on the old branch"}
    assert {name: fresh.git("show", f"HEAD:.qem/{name}").stdout for name in COMMITTED} == main_files


def test_a_fresh_clone_of_a_branch_from_before_the_memory_takes_the_committed_one(team):
    founder = team.founded("a fact on main")
    start = founder.git("rev-parse", "--short", "HEAD~1").stdout.strip()
    founder.git("push", "-q", "origin", f"{start}:refs/heads/old")
    founder.git("switch", "-q", "-c", "drop")  # a newer branch that deleted the memory: not its last form
    founder.git("rm", "-q", "-r", ".qem")
    founder.git("commit", "-q", "-m", "no memory here")
    founder.git("push", "-q", "origin", "drop")
    founder.git("switch", "-q", "main")
    mate = team.clone("mate")
    mate.git("fetch", "-q", "origin", "drop:drop")
    mate.git("switch", "-q", "old")
    assert not (mate.path / ".qem").exists()  # no index here to remember anything
    done = mate.qem("add", "a fact on the old branch", "-k", "finding")
    memory = founder.git("log", "-1", "--format=%h", "--", ".qem/config.toml").stdout.strip()
    assert f"commit {memory} holds" in done.stderr, done.stderr
    mate.git("switch", "-q", "main")
    assert "a fact on the old branch" in mate.qem("list").stdout  # its files travelled along
    mate.qem("export")
    mate.publish("the note from the old branch")
    fresh = team.clone("fresh")
    fresh.check()
    assert "a fact on the old branch" in fresh.qem("list").stdout


def test_the_export_hook_in_a_fresh_clone_never_renders_over_an_incomplete_commit(tmp_path):
    """The real pre-commit framework, the manifest's qem-export hook: in the clone of a
    commit that carried MEMORY.md without the note's files, the hook fails, names the
    note and the commit, and leaves MEMORY.md as it is."""
    from conftest import run_qem
    from test_precommit import git, git_env, local_hooks, pre_commit, project

    env = git_env(tmp_path / "home")
    (tmp_path / "home").mkdir()
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    proj = project(tmp_path, local_hooks("qem-export"), env)
    git("add", "-A", cwd=proj, env=env)
    git("commit", "-q", "-m", "the memory", cwd=proj, env=env)
    assert run_qem("add", "Deploys wait for the migration", "--kind", "gotcha", cwd=proj).returncode == 0
    assert run_qem("export", cwd=proj).returncode == 0
    git("reset", "-q", cwd=proj, env=env)  # unstaged, as a qem before writes were staged left it
    git("commit", "-q", "-am", "a note, partly", "--no-verify", cwd=proj, env=env)  # the note's files stay untracked
    commit = git("log", "-1", "--format=%h", "--", "MEMORY.md", cwd=proj, env=env).stdout.strip()
    fresh = tmp_path / "fresh"
    git("clone", "-q", str(proj), str(fresh), cwd=tmp_path, env=env)
    assert pre_commit("install", cwd=fresh, env=env).returncode == 0
    before = (fresh / "MEMORY.md").read_bytes()
    (fresh / "code.py").write_text("print('hello')\n", "utf-8")
    git("add", "code.py", cwd=fresh, env=env)
    done = git("commit", "-m", "code", cwd=fresh, env=env, check=False)
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode != 0 and "incomplete commit" in said and commit in said, said
    assert "Deploys wait for the migration" in said and "moved on" not in said
    assert (fresh / "MEMORY.md").read_bytes() == before


def test_a_hand_edit_is_still_a_hand_edit(team):
    """A line no rendering holds is a person's: an edited item of a note the log has, or a
    line that is no well-formed item, keeps the hand-edit verdict (check it in)."""
    team.founded("the first fact")
    mate = team.clone("mate")
    path = mate.path / "MEMORY.md"
    for edit in (lambda t: t.replace("the first fact", "the first fact, edited"),
                 lambda t: t.replace("## Tasks\n", "## Tasks\n\n- [#zzzz] not an item\n")):
        mate.git("checkout", "--", "MEMORY.md")
        path.write_text(edit(path.read_text("utf-8")), "utf-8")
        said = " ".join(mate.qem("export", "--check", code=1).stderr.split())
        assert "edited by hand" in said and "incomplete" not in said, said


def test_a_fresh_clone_of_a_memory_committed_before_its_first_note_reads_it(team):
    # git keeps no empty folder: the clone holds config.toml and no log folder, and is the
    # committed memory (a read answers, a write takes it), never a missing or a new one
    founder = team.founded()
    memory = founder.git("show", "main:.qem/config.toml").stdout
    mate = team.clone("mate")
    assert not (mate.path / ".qem" / "events").exists()
    listed = mate.qem("list")
    assert "no qem memory" not in listed.stderr and listed.stdout == ""
    assert mate.qem("owed").stdout.startswith(f"scope: {mate.path / '.qem'}")
    done = mate.qem("add", "the first note, from a clone", "-k", "finding")
    assert "started the memory" not in done.stderr and "created a new memory" not in done.stderr, done.stderr
    assert (mate.path / ".qem" / "config.toml").read_text("utf-8") == memory
    mate.publish("the first note")
    fresh = team.clone("fresh")
    fresh.check()
    assert [n["text"] for n in fresh.notes()] == ["the first note, from a clone"]
