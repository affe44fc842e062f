"""Credentials kept out of the log, checked on every string an event holds.

Credentials kept out of the log: the log is committed, so a note reaches every clone,
every CI job and every fork, and git history keeps it after `qem forget`.

Every string an event holds is held to the rule, not only a note's text: its reason, its
actor, and every string of its data, keys included (triggers, anchors' paths, what a vectr
import keeps...).  The strings are found by walking the event's stored form
(`logtree.event_object`), so a field added to an event is checked without a word here.

The detector is detect-secrets (Yelp's scanner), its high-confidence regex plugins only:
the keys and tokens whose shape names their issuer (cloud keys, private key blocks,
hosting-service and chat tokens, signed web tokens), and qem's own rule for a URL that
carries a password (`URL_PASSWORD`: any scheme, any characters but a space or `/` in the
password, a placeholder such as `${DB_PASSWORD}`, `<password>` or `****` not counted),
which stands in for detect-secrets' basic-auth plugin (it misses a password holding `!`
or `#`, and flags `<password>`).  Its entropy and keyword plugins are left out: they flag
commit hashes, ids and ordinary words.

Importing detect-secrets costs about 0.1 s (its plugins' base imports `requests`, for
verification qem never asks for), which a write of an ordinary note should not pay.  So a
text reaches the detector only when one of `_MAY_HOLD` finds in it the fixed part of one of the
plugins' patterns (a superset: tests/test_secrets.py checks that every string each
plugin's patterns match passes it); the detector alone decides.  An event's strings are
pre-checked at once, over its JSON form (`_may_hold_event`).

Every write passes here: `Transaction.record` (add, supersede, a check-in, the MCP tools)
and `Transaction.flush` (what `qem load` and `qem import vectr` bring).  A person who means
to commit a credential in a note's text passes `--allow-secret`; the event then carries
`"secret": "allowed"` in its data, which `qem verify` and the pre-commit hook honour.  A
secret anywhere else (a reason, a trigger, an anchor's path, an actor's name) is refused
even then: it lives in an event, which stays in the log for good (its id is the hash of
its bytes), so only a text, which `qem forget` erases, may hold one.  An agent cannot
allow one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from functools import reduce

from ..base import errors, ids
from ..base.records import Record
from ..base.replay import Event
from ..base.vocabulary import TRIGGER_ATTRIBUTES
from .logtree import event_object

WITHHELD = "<secret withheld>"  # what a message shows in a secret's place
ALLOWED = "secret"  # the key an event carries in its data when a person allowed its secret
TEXT = "the note text"  # the one field a person may allow a secret in (`qem forget` erases it)
# detect-secrets plugins used: (module, class); a password in a URL is qem's own (_UrlPassword)
PLUGINS = (
    ("aws", "AWSKeyDetector"), ("azure_storage_key", "AzureStorageKeyDetector"),
    ("private_key", "PrivateKeyDetector"), ("github_token", "GitHubTokenDetector"),
    ("gitlab_token", "GitLabTokenDetector"), ("slack", "SlackDetector"), ("discord", "DiscordBotTokenDetector"),
    ("telegram_token", "TelegramBotTokenDetector"), ("stripe", "StripeDetector"),
    ("sendgrid", "SendGridDetector"), ("twilio", "TwilioKeyDetector"), ("mailchimp", "MailchimpDetector"),
    ("square_oauth", "SquareOAuthDetector"), ("openai", "OpenAIDetector"), ("pypi_token", "PypiTokenDetector"),
    ("npm", "NpmDetector"), ("jwt", "JwtTokenDetector"),
)
# A URL that carries a password, `scheme://[user]:password@host`, whatever its scheme
# (postgres, mysql, redis, mongodb+srv, amqp, https...).  The password runs to the last `@`
# before the host, so a raw `@`, `#` or `!` in it (common, though a URL parser would read
# them otherwise) stays in it; a space or a `/` ends it (a URL's authority holds neither).
URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://(?P<user>[^\s:/@]*):(?P<password>[^\s/]+)@[^\s/@]+")
# What stands in for a password in documentation and configuration: a variable
# (`${DB_PASSWORD}`, `$PASS`, `%(password)s`, `{{ password }}`), a bracketed name
# (`<password>`, `[pass]`), a mask (`****`, `xxxx`, `...`), or the word itself.
_PLACEHOLDER = re.compile(r"""(?x)
    \$\{[^}]*\} | \$\(?[A-Za-z_]\w*\)? | %\(?\w*\)?s | \{\{[^}]*\}\} | \{\w[\w.-]*\}
    | <[^<>]*> | \[[^][]*\] | [*xX.•_-]+
    | (?i: password | passwd | pass | pwd | secret | changeme | redacted | your[_-]?password | mypassword )
