"""What a trigger is and how it matches: the moments, paths, commands and terms a note declares.

When a note reaches an agent: exact triggers, each a match on data the note declares.

A note fires at a lifecycle moment (`start`, `compact`, `prompt`, `edit`, `read`, `shell`)
by its kind's default bundle (a directive at every session start and after every
compaction; a high-priority task at session start), unless it declares its own moments
(`@on:`), which then replace the bundle.  Beside the moments, every note fires:

- before an agent edits (and, as a second tier, reads) a file one of its anchors covers
  (the anchored file, or any file under an anchored folder) or one of its `@when-path:`
  patterns matches;
- before a shell command one of its `@when-run:` patterns matches (the whole command, or
  any of its simple commands: split at `&&`, `||`, `;`, `|` and line ends, leading
  `NAME=value` assignments dropped);
- at a prompt that names, verbatim, one of its anchored paths, a path one of its patterns
  matches, or one of the terms its text names in backticks (a backticked span of 3 to 100
  characters with no space, found in the prompt at identifier boundaries).

Nothing here is a similarity: a note that declares the data fires, one that does not never
does, and what a budget cuts is counted (qem_edit.reads.delivery).  Pure: strings in, answers out.

A trigger's stored form is here too: a created event's `triggers`, {name: [value, ...]},
checked alike on write and on read (qem_edit.base.stored_form holds the other fields' rules).
"""

from __future__ import annotations

import os
import unicodedata

from .patterns import Lazy
from .stored_form import anchor_path_problem
from .vocabulary import MOMENTS, PRIORITIES, TRIGGER_ATTRIBUTES, TRIGGER_NAMES, Trigger

TYPE_CHECKING = False  # typing's flag, without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

TRIGGER_LIMIT = 20  # of each name, per note
PATTERN_LIMIT = 200  # characters of a pattern


def trigger_problem(name: str, value: object) -> str | None:
    """What keeps `value` from being a trigger of that name (None: nothing)."""
    if not isinstance(value, str) or not value:
        return f"an @{TRIGGER_ATTRIBUTES.get(name, name)}: value must be a non-empty string"
    if name == "on":
        return None if value in MOMENTS else f"unknown moment {value!r}; use " + ", ".join(MOMENTS)
    if len(value) > PATTERN_LIMIT:
        return f"a pattern of {len(value)} characters; keep it under {PATTERN_LIMIT}"
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in value) or value != value.strip():
        return "a pattern holding a control character, or spaces at its ends"
    if name == "path":
        problem = anchor_path_problem(value)
        if problem:
            return f"path pattern {value!r}: {problem.replace('an anchor', 'a pattern')}"
        if any("**" in part and part != "**" for part in value.split("/")):
            return f"path pattern {value!r}: `**` stands for whole folders, a part of its own (src/**/x.py)"
        return None
    if name == "run":
        return None
    return f"unknown trigger {name!r}; use " + ", ".join(TRIGGER_NAMES)


def triggers_problem(value: object) -> str | None:
    """What is wrong with an event's `triggers` (None: nothing): {name: [value, ...]},
    names from TRIGGER_NAMES, each list non-empty, sorted, without repeats, each value valid."""
    if not isinstance(value, dict) or not value:
        return "triggers must be a non-empty {on, path, run} of lists"
    for name, values in value.items():
        if name not in TRIGGER_NAMES:
            return f"unknown trigger {name!r}; use " + ", ".join(TRIGGER_NAMES)
        if not isinstance(values, list) or not values or len(values) > TRIGGER_LIMIT:
            return f"triggers {name!r} must be a list of 1 to {TRIGGER_LIMIT} values"
        for item in values:
            problem = trigger_problem(name, item)
            if problem:
                return problem
        if values != sorted(set(values)):
            return f"triggers {name!r} must be sorted, each value once"
    return None


def triggers_of(data: Mapping[str, object]) -> tuple[Trigger, ...]:
    """An event's triggers as (name, value) pairs in order; none where it declares none."""
    value = data.get("triggers")
    if value is None or triggers_problem(value) is not None:
        return ()
    return tuple(sorted((name, item) for name, values in value.items() for item in values))  # type: ignore[union-attr]


