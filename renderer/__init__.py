"""Notes in, MEMORY.md text out: the deterministic projection of the store. Pure."""

from __future__ import annotations

import hashlib
from pathlib import Path

from .format import Scope
from .render import assemble, assemble_bytes, header_line, item_text, render, render_item

# Identifies the rendering code: the store caches each note's rendered item, and a cache
# made by other rendering code is not used (and is rebuilt on the next write).
RENDER_VERSION = hashlib.sha256(
    b"".join((Path(__file__).parent / name).read_bytes() for name in ("format.py", "render.py"))
).hexdigest()[:16]

__all__ = ["RENDER_VERSION", "Scope", "assemble", "assemble_bytes", "header_line", "item_text", "render", "render_item"]