""")
_PORT_THEN = re.compile(r"\d{1,5}[?#]")  # `host:8080?next=a@b`: a port, then a query holding an `@`


class _UrlPassword:
    """URL_PASSWORD as a detect-secrets detector reads (`secret_type`, `denylist`,
    `analyze_string`, which yields each secret found): a placeholder, or a port followed by
    a query, is not one."""

    secret_type = "Basic Auth Credentials"
    denylist = (URL_PASSWORD,)

    def analyze_string(self, line: str) -> Iterator[str]:
        for match in URL_PASSWORD.finditer(line):
            password = match["password"]
            if self._counts(password):
                yield password

    def withhold(self, line: str) -> str:
        def held(match: re.Match) -> str:
            start, end = match.span("password")
            whole = match.group(0)
            base = match.start()
            return whole[:start - base] + WITHHELD + whole[end - base:] if self._counts(match["password"]) else whole

        return URL_PASSWORD.sub(held, line)

    @staticmethod
    def _counts(password: str) -> bool:
        return not _PLACEHOLDER.fullmatch(password) and not _PORT_THEN.match(password)


# The pre-check: for each plugin above, a looser pattern every one of its matches holds,
# each searched on its own.  Each begins with a fixed string where it can (`:` before a
# telegram token's tail, `-us` of a mailchimp key, not the digits and letters before them),
# which the regex engine skips to as fast as `in` does; one alternation of them all tries
# every branch at every character, several times slower over an event's JSON.
_MAY_HOLD = tuple(re.compile(pattern) for pattern in (
    r"A(?:3T|BIA|CCA|KIA|SIA|ccountKey=)",                      # aws key id, azure storage key
    r"PRIVATE KEY", r"PuTTY-User-Key-File",                      # private key blocks
    r"gh[pousr]_", r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-", r"GR1348941",  # github, gitlab
    r"\.[\w-]{6}\.[\w-]{27}",                                     # discord
    r":[\w-]{35}",                                                # telegram (its bot id's digits before)
    r"k_live_", r"SG\.", r"AC[a-z0-9]{32}", r"SK[a-z0-9]{32}", r"-us\d", r"sq0csp-",  # stripe ... mailchimp, square
    r"T3BlbkFJ", r"pypi-", r"_authToken=",                        # openai, pypi, npm
    r"://[^\s:/@]*:[^\s/]+@",                                      # a password in a URL
    r"eyJ",                                                       # a signed web token
))
# The case-blind ones: a word the text, case-folded, holds (`str.casefold` folds what
# IGNORECASE does: ſ to s, K to k), then, where there is one, the pattern itself.
_MAY_HOLD_FOLDED = (
    ("aws", re.compile(r"(?i:aws[^\n]{0,49}[0-9a-z/+]{40})")),  # aws secret key, 49 characters at most after "aws"
    ("xox", re.compile(r"(?i:xox[abposr]-)")), ("hooks.slack.com", None),  # slack
)


class Found(Record):
    """A secret in a text: its kind (the detector's name for it) and its line (from 1)."""

    kind: str
    line: int


class SecretRefused(errors.Refused):
    """A text that holds a credential, refused before anything was written."""


def may_hold(text: str) -> bool:
    """Whether the detector need look at `text` at all (cheap; a superset)."""
    if any(pattern.search(text) is not None for pattern in _MAY_HOLD):
        return True
    folded = text.casefold()
    return any(word in folded and (pattern is None or pattern.search(text) is not None)
               for word, pattern in _MAY_HOLD_FOLDED)


_DETECTORS: list | None = None


def _detectors() -> list:
    global _DETECTORS
    if _DETECTORS is None:
        from detect_secrets import plugins
        from detect_secrets.plugins import (  # noqa: F401
            aws,
            azure_storage_key,
            discord,
            github_token,
            gitlab_token,
            jwt,
            mailchimp,
            npm,
            openai,
            private_key,
            pypi_token,
            sendgrid,
            slack,
            square_oauth,
            stripe,
            telegram_token,
            twilio,
        )

        _DETECTORS = [getattr(getattr(plugins, module), name)() for module, name in PLUGINS] + [_UrlPassword()]
    return _DETECTORS


def scan(text: str | None) -> list[Found]:
    """The secrets `text` holds, a kind once per line, in line order."""
    if not text or not may_hold(text):
        return []
    out = []
    for number, line in enumerate(text.split("\n"), 1):
        if not may_hold(line):
            continue
        kinds = [d.secret_type for d in _detectors() if any(True for _ in d.analyze_string(line))]
        out += [Found(kind, number) for kind in dict.fromkeys(kinds)]
    return out


def withheld(text: str) -> str:
    """`text` with every secret the detectors find in it written as WITHHELD: what a
    message shows of what someone typed (a refused option's value, a vectr note's title),
    so no report prints a secret."""
    if not may_hold(text):
        return text
    lines = text.split("\n")
    for number, line in enumerate(lines):
        if may_hold(line):
            for detector in _detectors():  # each whole match (a detector yields a part: a token's prefix)
                line = (detector.withhold(line) if isinstance(detector, _UrlPassword) else
                        reduce(lambda held, pattern: pattern.sub(WITHHELD, held), detector.denylist, line))
            lines[number] = line
    return "\n".join(lines)


# -- every string of an event -------------------------------------------------------------------

_JSON = json.JSONEncoder(ensure_ascii=False).encode  # made once (see logtree.canonical)
Where = tuple  # where a string is in an event's stored form: its keys and list positions


def strings(value: object, path: Where = ()) -> Iterator[tuple[Where, str, bool]]:
    """Every string a JSON value holds, a mapping's keys too: (where, the string, whether
    it is a key)."""
    if isinstance(value, str):
        yield path, value, False
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str):
                yield path + (key,), key, True
            yield from strings(item, path + (key,))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from strings(item, path + (i,))


