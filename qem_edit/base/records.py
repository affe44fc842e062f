"""Record: a NamedTuple class made for a fraction of what `typing.NamedTuple` costs at import.

Every record here is a NamedTuple (a tuple, its fields named, defaulted and annotated),
and every command and hook makes thirty to forty of their classes before it does
anything: `typing.NamedTuple` compiles each field's annotation (a string, under `from
__future__ import annotations`) into a `ForwardRef`, then `collections.namedtuple`
compiles five methods for each class.  Together about 100-200 us a class: a few
milliseconds of every hook an agent runs before its edits.  A `Record` subclass is the
same tuple class, made the way `typing.NamedTupleMeta` makes one, but with the
annotations kept as written (`typing.get_type_hints` still resolves them) and the
methods every record shares written once, here, rather than compiled per class: only
`__new__`, whose signature is the fields', is made for each, from code compiled with the
package for its number of fields (qem_edit.base.record_new).

    class Move(Record):
        verb: str
        target: str | None = None

        @property
        def shown(self) -> str: ...

What a record is and does is the NamedTuple's: `_fields`, `_field_defaults`, `_make`,
`_replace`, `_asdict`, its repr, equality, hashing, pickling, `__match_args__`
(tests/test_records.py holds each against `typing.NamedTuple`).
"""

from __future__ import annotations

import sys
from keyword import iskeyword
from operator import itemgetter
from types import CodeType, FunctionType

from . import record_new

_UNEXPECTED = TypeError if sys.version_info >= (3, 13) else ValueError  # what namedtuple's _replace raises there
_PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults",
                         "_make", "_replace", "_asdict", "_source"})
_SPECIAL = frozenset({"__module__", "__name__", "__annotations__"})

try:  # the C accessor collections.namedtuple uses (a property of itemgetter where it is absent)
    from _collections import _tuplegetter
except ImportError:  # pragma: no cover - other interpreters
    def _tuplegetter(index: int, doc: str) -> property:  # type: ignore[misc]
        return property(itemgetter(index), doc=doc)


class _Shared(tuple):
    """The methods every record class shares: collections.namedtuple's, reading the class's
    own `_fields` rather than compiled for each class."""

    __slots__ = ()
    # (not annotated: typing.get_type_hints reads a record's annotations up its classes, and
    # a NamedTuple's hold only its fields)
    _fields = ()
    _field_defaults = {}  # type: ignore[var-annotated]

    @classmethod
    def _make(cls, iterable):  # type: ignore[no-untyped-def]
        """Make a new record from a sequence or iterable."""
        result = tuple.__new__(cls, iterable)
        if len(result) != len(cls._fields):
            raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(result)}")
        return result

    def _replace(self, /, **kwds):  # type: ignore[no-untyped-def]
        """Return a new record replacing specified fields with new values."""
        result = self._make(map(kwds.pop, self._fields, self))
        if kwds:
            raise _UNEXPECTED(f"Got unexpected field names: {list(kwds)!r}")
        return result

    def __repr__(self) -> str:
        """Return a nicely formatted representation string."""
        inner = ", ".join(f"{name}={value!r}" for name, value in zip(self._fields, self))
        return f"{self.__class__.__name__}({inner})"

    def _asdict(self) -> dict[str, object]:
        """Return a new dict which maps field names to their values."""
        return dict(zip(self._fields, self))

    def __getnewargs__(self) -> tuple[object, ...]:
        """Return self as a plain tuple.  Used by copy and pickle."""
        return tuple(self)

    __replace__ = _replace  # copy.replace (Python 3.13), as a NamedTuple has it


def _new(name: str, annotations: dict[str, object], defaults: tuple[object, ...]):  # type: ignore[no-untyped-def]
    """The class's `__new__`, its parameters the fields (compiled, as namedtuple's is: a
    record is made as fast as a tuple; a generic `*args` would be slower for every one).
    The code, one for each number of fields (compiled with the package: record_new), is
    given each class's field names (`CodeType.replace`): nothing is compiled a class."""
    fields = tuple(annotations)
    for field in fields:
        if not field.isidentifier() or iskeyword(field) or field.startswith("_"):
            raise ValueError(f"{name}: {field!r} cannot be a record's field name")
    params = ", ".join(fields)
    template = _TEMPLATES.get(len(fields))
    if template is None:
        template = _TEMPLATES[len(fields)] = _template(len(fields))
    code = template.replace(co_varnames=("_cls", *fields), co_name="__new__", co_qualname=f"{name}.__new__")
    new = FunctionType(code, _NEW_GLOBALS, "__new__", defaults or None)
    new.__annotations__ = dict(annotations)
    new.__doc__ = f"Create new instance of {name}({params})"
    return new


def _template(count: int) -> CodeType:
    """`__new__`'s code for `count` fields, its parameters named f0, f1, ... (renamed per
    class): compiled with the package up to record_new.MOST, else compiled here."""
    if count <= record_new.MOST:
        return record_new.NEW[count].__code__
    params = ", ".join(f"f{i}" for i in range(count))
    made = f"_tuple_new(_cls, ({params}{',' if count == 1 else ''}))"
    return eval(f"lambda _cls{', ' if count else ''}{params}: {made}", _NEW_GLOBALS).__code__  # noqa: S307 (no input)


_NEW_GLOBALS = {"_tuple_new": tuple.__new__, "__builtins__": {}, "__name__": "records"}
_TEMPLATES: dict[int, CodeType] = {}


class _RecordMeta(type):
    def __new__(mcs, name: str, bases: tuple[type, ...], ns: dict[str, object]):  # type: ignore[no-untyped-def]
        if not bases:  # Record itself
            return super().__new__(mcs, name, bases, ns)
        if bases != (Record,):
            raise TypeError("a record can only inherit from Record")
        if "__annotations__" not in ns and "__annotate__" in ns:  # (annotations evaluated lazily: Python 3.14)
            raise TypeError(f"record {name}: its module needs `from __future__ import annotations`")
        annotations: dict[str, object] = ns.get("__annotations__", {})  # type: ignore[assignment]
        fields = tuple(annotations)
        defaulted = [field for field in fields if field in ns]
        if defaulted and fields[-len(defaulted):] != tuple(defaulted):
            first = defaulted[0]
            later = next(f for f in fields[fields.index(first):] if f not in ns)
            raise TypeError(f"Non-default namedtuple field {later} cannot follow default field {first}")
        defaults = tuple(ns[field] for field in defaulted)
        body: dict[str, object] = {
            "__doc__": f"{name}({', '.join(fields)})", "__slots__": (), "_fields": fields,
            "_field_defaults": dict(zip(defaulted, defaults)), "__new__": _new(name, annotations, defaults),
            "__match_args__": fields, "__annotations__": annotations, "__module__": ns["__module__"],
        }
        for index, field in enumerate(fields):
            body[field] = _tuplegetter(index, f"Alias for field number {index}")
        for key, value in ns.items():
            if key in _PROHIBITED:
                raise AttributeError("Cannot overwrite NamedTuple attribute " + key)
            if key not in _SPECIAL and key not in fields:
                body[key] = value
        if "__eq__" in ns and "__hash__" not in ns:  # typing sets a body's __eq__ after the class, keeping tuple's hash
            body["__hash__"] = tuple.__hash__
        return type(name, (_Shared,), body)


TYPE_CHECKING = False  # (typing's flag, without importing typing)
if TYPE_CHECKING:  # a type checker sees the NamedTuple each record is
    from typing import NamedTuple as Record
else:
    class Record(metaclass=_RecordMeta):
        """Subclass it, with annotated fields, for a NamedTuple class (this module's doc)."""
