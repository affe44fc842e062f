"""Notes in, MEMORY.md text out: the deterministic projection of the store. Pure."""

from .format import Scope
from .render import header_line, render, render_item

__all__ = ["Scope", "header_line", "render", "render_item"]