def trigger_data(triggers: Iterable[Trigger]) -> dict[str, list[str]]:
    """The stored form of (name, value) pairs."""
    out: dict[str, list[str]] = {}
    for name, value in sorted(set(triggers)):
        out.setdefault(name, []).append(value)
    return out


# The notes that fire by their kind when they declare no moment of their own: (kind, the
# priorities, the moments): every directive at every start and after every compaction, a
# high-priority task at the start.
BUNDLES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("directive", PRIORITIES, ("start", "compact")),
    ("task", ("high",), ("start",)),
)

_TERM_RE = Lazy(r"`([^`\s]{3,100})`")
_WORD_RE = Lazy(r"[A-Za-z0-9_]+")
# A prompt's words (runs of _WORD) and path-like tokens (runs of _PATHISH, to their last word
# character) are found in its UTF-8 bytes by bytes.translate, in C, each other byte made a space:
# what `[A-Za-z0-9_]+` and `[A-Za-z0-9_.@+~/-]*[A-Za-z0-9_]` find, without a regular expression
# engine loaded for every prompt.
_WORD = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"
_PATH_ONLY = b".@+~/-"
_WORDS = bytes(c if c in _WORD else 32 for c in range(256))
_PATHISH = bytes(c if c in _WORD or c in _PATH_ONLY else 32 for c in range(256))
_SPLIT_RE = Lazy(r"&&|\|\||[;|\n]")
_ASSIGNMENT_RE = Lazy(r"[A-Za-z_][A-Za-z0-9_]*=\S*\s+")
_GLOB_CHARS = frozenset("*?[")


TYPE_CHECKING = False  # typing's flag, without importing typing: no hook or write loads it (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import Protocol

    class Declaring(Protocol):
        """What `moments` reads of a note (a qem_edit.base.replay.Note, whose module imports
        this one's rules: a Note here would close a cycle)."""

        kind: str
        priority: str
        triggers: tuple[Trigger, ...]


def moments(note: Declaring) -> tuple[str, ...]:
    """The lifecycle moments the note fires at: its own, or its kind's default bundle."""
    declared = tuple(value for name, value in note.triggers if name == "on")
    return declared or bundle_moments(note.kind, note.priority)


def bundle_moments(kind: str, priority: str) -> tuple[str, ...]:
    """The moments a note of this kind and priority fires at when it declares none."""
    return next((fires for k, priorities, fires in BUNDLES if k == kind and priority in priorities), ())


def bundle_at(moment: str) -> dict[str, tuple[str, ...]]:
    """{kind: priorities} of the notes a moment fires by their kind."""
    return {kind: priorities for kind, priorities, fires in BUNDLES if moment in fires}


# A read gives what an edit of the file would (its notes, and those due at every edit), so
# the edit that follows it has nothing left to hold; and the notes due at every read.
READ_GIVES = ("read", "edit")
MOMENT_WORDS = {"start": "at start", "compact": "after compaction", "prompt": "at every prompt",
                "edit": "before every edit", "read": "before every read", "shell": "before every command"}


def bundle_why(kind: str, priority: str) -> str:
    """Why a moment gave a note by its kind's bundle (BUNDLES)."""
    why = _BUNDLE_WHY.get((kind, priority))
    if why is None:  # (made once a kind and priority: a start at scale gives thousands of notes by their kind)
        which = f"{priority} {kind}" if kind == "task" else kind
        why = _BUNDLE_WHY[kind, priority] = f"every {which}, " + " and ".join(
            MOMENT_WORDS[m] for m in bundle_moments(kind, priority))
    return why


_BUNDLE_WHY: dict[tuple[str, str], str] = {}


# -- terms: what a note's text names in backticks ---------------------------------------------


def terms_of(text: str) -> list[tuple[str, str]]:
    """(key, term) for each distinct backticked term of the text; the key is the term's
    longest word (letters, digits, `_`), which a prompt naming the term holds as a word."""
    found: dict[str, str] = {}
    for term in _TERM_RE.findall(text):
        words = _WORD_RE.findall(term)
        if words and term not in found:
            found[term] = max(words, key=len)
    return sorted((key, term) for term, key in found.items())


