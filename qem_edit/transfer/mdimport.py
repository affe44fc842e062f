"""`qem import markdown`: CLAUDE.md and its kin proposed as notes, for review.

`qem import markdown FILE...`: the memory a team already keeps in markdown (CLAUDE.md,
AGENTS.md, a hand-kept MEMORY.md, Claude Code's auto-memory files) proposed as new notes,
written as a checkout for a person to review and check in.  Nothing reaches the log before
that check-in: the checkout is the proposal, and `qem checkin` (or `qem edit --resume`)
is the one way it lands, with every rule a check-in enforces.

Each top-level bullet or paragraph is a proposed note (a nested list stays with its
bullet; a fenced block with what introduces it; a paragraph ending in ":" before a list
introduces it, and only hints its kind); headings, front matter, comments, rules and
Claude's `@path` imports are not notes.  A file of Claude Code's auto-memory (front matter
with `type:`) is one memory: one note.  The kind is guessed by `guess_kind` (docs/IMPORT.md
has the table), and a person moves an item to another section to change it.  A text some
note of the memory already has (any state but forgotten) is not proposed again, so
importing a file twice proposes nothing the first check-in brought.  A file holding a
credential is refused, naming the file, the line and the kind of secret, never the secret.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..base import errors
from ..base.stored_form import normalize_text
from ..base.vocabulary import KINDS, PRIORITIES, TextError
from ..renderer import Selection
from ..renderer.format import HEADER_RE, INDENT, SECTION_TITLES, escape_first_line, escape_text_line
from ..storage import secrets
from ..storage.store import Store
from ..system.workspace import Workspace


@dataclass(frozen=True)
class Proposal:
    """A note proposed from a file: its text, its guessed kind, where it starts."""

    text: str
    kind: str
    file: str
    line: int


# -- the kind a text is guessed to be -------------------------------------------------------

# The rules, in the order they are tried; the first that says a kind decides.  Within a
# table the first row whose pattern matches wins; a heading is looked at nearest first.
# 1. an open checkbox (`- [ ] ...`) is a task
# 2. a heading that names a kind outright (`## Gotchas`, `## Decision`): the author sorted it
KIND_NAMES = r"\A(?:directives?|tasks?|gotchas?|findings?|references?|decisions?|operational)\Z"
# 3. the text's own strong words
STRONG_WORDS: tuple[tuple[str, str], ...] = (
    ("task", r"\bTODO\b|\bFIXME\b|\bto-?do:"),
    ("gotcha", r"\bgotchas?\b|\bcareful\b|\bbeware\b|\bwatch out\b|\bpitfalls?\b|\bcaveats?\b|\bwarning\b"
               r"|\bdon'?t\b|\bdo not\b|\bdoesn'?t work\b"),
    ("decision", r"\bdecided\b|\bwe chose\b|\brationale\b"),
    ("reference", r"https?://"),
)
# 4. words in a heading above
HEADING_HINTS: tuple[tuple[str, str], ...] = (
    ("task", r"\btodos?\b|\broadmap\b|\bbacklog\b|\bnext steps\b|\bopen questions\b"),
    ("gotcha", r"\bpitfalls?\b|\bcaveats?\b|\bknown issues\b|\bwarnings?\b|\btroubleshooting\b|\bwatch out\b"),
    ("directive", r"\brules?\b|\bconventions?\b|\bguidelines?\b|\bstyle\b|\bstandards?\b|\binstructions?\b"
                  r"|\bpolic(?:y|ies)\b|\bpreferences?\b|\bdo'?s\b"),
    ("decision", r"\badrs?\b|\brationale\b"),
    ("reference", r"\blinks?\b|\bresources?\b|\bdocs\b|\bdocumentation\b|\bsee also\b"),
    ("operational", r"\bcommands?\b|\bbuild(?:ing)?\b|\bsetup\b|\bset up\b|\bdevelopment\b|\btesting\b|\btests\b"
                    r"|\brunning\b|\bdeploy(?:ment|ing)?\b|\bworkflows?\b|\bscripts?\b|\btooling\b|\boperations?\b"),
    ("finding", r"\blearn(?:ed|ings?)\b|\barchitecture\b|\boverview\b|\bnotes?\b|\bcontext\b"),
)
# 5. the text's other words, and 6. weak cues; else 7. a finding
WORDS: tuple[tuple[str, str], ...] = (
    ("directive", r"\balways\b|\bnever\b|\bmust\b|\bshould\b|\bprefer\b|\brequired?\b"),
    ("decision", r"\bdecision\b|\bchosen\b|\binstead of\b"),
)
CUES: tuple[tuple[str, str], ...] = (
    ("operational", r"\A`[^`]+`|^```|^~~~|\b(?:run|npm|pnpm|yarn|make|pytest|cargo|docker|pip)\b"),
)
# Claude Code's auto-memory files say their type in their front matter.
AUTO_MEMORY_TYPES = {"feedback": "directive", "project": "finding", "reference": "reference", "user": "finding"}


def guess_kind(text: str, headings: list[str], checkbox: bool = False) -> str:
    """A note's kind, by the rules above (docs/IMPORT.md has them as a table)."""
    if checkbox:
        return "task"
    nearest_first = list(reversed(headings))
    for heading in nearest_first:
        if re.match(KIND_NAMES, heading.strip().rstrip(":"), re.IGNORECASE):
            return _kind_named(heading)
    for rules, texts in ((STRONG_WORDS, [text]), (HEADING_HINTS, nearest_first), (WORDS, [text]), (CUES, [text])):
        for said in texts:
            for kind, pattern in rules:
                if re.search(pattern, said, re.IGNORECASE | re.MULTILINE):
                    return kind
    return "finding"


