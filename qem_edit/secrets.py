"""Credentials kept out of the log: the log is committed, so a note reaches every clone,
every CI job and every fork, and git history keeps it after `qem forget`.

The detector is detect-secrets (Yelp's scanner), its high-confidence regex plugins only:
the keys and tokens whose shape names their issuer (cloud keys, private key blocks,
hosting-service and chat tokens, passwords in URLs, signed web tokens).  Its entropy and
keyword plugins are left out: they flag commit hashes, ids and ordinary words.

Importing detect-secrets costs about 0.1 s (its plugins' base imports `requests`, for
verification qem never asks for), which a write of an ordinary note should not pay.  So a
text reaches the detector only when `_MAY_HOLD` finds in it the fixed part of one of the
plugins' patterns (a superset: tests/test_secrets.py checks that every string each
plugin's patterns match passes it); the detector alone decides.

Every write passes here: `Transaction.record` (add, supersede, a check-in, the MCP tools)
and `Transaction.flush` (what `qem load` and `qem import vectr` bring).  A person who means
to commit a credential passes `--allow-secret`; the event then carries
`"secret": "allowed"` in its data, which `qem verify` and the pre-commit hook honour.  An
agent cannot allow one.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator, NamedTuple

from . import errors, ids

ALLOWED = "secret"  # the key an event carries in its data when a person allowed its secret
# detect-secrets plugins used: (module, class)
PLUGINS = (
    ("aws", "AWSKeyDetector"), ("azure_storage_key", "AzureStorageKeyDetector"),
    ("private_key", "PrivateKeyDetector"), ("github_token", "GitHubTokenDetector"),
    ("gitlab_token", "GitLabTokenDetector"), ("slack", "SlackDetector"), ("discord", "DiscordBotTokenDetector"),
    ("telegram_token", "TelegramBotTokenDetector"), ("stripe", "StripeDetector"),
    ("sendgrid", "SendGridDetector"), ("twilio", "TwilioKeyDetector"), ("mailchimp", "MailchimpDetector"),
    ("square_oauth", "SquareOAuthDetector"), ("openai", "OpenAIDetector"), ("pypi_token", "PypiTokenDetector"),
    ("npm", "NpmDetector"), ("basic_auth", "BasicAuthDetector"), ("jwt", "JwtTokenDetector"),
)
# The pre-check: for each plugin above, a looser pattern every one of its matches holds.
_MAY_HOLD = re.compile("|".join((
    r"A3T|ABIA|ACCA|AKIA|ASIA", r"AccountKey=",                # aws key id, azure storage key
    r"(?i:aws[^\n]{0,49}[0-9a-z/+]{40})",                      # aws secret key, 49 characters at most after "aws"
    r"PRIVATE KEY|PuTTY-User-Key-File",                         # private key blocks
    r"gh[pousr]_", r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-|GR1348941",                      # github, gitlab
    r"(?i:xox[abposr]-|hooks\.slack\.com)",                     # slack
    r"\.[\w-]{6}\.[\w-]{27}",                                   # discord
    r"\d{8}:[\w-]{35}",                                         # telegram
    r"[rs]k_live_", r"SG\.", r"(?:AC|SK)[a-z0-9]{32}", r"[0-9a-z]{32}-us\d", r"sq0csp-",
    r"T3BlbkFJ", r"pypi-", r"_authToken=",                      # openai, pypi, npm
    r"://[^\s@]+:[^\s@]+@",                                     # a password in a URL
    r"eyJ",                                                     # a signed web token
)))


class Found(NamedTuple):
    """A secret in a text: its kind (the detector's name for it) and its line (from 1)."""

    kind: str
    line: int


class SecretRefused(errors.Refused):
    """A text that holds a credential, refused before anything was written."""


def may_hold(text: str) -> bool:
    """Whether the detector need look at `text` at all (cheap; a superset)."""
    return _MAY_HOLD.search(text) is not None


_DETECTORS: list | None = None


def _detectors() -> list:
    global _DETECTORS
    if _DETECTORS is None:
        from detect_secrets import plugins
        from detect_secrets.plugins import (aws, azure_storage_key, basic_auth, discord, github_token,  # noqa: F401
                                            gitlab_token, jwt, mailchimp, npm, openai, private_key, pypi_token,
                                            sendgrid, slack, square_oauth, stripe, telegram_token, twilio)

        _DETECTORS = [getattr(getattr(plugins, module), name)() for module, name in PLUGINS]
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


def described(found: list[Found]) -> str:
    """`AWS Access Key on line 1, Private Key on line 3`: the kinds and lines, never the secret."""
    return ", ".join(f"{f.kind} on line {f.line}" for f in found)


def refusal(what: str, found: list[Found], agent: bool) -> SecretRefused:
    hint = ("remove the secret (a placeholder such as <token> keeps the note's sense) and write it again;"
            " an agent cannot allow a secret" if agent else
            "remove the secret (a placeholder such as <token> keeps the note's sense) and write it again,"
            " or, as a person who means to commit it to every clone, pass --allow-secret")
    return SecretRefused(f"{what} holds a secret ({described(found)}): the log is committed, so it would reach"
                         " every clone and stay in git history; nothing was written", hint=hint)


def agent_may_not_allow(actor: str) -> errors.Refused:
    return errors.Refused(f"{actor}, writing as an agent, cannot pass --allow-secret: only a person may commit a"
                          " secret; nothing was written", hint="remove the secret from the text instead")


def checked_draft(draft, data: dict, allow: bool, agent: bool) -> None:  # type: ignore[no-untyped-def]
    """A drafted event's text and reason: refused (SecretRefused) when either holds a
    secret, unless a person allows it, which `data` then records."""
    found = [("the note text", scan(draft.text)), ("the reason", scan(draft.reason))]
    found = [(what, f) for what, f in found if f]
    if not found:
        return
    if not allow or agent:
        raise refusal(found[0][0], found[0][1], agent)
    data[ALLOWED] = "allowed"


def loaded(events: Iterable, texts: Iterable) -> Iterator[str]:  # type: ignore[type-arg]
    """What of loaded `events` and `texts` (a dump's, an import's) holds a secret no
    person allowed, each named (its note, its kind, its line); events first, then texts."""
    allowed: set[str] = set()
    for event in events:
        if event.data.get(ALLOWED) == "allowed":
            allowed.add(event.note if event.type == "created" else "")
            continue
        found = scan(event.reason)
        if found:
            yield f"the reason of event {ids.shown(event.id)} (note {ids.shown(event.note)}) holds a secret ({described(found)})"
    for text in texts:
        found = [] if text.note in allowed else scan(text.text)
        if found:
            yield f"the text of note {ids.shown(text.note)} holds a secret ({described(found)})"


def refuse_loaded(events: Iterable, texts: Iterable) -> None:  # type: ignore[type-arg]
    """Loaded events and texts: the first secret no person allowed refuses the whole write."""
    for problem in loaded(events, texts):
        raise SecretRefused(f"{problem}: the log is committed, so it would reach every clone and stay in git"
                            " history; nothing was written",
                            hint="remove the note from what you load, or, as a person who means to commit it,"
                                 " pass --allow-secret")


def log_problems(store, fresh) -> list[str]:  # type: ignore[no-untyped-def]
    """`qem verify`'s check: every note whose text holds a secret no person allowed, and
    every event whose reason does (the log as `fresh`, an index of it read afresh, holds
    them: a clone's files are untrusted), with the commit that brought each in git.
    Streamed; only the texts the pre-check lets through reach the detector."""
    out = []
    from .index import reasons, secret_allowed, texts_with_files

    for note_id, short, text, file in texts_with_files(fresh):
        found = scan(text)
        if found and not secret_allowed(fresh, note_id):
            out.append(f"note #{short}: its text holds a secret, {described(found)}{_brought(store, file)}")
    for event_id, note_id, reason in reasons(fresh):
        found = scan(reason)
        if found and not secret_allowed(fresh, event_id):
            out.append(f"event {ids.shown(event_id)} (note {ids.shown(note_id)}): its reason holds a secret, {described(found)}")
    return out


def _brought(store, file: str) -> str:  # type: ignore[no-untyped-def]
    """Where the text came from: the commit that added its file, in git."""
    from .gitrepo import last_change, toplevel

    path = store.root / file
    top = toplevel(store.root)
    commit = last_change(top, path, added=True, oldest=True) if top is not None and path.exists() else None
    where = f"added by commit {commit}" if commit else "not committed yet"
    return f" (in .qem/{file}, {where}; `qem forget` it, then purge it from git history: docs/SHARING.md)"


def files_problems(store, paths: Iterable) -> list[str]:  # type: ignore[no-untyped-def,type-arg]
    """The pre-commit hook's check (`qem check-secrets FILE...`): what of the log files
    given (those a commit adds) holds a secret no person allowed, each named with its
    file.  A file that is not a readable log file is left to `qem verify`."""
    from pathlib import Path

    from .logtree import LogFileError, records_from

    out = []
    root = store.root.resolve()
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
