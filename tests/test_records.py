"""A Record is a NamedTuple: the same class, made for less (qem_edit/base/records.py).

Each behaviour a NamedTuple has is asserted of a Record and of the typing.NamedTuple
written the same way, side by side, so a difference in either fails here."""

from __future__ import annotations

import copy
import inspect
import pickle
import re
from pathlib import Path
from typing import Mapping, NamedTuple, get_type_hints

import pytest

from qem_edit.base.records import Record

ROOT = Path(__file__).resolve().parent.parent


class ByTyping(NamedTuple):
    """A sample."""

    name: str
    kind: str | None
    tags: frozenset[str] = frozenset()
    data: Mapping[str, object] = {}
    count: int = 0

    @property
    def shout(self) -> str:
        return self.name.upper()

    def twice(self) -> int:
        return 2 * self.count


class ByRecord(Record):
    """A sample."""

    name: str
    kind: str | None
    tags: frozenset[str] = frozenset()
    data: Mapping[str, object] = {}
    count: int = 0

    @property
    def shout(self) -> str:
        return self.name.upper()

    def twice(self) -> int:
        return 2 * self.count


class One(Record):
    only: int


class Empty(Record):
    pass


BOTH = (ByTyping, ByRecord)


@pytest.mark.parametrize("cls", BOTH)
def test_fields_defaults_and_annotations(cls: type) -> None:
    assert cls._fields == ("name", "kind", "tags", "data", "count")
    assert cls.__match_args__ == cls._fields
    assert cls._field_defaults == {"tags": frozenset(), "data": {}, "count": 0}
    assert cls.__doc__ == "A sample."
    assert cls.__module__ == __name__ and cls.__qualname__ == cls.__name__
    assert get_type_hints(cls)["kind"] == (str | None)
    assert list(get_type_hints(cls)) == list(cls._fields)  # the fields', and nothing else's
    assert issubclass(cls, tuple) and cls.__slots__ == ()


@pytest.mark.parametrize("cls", BOTH)
def test_made_read_and_compared_as_a_tuple(cls: type) -> None:
    a = cls("x", None, count=3)
    assert tuple(a) == ("x", None, frozenset(), {}, 3)
    assert (a.name, a.kind, a.count, a[0], a[-1]) == ("x", None, 3, "x", 3)
    assert a == cls("x", None, frozenset(), {}, 3) == ("x", None, frozenset(), {}, 3)
    assert a.shout == "X" and a.twice() == 6
    assert hash(cls("x", "k", frozenset(), (), 1)) == hash(("x", "k", frozenset(), (), 1))
    match a:
        case cls(name, kind):  # type: ignore[misc]
            assert (name, kind) == ("x", None)
        case _:
            pytest.fail("a positional class pattern did not match")
    with pytest.raises(AttributeError):
        a.name = "y"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        a.other = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("cls", BOTH)
def test_the_namedtuple_methods(cls: type) -> None:
    a = cls("x", "k", count=1)
    b = a._replace(count=2, kind=None)
    assert type(b) is cls and b == cls("x", None, count=2) and a.count == 1
    assert a._asdict() == {"name": "x", "kind": "k", "tags": frozenset(), "data": {}, "count": 1}
    assert cls._make(["y", "z", frozenset(), {}, 5]) == cls("y", "z", count=5)
    assert type(cls._make(iter(["y", "z", frozenset(), {}, 5]))) is cls


def test_the_repr_and_the_errors_are_the_namedtuples() -> None:
    def outcome(call):  # type: ignore[no-untyped-def]
        try:
            return repr(call())
        except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
            return type(exc).__name__ + ": " + re.sub(r"By(Typing|Record)", "C", str(exc))

    calls = (
        lambda cls: cls("x", "k"),
        lambda cls: cls("x", "k", data={"a": 1})._replace(count=4),
        lambda cls: cls("x"),
        lambda cls: cls("x", "k", frozenset(), {}, 1, 2),
        lambda cls: cls("x", "k", nope=1),
        lambda cls: cls("x", "k", name="y"),
        lambda cls: cls("x", "k")._replace(nope=1),
        lambda cls: cls._make(["x"]),
    )
    for call in calls:
        by_typing = outcome(lambda: call(ByTyping)).replace("ByTyping", "C")
        by_record = outcome(lambda: call(ByRecord)).replace("ByRecord", "C")
        assert by_record == by_typing


@pytest.mark.parametrize("cls", BOTH)
def test_pickled_and_copied(cls: type) -> None:
    a = cls("x", "k", frozenset({"t"}), {"a": [1]}, 3)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(a, protocol))
        assert back == a and type(back) is cls
    deep = copy.deepcopy(a)
    assert deep == a and deep.data is not a.data and type(copy.copy(a)) is cls


class Equal(NamedTuple):
    x: int

    def __eq__(self, other: object) -> bool:
        return tuple.__eq__(self, other)