def _kind_named(heading: str) -> str:
    word = heading.strip().rstrip(":").lower()
    return next(kind for kind in KINDS if word.startswith(kind))


# -- a markdown file read into blocks -------------------------------------------------------

_HEADING = re.compile(r" {0,3}(#{1,6})\s+(.*?)\s*#*\s*\Z")
_BULLET = re.compile(r"( {0,3})(?:[-*+]|\d{1,9}[.)])\s+(.*)\Z")
_CHECKBOX = re.compile(r"\[([ xX])\]\s+(.*)\Z", re.DOTALL)
_FENCE = re.compile(r" {0,3}(```+|~~~+)")
_RULE = re.compile(r" {0,3}(?:(?:-\s*){3,}|(?:\*\s*){3,}|(?:_\s*){3,})\Z")
_IMPORT = re.compile(r"@[\w./~-]+\Z")  # a line that is only Claude's `@path` import
_ABOUT_THE_FILE = re.compile(r"this file (?:provides|gives|contains|holds) (?:guidance|instructions)", re.IGNORECASE)
_INDEX_LINK = re.compile(r"\[[^\]]*\]\((?!https?:)[^)]*\.md\)")  # an auto-memory index line: a link to a topic file


@dataclass
class Block:
    """A stretch of the file that may become a note: its lines, where it starts, the
    headings above it, and what it is (a bullet, a paragraph, a fence, a table)."""

    what: str
    line: int
    headings: list[str]
    lines: list[str] = field(default_factory=list)
    indent: int = 0  # a bullet's: the spaces before its marker (a bullet indented more is nested in it)


@dataclass
class Skipped:
    done: int = 0  # `- [x]` items: finished tasks
    index: int = 0  # lines of an auto-memory index that only link to its topic files
    imports: int = 0  # `@path` lines: Claude's imports of other files
    about: int = 0  # a paragraph about the file itself ("This file provides guidance to ...")
    known: int = 0  # texts some note already has


