"""The mirror patched by a write's changed items equals the whole rendering, byte for byte.

renderer.patch is what keeps MEMORY.md current after `qem add` without rendering every
note again; here hypothesis draws a memory, changes it (notes added, changed, taken out,
short ids lengthened by new neighbours), and the patched old rendering must be exactly
the new one.  Bases that are not a rendering are refused (None), never patched wrongly.
"""

from __future__ import annotations

from _render_support import ID, MEMORY, note_for, note_sets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from qem_edit.renderer import render
from qem_edit.renderer.patch import ItemChange, patched
from qem_edit.renderer.render import _disagreements, item_text

from qem_edit.base import ids

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def items_of(notes) -> dict[str, tuple[str, bytes]]:  # type: ignore[no-untyped-def]
    """Each note's item as the whole rendering shows it: note id → (kind, bytes)."""
    graph = _disagreements(notes)
    shorts = {n.id: n.shown for n in notes}
    return {n.id: (n.kind, item_text(n, graph, shorts).encode("utf-8")) for n in notes}


def with_shorts(notes):  # type: ignore[no-untyped-def]
    shorts = ids.short_ids({n.id: ids.MIN_SHORT for n in notes})
    return [n._replace(short=shorts[n.id]) for n in notes]


@st.composite
def before_and_after(draw):  # type: ignore[no-untyped-def]
    before = draw(note_sets(max_notes=12))
    kept = [n for n in before if draw(st.booleans()) or draw(st.booleans())]  # most stay
    changed = [draw(note_for(n.id)) if draw(st.integers(0, 3)) == 0 else n for n in kept]
    new_ids = draw(st.lists(ID, unique=True, max_size=4))
    added = [draw(note_for(i)) for i in new_ids if i not in {n.id for n in before}]
    return before, with_shorts(changed + added)


@SETTINGS
@given(before_and_after())
def test_a_patched_rendering_is_the_whole_rendering(pair):
    before, after = pair
    base = render(before, MEMORY).encode("utf-8")
    old, new = items_of(before), items_of(after)
    changes = [
        ItemChange(old[i][0] if i in old else None, old[i][1] if i in old else None,
                   new[i][0] if i in new else None, new[i][1] if i in new else None)
        for i in sorted(set(old) | set(new)) if old.get(i) != new.get(i)
    ]
    assert patched(base, MEMORY, _all(), changes) == render(after, MEMORY).encode("utf-8")


@SETTINGS
@given(note_sets(max_notes=6))
def test_nothing_changed_is_the_same_bytes(notes):
    base = render(notes, MEMORY).encode("utf-8")
    assert patched(base, MEMORY, _all(), []) == base


@SETTINGS
@given(note_sets(max_notes=6), st.integers(0, 10_000))
def test_a_base_that_is_not_a_rendering_is_refused(notes, cut):
    base = render(notes, MEMORY).encode("utf-8")
    damaged = base[:cut % len(base)] + b"x" + base[cut % len(base):]
    result = patched(damaged, MEMORY, _all(), [])
    assert result is None or result == damaged  # refused, or the x landed inside an item's text
    assert patched(base, "an0thermem0ry", _all(), []) is None  # another memory's header
    if notes:
        kind, item = items_of(notes)[notes[0].id]
        gone = base.replace(item, b"", 1)
        assert patched(gone, MEMORY, _all(), [ItemChange(kind, item, None, None)]) is None  # not there


def _all():  # type: ignore[no-untyped-def]
    from qem_edit.renderer import Selection

    return Selection()


@SETTINGS
@given(before_and_after(), st.sampled_from([0, 16]))
def test_a_plan_over_a_base_read_in_place_is_the_whole_rendering(pair, bisection_reads):
    """patch_plan, the base read in windows (each item found by bisection) or, where the
    bisections would read more than a section holds, the section held once: the same bytes."""
    from qem_edit.renderer import patch
    from qem_edit.renderer.patch import SectionChange, headings_in, patch_plan

    before, after = pair
    base = render(before, MEMORY).encode("utf-8")
    old, new = items_of(before), items_of(after)
    changes: dict[str, tuple[list[str], list[bytes]]] = {}
    for i in sorted(set(old) | set(new)):
        if old.get(i) == new.get(i):
            continue
        if i in old:
            changes.setdefault(old[i][0], ([], []))[0].append(i)
        if i in new:
            changes.setdefault(new[i][0], ([], []))[1].append(new[i][1])

    def read(at: int, size: int) -> bytes:
        return base[at:at + size]

    kept, patch._BISECTION_READS = patch._BISECTION_READS, bisection_reads  # 0: never held
    try:
        pieces = patch_plan(read, len(base), headings_in([base]), MEMORY, _all(),
                            {k: SectionChange(g, n) for k, (g, n) in changes.items()})
    finally:
        patch._BISECTION_READS = kept
    assert pieces is not None
    made = b"".join(p if isinstance(p, bytes) else base[p[0]:p[1]] for p in pieces)
    assert made == render(after, MEMORY).encode("utf-8")
