"""Edited MEMORY.md text in, a plan of events and conflicts out, pure."""
