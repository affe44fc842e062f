"""The rendering's version moves with the golden files.

The store caches each note's rendered item and trusts the cache only while
`FORMAT_VERSION` is the one it was made with, so a change to what the renderer writes
must come with a new version.  The golden files are what the renderer writes: their digest
is recorded in fixtures/golden/VERSION beside the version it belongs to, and this test
fails when either moves without the other.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from qem_edit.renderer import FORMAT_VERSION

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RECORD = FIXTURES / "golden" / "VERSION"
# read at import: the autouse fixture clears every QEM_ variable before a test runs
UPDATE = os.environ.get("QEM_UPDATE_GOLDEN") == "1"


def golden_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted((FIXTURES / "golden").glob("*.md")) + [FIXTURES / "MEMORY-749.md"]:
        if path.name == "README.md":
            continue
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def recorded() -> tuple[str, str]:
    version, digest = RECORD.read_text("ascii").split()
    return version, digest


def test_golden_files_change_only_with_a_new_format_version() -> None:
    version, digest = recorded()
    now = golden_digest()
    if UPDATE and version != FORMAT_VERSION:
        RECORD.write_text(f"{FORMAT_VERSION} {now}\n", "ascii")
        version, digest = recorded()
    assert version == FORMAT_VERSION, (
        f"FORMAT_VERSION is {FORMAT_VERSION} but the golden files were recorded for {version}:"
        " after regenerating them, record their digest with QEM_UPDATE_GOLDEN=1"
    )
    assert digest == now, (
        "the golden files changed but FORMAT_VERSION did not: bump it in"
        " renderer/version.py (stores re-render their cached items), then record with QEM_UPDATE_GOLDEN=1"
    )