def blocks_of(lines: list[str], start: int = 1) -> list[Block]:
    """The file's blocks, in order (`start`: the number of the first line)."""
    blocks: list[Block] = []
    headings: list[tuple[int, str]] = []
    fence: str | None = None
    comment = False
    for number, line in enumerate(lines, start):
        if fence is not None:  # inside a fenced block: verbatim until its closing fence
            blocks[-1].lines.append(line)
            fence = None if line.strip().startswith(fence) and not line.strip().strip(fence[0]) else fence
            continue
        if comment or line.lstrip().startswith("<!--"):
            comment = "-->" not in line
            continue
        fence = _read_line(line, number, blocks, headings)
    return blocks


def _read_line(line: str, number: int, blocks: list[Block], headings: list[tuple[int, str]]) -> str | None:
    """One line taken into the blocks; the fence it opens, if it opens one."""
    last = blocks[-1] if blocks else None
    above = [text for _, text in headings]
    if not line.strip():
        if last is not None and last.what in ("paragraph", "table"):
            last.what += " ended"
        elif last is not None and last.what == "bullet":
            last.lines.append("")  # a blank inside a bullet: what follows may still be its
        return None
    heading, fence, bullet = _HEADING.match(line), _FENCE.match(line), _BULLET.match(line)
    if heading:
        level = len(heading[1])
        headings[:] = [h for h in headings if h[0] < level] + [(level, heading[2])]
        blocks.append(Block("heading", number, above))
    elif fence:
        blocks.append(Block("fence", number, above, [line.strip()]))
        return fence[1]
    elif _RULE.match(line) or _IMPORT.match(line.strip()):
        blocks.append(Block("import" if line.strip().startswith("@") else "rule", number, above))
    elif bullet and not (last is not None and last.what == "bullet" and len(bullet[1]) > last.indent) \
            and not line.startswith(("    ", "\t")):
        blocks.append(Block("bullet", number, above, [bullet[2]], indent=len(bullet[1])))
    elif last is not None and last.what == "bullet" and (line.startswith((" ", "\t")) or last.lines[-1]):
        last.lines.append(line)  # a continuation, or a nested list, of the bullet
    elif last is not None and last.what == ("table" if line.lstrip().startswith("|") else "paragraph"):
        last.lines.append(line.strip())
    else:
        what = "table" if line.lstrip().startswith("|") else "paragraph"
        blocks.append(Block(what, number, above, [re.sub(r"\A\s*>\s?", "", line).strip()]))
    return None


def proposals_of(name: str, text: str, skipped: Skipped) -> list[Proposal]:
    """The notes a markdown file proposes, each with its kind guessed."""
    lines = text.split("\n")
    matter, start = _front_matter(lines)
    body = lines[start:]
    if matter.get("type") in AUTO_MEMORY_TYPES:  # one auto-memory: one note
        whole = "\n".join(body).strip() or matter.get("description", "")
        if not whole.strip():
            return []
        return [Proposal(_normal(whole), AUTO_MEMORY_TYPES[matter["type"]], name, start + 1)]
    return _from_blocks(name, blocks_of(body, start + 1), skipped)


def _from_blocks(name: str, blocks: list[Block], skipped: Skipped) -> list[Proposal]:
    out: list[Proposal] = []
    for i, block in enumerate(blocks):
        after = blocks[i + 1] if i + 1 < len(blocks) else None
        if block.what in ("heading", "rule") or block.what.startswith("import"):
            skipped.imports += block.what == "import"
            continue
        if block.what == "fence" and out and i and blocks[i - 1].what.startswith(("paragraph", "bullet")) \
                and out[-1].line == blocks[i - 1].line:
            out[-1] = _with_fence(out[-1], block)  # the command a paragraph introduces stays with it
            continue
        lead_in = block.what.startswith("paragraph") and block.lines[-1].endswith(":")
        if lead_in and after is not None and after.what == "bullet":
            after.headings = [*after.headings, block.lines[-1]]  # "Commands:" before a list hints its kind
            for later in blocks[i + 2:]:
                if later.what == "bullet" and later.headings == block.headings:
                    later.headings = after.headings
                elif later.what != "bullet":
                    break
            continue
        proposal = _proposal(name, block, skipped)
        if proposal is not None:
            out.append(proposal)
    return out