def _may_hold_json(whole: str) -> bool:
    """The pre-check over a JSON value's text at once: each of its strings stands in it as
    it is, unless JSON escaped a character in it (a quote, a backslash, a newline...), which
    leaves a backslash; then it may, and the strings are read one by one."""
    return "\\" in whole or may_hold(whole)


_NAMED = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,39}\Z")


def field_name(path: Where, key: bool = False) -> str:
    """How a message names where in an event a string is, never the string: `the reason`,
    `the @when-run trigger (--when-run)`, `an anchor's path`, else its place in the event's
    stored form (`the field data.vectr.tags[0]`; a key that looks like a secret is not named)."""
    if not key:
        if path in (("reason",), ("actor",)):
            return f"the {path[0]}" if path[0] == "reason" else "the actor's name"
        if len(path) == 4 and path[:2] == ("data", "triggers") and path[2] in TRIGGER_ATTRIBUTES:
            attribute = TRIGGER_ATTRIBUTES[str(path[2])]
            return f"the @{attribute} trigger" + (f" (--{attribute})" if attribute != "on" else "")
        if len(path) == 4 and path[:2] == ("data", "anchors") and path[3] == "path":
            return "an anchor's path"
    shown = [f"[{part}]" if isinstance(part, int) else f".{part}" if _NAMED.match(str(part)) and not may_hold(str(part))
             else ".<a key>" for part in (path[:-1] if key else path)]
    return ("a key of " if key else "the field ") + ("".join(shown).lstrip(".") or "the event")


def event_problems(event: Event, text: str | None = None) -> list[tuple[str, list[Found]]]:
    """Each field of `event` that holds a secret, with what it holds: every string of its
    stored form (`logtree.event_object`: what a clone reads), and `text`, a created note's
    (named TEXT).  One search over the event's JSON spares the walk where it may hold none."""
    found = scan(text)
    out = [(TEXT, found)] if found else []
    stored = event_object(event)
    if not _may_hold_json(_JSON(stored)):
        return out
    for path, value, key in strings(stored):
        found = scan(value)
        if found:
            out.append((field_name(path, key), found))
    return out


def checked(event: Event, text: str | None, allow: bool, agent: bool) -> bool:
    """A drafted event and its note's text, refused (SecretRefused) where any field holds a
    secret; but a person may allow one in the text: True then (the event records it)."""
    found = event_problems(event, text)
    if not found:
        return False
    kept = [(what, f) for what, f in found if what != TEXT]  # in the event itself: there for good
    if agent or not allow or kept:
        what, first = (kept or found)[0]
        raise refusal(what, first, agent)
    return True


def described(found: list[Found]) -> str:
    """`AWS Access Key on line 1, Private Key on line 3`: the kinds and lines, never the secret."""
    return ", ".join(f"{f.kind} on line {f.line}" for f in found)


def refusal(what: str, found: list[Found], agent: bool) -> SecretRefused:
    remove = "remove the secret (a placeholder such as <token> keeps the note's sense) and write it again"
    hint = (f"{remove}; an agent cannot allow a secret" if agent else
            f"{remove}, or, as a person who means to commit it to every clone, pass --allow-secret" if what == TEXT
            else f"{remove}: {what} is kept in an event, which stays in the log for good (`qem forget` erases a"
                 " note's text, never an event), so no one may allow a secret there")
    return SecretRefused(f"{what} holds a secret ({described(found)}): the log is committed, so it would reach"
                         " every clone and stay in git history; nothing was written", hint=hint)


