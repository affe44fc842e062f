"""The rendering's version, which every index asks without compiling the grammar.

The rendering's version, apart from the grammar (format.py) so that what only asks it
(every command's index, to know whether its cached items still hold) compiles none of
the grammar's regular expressions."""

# The store caches each note's rendered item and uses the cache only while this matches,
# so it changes with every change to what the renderer writes; fixtures/golden/VERSION
# records the golden files' digest for it, and a test fails when they change without it
# (QEM_UPDATE_GOLDEN=1 records a new version's digest).
FORMAT_VERSION = "10"
