"""Notes in, MEMORY.md text out: the deterministic projection of the store. Pure."""

from .format import FORMAT_VERSION, Selection
from .render import assemble, assemble_bytes, assemble_chunks, for_editing, header_line, item_text, render, render_item

__all__ = ["FORMAT_VERSION", "Selection", "assemble", "assemble_bytes", "assemble_chunks", "for_editing", "header_line", "item_text", "render", "render_item"]