class EqualRecord(Record):
    x: int

    def __eq__(self, other: object) -> bool:
        return tuple.__eq__(self, other)


@pytest.mark.parametrize("cls", (Equal, EqualRecord))
def test_an_eq_of_its_own_keeps_the_tuples_hash(cls: type) -> None:
    assert hash(cls(1)) == hash((1,)) and cls(1) == (1,)


@pytest.mark.parametrize("cls", BOTH)
def test_a_new_has_the_fields_as_parameters(cls: type) -> None:
    import inspect

    parameters = inspect.signature(cls).parameters
    assert list(parameters) == list(cls._fields) and parameters["count"].default == 0
    assert cls.__new__.__annotations__.keys() == set(cls._fields)
    if hasattr(copy, "replace"):  # Python 3.13
        assert copy.replace(cls("x", None), count=2) == cls("x", None, count=2)


def test_copy_replace_is_replace() -> None:
    """What `copy.replace` calls (Python 3.13, where a NamedTuple has it)."""
    assert ByRecord("x", None).__replace__(count=2) == ByRecord("x", None, count=2)


def test_one_field_and_none() -> None:
    assert tuple(One(4)) == (4,) and One(only=4).only == 4 and repr(One(4)) == "One(only=4)"
    assert tuple(Empty()) == () and repr(Empty()) == "Empty()"


def test_a_record_is_refused_what_a_namedtuple_is() -> None:
    with pytest.raises(TypeError, match="Non-default namedtuple field b cannot follow default field a"):
        class Bad(Record):
            a: int = 0
            b: int

    with pytest.raises(AttributeError, match="Cannot overwrite NamedTuple attribute _replace"):
        class Worse(Record):
            a: int

            def _replace(self):  # type: ignore[no-untyped-def]
                return self

    with pytest.raises(TypeError, match="only inherit from Record"):
        class Mixed(Record, dict):  # type: ignore[misc]
            a: int

    with pytest.raises(ValueError, match="'_a' cannot be a record's field name"):
        class Private(Record):
            _a: int


def test_no_product_module_makes_a_typing_namedtuple() -> None:
    """Each product record is a Record, so none pays typing's price at import again."""
    made = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("qem_edit", "renderer", "reconciler")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if re.match(r"\s*class \w+\((typing\.)?NamedTuple\b", line) or re.search(r"\bNamedTuple\(\s*['\"]", line)
    ]
    assert made == []


def written_new(most: int = 40) -> str:
    """qem_edit/base/record_new.py as it is written: a record's `__new__` for each number of
    fields up to `most`, its parameters f0, f1, ... (records renames them for each class)."""
    import textwrap

    out = ['"""A record\'s `__new__` for each number of fields, compiled with the package.', "",
           "Up to MOST fields, compiled with the package rather than when a record class is made",
           "(qem_edit.base.records renames it for each class): compiling one (`eval`) costs 40-120 us,",
           "and every command and hook makes record classes of about ten numbers of fields, half a",
           "millisecond before it does anything.",
           "Written by tests/test_records.py's `written_new()` (`python tests/test_records.py` writes",
           'it), which a test holds this file to."""', "",
           "_tuple_new = tuple.__new__  # (what each code calls: records gives it this name in its globals)", "",
           f"MOST = {most}", "NEW = ("]
    for count in range(most + 1):
        params = [f"f{i}" for i in range(count)]
        head = "lambda " + ", ".join(["_cls", *params]) + ":"
        made = f"_tuple_new(_cls, ({', '.join(params)}{',' if count == 1 else ''}))"
        out += textwrap.wrap(f"{head} {made},", 110, initial_indent="    ", subsequent_indent="        ",
                             break_long_words=False, break_on_hyphens=False)
    return "\n".join(out + [")", ""])


def test_the_compiled_news_are_the_ones_written() -> None:
    """record_new.py holds what written_new() writes (`python tests/test_records.py` writes
    it), and every number of fields up to its MOST, and one past it (compiled then), makes
    a record as a NamedTuple of as many fields is made."""
    from collections import namedtuple

    from qem_edit.base import record_new

    assert Path(record_new.__file__).read_text(encoding="utf-8") == written_new()
    for count in range(record_new.MOST + 2):
        fields = [f"x{i}" for i in range(count)]
        made = type(Record)("Made", (Record,), {"__annotations__": dict.fromkeys(fields, "int"),
                                                "__module__": __name__})
        want = namedtuple("Made", fields)
        values = list(range(count))
        assert made(*values) == want(*values) and tuple(made(**dict(zip(fields, values)))) == tuple(values)
        assert list(inspect.signature(made).parameters) == fields


if __name__ == "__main__":  # writes qem_edit/base/record_new.py
    from qem_edit.base import record_new as _written

    Path(_written.__file__).write_text(written_new(), encoding="utf-8")