def prompt_words(prompt: str) -> set[str]:
    return {word.decode("ascii") for word in prompt.encode("utf-8", "surrogatepass").translate(_WORDS).split()}


def term_in(term: str, prompt: str) -> bool:
    """Whether `term` appears in the prompt, not inside a longer identifier."""
    import re  # (a term the prompt names, its note's to give)

    head = r"(?<![A-Za-z0-9_])" if _WORD_RE.match(term[0]) else ""
    tail = r"(?![A-Za-z0-9_])" if _WORD_RE.match(term[-1]) else ""
    return re.search(head + re.escape(term) + tail, prompt) is not None


def prompt_paths(prompt: str, top: str | None = None) -> set[str]:
    """The path-like tokens of a prompt, as paths from the work tree's top: `./x` read as
    `x`, an absolute path under `top` made relative, trailing punctuation dropped."""
    out: set[str] = set()
    for run in prompt.encode("utf-8", "surrogatepass").translate(_PATHISH).split():
        token = run.rstrip(_PATH_ONLY).decode("ascii")
        if "/" not in token and "." not in token:  # (no token at all too)
            continue
        path = relative(token, top)
        if path:
            out.add(path)
    return out


def relative(path: str, top: str | None) -> str | None:
    """A path a harness or a prompt gives, from the work tree's top (None: outside it)."""
    if path.startswith("/"):
        if not top:
            return None
        prefix = top.rstrip("/") + "/"
        if not path.startswith(prefix):
            return None
        path = path[len(prefix):]
    while path.startswith("./"):
        path = path[2:]
    path = path.rstrip("/")
    return path or None


def from_cwd(paths: Iterable[str], cwd: str, top: str) -> tuple[str, ...]:
    """Paths as a harness or a person gives them (absolute, or from `cwd`), from the top
    of the work tree; a path outside it is left out."""
    out = []
    for path in paths:
        full = os.path.join(cwd, path)  # an absolute path stays itself
        named = relative(os.path.normpath(full), top) or relative(os.path.realpath(full), top)
        if named:
            out.append(named)
    return tuple(dict.fromkeys(out))


# -- what a tool call's moment fires, by its paths and its command ------------------------------
# The one statement of these rules: the index's reads (qem_edit.reads.delivery.hits) and a
# hook's digest of them (qem_edit.reads.quiet) both ask here.

def declaring(event: str) -> tuple[str, ...]:
    """The moments whose notes (declared, or by their kind's bundle) a moment gives: a
    read gives what is due before an edit too."""
    return READ_GIVES if event == "read" else (event,)


