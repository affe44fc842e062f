"""Notes in, MEMORY.md text out: the deterministic projection of the store, pure.

Its names are loaded when first asked for (module `__getattr__`): a command that reads
only the index's cached items, or asks only the rendering's version, imports neither
the renderer nor the grammar's regular expressions."""

import sys
from types import ModuleType

from .version import FORMAT_VERSION

_HOME = {"Selection": "format", "assemble": "render", "assemble_bytes": "render", "assemble_chunks": "render",
         "for_editing": "render", "header_line": "render", "item_text": "render", "render": "render",
         "render_item": "render"}

__all__ = ["FORMAT_VERSION", *_HOME]


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{home}", fromlist=[name]), name)
    globals()[name] = value
    return value


class _Package(ModuleType):
    """This package, whose `render` is the function, as when it imported it first: the
    import system names a submodule on its package once it is loaded (render.py, by
    whichever import loads it), which would make `render` the module."""

    def __setattr__(self, name: str, value: object) -> None:
        if name == "render" and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
