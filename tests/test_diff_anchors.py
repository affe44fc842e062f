"""`qem diff` and the code a change edits: the stale flags a code change caused (a
`stale_flagged` event whose data carries `drift`) in a group of their own."""

from __future__ import annotations

from qem_edit.diff import DRIFTED, changes_of
from qem_edit.model import Event, drift_of


# -- which stale flags are drift: the data's shape, without a repository ----------------------


OID_A, OID_B = "a" * 40, "b" * 64


def flag(data: dict) -> Event:
    return Event("e" * 26, "n" * 26, "stale_flagged", "2026-07-27T10:00:00Z", "hook", "drifted", data=data)


def test_only_a_well_formed_drift_makes_a_drift_flag():
    good = {"drift": [{"path": "src/a.py", "was": OID_A, "now": OID_B}, {"path": "b", "was": OID_B, "now": None}]}
    assert drift_of(good) == (("src/a.py", OID_A, OID_B), ("b", OID_B, None))
    assert [c.group for c in changes_of([flag(good)], {})] == [DRIFTED]
    for bad in ({}, {"drift": []}, {"drift": "src/a.py"}, {"drift": [{"path": "src/a.py", "was": OID_A}]},
                {"drift": [{"path": "../out", "was": OID_A, "now": None}]},
                {"drift": [{"path": "a", "was": OID_A.upper(), "now": None}]},
                {"drift": [{"path": "a", "was": OID_A, "now": "b" * 12}]},
                {"drift": [good["drift"][0], "a"]}):
        assert drift_of(bad) == (), bad
        assert [c.group for c in changes_of([flag(bad)], {})] == ["stale_flagged"], bad
