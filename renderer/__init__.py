"""Notes in, MEMORY.md text out: the deterministic projection of the store. Pure."""

from __future__ import annotations

import zlib
from pathlib import Path

from .format import Scope
from .render import assemble, assemble_bytes, header_line, item_text, render, render_item

# Identifies the rendering code (and the note model it renders): the store caches each
# note's rendered item, and a cache made by other code is not used (the next write
# rebuilds it).
_SOURCES = (
    Path(__file__).parent / "format.py",
    Path(__file__).parent / "render.py",
    Path(__file__).parent.parent / "qem_edit" / "model.py",  # the Note the items are made of
)
RENDER_VERSION = "%08x" % zlib.crc32(b"".join(path.read_bytes() for path in _SOURCES))

__all__ = ["RENDER_VERSION", "Scope", "assemble", "assemble_bytes", "header_line", "item_text", "render", "render_item"]