def agent_may_not_allow(actor: str) -> errors.Refused:
    return errors.Refused(f"{actor}, writing as an agent, cannot pass --allow-secret: only a person may commit a"
                          " secret; nothing was written", hint="remove the secret from the text instead")


def unallowed(event: Event) -> list[tuple[str, list[Found]]]:
    """What a reader holds against an event from the log (a clone's, a dump's): each field
    holding a secret, but for those a person allowed (`"secret": "allowed"`: its text, and,
    as qem before this rule let a person allow, its reason)."""
    found = event_problems(event)
    if event.data.get(ALLOWED) == "allowed":
        found = [(what, f) for what, f in found if what != field_name(("reason",))]
    return found


def loaded(events: Iterable, texts: Iterable) -> Iterator[str]:  # type: ignore[type-arg]
    """What of loaded `events` and `texts` (a dump's, an import's, a clone's file) holds a
    secret no person allowed, each named (its field, its event and note, its kind, its
    line), never shown; events first, then texts."""
    allowed: set[str] = set()
    for event in events:
        if event.type == "created" and event.data.get(ALLOWED) == "allowed":
            allowed.add(event.note)
        for what, found in unallowed(event):
            yield (f"{what} of event {ids.shown(event.id)} (note {ids.shown(event.note)}) holds a secret"
                   f" ({described(found)})")
    for text in texts:
        found = [] if text.note in allowed else scan(text.text)
        if found:
            yield f"the text of note {ids.shown(text.note)} holds a secret ({described(found)})"


def refuse_loaded(events: Iterable, texts: Iterable) -> None:  # type: ignore[type-arg]
    """Loaded events and texts: the first secret no person allowed refuses the whole write."""
    for problem in loaded(events, texts):
        raise SecretRefused(f"{problem}: the log is committed, so it would reach every clone and stay in git"
                            " history; nothing was written",
                            hint="remove the secret from what you load (a placeholder such as <token> keeps the"
                                 " note's sense), then load it again")


def log_problems(store, fresh) -> list[str]:  # type: ignore[no-untyped-def]
    """`qem verify`'s check: every note whose text holds a secret no person allowed, and
    every field of every event that does (the log as `fresh`, an index of it read afresh,
    holds them: a clone's files are untrusted), with the file and the commit that brought
    each in git.  Streamed; one search over an event's columns spares the rest."""
    out = []
    from .index import event_from_row
    from .verify_reads import event_file, event_rows, secret_allowed, texts_with_files

    for note_id, short, text, file in texts_with_files(fresh):
        found = scan(text)
        if found and not secret_allowed(fresh, note_id):
            out.append(f"note #{short}: its text holds a secret, {described(found)}{_brought(store, file)}")
    for row in event_rows(fresh):
        if not _may_hold_json("\n".join(value for value in row if isinstance(value, str))):
            continue
        event = event_from_row(row)
        for what, found in unallowed(event):
            out.append(f"event {ids.shown(event.id)} (note {ids.shown(event.note)}): {what} holds a secret,"
                       f" {described(found)}{_brought(store, event_file(fresh, event.id), event=True)}")
    return out


def _brought(store, file: str | None, event: bool = False) -> str:  # type: ignore[no-untyped-def]
    """Where a secret came from: the commit that added its file, in git; what to do."""
    from pathlib import Path

    from ..system.gitrepo import last_change, toplevel

    path = Path(store.root, file) if file else None
    top = toplevel(store.root)
    commit = last_change(top, path, added=True, oldest=True) if top is not None and path and path.exists() else None
    where = f"added by commit {commit}" if commit else "not committed yet"
    if event:  # an event cannot be forgotten: its id is the hash of its bytes
        return (f" (in .qem/{file}, {where}; an event stays in the log: drop that commit before it is merged,"
                " or purge the file from git history, and rotate the credential: docs/SHARING.md)")
    return f" (in .qem/{file}, {where}; `qem forget` it, then purge it from git history: docs/SHARING.md)"


def files_problems(store, paths: Iterable) -> list[str]:  # type: ignore[no-untyped-def,type-arg]
    """The pre-commit hook's check (`qem check-secrets FILE...`): what of the log files
    given (those a commit adds) holds a secret no person allowed, each named with its
    file.  A file that is not a readable log file is left to `qem verify`."""
    from pathlib import Path

    from .logtree import LogFileError, records_from

    out = []
    root = Path(store.root).resolve()
    for given in paths:
        path = Path(given).resolve()
        if not path.is_relative_to(root):
            continue
        name = path.relative_to(root).as_posix()
        try:
            events, texts = records_from(name, path.read_bytes())
        except (LogFileError, OSError):
            continue
        texts = [t for t in texts if not store.secret_allowed(t.note)]
        out += [f"{Path(given).as_posix()}: {problem}" for problem in loaded(events, texts)]  # as the hook names it
    return out
