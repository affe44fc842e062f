"""qem: an agent's memory as an append-only event log, legible and editable as MEMORY.md."""

__version__ = "0.1.0"