def by_paths(paths: Iterable[str], anchored: Callable[[set[str]], Iterable[tuple[str, str]]],
             patterns: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The notes an edit or a read of `paths` fires, with why: those anchored to a path or
    a folder above it (`anchored(covering paths)` gives their (note, path)), then those
    whose `when-path` pattern (`patterns`: (pattern, note)) matches one of the paths."""
    wanted = [p for p in paths if p]
    why: dict[str, str] = {}
    if not wanted:
        return why
    for note, path in anchored({q for p in wanted for q in covering_anchors(p)}):
        why.setdefault(note, f"anchored to {path}")
    for pattern, note in patterns:
        if note not in why and any_path_matches([pattern], wanted):
            why[note] = f"when-path {pattern}"
    return why


def by_prompt(prompt: str, top: str | None, anchored: Callable[[set[str]], Iterable[tuple[str, str]]],
              patterns: Callable[[], Iterable[tuple[str, str]]],
              terms: Callable[[set[str]], Iterable[tuple[str, str]]]) -> dict[str, str]:
    """The notes a prompt fires, with why: those anchored to a path it names (`anchored(paths)`
    gives their (note, path)), those whose `when-path` pattern (`patterns()`: (pattern, note))
    matches one, then those naming a backticked term the prompt holds (`terms(words)`: the
    (term, note) of the terms whose key is one of the prompt's words)."""
    why: dict[str, str] = {}
    paths = prompt_paths(prompt, top)
    if paths:
        for note, path in anchored(paths):
            why.setdefault(note, f"the prompt names {path}")
        for pattern, note in patterns():
            if note not in why:
                named = next((p for p in sorted(paths) if path_matches(pattern, p)), None)
                if named is not None:
                    why[note] = f"the prompt names {named} (when-path {pattern})"
    words = {w for w in prompt_words(prompt) if len(w) >= 2}
    if words:
        for term, note in sorted(terms(words)):
            if note not in why and term_in(term, prompt):
                why[note] = f"the prompt names `{term}`"
    return why


def by_command(command: str, patterns: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The notes a command fires, with why: those whose `when-run` pattern (`patterns`:
    (pattern, note)) matches one of its simple commands."""
    why: dict[str, str] = {}
    for pattern, note in patterns:
        if note not in why and command_matches(pattern, command):
            why[note] = f"when-run {pattern}"
    return why


# -- patterns ------------------------------------------------------------------------------------


def path_matches(pattern: str, path: str) -> bool:
    """A path pattern over a whole path from the work tree's top: `*`, `?` and `[...]`
    within one part (fnmatch's, case-sensitive), `**` any number of whole parts; a pattern
    with no glob character is that path or anything under it (a folder)."""
    if not _GLOB_CHARS.intersection(pattern):
        return path == pattern or path.startswith(pattern + "/")
    return _parts_match(pattern.split("/"), path.split("/"))


def _parts_match(pattern: list[str], parts: list[str]) -> bool:
    """Whole parts against pattern parts, `**` any number of them: one pass over the
    path keeping the set of pattern positions reached (at most the pattern's parts, so
    no pattern a clone sends makes it slow)."""
    from fnmatch import fnmatchcase  # (a glob's part: loaded by the patterns that have one)

    reached = _closed({0}, pattern)
    for part in parts:
        step = set()
        for i in reached:
            if i < len(pattern):
                if pattern[i] == "**":
                    step.add(i)  # it takes this part too
                elif fnmatchcase(part, pattern[i]):
                    step.add(i + 1)
        reached = _closed(step, pattern)
        if not reached:
            return False
    return len(pattern) in reached


def _closed(positions: set[int], pattern: list[str]) -> set[int]:
    """The positions, and past any `**` at them (it may take no part)."""
    out, todo = set(), list(positions)
    while todo:
        i = todo.pop()
        if i not in out:
            out.add(i)
            if i < len(pattern) and pattern[i] == "**":
                todo.append(i + 1)
    return out


def glob_match(pattern: str, text: str) -> bool:
    """Whether `pattern` (`*` any characters, `?` one, the rest literal) matches the whole
    of `text`: the two-pointer match, linear in each star's retries, so no pattern a clone
    sends can make a hook backtrack for long."""
    p = t = 0
    star, resume = -1, 0
    while t < len(text):
        if p < len(pattern) and pattern[p] in ("?", text[t]) and pattern[p] != "*":
            p, t = p + 1, t + 1
        elif p < len(pattern) and pattern[p] == "*":
            star, resume, p = p, t, p + 1
        elif star >= 0:
            p, resume = star + 1, resume + 1
            t = resume
        else:
            return False
    return all(c == "*" for c in pattern[p:])


def simple_commands(command: str) -> list[str]:
    """The command line and each simple command in it, leading assignments dropped."""
    pieces = [command.strip()]
    for piece in _SPLIT_RE.split(command):
        piece = piece.strip()
        while True:
            m = _ASSIGNMENT_RE.match(piece)
            if not m:
                break
            piece = piece[m.end():]
        if piece and piece not in pieces:
            pieces.append(piece)
    return pieces


def command_matches(pattern: str, command: str) -> bool:
    return any(glob_match(pattern, piece) for piece in simple_commands(command))


def covering_anchors(path: str) -> list[str]:
    """A path and every folder above it: an anchor on any of them covers the path."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def any_path_matches(patterns: Iterable[str], paths: Iterable[str]) -> bool:
    listed = list(paths)
    return any(path_matches(p, path) for p in patterns for path in listed)
