"""Regular expressions compiled when first used, not when their module is imported.

A module's patterns used to be compiled as it was imported: about 65 µs each, paid by
every hook for patterns only a write, a build or a prompt uses.  `Lazy(source)` stands
where the compiled pattern stood (`_WORD_RE = Lazy(r"[A-Za-z0-9_]+")`, then
`_WORD_RE.findall(text)` as before): it compiles on the first method asked of it and
keeps that method as its own attribute, so every later call costs what a compiled
pattern's does (the build calls some of them once a record).
"""

from __future__ import annotations


class Lazy:
    """A regular expression (`re.compile(source, flags)`) compiled on first use."""

    def __init__(self, source: str, flags: int = 0) -> None:
        self.source, self.flags = source, flags

    def __getattr__(self, name: str) -> object:  # (called only for what is not kept yet)
        import re  # (here: a module whose patterns are all lazy loads no regular expression engine)

        value = getattr(re.compile(self.source, self.flags), name)
        setattr(self, name, value)
        return value
