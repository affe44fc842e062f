"""A session's start through the real hooks: every due note at least as a line, whole
texts while room remains, each reason said once (the seed's two tiers, the vectr post's
section 08), in each harness's own unit: Claude Code's 10,000 characters as JavaScript
counts them (UTF-16 code units), Codex's 2,500 tokens by its estimate (UTF-8 bytes / 4).
Real hook input on stdin, replies checked against the published contracts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import add, code_repository
from conftest import CORPUS, run_qem
from test_hooks import claude, codex, gemini, hook

from qem_edit.storage.store import Store

CAPS = {"claude": 10_000, "codex": 10_000, "gemini": 10_000}


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def utf8(text: str) -> int:
    return len(text.encode("utf-8"))


def start(top: Path, harness: str, session: str = "s", source: str = "startup") -> str:
    if harness == "claude":
        return claude(top, "SessionStart", session=session, source=source)
    if harness == "codex":
        return codex(top, "SessionStart", session=session, source=source)
    reply = gemini(top, "SessionStart", session=session, source=source)
    return reply.get("hookSpecificOutput", {}).get("additionalContext", "")


def listed(said: str) -> list[str]:
    """The short ids a reply gives, in order (each note's line starts `- [#ID] `)."""
    return [line[4:line.index("]")] for line in said.split("\n") if line.startswith("- [#")]


def due(top: Path, moment: str = "start") -> list[str]:
    data = json.loads(run_qem("deliver", moment, "--budget", "0", "--json", cwd=top).stdout)
    return [g["short"] for g in data["given"]]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    top = code_repository(tmp_path_factory.mktemp("c") / "vectr", {"README.md": "# vectr\n"})
    assert run_qem("init", cwd=top).returncode == 0
    assert run_qem("load", str(CORPUS), cwd=top).returncode == 0
    return top


@pytest.mark.skipif(not CORPUS.exists(), reason="fixtures/corpus-749.jsonl is not there")
@pytest.mark.parametrize("harness", ["claude", "codex", "gemini"])
def test_the_749_note_corpus_start_misses_no_due_note(corpus: Path, harness: str) -> None:
    wanted = due(corpus)
    assert len(wanted) == 55  # 43 directives and 12 high tasks
    said = start(corpus, harness, session=f"corpus-{harness}")
    assert listed(said) == wanted and "did not fit" not in said  # every one, in order, none cut
    assert utf16(said) <= CAPS[harness] and (harness != "codex" or utf8(said) <= 10_000)
    assert said.count("## Every directive, at start and after compaction (43)") == 1
    assert said.count("at start and after compaction") == 1  # the reason once, not per note
    assert " …\n" not in said + "\n"  # room for every whole text


def test_lines_first_whole_texts_while_room_remains(tmp_path: Path) -> None:
    top = code_repository(tmp_path / "p", {"a.py": "x\n"})
    assert run_qem("init", cwd=top).returncode == 0
    with Store.open(top / ".qem") as store:
        for i in range(40):
            add(store, f"Rule {i:02d} in short\n" + ("why: " + "w" * 95 + "\n") * 3, "directive", priority="high")
        add(store, "The user said so", "directive", priority="low", provenance="user-stated")
    said = claude(top, "SessionStart", source="startup")
    assert len(listed(said)) == 41 and "did not fit" not in said  # every line
    heads = [line for line in said.split("\n") if line.startswith("- [#")]
    whole = [not h.endswith(" …") for h in heads[:40]]
    assert 0 < whole.count(True) < 40 and whole == sorted(whole, reverse=True)  # whole texts in order, then lines
    assert said.count("why: ") == 3 * whole.count(True)
    assert heads[40].endswith("] directive/low · the user's words · The user said so")  # provenance when not the default
    assert utf16(said) <= 10_000
    again = claude(top, "PreToolUse", tool_name="Edit", tool_input={"file_path": str(top / "a.py")})
    assert again == ""  # a line is not given again at a moment the note is not due


def cjk_directives(top: Path, count: int = 40) -> None:
    with Store.open(top / ".qem") as store:
        for i in range(count):
            add(store, f"第{i:02d}条：" + "提交前必须运行完整的测试套件并确认格式检查通过，" * 5, "directive")


def test_codex_s_cap_holds_in_its_own_unit_and_the_ledger_records_only_what_it_gave(tmp_path: Path) -> None:
    top = code_repository(tmp_path / "cjk", {"a.py": "x\n"})
    assert run_qem("init", cwd=top).returncode == 0
    cjk_directives(top)
    wanted = due(top)
    said = codex(top, "SessionStart", session="z", source="startup")
    assert len(said) < 10_000 < utf8(said) + 5_000  # characters would have let far more through
    assert utf8(said) <= 10_000  # Codex's 2,500 tokens: UTF-8 bytes / 4
    shown = listed(said)
    last = said.rsplit("\n", 1)[1]
    assert 0 < len(shown) < 40 and last.startswith(f"… {40 - len(shown)} more notes did not fit (")
    assert shown == wanted[:len(shown)]
    rest = codex(top, "SessionStart", session="z", source="resume")  # the ledger holds only what was given
    assert listed(rest) == wanted[len(shown):len(shown) + len(listed(rest))] and listed(rest)
    whole = claude(top, "SessionStart", session="z", source="startup")
    assert listed(whole) == wanted and utf16(whole) <= 10_000  # 3 bytes a character, one UTF-16 unit


def test_claude_s_cap_counts_an_emoji_twice(tmp_path: Path) -> None:
    top = code_repository(tmp_path / "emoji", {"a.py": "x\n"})
    assert run_qem("init", cwd=top).returncode == 0
    with Store.open(top / ".qem") as store:
        for i in range(60):
            add(store, f"Rule {i:02d} " + "🔥" * 120, "directive")
    said = claude(top, "SessionStart", source="startup")
    assert utf16(said) <= 10_000 < utf16(said) + 3_000 and len(said) < 8_000  # code points would overflow it
    shown = listed(said)
    assert 0 < len(shown) < 60 and said.rsplit("\n", 1)[1].startswith(f"… {60 - len(shown)} more notes did not fit")
    codex_said = codex(top, "SessionStart", session="e", source="startup")
    assert utf8(codex_said) <= 10_000  # 4 bytes an emoji


def test_deliver_shows_the_two_tiers_and_its_json_says_which_were_whole(tmp_path: Path) -> None:
    top = code_repository(tmp_path / "d", {"a.py": "x\n"})
    assert run_qem("init", cwd=top).returncode == 0
    cjk_directives(top, 3)
    with Store.open(top / ".qem") as store:
        add(store, "Long one\n" + "z" * 400, "directive", priority="high")
    small = json.loads(run_qem("deliver", "start", "--budget", "1000", "--json", cwd=top).stdout)
    assert [g["full"] for g in small["given"]] == [False, True, True, True] and small["left"]["count"] == 0
    assert small["given"][0]["line"] == "Long one"
    text = run_qem("deliver", "start", "--budget", "1000", cwd=top).stdout
    assert "] directive/high · Long one …\n" in text and "z" * 10 not in text


def test_a_start_in_an_empty_or_quiet_memory_says_nothing(tmp_path: Path) -> None:
    top = code_repository(tmp_path / "q", {"a.py": "x\n"})
    assert run_qem("init", cwd=top).returncode == 0
    assert run_qem("add", "Only a finding", "-k", "finding", cwd=top).returncode == 0
    assert start(top, "claude") == "" and start(top, "codex") == "" and start(top, "gemini") == ""
    assert hook(top, "claude", "SessionStart", {"session_id": "q2", "source": "startup"}).stdout == b""


def test_a_start_gives_by_kind_every_note_that_declares_no_moment_of_its_own(tmp_path: Path) -> None:
    """A directive (every one of which a start gives by its kind) is given at a start
    whether it declares no trigger, only a path's or only a command's; one declaring
    another moment is not, one declaring the start is, and none out of force is: through
    the real hook as through `qem deliver`."""
    top = code_repository(tmp_path / "k", {"a.py": "x\n"})
    assert run_qem("init", cwd=top).returncode == 0
    made = {}
    for name, extra in (("plain", []), ("by path", ["--when-path", "src/**"]), ("by command", ["--when-run", "make*"]),
                        ("at edits", ["--on", "edit"]), ("at starts", ["--on", "start", "--when-path", "db/**"]),
                        ("revoked", [])):
        done = run_qem("add", f"Directive {name}", "-k", "directive", *extra, cwd=top)
        assert done.returncode == 0, done.stderr
        made[name] = done.stdout.split()[0]
    assert run_qem("revoke", made["revoked"], "-m", "wrong", cwd=top).returncode == 0
    wanted = {"plain", "by path", "by command", "at starts"}
    assert sorted(due(top)) == sorted(made[n] for n in wanted)
    said = start(top, "claude")
    assert {n for n in made if f"Directive {n}" in said} == wanted, said