def _with_fence(proposal: Proposal, fence: Block) -> Proposal:
    text = proposal.text + "\n" + "\n".join(fence.lines)
    kind = proposal.kind if proposal.kind != "finding" else guess_kind(text, [])
    return Proposal(_normal(text), kind, proposal.file, proposal.line)


def _proposal(name: str, block: Block, skipped: Skipped) -> Proposal | None:
    if block.what == "bullet":
        first, rest = block.lines[0], _dedent(block.lines[1:])
        box = _CHECKBOX.match(first)
        if box and box[1] in "xX":
            skipped.done += 1
            return None
        if _INDEX_LINK.search(first):
            skipped.index += 1
            return None
        first = box[2] if box else first
        continued = [line for line in rest if line and not _BULLET.match(line)]
        text = " ".join([first.strip(), *(line.strip() for line in continued)]) if len(continued) == len(
            [line for line in rest if line]) else "\n".join([first.strip(), *rest])
        return Proposal(_normal(text), guess_kind(text, block.headings, checkbox=box is not None), name, block.line)
    lines = block.lines
    if block.what.startswith("paragraph") and _ABOUT_THE_FILE.match(lines[0]):
        skipped.about += 1  # what `claude /init` writes at the top: about the file, not the project
        return None
    text = "\n".join(lines) if block.what.startswith(("table", "fence")) else " ".join(lines)
    return Proposal(_normal(text), guess_kind(text, block.headings), name, block.line)


def _dedent(lines: list[str]) -> list[str]:
    """A bullet's further lines, its own indent taken off (a nested list keeps its shape)."""
    widths = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    cut = min(widths, default=0)
    return [line[cut:].rstrip() for line in lines]


def _front_matter(lines: list[str]) -> tuple[dict[str, str], int]:
    """A file's front matter (`---` ... `---` at its top), its flat `key: value` lines,
    and the index of the body's first line."""
    if not lines or lines[0].strip() != "---":
        return {}, 0
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            pairs = (line.split(":", 1) for line in lines[1:end] if ":" in line)
            return {key.strip(): value.strip().strip("\"'") for key, value in pairs}, end + 1
    return {}, 0


def _normal(text: str) -> str:
    try:
        return normalize_text(text)
    except TextError:
        return ""


# -- the files read, checked and proposed ----------------------------------------------------


@dataclass
class Read:
    """What the files propose, in order, and what was left out."""

    proposals: list[Proposal]
    skipped: Skipped


def read_files(paths: list[Path]) -> Read:
    """Every file read and checked before anything is opened: an unreadable file, qem's own
    rendering and a credential are refused (BadInput, SecretRefused) naming the file."""
    skipped, proposals = Skipped(), []
    for path in paths:
        text = _text_of(path)
        if HEADER_RE.match(text.split("\n", 1)[0].lstrip("\ufeff").rstrip()):
            raise errors.BadInput(
                f"{path} is qem's own rendering of a memory (its first line is qem's header), not memory kept"
                " by hand; nothing was imported",
                hint=f"to change notes through it, edit it and run `qem checkin --path {path}`")
        found = secrets.scan(text)
        if found:
            raise secrets.SecretRefused(
                f"{path} holds a secret ({secrets.described(found)}): the log is committed, so it would reach every"
                " clone and stay in git history; nothing was imported",
                hint=f"replace it in {path} with a placeholder such as <token> and import again; a person who means to"
                     " commit it adds that note by hand with `qem add TEXT --allow-secret`")
        proposals += [p for p in proposals_of(str(path), text, skipped) if p.text]
    return Read(proposals, skipped)


def _text_of(path: Path) -> str:
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise errors.BadInput(f"{path} is a folder; give the markdown files in it") from None
    except OSError as exc:
        raise errors.BadInput(f"cannot read {path}: {exc.strerror or exc}; nothing was imported") from None
    try:
        return data.decode("utf-8").replace("\r\n", "\n")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise errors.BadInput(f"{path} line {line}: not UTF-8 text; nothing was imported") from None


