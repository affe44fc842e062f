"""Readable diffs of the log through real git: after `qem hooks install`, `git diff` and
`git log -p` show one line per event (loose or packed) instead of JSON."""

from __future__ import annotations

import re

from test_git import Team, team  # noqa: F401  (the fixture)

from qem_edit.mirror.textconv import readable

EVENT_LINE = re.compile(r"^[+-]event [0-9a-z]{8} \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \w+ note [0-9a-z]{26}")


def changed_lines(patch: str) -> list[str]:
    return [line for line in patch.splitlines() if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))]


def test_git_diff_shows_one_line_per_event(team: Team):
    founder = team.founded("the lock is released before the restart")
    done = founder.qem("hooks", "install")
    assert "diff.qem-log.textconv" in done.stdout
    assert founder.git("config", "--local", "diff.qem-log.textconv").stdout.strip().endswith("-m qem_edit log-textconv")
    short = founder.texts_short("the lock is released before the restart")
    founder.qem("revoke", short, "-m", "wrong: after the restart")
    founder.git("add", "-A")
    patch = founder.git("diff", "--cached", "--", ".qem").stdout
    lines = changed_lines(patch)
    assert len(lines) == 1 and EVENT_LINE.match(lines[0]), patch
    assert " revoked note " in lines[0] and lines[0].endswith("by founder: wrong: after the restart")
    assert '{"actor"' not in patch
    founder.commit("revoked")
    # git log -p too; a created note shows its event and its text, one line each
    founder.qem("add", "two\nlines", "-k", "directive")
    founder.commit("a directive")
    log = founder.git("log", "-p", "-1", "--", ".qem").stdout
    lines = changed_lines(log)
    assert sorted(line.split(" ")[0] for line in lines) == ["+event", "+text:"], log
    assert "+text: two\\nlines" in lines and any(" created note " in l and "directive · medium · agent" in l for l in lines)


def test_packs_diff_one_line_per_event_too(team: Team):
    founder = team.founded("one", "two", "three")
    founder.qem("hooks", "install")
    before = set(changed_lines(founder.git("log", "-p", "--format=", "--", ".qem/events").stdout))
    founder.qem("pack")
    founder.commit("packed")
    shown = founder.git("show", "--format=", "--", ".qem").stdout
    lines = changed_lines(shown)
    added = [l for l in lines if l.startswith("+event")]
    removed = [l for l in lines if l.startswith("-event")]
    # the same three events leave their loose files and arrive in the pack, line for line
    assert len(added) == len(removed) == 3 and {l[1:] for l in added} == {l[1:] for l in removed}
    assert {"+" + l[1:] for l in removed} <= before
    assert sum(1 for l in lines if l.startswith("+text of note ")) == 3


def test_without_the_hook_git_shows_the_json(team: Team):
    founder = team.founded("a note")
    mate = team.clone("mate")
    founder.qem("hooks", "install")
    founder.add("another")
    founder.publish("another")
    mate.git("pull", "-q")
    # the attribute is committed, the command is local: a clone that has not installed it
    # sees the JSON, and installing it there takes one command
    assert '{"actor"' in mate.git("log", "-p", "-1", "--", ".qem").stdout
    mate.qem("hooks", "install")
    assert '{"actor"' not in mate.git("log", "-p", "-1", "--", ".qem").stdout


def test_an_old_gitattributes_gets_the_attribute(team: Team):
    founder = team.founded("a note")
    attributes = founder.path / ".qem" / ".gitattributes"
    attributes.write_text("# old\nevents/** -text\ntexts/** -text\npacks/** -text\n", "utf-8")
    founder.commit("old attributes")
    out = founder.qem("hooks", "install").stdout
    assert "commit it" in out
    text = attributes.read_text("utf-8")
    assert "events/** -text diff=qem-log" in text and "events/** -text\n" not in text and text.startswith("# old\n")
    assert "commit it" not in founder.qem("hooks", "install").stdout  # installed twice: nothing more


def test_bad_input_to_the_hooks_command(team: Team):
    founder = team.founded("a note")
    done = founder.qem("hooks", "remove", code=2)
    assert "unknown hooks action 'remove'" in done.stderr


def test_what_is_not_a_log_file_shows_as_it_is():
    assert readable(b"not json\n") == b"not json\n"
    assert readable(b'{"some": "object"}\n') == b'{"some": "object"}\n'
    assert readable(b"\xff\xfe") == b"\xff\xfe"


def test_a_file_nested_past_the_parser_s_stack_shows_as_it_is(tmp_path):
    """A pulled file nested deeper than JSON's parser goes (about 1,000 levels) is shown as
    it is, by `qem log-textconv` as git runs it: it was a RecursionError's traceback."""
    from conftest import run_qem

    for depth in (70, 1_100, 100_000):
        data = b'{"type": "created", "data": ' + b"[" * depth + b"]" * depth + b"}\n"
        assert readable(data) == data
        (tmp_path / "deep").write_bytes(data)
        done = run_qem("log-textconv", str(tmp_path / "deep"))
        assert done.returncode == 0 and done.stdout == data.decode() and "Traceback" not in done.stderr, done.stderr
