"""Whether a note an agent writes is user-stated: the user's own words, found in what they typed."""

from __future__ import annotations

from ..base import errors
from ..system.ledger import RECENT_HOURS, recent_prompts
from ..system.workspace import Workspace
from .acts import note_text

QUOTED_AT_LEAST = 20  # characters of a text found whole in what the user typed, to make it user-stated unasked


def provenance_of(text: str, quote: str | None, place: Workspace) -> str:
    """An agent's note's provenance (the MCP server's `add` and `supersede`): what the
    user typed in this clone's recent sessions, as qem's prompt hook heard it, read and
    judged by `judged`."""
    return judged(text, quote, recent_prompts(place.store_path))


def judged(text: str, quote: str | None, typed: list[str] | None = None) -> str:
    """`user-stated` when `quote` (the user's own words) is found verbatim in the note's
    text, makes up at least half of it, and (where qem's prompt hook heard the user:
    `typed`) is in what the user typed; or, with no quote, when the whole text is in what
    the user typed.  `agent` otherwise.  A quote that does not bind is refused, never
    silently dropped."""
    heard = [_spaced(p) for p in typed or ()]
    if quote is None:
        said = _spaced(note_text(text))
        return "user-stated" if len(said) >= QUOTED_AT_LEAST and any(said in p for p in heard) else "agent"
    body, words = note_text(text), quote.strip()
    if not words:
        raise errors.BadInput("user_quote is empty; leave it out for provenance agent")
    if words not in body:
        raise errors.BadInput("user_quote is not in the text verbatim, so it cannot make the note user-stated;"
                              " quote the user's words exactly, or leave user_quote out (provenance agent)")
    if 2 * len(words) < len(body):
        raise errors.BadInput("user_quote makes up less than half of the text: a user-stated note transcribes"
                              " the user's words; write the quote alone, or leave user_quote out (provenance agent)")
    if heard and not any(_spaced(words) in p for p in heard):
        raise errors.BadInput("user_quote is not in what the user typed in this project's sessions of the last"
                              f" {RECENT_HOURS} hours (as qem's prompt hook heard it): quote their words exactly,"
                              " or leave user_quote out (provenance agent)")
    return "user-stated"


def _spaced(text: str) -> str:
    return " ".join(text.split())