@dataclass
class Imported:
    """What `qem import markdown` did: the notes it proposed and where, what it left out."""

    proposals: list[Proposal]
    skipped: Skipped
    files: int
    checkout: Path | None = None  # the file to review (None: nothing to propose)
    checkout_id: str | None = None  # a kept checkout's id (None: a file given with --path)

    def text(self) -> str:
        left = [f"{n} {what}" for n, what in ((self.skipped.known, "already in memory"),
                                               (self.skipped.done, "done tasks"),
                                               (self.skipped.index, "index lines linking to topic files"),
                                               (self.skipped.imports, "@path imports"),
                                               (self.skipped.about, "lines about the file itself")) if n]
        kinds = [f"{sum(p.kind == k for p in self.proposals)} {k}" for k in KINDS if any(p.kind == k for p in self.proposals)]
        head = (f"proposed {len(self.proposals)} notes ({', '.join(kinds)}) from {self.files} files"
                if self.proposals else f"nothing to propose from {self.files} files")
        lines = [head + (f"; left out: {', '.join(left)}" if left else "")]
        if self.checkout is None:
            return lines[0] + "; nothing was written"
        checkin = f"qem checkin --path {self.checkout}" if self.checkout_id is None else "qem checkin"
        lines += [f"review them in {self.checkout} (move an item to another section to change its kind,"
                  " delete what should not be kept); nothing is in the log yet",
                  f"check them in with `{checkin} -m \"imported from markdown\"`"
                  + (f", or in your editor with `qem edit --resume {self.checkout_id}`" if self.checkout_id else "")]
        return "\n".join(lines)


def import_markdown(store: Store, place: Workspace, read: Read, path: Path | None, force: bool = False) -> Imported:
    """The proposals no note has yet, each text once, written as a checkout (a kept one,
    or `path` recorded as `qem checkout --path` records it) of no notes: the check-in
    creates them and touches nothing else."""
    from ..base.times import utc_now
    from ..writes.kept_edits import new_checkout, owning, write_checkout

    held = store.texts_held(p.text for p in read.proposals)
    fresh: dict[str, Proposal] = {}
    for proposal in read.proposals:
        if proposal.text in held:
            read.skipped.known += 1
        else:
            fresh.setdefault(proposal.text, proposal)
    files = len({p.file for p in read.proposals})
    if not fresh:
        return Imported([], read.skipped, files)
    # a query's checkout that holds no note: the header says which notes are the file's
    # (those made since now, once checked in), and the check-in reads no other
    selection = Selection(query=(f"since={utc_now()}",), notes=frozenset())
    if path is None:
        checkout = new_checkout(store, place, selection)
    else:
        write_checkout(store, place, selection, path, force)
        checkout = owning(place, path)
        assert checkout is not None
    base = checkout.base_file.read_text("utf-8")
    checkout.replace(with_proposals(base, list(fresh.values())))
    return Imported(list(fresh.values()), read.skipped, files, checkout.file, None if path else checkout.id)


def with_proposals(rendering: str, proposals: list[Proposal]) -> str:
    """A rendering with each proposal as a new item (`- text`, further lines indented)
    at the top of its kind's section, in the order given."""
    out = rendering
    for kind in reversed(KINDS):
        items = [item_of(p.text) for p in proposals if p.kind == kind]
        heading = f"\n## {SECTION_TITLES[kind]}\n\n"
        at = out.find(heading)
        if items and at >= 0:
            at += len(heading)
            out = out[:at] + "\n".join(items) + "\n" + ("\n" if out[at:at + 1] != "\n" else "") + out[at:]
    return out


def item_of(text: str) -> str:
    """A new note's item as a person would type it; a first line that would read as a
    priority or a marker is escaped."""
    first, *rest = text.split("\n")
    head, sep, _ = first.partition(" · ")
    first = "\\" + first if sep and head in PRIORITIES else escape_first_line(first)
    return "\n".join([f"- {first}", *(INDENT + escape_text_line(line) if line else "" for line in rest)])
