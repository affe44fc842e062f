"""What a scripted agent session is given, what it misses and why, and what each hook costs.

    python bench/delivery.py                     # 749 and 74,900 notes, 9 timed runs a hook
    python bench/delivery.py --quick             # 749 notes, 3 timed runs: a smoke check
    python bench/delivery.py --sizes 749 --runs 5 --output bench/out/delivery.json

For each size it builds (once; cached under bench/out/delivery/) a repository holding a code
tree and a memory, replays a scripted Claude Code session against it, one whole `qem hook
claude EVENT` process per hook call, and compares what every reply gave with what the notes
declare; then times each kind of hook against the start-up floor.  It prints a markdown
report (the tables for docs/PERFORMANCE.md's "Delivery" section) and exits 1 when a note the
notes' data says is due was missed with no reason, a reply gave a note they do not make
due, or a note due at an edit or a command reached the model only after it (each is listed:
a bug to look into, never to hide).  Standard library and qem only.

The session (fixtures/sessions/claude-session.json)
---------------------------------------------------
A JSON object: `calls`, the hook calls in order, and `timing`, extra calls the timing uses.
A call is `{"event": EVENT, "input": {...}}`: EVENT is Claude Code's hook event name
(SessionStart, UserPromptSubmit, PreToolUse, PreCompact, SessionEnd) and `input` the fields
of its hook input that are the event's own (`source`, `prompt`, `tool_name` and
`tool_input`, `trigger`, `reason`).  In every string `{top}` stands for the repository's
path (tool calls name files by absolute path, as Claude Code does).  The bench adds the
fields every Claude Code hook input carries: `session_id` (a fresh one for each replay),
`transcript_path`, `cwd` (the repository), `permission_mode` and `hook_event_name`.  Files are
named in the code tree below (`src/m0003/f052.py`).  The script: a start, 5 prompts naming
files, a folder and backticked terms, 50 edits (Edit, MultiEdit, Write), 10 reads, 10 Bash
commands, a compaction (PreCompact, SessionStart compact), 3 prompts, 10 edits and 2 commands
after it, the end.

The repository and the memory (deterministic; a size's build is cached)
----------------------------------------------------------------------
Code: FILES files, `src/m{NNNN}/f{NNN}.py` in folders of PER_FOLDER, committed.  Notes:
`fixtures/generate.py --notes N` (JSON Lines), then, counting the created events in log
order (j = 0, 1, ...), before `qem load`:

- j % 30 == 0: anchored to file number (j // 30 * 7919) % 1000 (the folders m0000-m0009), with
  the file's blob id (qem_edit.system.anchors.blob_oid): 25 notes at 749, 2,497 at 74,900 (2-3 a file);
- j % 30 == 15, the first 12: anchored to a folder, src/m0010-m0013 (its tree id from git);
- j % 30 == 10, the first 12: `triggers.path`, PATH_PATTERNS[k % 6] (k = j // 30);
- j % 30 == 20, the first 6: `triggers.on`, ON_MOMENTS[k % 3];
- the first 12 operational notes: `triggers.run`, RUN_PATTERNS[i % 6] for the i-th.

Each pattern and moment goes to two notes: the generator's history decides which notes are
still in force (some were superseded, revoked or expired since: they must not fire), and the
second keeps most of them in force at every size.  The script's edits hit files anchored by notes
(m0000-m0009), files in anchored folders (m0010-m0013), files only a path pattern matches
(m0014-m0017, m0019/f099.py) and files nothing declares (m0018, m0019); the report counts
them per size.

Ground truth
------------
Computed by this file from the loaded JSON Lines alone, with its own matchers (no
qem_edit.reads.delivery nor qem_edit.base.triggers): the notes' state from their events (checked
against `qem list --json`, which also maps each note's number to its id and short id), their
kind, priority, anchors, triggers and backticked terms; then, for each hook call, the
notes due by the documented rules:

- session start: every note in force whose moments include `start` (its declared `on`, else
  its kind's: a directive at start and after a compaction, a high task at start);
- the start after a compaction: those whose moments include `compact`;
- a prompt: those declaring `prompt`, and those whose anchored path, a path one of their
  patterns matches, or one of their backticked terms (3-100 characters, no space) the prompt
  names verbatim (a path as a token of the prompt, a term at identifier boundaries);
- an edit (Edit, MultiEdit, Write): those declaring `edit`, anchored to the file or to a
  folder holding it, or with a path pattern matching it (`*`, `?`, `[...]` within a part,
  `**` for whole parts, a pattern with none of them a path and what is under it);
- a read: those declaring `read`, and whole what an edit of the file would give (its
  notes, and those declaring `edit`);
- a Bash command: those declaring `shell`, and those with a run pattern (`*` any characters,
  `?` one) matching the whole command or one of its simple commands (split at `&&`, `||`,
  `;`, `|`, line ends; leading `NAME=value` dropped); then a read's notes for each file or
  folder a reading command in it names (`cat`, `head`, `tail`, `sed`, `nl`, `less`, `grep`,
  `rg`: their operands, a pattern or script aside; a `cd DIR` before them followed).

A note due at a call is: delivered (its `- [#SHORT]` line is in the reply; a note too long
for the budget, given as its first line, counts as given whole, as the ledger counts it, and
is counted apart); held back as given earlier in the session (given since the last
compaction, whole, or as a line when a line is due: the ledger's rule, legitimately not
repeated, not a miss); cut by the budget; or missed with no reason, which must never
happen.  A reply that holds the call (Claude Code's `permissionDecision: "deny"`, the notes
in its reason) is made again at once, as the model does, and the two replies are the call's:
the call made again must pass (a hold twice is listed), and a read is never held.

Before the action: at each edit and each Bash command, every note due there is counted as
given before the action (whole earlier in the context window, or in the reason of the hold)
or after it (in context, which the model reads beside the tool's result, or not at all: cut
by the budget); and the calls held, per session.

Cut by the budget means: of the notes
due and not held back, in the order they are given (kind as qem_edit.base.vocabulary.KINDS lists
them, priority high first, id; a compaction's notes before a prompt's), the budget takes
them from the front while they fit and stops at the first that does not, so the cut ones
are the tail after the last one given, and their count and how many are directives are the
reply's last line (`… N more notes did not fit (M of them directives)`); a note missing
before the last one given, or a tail longer than the count, is missed with no reason.  A
reply that gives a note not due, or gives again a note held back, is listed too.

Timing
------
Each kind of hook as a whole process (`qem hook claude EVENT`, the input on stdin, cwd the
repository), each run right after a run of the start-up floor (`python -c "import typer"`,
given the same stdin), after a warm-up; median, min-max and ratio, with bench/run.py's
helpers.  SessionStart (startup) gets a fresh session each run; the others run in the
replayed session as it stood before its compaction (its ledger holding the deliveries of the
50 edits, 10 reads, 10 commands and 5 prompts before it), put back before each run:
UserPromptSubmit, PreToolUse Edit and PreToolUse Bash with the fixture's `timing` inputs (each
gives notes not given yet), PreToolUse Edit of a file nothing declares (its `timing` input
"PreToolUse Edit, nothing new": what the edit moment declares was given earlier in the
session, so the call is answered from the digest beside the index, qem_edit.reads.quiet), PreCompact, and SessionStart (compact) in the ledger as the
PreCompact left it.  Targets (issue): a hook call <= 1.5x the start-up floor at 749 notes,
<= 2x at 74,900.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from run import (  # bench/run.py
    GNU_TIME,
    OUT,
    REPO,
    BenchError,
    Sample,
    Tools,
    base_env,
    call,
    checkpoint,
    code_fingerprint,
    code_state,
    fail,
    git,
    machine,
    memory_key,
)

sys.path.insert(0, str(REPO))
from qem_edit.base.vocabulary import KINDS, PRIORITIES  # noqa: E402  (the order notes are given in)
from qem_edit.system.anchors import blob_oid  # noqa: E402  (git's own id of a file's bytes)

FIXTURE = REPO / "fixtures" / "sessions" / "claude-session.json"
CACHE = OUT / "delivery"
HARNESS = "claude"
BUDGET = 10_000  # characters: what a Claude Code hook's context may hold
DEFAULT_SIZES = (749, 74_900)
TARGETS = {749: 1.5, 74_900: 2.0}  # the issue's: a hook call against the start-up floor

# -- the repository and the memory (this section's text is part of the cache key) -----------------

FILES = 2_000
PER_FOLDER = 100
ANCHOR_EVERY = 30
FILE_SPAN = 1_000  # file anchors go to the first FILE_SPAN files (m0000-m0009)
FOLDERS = ("src/m0010", "src/m0011", "src/m0012", "src/m0013")
FOLDER_NOTES = 12
PATH_PATTERNS = ("src/m0014/**", "src/m0015/f00?.py", "src/**/f099.py", "src/m0016",
                 "src/m0017/f01*.py", "src/m001[23]/f05?.py")
ON_MOMENTS = ("edit", "shell", "prompt")
RUN_PATTERNS = ("pytest*", "make release*", "git push*", "npm run build", "cargo test*", "alembic upgrade*")


def file_path(n: int) -> str:
    return f"src/m{n // PER_FOLDER:04d}/f{n % PER_FOLDER:03d}.py"


def write_tree(tools: Tools, repo: Path) -> dict[str, str]:
    """The code tree, committed; the tree id of each anchored folder."""
    for n in range(FILES):
        path = repo / file_path(n)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'"""Module {n}."""\n\nVALUE_{n} = {n}\n')
    git(tools, repo.parent, "init", "-q", str(repo))
    git(tools, repo, "add", "-A")
    git(tools, repo, "-c", "commit.gpgsign=false", "commit", "-q", "-m", "code")
    return {folder: git(tools, repo, "rev-parse", f"HEAD:{folder}").strip() for folder in FOLDERS}


def shape(events: list[dict], repo: Path, folders: dict[str, str]) -> list[dict]:
    """The generated events with anchors and triggers given to some created events (the
    module's docstring has the rule)."""
    j = operational = 0
    for event in events:
        if event["type"] != "created":
            continue
        data, k = event["data"], j // ANCHOR_EVERY
        triggers: dict[str, list[str]] = {}
        if j % ANCHOR_EVERY == 0:
            path = file_path(k * 7919 % FILE_SPAN)
            data["anchors"] = [{"path": path, "oid": blob_oid((repo / path).read_bytes())}]
        elif j % ANCHOR_EVERY == 15 and k < FOLDER_NOTES:
            folder = FOLDERS[k % len(FOLDERS)]
            data["anchors"] = [{"path": folder, "oid": folders[folder]}]
        elif j % ANCHOR_EVERY == 10 and k < 2 * len(PATH_PATTERNS):
            triggers["path"] = [PATH_PATTERNS[k % len(PATH_PATTERNS)]]
        elif j % ANCHOR_EVERY == 20 and k < 2 * len(ON_MOMENTS):
            triggers["on"] = [ON_MOMENTS[k % len(ON_MOMENTS)]]
        if data.get("kind") == "operational":
            if operational < 2 * len(RUN_PATTERNS):
                triggers["run"] = [RUN_PATTERNS[operational % len(RUN_PATTERNS)]]
            operational += 1
        if triggers:
            data["triggers"] = {name: sorted(values) for name, values in sorted(triggers.items())}
        j += 1
    return events


# -- end of the memory's section ------------------------------------------------------------------


def cache_key(size: int, seed: int) -> str:
    """The built repository's name: run.py's key for the generated memory (generator, index
    schema, format version) and a digest of the section above."""
    text = Path(__file__).read_text("utf-8")
    section = text[text.index("# -- the repository and the memory"):text.index("# -- end of the memory's section")]
    digest = hashlib.sha256((memory_key(size, seed) + section).encode()).hexdigest()[:10]
    return f"n{size}-seed{seed}-{digest}"


def build(tools: Tools, size: int, seed: int) -> Path:
    """The cached repository for `size` notes (built if missing): the code tree, the memory
    (its index caught up and checkpointed), all committed, and notes.jsonl, what was loaded."""
    CACHE.mkdir(parents=True, exist_ok=True)
    key = cache_key(size, seed)
    done = CACHE / key
    if (done / "repo" / ".qem" / "index.db").is_file() and (done / "notes.jsonl").is_file():
        return done
    for old in CACHE.glob(f"n{size}-seed{seed}-*"):
        shutil.rmtree(old, ignore_errors=True)
    work = CACHE / f"{key}.building"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    print(f"building the {size:,}-note repository (cached as bench/out/delivery/{key}/) ...", flush=True)
    t0 = time.perf_counter()
    repo = work / "repo"
    folders = write_tree(tools, repo)
    env = base_env() | {"QEM_NOW": "2026-12-01T00:00:00Z"}
    dump = work / "generated.jsonl"
    call([tools.python, str(REPO / "fixtures" / "generate.py"), "--notes", str(size), "--seed", str(seed),
          "-o", str(dump)], what=f"generate {size} notes", cwd=work, env=env)
    with open(dump, encoding="utf-8") as handle:
        events = [json.loads(line) for line in handle]
    dump.unlink()
    with open(work / "notes.jsonl", "w", encoding="utf-8") as handle:
        for event in shape(events, repo, folders):
            handle.write(json.dumps(event, ensure_ascii=False) + "\n")
    t1 = time.perf_counter()
    call(tools.qem + ["load", str(work / "notes.jsonl"), "-w", str(repo)], what=f"qem load ({size} notes)",
         cwd=repo, env=env)
    t2 = time.perf_counter()
    git(tools, repo, "add", "-A")
    git(tools, repo, "-c", "commit.gpgsign=false", "commit", "-q", "--no-verify", "-m", "memory")
    checkpoint(repo / ".qem" / "index.db")
    os.replace(work, done)
    print(f"  generated and shaped in {t1 - t0:.1f} s, loaded in {t2 - t1:.1f} s", flush=True)
    return done


# -- ground truth ---------------------------------------------------------------------------------

LIVE = ("active", "stale")
STATE_AFTER = {"superseded": "superseded", "revoked": "revoked", "stale_flagged": "stale", "reinstated": "active",
               "expired": "expired", "forgotten": "forgotten"}
TERM_RE = re.compile(r"`([^`\s]{3,100})`")
WORD = "A-Za-z0-9_"
TOKEN_RE = re.compile(r"[^\s`'\"(),;:<>{}!?]+")
SPLIT_RE = re.compile(r"&&|\|\||[;|\n]")
ASSIGNMENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*\s+")


@dataclass
class Facts:
    """One note as its events declare it."""

    id: str
    short: str
    number: int
    kind: str
    priority: str
    state: str
    anchors: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()  # path patterns
    runs: tuple[str, ...] = ()  # command patterns
    on: tuple[str, ...] = ()
    terms: tuple[str, ...] = ()

    @property
    def moments(self) -> tuple[str, ...]:
        if self.on:
            return self.on
        if self.kind == "directive":
            return ("start", "compact")
        if self.kind == "task" and self.priority == "high":
            return ("start",)
        return ()


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A path pattern as a regular expression over "/" + path: each part "/" + its glob, `**`
    any number of whole parts, a pattern without glob characters the path or anything under it."""
    if not set("*?[") & set(pattern):
        return re.compile(re.escape("/" + pattern) + r"(?:/.*)?")
    out = []
    for part in pattern.split("/"):
        if part == "**":
            out.append(r"(?:/[^/]+)*")
            continue
        rx, i = "/", 0
        while i < len(part):
            c = part[i]
            if c == "*":
                rx += "[^/]*"
            elif c == "?":
                rx += "[^/]"
            elif c == "[" and "]" in part[i + 2:]:
                end = part.index("]", i + 2)
                inside = part[i + 1:end]
                rx += "[" + ("^" + inside[1:] if inside.startswith("!") else inside).replace("\\", "\\\\") + "]"
                i = end
            else:
                rx += re.escape(c)
            i += 1
        out.append(rx)
    return re.compile("".join(out))


def path_match(pattern: str, path: str) -> bool:
    return glob_regex(pattern).fullmatch("/" + path) is not None


def command_match(pattern: str, command: str) -> bool:
    rx = re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.S)
    pieces = [command.strip()]
    for piece in SPLIT_RE.split(command):
        piece = piece.strip()
        while (m := ASSIGNMENT_RE.match(piece)):
            piece = piece[m.end():]
        pieces.append(piece)
    return any(piece and rx.fullmatch(piece) for piece in pieces)


def term_named(term: str, prompt: str) -> bool:
    head = f"(?<![{WORD}])" if re.match(f"[{WORD}]", term[0]) else ""
    tail = f"(?![{WORD}])" if re.match(f"[{WORD}]", term[-1]) else ""
    return re.search(head + re.escape(term) + tail, prompt) is not None


def prompt_tokens(prompt: str, top: str) -> set[str]:
    """The paths a prompt names: its tokens, trailing punctuation dropped, `./` and the
    repository's own path taken off."""
    out = set()
    for token in TOKEN_RE.findall(prompt):
        token = token.rstrip(".")
        if token.startswith(top + "/"):
            token = token[len(top) + 1:]
        while token.startswith("./"):
            token = token[2:]
        token = token.rstrip("/")
        if token:
            out.add(token)
    return out


class Truth:
    """The notes' declared data, and what each moment makes due: {note id: whole (False: its
    one-line index entry)}."""

    def __init__(self, jsonl: Path, listed: list[dict]) -> None:
        by_number = {n["alias"]: n for n in listed}
        state: dict[int, str] = {}
        created: dict[int, dict] = {}
        with open(jsonl, encoding="utf-8") as handle:
            for line in handle:
                event = json.loads(line)
                number = event["note_id"]
                if event["type"] == "created":
                    created[number] = event["data"]
                    state[number] = "active"
                else:
                    state[number] = STATE_AFTER[event["type"]]
        self.notes: dict[str, Facts] = {}
        problems = []
        for number, data in created.items():
            shown = by_number.get(number)
            if shown is None:
                problems.append(f"note #{number} is not in `qem list`")
                continue
            trig = data.get("triggers", {})
            facts = Facts(shown["id"], shown["short"], number, data["kind"], data["priority"], state[number],
                          tuple(a["path"] for a in data.get("anchors", [])), tuple(trig.get("path", [])),
                          tuple(trig.get("run", [])), tuple(trig.get("on", [])),
                          tuple(dict.fromkeys(TERM_RE.findall(data.get("text") or ""))))
            if (facts.state in LIVE) != (shown["state"] in LIVE):
                problems.append(f"note #{number} ({facts.short}): state {facts.state} from its events,"
                                f" {shown['state']} in `qem list`")
            if facts.state in LIVE and (sorted(facts.anchors) != sorted(a["path"] for a in shown["anchors"])
                                        or {k: list(v) for k, v in trig.items()} != shown["triggers"]):
                problems.append(f"note #{number} ({facts.short}): anchors or triggers differ from `qem list`")
            self.notes[facts.id] = facts
        if problems:
            raise BenchError("the loaded notes are not what the bench gave:\n  " + "\n  ".join(problems[:20]))
        self.live = [n for n in self.notes.values() if n.state in LIVE]
        self.by_short = {n.short: n.id for n in self.notes.values()}
        self.anchored = [n for n in self.live if n.anchors]
        self.patterned = [n for n in self.live if n.paths]
        self.run = [n for n in self.live if n.runs]
        self.termed = [n for n in self.live if n.terms]
        kind_rank = {k: i for i, k in enumerate(KINDS)}
        priority_rank = {p: i for i, p in enumerate(PRIORITIES)}
        self.order = lambda note: (kind_rank[self.notes[note].kind], priority_rank[self.notes[note].priority], note)

    def at(self, moment: str) -> dict[str, bool]:
        return {n.id: True for n in self.live if moment in n.moments}

    def for_path(self, path: str) -> dict[str, str]:
        """The notes an edit of `path` makes due, each with why."""
        out = {}
        for n in self.anchored:
            for a in n.anchors:
                if path == a or path.startswith(a + "/"):
                    out[n.id] = "folder anchor" if a != path else "file anchor"
        for n in self.patterned:
            if n.id not in out and any(path_match(p, path) for p in n.paths):
                out[n.id] = "path pattern"
        return out

    def edit(self, path: str) -> dict[str, bool]:
        return self.at("edit") | {n: True for n in self.for_path(path)}

    def read(self, path: str) -> dict[str, bool]:
        return {n: True for n in self.for_path(path)} | self.at("edit") | self.at("read")

    def shell(self, command: str) -> dict[str, bool]:
        return self.at("shell") | {n.id: True for n in self.run if any(command_match(p, command) for p in n.runs)}

    def prompt(self, prompt: str, top: str) -> dict[str, bool]:
        out = self.at("prompt")
        named = prompt_tokens(prompt, top)
        for n in self.anchored:
            if named & set(n.anchors):
                out[n.id] = True
        for n in self.patterned:
            if any(path_match(p, t) for p in n.paths for t in named if "/" in t or "." in t):
                out[n.id] = True
        for n in self.termed:
            if any(term_named(t, prompt) for t in n.terms):
                out[n.id] = True
        return out


# -- the replay -----------------------------------------------------------------------------------

HEAD_RE = re.compile(r"^- \[#([0-9a-z]+)\] ", re.M)
CUT_RE = re.compile(r"^… ([\d,]+) more notes? did not fit(?: \(([\d,]+) of them directives?\))?; ", re.M)
TOOL_KIND = {"Edit": "edit", "MultiEdit": "edit", "Write": "edit", "NotebookEdit": "edit", "Read": "read",
             "Bash": "Bash"}
ACTIONS = ("PreToolUse edit", "PreToolUse Bash")  # the calls whose notes must come before them
HOOK_KINDS = ("SessionStart (startup)", "UserPromptSubmit", "PreToolUse edit", "PreToolUse read", "PreToolUse Bash",
         "PreCompact", "SessionStart (compact)", "SessionEnd")


def kind_of(call_: dict) -> str:
    event, given = call_["event"], call_["input"]
    if event == "SessionStart":
        return f"SessionStart ({given.get('source', 'startup')})"
    if event == "PreToolUse":
        return "PreToolUse " + TOOL_KIND.get(given.get("tool_name", ""), given.get("tool_name", ""))
    return event


def filled(value: object, top: str) -> object:
    if isinstance(value, str):
        return value.replace("{top}", top)
    if isinstance(value, list):
        return [filled(v, top) for v in value]
    if isinstance(value, dict):
        return {k: filled(v, top) for k, v in value.items()}
    return value


def hook_input(call_: dict, top: str, session: str) -> bytes:
    data = {"session_id": session, "transcript_path": f"/tmp/claude-transcripts/{session}.jsonl", "cwd": top,
            "permission_mode": "default", "hook_event_name": call_["event"], **filled(call_["input"], top)}
    return json.dumps(data, ensure_ascii=False).encode()


@dataclass
class Reply:
    """A hook's reply: its text (the context, or a held call's reason), whether it holds
    the call, the notes it gives ({short: "whole", "line" (an index entry), "tier line" (a
    session start's line for a note its budget had no room to give whole, ending in …) or
    "too long" (a note too long for the budget, given as its line, which counts as given
    whole)}), and its cut counts."""

    text: str = ""
    held: bool = False
    given: dict[str, str] = field(default_factory=dict)
    left: int = 0
    directives: int = 0


def parse_reply(event: str, out: str) -> Reply:
    if not out.strip():
        return Reply()
    data = json.loads(out)
    spec = data["hookSpecificOutput"]
    if spec.get("hookEventName") != event:
        raise BenchError(f"a {event} hook answered as {spec.get('hookEventName')!r}")
    held = spec.get("permissionDecision") == "deny"
    if held and (event != "PreToolUse" or set(spec) != {"hookEventName", "permissionDecision",
                                                          "permissionDecisionReason"}):
        raise BenchError(f"a {event} hook held a call outside Claude Code's contract: {sorted(spec)}")
    text = spec["permissionDecisionReason"] if held else spec["additionalContext"]
    given: dict[str, str] = {}
    blocks = HEAD_RE.split(text)
    for short, body in zip(blocks[1::2], blocks[2::2]):
        head, _, rest = body.partition("\n")
        lines = [line for line in rest.split("\n\n… ")[0].rstrip("\n").split("\n")]
        one = len(lines) == 1
        given[short] = ("tier line" if head.endswith("…") and not rest.startswith("  ") else
                        "line" if one and lines[0].endswith(f" (`qem show {short}`)") else
                        "too long" if one and re.search(r" \(too long to give here: [\d,]+ characters; `qem show "
                                                        + re.escape(short) + r"`\)$", lines[0]) else "whole")
    cut = CUT_RE.search(text.rsplit("\n", 1)[-1])
    left = int(cut.group(1).replace(",", "")) if cut else 0
    directives = int(cut.group(2).replace(",", "")) if cut and cut.group(2) else 0
    return Reply(text, held, given, left, directives)


READERS = {"cat": 0, "head": 0, "tail": 0, "nl": 0, "less": 0, "more": 0, "sed": 1, "grep": 1, "egrep": 1,
           "fgrep": 1, "rg": 1}  # a reading command: how many operands before its files are not files


def shell_reads(command: str) -> list[str]:
    """The files and folders the reading commands of a line name (this bench's own reading:
    options dropped, sed's script and grep's pattern aside unless -e gives it; `cd DIR`
    followed; a line the shell's quoting cannot read names none)."""
    out, base = [], ""
    for piece in SPLIT_RE.split(command):
        try:
            words = shlex.split(piece)
        except ValueError:
            return []
        while words and ASSIGNMENT_RE.match(words[0] + " "):
            words = words[1:]
        if not words:
            continue
        if words[0] == "cd" and len(words) == 2:
            base = f"{base}/{words[1]}" if base else words[1]
        elif words[0] in READERS:
            operands = [w for w in words[1:] if not w.startswith("-")]
            skip = 0 if "-e" in words else READERS[words[0]]
            out += [f"{base}/{w}" if base else w for w in operands[skip:] if not set("*?[$~") & set(w)]
    return out


@dataclass
class Tally:
    calls: int = 0
    replies: int = 0  # calls that gave context
    due: int = 0  # (note, call) pairs the notes' data makes due
    delivered: int = 0
    budget: int = 0  # due, not given, counted in the reply's last line
    ledger: int = 0  # due, held back as given earlier in the session
    unexplained: int = 0
    extra: int = 0  # given, not due
    repeated: int = 0  # given again though given earlier
    too_long: int = 0  # delivered as their line: too long for the budget
    cut: int = 0  # what the last lines counted
    cut_directives: int = 0
    chars: int = 0
    largest: int = 0
    held: int = 0  # calls held (denied, the notes their reason), each made again
    before_earlier: int = 0  # due at an edit or a command: given whole earlier in the window
    before_held: int = 0  # ... given in the reason of the call's hold
    after_context: int = 0  # ... given as context: the model reads it after the action
    after_none: int = 0  # ... not given at all (cut by the budget, or missed)
    seconds: list[float] = field(default_factory=list)

    def add(self, other: "Tally") -> None:
        for name in ("calls", "replies", "due", "delivered", "budget", "ledger", "unexplained", "extra", "repeated",
                     "too_long", "cut", "cut_directives", "chars", "held", "before_earlier", "before_held",
                     "after_context", "after_none"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.largest = max(self.largest, other.largest)
        self.seconds += other.seconds


class Replay:
    """One replay of the script: each hook call a whole process, each reply checked."""

    def __init__(self, tools: Tools, repo: Path, truth: Truth, calls: list[dict], session: str) -> None:
        self.tools, self.repo, self.truth, self.calls, self.session = tools, repo, truth, calls, session
        self.top = str(repo.resolve())
        self.tally: dict[str, Tally] = {k: Tally() for k in HOOK_KINDS}
        self.given: dict[str, tuple[int, bool]] = {}  # the ledger as the replies show it: note -> (epoch, whole)
        self.epoch = 0
        self.pending_compact = False
        self.problems: list[str] = []
        self.due_notes: set[str] = set()
        self.got_notes: set[str] = set()
        self.edits: dict[str, int] = {}  # edited files by what makes notes due for them
        self.snapshots: dict[str, bytes] = {}
        self.ledger: Path | None = None

    def ledger_path(self) -> Path:
        """The session's ledger file: the one ledger in `.qem/sessions/` (the replay starts
        with none), whatever qem names it."""
        found = sorted((self.repo / ".qem" / "sessions").glob("*.json"))
        if len(found) != 1:
            raise BenchError(f"{len(found)} session ledgers in .qem/sessions/ during the replay; expected one")
        return found[0]

    def run(self) -> None:
        for i, call_ in enumerate(self.calls):
            if call_["event"] == "PreCompact":  # the timing's sessions: the ledger before and after it
                self.ledger = self.ledger_path()
                self.snapshots["before compaction"] = self.ledger.read_bytes()
            self.one(i, call_)
            if call_["event"] == "PreCompact":
                self.snapshots["after PreCompact"] = self.ledger_path().read_bytes()

    def due(self, call_: dict) -> list[tuple[str, bool]]:
        """The notes due at a call, in the order they are given: each moment's in the one
        order (kind, priority, id), the compaction's first; a note once, as its first moment
        has it."""
        event, given = call_["event"], call_["input"]
        moments: list[dict[str, bool]] = []
        if event == "PreCompact":
            self.epoch += 1
            self.pending_compact = True
            return []
        if event == "SessionStart":
            if given.get("source") in ("clear", "compact"):
                self.epoch += 1
                self.pending_compact = True
        if event in ("SessionStart", "UserPromptSubmit") and self.pending_compact:
            moments.append(self.truth.at("compact"))
            self.pending_compact = False
        out: dict[str, bool] = {}
        reads: list[dict[str, bool]] = []  # a command's: after its own notes
        if event == "SessionStart" and given.get("source") != "compact":
            out |= self.truth.at("start")
        elif event == "UserPromptSubmit":
            out |= self.truth.prompt(given["prompt"], self.top)
        elif event == "PreToolUse":
            tool, args = given["tool_name"], filled(given["tool_input"], self.top)
            if tool == "Bash":  # the command's own notes, then a read's for each file it reads
                out |= self.truth.shell(args["command"])
                reads = [self.truth.read(path) for path in shell_reads(args["command"])]
            elif tool in TOOL_KIND:
                path = args["file_path"].removeprefix(self.top + "/")
                why = self.truth.for_path(path)
                if TOOL_KIND[tool] == "edit":
                    reason = ("file anchor" if "file anchor" in why.values() else "folder anchor"
                              if "folder anchor" in why.values() else "path pattern" if why else "nothing")
                    self.edits[reason] = self.edits.get(reason, 0) + 1
                    out |= self.truth.edit(path)
                else:
                    out |= self.truth.read(path)
        moments += [out, *reads]
        ordered: dict[str, bool] = {}
        for moment in moments:
            for note in sorted(moment, key=self.truth.order):
                ordered.setdefault(note, moment[note])
        return list(ordered.items())

    def ask(self, i: int, kind: str, call_: dict, t: Tally) -> Reply:
        """One hook process for the call, its reply checked and tallied."""
        t0 = time.perf_counter()
        argv = self.tools.qem + ["hook", HARNESS, call_["event"]]
        proc = subprocess.run(argv, input=hook_input(call_, self.top, self.session), cwd=self.repo, env=base_env(),
                              capture_output=True)
        t.seconds.append(time.perf_counter() - t0)
        if proc.returncode != 0 or proc.stderr:  # a hook that fails says nothing and exits 0, with a line on stderr
            fail(f"call {i} ({kind})", argv, proc.returncode, proc.stderr, proc.stdout)
        reply = parse_reply(call_["event"], proc.stdout.decode("utf-8"))
        if len(reply.text) > BUDGET:
            self.problems.append(f"call {i} ({kind}): {len(reply.text):,} characters, over the budget of {BUDGET:,}")
        t.replies += bool(reply.text)
        t.chars += len(reply.text)
        t.largest = max(t.largest, len(reply.text))
        for short, form in reply.given.items():
            t.too_long += form == "too long"
            if short not in self.truth.by_short:
                self.problems.append(f"call {i} ({kind}): gives [#{short}], a note `qem list` does not show")
        return reply

    def one(self, i: int, call_: dict) -> None:
        kind = kind_of(call_)
        t = self.tally[kind]
        t.calls += 1
        due = self.due(call_)
        first = self.ask(i, kind, call_, t)
        again = Reply()
        if first.held:  # the model makes the same call again, which must pass
            t.held += 1
            if kind not in ACTIONS:
                self.problems.append(f"call {i} ({kind}): held, and only an edit or a command may be")
            again = self.ask(i, kind, call_, t)
            if again.held:
                self.problems.append(f"call {i} ({kind}): held again when made again")
        held = {self.truth.by_short[s] for s in first.given if s in self.truth.by_short} if first.held else set()
        got = {self.truth.by_short[short]: form not in ("line", "tier line") for reply in (first, again)
               for short, form in reply.given.items() if short in self.truth.by_short}
        tiered_lines = {self.truth.by_short[short] for reply in (first, again) for short, form in reply.given.items()
                        if form == "tier line" and short in self.truth.by_short}  # no room at a start to give whole
        left, directives = (again.left, again.directives) if first.held else (first.left, first.directives)
        t.cut += left
        t.cut_directives += directives
        due_ids = dict(due)
        offered = []  # due and not held back, in the order given: what the budget takes from the front
        for note, whole in due:
            t.due += 1
            self.due_notes.add(note)
            earlier = self.given.get(note)
            before = bool(earlier and earlier[0] == self.epoch and (earlier[1] or not whole))
            if kind in ACTIONS:  # given before the action, or after it
                t.before_earlier += before and note not in got
                t.before_held += note in held
                t.after_context += note in got and note not in held
                t.after_none += not before and note not in got
                if not before and note not in held:
                    self.problems.append(f"call {i} ({kind}): [#{self.truth.notes[note].short}], due here, reached the"
                                         f" model after the action ({'as context' if note in got else 'not at all'})")
            if note in got:
                t.delivered += 1
                offered.append(note)
                if got[note] != whole and note not in tiered_lines:
                    form = {True: "whole", False: "as a line"}
                    self.problems.append(f"call {i} ({kind}): [#{self.truth.notes[note].short}] given"
                                         f" {form[got[note]]}, due {form[whole]}")
            elif before:
                t.ledger += 1
            else:
                offered.append(note)
        # The budget takes the offered notes in order while they fit and stops at the first
        # that does not: what is cut is the tail after the last note given, and its length
        # is the count in the reply's last line.  A note missing before the last one given
        # was skipped, not cut.
        last = max((k for k, note in enumerate(offered) if note in got), default=-1)
        skipped = [note for note in offered[:last] if note not in got]
        tail = offered[last + 1:]
        tail_directives = sum(self.truth.notes[n].kind == "directive" for n in tail)
        t.budget += min(len(tail), left)
        t.unexplained += len(skipped) + max(0, len(tail) - left)
        if skipped or len(tail) != left or tail_directives != directives:
            names = ", ".join(f"[#{self.truth.notes[n].short}] {self.truth.notes[n].kind}"
                              for n in (skipped + tail)[:20])
            self.problems.append(f"call {i} ({kind}): {len(skipped)} due notes skipped before the last one given,"
                                 f" {len(tail)} not given after it ({tail_directives} directives); the reply counts"
                                 f" {left} cut ({directives} directives): {names}")
        for note, whole in got.items():
            self.got_notes.add(note)
            if note not in due_ids:
                t.extra += 1
                self.problems.append(f"call {i} ({kind}): gives [#{self.truth.notes[note].short}]"
                                     f" ({self.truth.notes[note].kind}), which its data does not make due")
            earlier = self.given.get(note)
            if earlier and earlier[0] == self.epoch and (earlier[1] or not whole):
                t.repeated += 1
                self.problems.append(f"call {i} ({kind}): gives [#{self.truth.notes[note].short}] again")
            self.given[note] = (self.epoch, whole)


# -- timing ---------------------------------------------------------------------------------------


def timed_input(argv: list[str], stdin: Path, *, what: str, cwd: Path, env: dict[str, str], stdout: Path,
                stderr: Path) -> Sample:
    """bench/run.py's `timed`, with the process's stdin read from a file: spawn to reap, max
    RSS from GNU time where there is one."""
    rss_file = stderr.with_suffix(".rss")
    wrapped = [GNU_TIME, "-f", "%M", "-o", str(rss_file), *argv] if GNU_TIME else argv
    with open(stdin, "rb") as given, open(stdout, "wb") as out, open(stderr, "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(wrapped, stdin=given, stdout=out, stderr=err, cwd=cwd, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        t1 = time.perf_counter()
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0 or stderr.stat().st_size:
        fail(what, argv, rc, stderr.read_bytes(), stdout.read_bytes())
    rss = usage.ru_maxrss
    if GNU_TIME:
        lines = rss_file.read_text().split()
        rss = int(lines[-1]) if lines and lines[-1].isdigit() else rss
    return Sample(t1 - t0, rss)


def time_hooks(tools: Tools, repo: Path, fixture: dict, replay: Replay, runs: int, warmup: int) -> list[dict]:
    """Each kind of hook against the start-up floor (the module's docstring says in which session)."""
    top = str(repo.resolve())
    scratch = repo.parent / "timing"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    out, err = scratch / "stdout", scratch / "stderr"
    ledger = replay.ledger
    if ledger is None:
        raise BenchError("the script has no PreCompact: the timing has no session to run in")
    compact_index = next(i for i, c in enumerate(fixture["calls"]) if c["event"] == "PreCompact")
    by_name = {c["event"]: c for c in fixture["calls"][compact_index:compact_index + 2]}
    start = next(c for c in fixture["calls"] if c["event"] == "SessionStart")
    subjects = [
        ("SessionStart (startup)", start, None),
        ("UserPromptSubmit", fixture["timing"]["UserPromptSubmit"], "before compaction"),
        ("PreToolUse edit", fixture["timing"]["PreToolUse Edit"], "before compaction"),
        ("PreToolUse edit, nothing new", fixture["timing"]["PreToolUse Edit, nothing new"], "before compaction"),
        ("PreToolUse Bash", fixture["timing"]["PreToolUse Bash"], "before compaction"),
        ("PreCompact", by_name["PreCompact"], "before compaction"),
        ("SessionStart (compact)", by_name["SessionStart"], "after PreCompact"),
    ]
    floor = [tools.python, "-c", "import typer"]
    env = base_env()
    rows = []
    for name, call_, snapshot in subjects:
        argv = tools.qem + ["hook", HARNESS, call_["event"]]
        floors, mine, rss, chars, loads = [], [], 0, [], []
        for n in range(warmup + runs):
            session = replay.session if snapshot else f"bench-timing-start-{n}"
            stdin = scratch / "input.json"
            stdin.write_bytes(hook_input(call_, top, session))
            if snapshot:
                ledger.parent.mkdir(exist_ok=True)
                ledger.write_bytes(replay.snapshots[snapshot])
            loads.append(os.getloadavg()[0])
            f = timed_input(floor, stdin, what="start-up floor", cwd=repo, env=env, stdout=out, stderr=err)
            s = timed_input(argv, stdin, what=f"qem hook ({name})", cwd=repo, env=env, stdout=out, stderr=err)
            text = parse_reply(call_["event"], out.read_text("utf-8")).text
            if not snapshot:  # the fresh session's ledger goes
                for made in ledger.parent.iterdir():
                    if made.suffix in (".json", ".lock") and made.stem != ledger.stem:
                        made.unlink()
            if n >= warmup:
                floors.append(f.wall)
                mine.append(s.wall)
                rss = max(rss, s.rss_kb)
                chars.append(len(text))
        median, floor_median = statistics.median(mine), statistics.median(floors)
        rows.append({"hook": name, "median_s": median, "min_s": min(mine), "max_s": max(mine),
                     "floor_median_s": floor_median, "floor_min_s": min(floors), "floor_max_s": max(floors),
                     "ratio": median / floor_median, "rss_mb": rss / 1024, "chars": chars[0] if chars else 0,
                     "load": statistics.median(loads), "samples": mine, "floor_samples": floors})
        print(f"  {name}: {median * 1000:.0f} ms against {floor_median * 1000:.0f} ms (x{median / floor_median:.2f});"
              f" reply {rows[-1]['chars']:,} characters", flush=True)
    ledger.unlink(missing_ok=True)
    return rows


# -- one size -------------------------------------------------------------------------------------


def bench_size(tools: Tools, size: int, seed: int, fixture: dict, runs: int, warmup: int) -> tuple[dict, list[str]]:
    built = build(tools, size, seed)
    repo = built / "repo"
    shutil.rmtree(repo / ".qem" / "sessions", ignore_errors=True)  # earlier runs' ledgers
    listed = json.loads(call(tools.qem + ["list", "--json", "-w", str(repo)], what="qem list", cwd=repo))
    truth = Truth(built / "notes.jsonl", listed)
    print(f"{size:,} notes: {len(truth.live):,} in force; {len(truth.anchored):,} anchored,"
          f" {len(truth.patterned)} with path patterns, {len(truth.run)} with run patterns,"
          f" {sum(bool(n.on) for n in truth.live)} with declared moments", flush=True)
    session = f"bench-{size}-{os.getpid()}-{time.time_ns()}"
    replay = Replay(tools, repo, truth, fixture["calls"], session)
    t0 = time.perf_counter()
    replay.run()
    print(f"  replayed {len(fixture['calls'])} hook calls in {time.perf_counter() - t0:.1f} s", flush=True)
    whole = Tally()
    for t in replay.tally.values():
        whole.add(t)
    print(f"  due {whole.due:,}, delivered {whole.delivered:,}, cut by the budget {whole.budget:,},"
          f" held back as given {whole.ledger:,}, missed with no reason {whole.unexplained:,};"
          f" {whole.chars:,} characters", flush=True)
    print(f"  at edits and commands: before {whole.before_earlier + whole.before_held:,} (given earlier"
          f" {whole.before_earlier:,}, held {whole.before_held:,}), after {whole.after_context + whole.after_none:,}"
          f" (as context {whole.after_context:,}, not given {whole.after_none:,}); {whole.held} calls held",
          flush=True)
    for problem in replay.problems:
        print(f"  PROBLEM {problem}", flush=True)
    times = time_hooks(tools, repo, fixture, replay, runs, warmup)
    result = {
        "size": size, "in_force": len(truth.live), "anchored": len(truth.anchored),
        "path_patterns": len(truth.patterned), "run_patterns": len(truth.run), "edits": replay.edits,
        "session": {k: {**vars(t), "seconds": None, "median_s": statistics.median(t.seconds) if t.seconds else None}
                    for k, t in replay.tally.items()},
        "whole": {**vars(whole), "seconds": None}, "distinct_due": len(replay.due_notes),
        "distinct_delivered": len(replay.got_notes & replay.due_notes),
        "times": times, "target": target(size), "problems": replay.problems,
    }
    return result, replay.problems


def target(size: int) -> float:
    return TARGETS.get(size, 1.5 if size < 74_900 else 2.0)


# -- report ---------------------------------------------------------------------------------------


def report(results: list[dict], meta: dict) -> str:
    out = ["## Delivery (bench/delivery.py)", ""]
    out.append(f"Generated {meta['date']} in {meta['minutes']:.1f} min by:")
    out += ["", "```sh", meta["command"], "```", ""]
    out.append(f"Machine: {meta['machine']['cpu']}, {meta['machine']['nproc']} cores, {meta['machine']['ram']};"
               f" Python {meta['machine']['python']}. Load average at the start {meta['load_start']},"
               f" at the end {meta['load_end']}. Code: {meta['code']}.")
    out.append("")
    out.append("The scripted session (fixtures/sessions/claude-session.json, one `qem hook claude EVENT` process"
               " per call): what the notes' data makes due at each call, what the replies gave, and why the rest"
               " was not given.")
    out.append("")
    for r in results:
        e = r["edits"]
        out.append(f"- {r['size']:,} notes: {r['in_force']:,} in force, {r['anchored']:,} anchored,"
                   f" {r['path_patterns']} with path patterns, {r['run_patterns']} with run patterns; the"
                   f" {sum(e.values())} edits: {e.get('file anchor', 0)} of anchored files,"
                   f" {e.get('folder anchor', 0)} in anchored folders, {e.get('path pattern', 0)} matched by a"
                   f" pattern only, {e.get('nothing', 0)} of files nothing declares.")
    out.append("")
    out.append("| notes | hook | calls | replies | due (note, call) | delivered | cut by the budget |"
               " missed, no reason | held back: given earlier | characters | largest reply |")
    out.append("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        for kind in HOOK_KINDS:
            t = r["session"][kind]
            if not t["calls"]:
                continue
            out.append(f"| {r['size']:,} | {kind} | {t['calls']} | {t['replies']} | {t['due']:,} | {t['delivered']:,}"
                       f"{too_long(t)} |"
                       f" {t['budget']:,}{cut_directives(t)} | {t['unexplained']} | {t['ledger']:,} | {t['chars']:,} |"
                       f" {t['largest']:,} |")
        w = r["whole"]
        out.append(f"| {r['size']:,} | **whole session** | {w['calls']} | {w['replies']} | {w['due']:,} |"
                   f" {w['delivered']:,}{too_long(w)} | {w['budget']:,}{cut_directives(w)} | **{w['unexplained']}** |"
                   f" {w['ledger']:,} | **{w['chars']:,}** | {w['largest']:,} |")
    out.append("")
    for r in results:
        out.append(f"At {r['size']:,} notes, {r['distinct_delivered']:,} of the {r['distinct_due']:,} distinct notes"
                   f" due at some call reached the session at least once.")
    out += ["", "Before the action: each note due at an edit or a Bash command, given before the action (whole"
            " earlier in the context window, or in the reason of the call's hold) or after it (as context, which the"
            " model reads beside the tool's result, or not at all); and the calls held (each made again at once, as"
            " the model does, and passing).", "",
            "| notes | hook | calls | due (note, call) | before: given earlier | before: held | **after** |"
            " after: as context | after: not given | held calls |",
            "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        rows = [(kind, r["session"][kind]) for kind in ACTIONS] + [("**whole session**", r["whole"])]
        for kind, t in rows:
            after = t["after_context"] + t["after_none"]
            out.append(f"| {r['size']:,} | {kind} | {t['calls']} | {t['before_earlier'] + t['before_held'] + after:,} |"
                       f" {t['before_earlier']:,} | {t['before_held']:,} | **{after:,}** | {t['after_context']:,} |"
                       f" {t['after_none']:,} | {t['held']} |")
    out.append("")
    out.append("Each hook as a whole process against the start-up floor (`python -c \"import typer\"`), each run"
               f" right after a run of the floor; {meta['runs']} timed runs after {meta['warmup']} warm-up; the"
               " tool and prompt hooks in the replayed session as it stood before its compaction.")
    out.append("")
    out.append("| notes | hook | median | min–max | start-up floor | ratio | target | reply | status |")
    out.append("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in results:
        for row in r["times"]:
            status = "met" if row["ratio"] <= r["target"] else "**missed**"
            out.append(f"| {r['size']:,} | {row['hook']} | {ms(row['median_s'])} |"
                       f" {ms(row['min_s'])}–{ms(row['max_s'])} | {ms(row['floor_median_s'])} | ×{row['ratio']:.2f} |"
                       f" ≤ {r['target']:g}× | {row['chars']:,} chars | {status} |")
    return "\n".join(out) + "\n"


def too_long(t: dict) -> str:
    return f" ({t['too_long']:,} as their line: too long)" if t["too_long"] else ""


def cut_directives(t: dict) -> str:
    return f" ({t['cut_directives']:,} directives)" if t["cut_directives"] else ""


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=",".join(str(s) for s in DEFAULT_SIZES), help="note counts (749,74900)")
    parser.add_argument("--runs", type=int, default=9, help="timed runs of each hook (default 9)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--seed", type=int, default=749, help="the generator's seed")
    parser.add_argument("--output", type=Path, help="every figure as JSON")
    parser.add_argument("--quick", action="store_true", help="749 notes, 3 timed runs")
    args = parser.parse_args()
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s]
    runs = args.runs
    if args.quick:
        sizes, runs = [749], 3
    fixture = json.loads(FIXTURE.read_text("utf-8"))
    tools = Tools()
    started, load_start = time.perf_counter(), os.getloadavg()
    code, fingerprint = code_state(), code_fingerprint()
    results, failed = [], False
    try:
        for size in sizes:
            result, problems = bench_size(tools, size, args.seed, fixture, runs, args.warmup)
            results.append(result)
            failed = failed or bool(problems)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if code_fingerprint() != fingerprint:
        code += "; qem's code changed during the run"
    meta = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "minutes": (time.perf_counter() - started) / 60,
            "command": shlex.join([sys.executable, *sys.argv]),
            "machine": machine(), "code": code, "runs": runs, "warmup": args.warmup,
            "load_start": " / ".join(f"{x:.2f}" for x in load_start),
            "load_end": " / ".join(f"{x:.2f}" for x in os.getloadavg())}
    text = report(results, meta)
    print()
    print(text)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps({"meta": meta, "results": results}, indent=1, ensure_ascii=False) + "\n")
    if failed:
        print("FAILED: the replies and the notes' data disagree (the PROBLEM lines above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
