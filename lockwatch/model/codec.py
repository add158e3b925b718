"""A lossless JSON codec for the model's dataclasses: `--record` and `replay`.

Pure: values in, JSON-able values (or bytes) out; the caller owns the files.

The format, one JSON value per change set:

- a registered dataclass is ``{"~": "TypeName", "field": value, ...}``, in field
  order; a field equal to its default is left out and restored on decode, and a
  field the decoder does not know is ignored (recordings from newer versions);
- a datetime is ``{"~t": "2026-11-21T12:00:00.000123Z"}`` (RFC 3339 for aware
  datetimes; a naive one keeps no offset, so it comes back naive);
- a float that JSON cannot hold is ``{"~f": "nan" | "inf" | "-inf"}``;
- a record that occurs more than once (by identity: the PgBackend behind a
  session's thousands of pg_locks rows, a shared Verdict or ProcessFacts) is
  written once, in a table, and referred to as ``{"~r": n}``; the whole value is
  then ``{"~s": [record, ...], "~v": value}``, and decoding shares the object again;
- a field typed ``Any`` (`Lock.content`: whatever JSON or text a lock file held,
  hostile included) is opaque: written as is and never walked on decode, so a
  ``"~"`` key inside it is just a key;
- outside typed fields: a registered enum is ``{"~e": "State", "v": "active"}``, a
  dict with a key starting with ``~`` is ``{"~m": {...}}``, arrays decode as tuples.

`dumps_line` also copes with what orjson refuses: a string with lone surrogates (a
non-UTF-8 file name) becomes ``{"~x": "<unicode_escape text>"}``, and an opaque
value nested too deeply for one line is written as JSON text under ``"field~json"``.
Field types come from the dataclasses' annotations: tuples come back as tuples,
enums as their enum, and every value is checked against its field's type. Bad
input (a line cut short, corrupt or hostile: wrong types, dangling references,
nesting past the stack) is a `CodecError` saying what and where, never another
exception.

Why hand-written, and not msgspec (or cattrs + orjson), measured by
`benchmarks/bench_codec.py` on one change set of 50,025 Postgres locks (625
sessions x 80 advisory locks and 25 waiters, built by the source's `to_locks` and
`judge`, as a feed emits them), each side with the collector paused, medians of
5 rounds, 2 cores; the ratios moved by at most 0.1 over three runs:

=================  ======  ======  ======  ==========  =========  ============
side               encode  decode  line    objects MB  GIL held   keeps inf,
                                           (RSS peak)  ms, enc /  NaN, non-
                                                       dec        UTF-8 names
=================  ======  ======  ======  ==========  =========  ============
this codec         493 ms  1.22 s  57 MB   150 (410)   112 / 410  yes
msgspec.json       0.79x   0.77x   2.63x   246 (259)   388 / 300  no
msgspec.msgpack    0.52x   0.74x   1.99x   246 (259)   285 / 338  names: no
cattrs + orjson    2.46x   2.81x   2.65x   278 (853)   441 / 667  no
=================  ======  ======  ======  ==========  =========  ============

msgspec.json is 15-25% faster (msgpack encodes twice as fast), at a smaller job;
the rest of this codec's job is what costs:

- no sharing: each of a session's rows is written with its whole PgBackend,
  Holder and Verdict (2.6x the bytes; a 50,000-lock poll is a 149 MB line), and
  read back as 50,025 backends where there were 650 (246 MB of objects, not 150);
  making equal records one object again after decoding ("msgspec.json +
  interning" in the benchmark: attributes of frozen objects set in place) costs a
  third to a half of the decode gain, and sharing in the bytes would take a Python
  pass over every record before encoding: the pass this codec is;
- defaults are written out: `omit_defaults` is for msgspec's Structs, and the
  model stays frozen dataclasses;
- values are lost: JSON's NaN and infinities are written as null (an infinite ttl
  comes back None; a NaN in a plain `float` field makes the line unreadable), and
  one string with lone surrogates (a lock file name that is not UTF-8, which the
  file source keeps as surrogate escapes) fails the whole change set;
- one C call holds the GIL for the whole encode: 0.39 s at 50,000 locks, taken
  from the dashboard's event loop while the recorder's thread writes, past the
  0.25 s a key may take; here the Python hands the GIL over every 5 ms and only
  the final orjson.dumps holds it (~0.1 s);
- the format would change, and recording/1 files must stay readable: the decoding
  half of this module would stay beside a second format, not go.

Where msgspec is ahead is the peak while decoding (this codec holds the whole
parsed line while it builds the objects): a replay matter, not a live one.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from enum import Enum
from typing import Any, Final, cast

import orjson

from lockwatch import collector
from lockwatch.model.compact import plain
from lockwatch.model.facts import Facts
from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.model.process import ProcessFacts
from lockwatch.model.status import ScanError, SourceStatus
from lockwatch.model.verdict import State, Verdict

__all__ = [
    "CodecError",
    "decode",
    "dumps_line",
    "encode",
    "legacy_fields",
    "legacy_regroup",
    "loads_line",
    "register",
    "register_base",
]


class CodecError(ValueError):
    """A value that cannot be encoded, or data that is not a valid recording.

    `reason` says what is wrong and `path` where (``ChangeSet.upserts[3].lock.pid``).
    """

    def __init__(self, reason: str, path: tuple[str, ...] = ()) -> None:
        self.reason = reason
        self.path = path
        where = "".join(path)
        super().__init__(f"{where}: {reason}" if where else reason)

    def within(self, segment: str) -> CodecError:
        """The same error, one level further out."""
        return CodecError(self.reason, (segment, *self.path))


# Keys of the tagged forms.
_RECORD: Final = "~"
_REF: Final = "~r"
_SHARED: Final = "~s"
_VALUE: Final = "~v"
_TIME: Final = "~t"
_FLOAT: Final = "~f"
_ENUM: Final = "~e"
_MAP: Final = "~m"
_TEXT: Final = "~x"
_JSON_SUFFIX: Final = "~json"

# orjson writes at most 254 levels of nesting; keep opaque values well inside it.
_INLINE_DEPTH: Final = 200

_Enc = Callable[[Any, "_EncodeContext"], Any]
_Dec = Callable[[Any, "_DecodeContext"], Any]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<required>"


_REQUIRED: Final = _Missing()
_ABSENT: Final = _Missing()


# --- registry -------------------------------------------------------------------

_records: dict[str, type] = {}
_enums: dict[str, type[Enum]] = {}
# Base classes a field may be typed with (`Lock.facts: Facts | None`): any
# registered record of a subclass is read there, and nothing else.
_bases: set[type] = set()
# Fields older recordings have that a record no longer does, by record class:
# old name -> (the field it now feeds, how its decoded value becomes that one's).
_legacy: dict[type, dict[str, tuple[str, Callable[[Any], Any]]]] = {}
# Older recordings' fields that now feed several of a record's at once, by
# record class: (the old names, how the record's decoded fields and the old
# ones become the fields to build it with).
Regroup = Callable[[dict[str, Any], dict[str, Any], dict[str, Any]], None]
_regrouped: dict[type, tuple[tuple[str, ...], Regroup]] = {}
_plans: dict[type, _Plan] = {}
_plans_named: dict[str, _Plan] = {}  # compiled plans by record name, for decoding


def register(*classes: type) -> None:
    """Make dataclasses (and enums, for untyped positions) known by class name.

    Registering a class again is harmless; a different class under a name already
    taken is an error (recordings name types by their class name alone).
    """
    for cls in classes:
        if isinstance(cls, type) and issubclass(cls, Enum):
            table: dict[str, Any] = _enums
        elif isinstance(cls, type) and dataclasses.is_dataclass(cls):
            table = _records
        else:
            raise TypeError(f"{cls!r} is neither a dataclass nor an enum")
        name = cls.__name__
        taken = table.get(name)
        if taken is not None and _qualified(taken) != _qualified(cls):
            raise ValueError(
                f"codec type name {name!r} is taken by {_qualified(taken)}, not {_qualified(cls)}"
            )
        table[name] = cls  # the same class again, or a reloaded module's new one
    _plans.clear()
    _plans_named.clear()


def register_base(*classes: type) -> None:
    """Let fields typed with these (non-dataclass) base classes hold any
    registered record that is an instance of them."""
    _bases.update(classes)
    _plans.clear()
    _plans_named.clear()


def legacy_fields(cls: type, fields: dict[str, tuple[str, Callable[[Any], Any]]]) -> None:
    """Read recordings that still have fields `cls` no longer has: each old field's
    value, decoded as any value is, is converted into the field it now feeds
    (when the record does not have that field itself)."""
    _legacy.setdefault(cls, {}).update(fields)
    _plans.clear()
    _plans_named.clear()


def legacy_regroup(cls: type, old: tuple[str, ...], build: Regroup) -> None:
    """Read recordings whose `cls` records had fields `old` that now live
    elsewhere (in another record a field of it holds): `build(fields, olds, raw)`
    gets the record's decoded fields, the old ones present (decoded as any value
    is) and the same as written (a shared record's own dict for a reference: what
    a record type has since lost, its decoded form no longer holds), and completes
    the fields in place. It is called for every record of `cls` read."""
    _regrouped[cls] = (old, build)
    _plans.clear()
    _plans_named.clear()


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """How to write and read one dataclass: two functions generated from its fields."""

    cls: type
    name: str
    encode: _Enc
    decode: Callable[[dict[str, Any], _DecodeContext], Any]
    opaque: frozenset[str]


def _plan_for(cls: type) -> _Plan:
    plan = _plans.get(cls)
    if plan is None:
        if _records.get(cls.__name__) is not cls:
            raise CodecError(f"{cls.__name__} is not registered with the codec")
        plan = _plans[cls] = _plans_named[cls.__name__] = _compile_plan(cls)
    return plan


def _plan_named(name: Any) -> _Plan:
    if type(name) is not str:
        raise CodecError(f"a record's type name must be a string, got {_show(name)}")
    cls = _records.get(name)
    if cls is None:
        raise CodecError(f"unknown record type {name!r}")
    return _plans.get(cls) or _plan_for(cls)


@dataclasses.dataclass(frozen=True, slots=True)
class _Compiled:
    """What a field type compiles to."""

    enc: _Enc | None  # None: the value is JSON already
    dec: _Dec  # checks and converts what JSON parsers return
    # An expression over `v`, true when `v` needs no decoding (None: always decode).
    fast: str | None = None
    # An expression writing `@v` without a call where it can (`@e` is `enc`).
    inline: str = "@e(@v, context)"
    # The decoder to call once `fast` is false, when it can skip that check (None: `dec`).
    slow: _Dec | None = None


_AS_IS = "@v"
# A `Row` or `Document` is written as the dict it stands for (and read back as one).
_OPAQUE: Final = _Compiled(lambda v, context: plain(v), lambda v, context: v)


def _compile_plan(cls: type) -> _Plan:
    """Generate straight-line code for the class: a loop over its fields costs
    several times more, and a poll can hold 10,000 locks."""
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError, AttributeError):
        hints = {}  # e.g. a class defined in a function: its fields are read generically
    name = cls.__name__
    scope = _plan_scope(cls, name)
    required = ["'~': NAME"]
    optional: list[str] = []
    reads: list[str] = []
    opaque: set[str] = set()
    for i, spec in enumerate(dataclasses.fields(cast(Any, cls))):
        if not spec.init:
            continue
        field = spec.name
        hint = hints.get(field, spec.type if not isinstance(spec.type, str) else object)
        compiled = _OPAQUE if hint is Any else _compile_type(hint)
        if compiled is _OPAQUE:
            opaque.add(field)
        dec = None if compiled is _OPAQUE else (compiled.slow or compiled.dec)
        scope[f"e{i}"], scope[f"c{i}"] = compiled.enc, dec
        write = compiled.inline.replace("@e", f"e{i}")
        default = _field_default(spec)
        # encode: required fields in the dict display, the others unless default
        if default is _REQUIRED:
            required.append(f"{field!r}: {write.replace('@v', f'obj.{field}')}")
        else:
            scope[f"d{i}"], scope[f"t{i}"] = default, type(default)
            same = (
                "v is None" if default is None else f"v is d{i} or (type(v) is t{i} and v == d{i})"
            )
            optional += [
                f"    v = obj.{field}",
                f"    if not ({same}):",
                f"        out[{field!r}] = {write.replace('@v', 'v')}",
            ]
        reads += _field_reads(field, i, default is _REQUIRED, dec, compiled.fast)
    reads += _legacy_reads(cls, scope)
    reads += _regroup_reads(cls, scope)
    source = _plan_source(required, optional, reads)
    exec(compile(source, f"<lockwatch codec for {_qualified(cls)}>", "exec"), scope)
    return _Plan(cls, name, scope["encode"], scope["decode"], frozenset(opaque))


def _plan_scope(cls: type, name: str) -> dict[str, Any]:
    """The names a class's generated encode and decode see."""
    return {
        "ABSENT": _ABSENT,
        "NAME": name,
        "CodecError": CodecError,
        "cls": cls,
        "_ref": _ref,
        "_missing": _missing,
        "_cannot_build": _cannot_build,
        "_loads_opaque": _loads_opaque,
        "P": _plans,
        "_plan_for": _plan_for,
        "_dumps": orjson.dumps,
        "_UTC_Z": orjson.OPT_UTC_Z,
        "UTC": UTC,
        "datetime": datetime,
    }


def _field_default(spec: dataclasses.Field[Any]) -> Any:
    """A field's default (made by its factory), or _REQUIRED."""
    if spec.default is not dataclasses.MISSING:
        return spec.default
    if spec.default_factory is not dataclasses.MISSING:
        return spec.default_factory()
    return _REQUIRED


def _field_reads(field: str, i: int, required: bool, dec: Any, fast: str | None) -> list[str]:
    """The generated decode's lines for one field: read, check, convert, keep."""
    reads = [f"    v = data.get({field!r}, ABSENT)"]
    if dec is None:
        reads += [
            "    if v is ABSENT:",
            f"        v = data.get({field + _JSON_SUFFIX!r}, ABSENT)",
            "        if v is not ABSENT:",
            f"            v = _loads_opaque(v, {field!r})",
        ]
    if required:
        reads += ["    if v is ABSENT:", f"        raise _missing(NAME, {field!r})"]
        indent = "    "
    else:
        reads.append("    if v is not ABSENT:")
        indent = "        "
    if dec is not None:
        inner = indent
        if fast is not None:
            reads.append(f"{indent}if not ({fast}):")
            inner += "    "
        reads += [
            f"{inner}try:",
            f"{inner}    v = c{i}(v, context)",
            f"{inner}except CodecError as err:",
            f"{inner}    raise err.within({'.' + field!r}) from None",
        ]
    reads.append(f"{indent}kwargs[{field!r}] = v")
    return reads


def _legacy_reads(cls: type, scope: dict[str, Any]) -> list[str]:
    """The generated decode's lines for fields older recordings wrote under
    another name (`_legacy`), each converted to its new field."""
    reads: list[str] = []
    for number, (old, (new, convert)) in enumerate(_legacy.get(cls, {}).items()):
        scope[f"L{number}"] = convert
        scope["_decode_any"] = _decode_any
        reads += [
            f"    v = data.get({old!r}, ABSENT)",
            f"    if v is not ABSENT and {new!r} not in kwargs:",
            "        try:",
            f"            kwargs[{new!r}] = L{number}(_decode_any(v, context))",
            "        except CodecError as err:",
            f"            raise err.within({'.' + old!r}) from None",
            "        except (TypeError, ValueError, AttributeError) as err:",
            "            raise _cannot_build(NAME, err) from err",
        ]
    return reads


def _plan_source(required: list[str], optional: list[str], reads: list[str]) -> str:
    """The source of a class's encode and decode."""
    return "\n".join(
        [
            "def encode(obj, context):",
            "    key = id(obj)",
            "    out = context.memo.get(key)",
            "    if out is not None:",
            "        return _ref(key, out, context)",
            "    out = {" + ", ".join(required) + "}",
            *optional,
            "    context.memo[key] = out",
            "    return out",
            "",
            "def decode(data, context):",
            "    kwargs = {}",
            *reads,
            "    try:",
            "        return cls(**kwargs)",
            "    except (TypeError, ValueError) as err:",
            "        raise _cannot_build(NAME, err) from err",
        ]
    )


def _regroup_reads(cls: type, scope: dict[str, Any]) -> list[str]:
    """The decoding lines that hand a record's old fields to its `legacy_regroup`."""
    regrouped = _regrouped.get(cls)
    if regrouped is None:
        return []
    old, build = regrouped
    scope["R"], scope["_decode_any"] = build, _decode_any
    reads = ["    old = {}", "    raw = {}"]
    for name in old:
        reads += [
            f"    v = data.get({name!r}, ABSENT)",
            "    if v is not ABSENT:",
            "        try:",
            f"            old[{name!r}] = _decode_any(v, context)",
            f"            raw[{name!r}] = context.peek(v)",
            "        except CodecError as err:",
            f"            raise err.within({'.' + name!r}) from None",
        ]
    return [
        *reads,
        "    try:",
        "        R(kwargs, old, raw)",
        "    except (TypeError, ValueError, AttributeError) as err:",
        "        raise _cannot_build(NAME, err) from err",
    ]


def _missing(name: str, field: str) -> CodecError:
    return CodecError(f"{name} lacks its required field {field!r}")


def _cannot_build(name: str, err: Exception) -> CodecError:
    return CodecError(f"cannot build a {name}: {err}")


def _compile_type(hint: Any) -> _Compiled:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is str:
        return _Compiled(None, _dec_str, "type(v) is str", _AS_IS)
    if hint is bool:
        return _Compiled(None, _dec_bool, "type(v) is bool", _AS_IS)
    if hint is int:
        return _Compiled(None, _dec_int, "type(v) is int", _AS_IS)
    if hint is float:
        fast = "type(v) is float or type(v) is int"
        return _Compiled(_enc_float, _dec_float, fast, _INLINE_FLOAT)
    if hint is type(None) or hint is None:
        return _Compiled(None, _dec_none, "v is None", _AS_IS)
    if isinstance(hint, type) and issubclass(hint, datetime):
        return _Compiled(_enc_datetime, _dec_datetime, None, _INLINE_TIME)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return _Compiled(_enc_enum, _enum_decoder(hint))
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or hint in _bases):
        return _Compiled(_encode_record, _record_decoder(hint), None, _INLINE_RECORD)
    if origin is typing.Literal and all(a is None or type(a) in (str, int, bool) for a in args):
        return _Compiled(None, _literal_decoder(args), None, _AS_IS)
    if origin is typing.Union or origin is types.UnionType:
        others = [a for a in args if a is not type(None)]
        if len(others) == 1 and len(args) == 2:
            inner = _compile_type(others[0])
            return _Compiled(
                None if inner.enc is None else _optional_encoder(inner.enc),
                _optional_decoder(inner.dec),
                "v is None" if inner.fast is None else f"v is None or {inner.fast}",
                _AS_IS if inner.enc is None else f"(None if @v is None else {inner.inline})",
                inner.slow or inner.dec,  # `fast` has ruled None out
            )
        return _Compiled(_encode_any, _decode_any)
    if origin is tuple or origin is list:
        make = tuple if origin is tuple else list
        if (origin is tuple and len(args) == 2 and args[1] is Ellipsis) or (
            origin is list and len(args) == 1
        ):
            item = _compile_type(args[0])
            if item.enc is None:
                inline = "list(@v)"
            elif item.inline == _INLINE_RECORD:
                inline = "[" + _INLINE_RECORD.replace("@v", "x") + " for x in @v]"
            else:
                inline = "@e(@v, context)"
            return _Compiled(
                _sequence_encoder(item.enc), _sequence_decoder(item.dec, make), None, inline
            )
        if origin is tuple and args and Ellipsis not in args:
            items = [_compile_type(a) for a in args]
            return _Compiled(
                _fixed_encoder([i.enc for i in items]), _fixed_decoder([i.dec for i in items])
            )
        return _Compiled(_sequence_encoder(_encode_any), _sequence_decoder(_decode_any, make))
    return _Compiled(_encode_any, _decode_any)


# Straight-line forms of the common cases; anything unusual goes through `@e`.
_INLINE_FLOAT = "(@e(@v, context) if type(@v) is float and @v - @v != 0.0 else @v)"
_INLINE_TIME = (
    "({'~t': _dumps(@v, option=_UTC_Z)[1:-1].decode()}"
    " if type(@v) is datetime and @v.tzinfo is UTC else @e(@v, context))"
)
_INLINE_RECORD = "(P.get(type(@v)) or _plan_for(type(@v))).encode(@v, context)"


# --- encoding -------------------------------------------------------------------


class _EncodeContext:
    __slots__ = ("memo", "refs", "shared", "table")

    def __init__(self) -> None:
        # id(record) -> its dict. Every record stays alive while it is encoded
        # (the value holds it, frozen), so no id is reused meanwhile.
        self.memo: dict[int, dict[str, Any]] = {}
        self.shared: dict[int, int] = {}  # id(record) -> its index in `table`
        self.table: list[dict[str, Any]] = []
        self.refs: list[dict[str, int]] = []


def encode(value: Any) -> Any:
    """`value` as JSON-able data (dicts, lists, strings, numbers, booleans, None).

    The result may share parts (an opaque `content`, for one) with `value`:
    treat it as read-only.
    """
    context = _EncodeContext()
    try:
        root = _encode_any(value, context)
    except RecursionError:
        raise CodecError("too deeply nested (or cyclic) to encode") from None
    table = context.table
    if not table:
        return root
    for index, written in enumerate(table):
        # Move each shared record into the table, leaving a reference where it
        # was first written (also inside other shared records).
        table[index] = dict(written)
        written.clear()
        written[_REF] = index
    return {_SHARED: table, _VALUE: root}


def _encode_record(obj: Any, context: _EncodeContext) -> Any:
    plan = _plans.get(type(obj))
    if plan is None:
        plan = _plan_for(type(obj))
    return plan.encode(obj, context)


def _ref(key: int, out: dict[str, Any], context: _EncodeContext) -> dict[str, Any]:
    """A record met again: written once in the table, referred to by index."""
    index = context.shared.get(key)
    if index is None:
        index = context.shared[key] = len(context.table)
        context.table.append(out)
        context.refs.append({_REF: index})
    return context.refs[index]  # one dict per shared record: fewer to allocate


def _encode_any(value: Any, context: _EncodeContext) -> Any:
    kind = type(value)
    if value is None or kind is str or kind is int or kind is bool:
        return value
    if kind is float:
        return _enc_float(value, context)
    if kind is tuple or kind is list:
        return [_encode_any(item, context) for item in value]
    if kind is dict:
        return _encode_map(value, context)
    if isinstance(value, datetime):
        return _enc_datetime(value, context)
    if isinstance(value, Enum):
        name = kind.__name__
        if _enums.get(name) is not kind:
            raise CodecError(f"enum {name} is not registered with the codec")
        return {_ENUM: name, "v": _encode_any(value.value, context)}
    if dataclasses.is_dataclass(value):
        return _encode_record(value, context)
    raise CodecError(f"cannot encode a {kind.__name__}")


def _encode_map(value: dict[Any, Any], context: _EncodeContext) -> Any:
    out: dict[str, Any] = {}
    escape = False
    for key, item in value.items():
        if type(key) is not str:
            raise CodecError(f"dict keys must be strings, got {_show(key)}")
        escape = escape or key.startswith("~")
        out[key] = _encode_any(item, context)
    return {_MAP: out} if escape else out


def _enc_float(value: Any, context: _EncodeContext) -> Any:
    if type(value) is float and value - value != 0.0:  # nan or ±inf
        return {_FLOAT: "nan" if value != value else ("inf" if value > 0 else "-inf")}
    return value


def _enc_datetime(value: Any, context: _EncodeContext) -> Any:
    if not isinstance(value, datetime):
        raise CodecError(f"expected a datetime, got {_show(value)}")
    text = value.isoformat()
    if text.endswith("+00:00"):
        text = text[:-6] + "Z"
    return {_TIME: text}


def _enc_enum(value: Any, context: _EncodeContext) -> Any:
    return value.value if isinstance(value, Enum) else value


def _optional_encoder(inner: _Enc) -> _Enc:
    def enc(value: Any, context: _EncodeContext) -> Any:
        return None if value is None else inner(value, context)

    return enc


def _sequence_encoder(inner: _Enc | None) -> _Enc:
    if inner is None:

        def as_list(value: Any, context: _EncodeContext) -> Any:
            return list(value)

        return as_list

    def enc(value: Any, context: _EncodeContext) -> Any:
        return [inner(item, context) for item in value]

    return enc


def _fixed_encoder(inner: list[_Enc | None]) -> _Enc:
    def enc(value: Any, context: _EncodeContext) -> Any:
        if len(value) != len(inner):
            raise CodecError(f"expected {len(inner)} items, got {len(value)}")
        return [v if e is None else e(v, context) for e, v in zip(inner, value, strict=True)]

    return enc


# --- decoding -------------------------------------------------------------------


class _DecodeContext:
    __slots__ = ("busy", "done", "table")

    def __init__(self, table: list[Any]) -> None:
        self.table = table
        self.done: dict[int, Any] = {}
        self.busy: set[int] = set()

    def peek(self, value: Any) -> Any:
        """`value` as written: a reference's shared record as its dict, undecoded."""
        if type(value) is dict and _REF in value:
            index = value[_REF]
            if type(index) is int and 0 <= index < len(self.table):
                return self.table[index]
        return value

    def resolve(self, data: dict[str, Any]) -> Any:
        index = data[_REF]
        if type(index) is not int or not 0 <= index < len(self.table):
            raise CodecError(f"reference {_show(index)} to no shared record")
        found = self.done.get(index, _ABSENT)
        if found is not _ABSENT:
            return found
        if index in self.busy:
            raise CodecError(f"shared record #{index} refers to itself")
        self.busy.add(index)
        try:
            entry = self.table[index]
            if type(entry) is not dict or _RECORD not in entry:
                raise CodecError(f"expected a record, got {_show(entry)}")
            value = self.done[index] = _decode_record(entry, self)
        except CodecError as err:
            raise err.within(f"<shared #{index}>") from None
        finally:
            self.busy.discard(index)
        return value


def decode(data: Any) -> Any:
    """The value `encode` was given, from data as JSON parsers return it."""
    try:
        return _decode_root(data)
    except RecursionError:
        # JSON parsers read ~1,000 levels; walking untyped arrays and maps that
        # deep overflows the stack: a hostile or corrupt line, never ours.
        raise CodecError("nested too deeply to be a recording") from None


def _decode_root(data: Any) -> Any:
    context = _DecodeContext([])
    root = data
    if type(data) is dict and _SHARED in data:
        table = data[_SHARED]
        if type(table) is not list or _VALUE not in data:
            raise CodecError("a shared-record table must be an array beside a '~v' value")
        context = _DecodeContext(table)
        root = data[_VALUE]
    try:
        value = _decode_any(root, context)
    except CodecError as err:
        label = root.get(_RECORD) if type(root) is dict else None
        raise err.within(label if type(label) is str else "value") from None
    for index in range(len(context.table)):  # unreferenced entries must be valid too
        context.resolve({_REF: index})
    return value


def _decode_record(data: dict[str, Any], context: _DecodeContext) -> Any:
    return _plan_named(data[_RECORD]).decode(data, context)


def _decode_any(value: Any, context: _DecodeContext) -> Any:
    kind = type(value)
    if value is None or kind is str or kind is int or kind is float or kind is bool:
        return value
    if kind is list:
        return _decode_array(value, context)
    if kind is not dict:
        raise CodecError(f"not a JSON value: {_show(value)}")
    if _RECORD in value:
        return _decode_record(value, context)
    if _REF in value:
        return context.resolve(value)
    if _TIME in value:
        return _dec_datetime(value, context)
    if _FLOAT in value:
        return _dec_float(value, context)
    if _TEXT in value:
        return _dec_str(value, context)
    if _ENUM in value:
        return _dec_enum_tagged(value, context)
    if _MAP in value:
        inner = value[_MAP]
        if type(inner) is not dict or len(value) != 1:
            raise CodecError(f"malformed '~m' map: {_show(value)}")
        return _decode_map(inner, context)
    return _decode_map(value, context)


def _decode_map(value: dict[str, Any], context: _DecodeContext) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        try:
            out[key] = _decode_any(item, context)
        except CodecError as err:
            raise err.within(f"[{key!r}]") from None
    return out


def _wrong(expected: str, value: Any) -> CodecError:
    return CodecError(f"expected {expected}, got {_show(value)}")


def _dec_str(value: Any, context: _DecodeContext) -> Any:
    if type(value) is str:
        return value
    if type(value) is dict and len(value) == 1 and type(value.get(_TEXT)) is str:
        try:
            return value[_TEXT].encode("ascii").decode("unicode_escape")
        except UnicodeError as err:
            raise CodecError(f"malformed escaped text: {err}") from err
    raise _wrong("a string", value)


def _dec_int(value: Any, context: _DecodeContext) -> Any:
    if type(value) is int:
        return value
    raise _wrong("an integer", value)


def _dec_bool(value: Any, context: _DecodeContext) -> Any:
    if type(value) is bool:
        return value
    raise _wrong("true or false", value)


def _dec_none(value: Any, context: _DecodeContext) -> Any:
    if value is None:
        return None
    raise _wrong("null", value)


_SPECIAL_FLOATS: Final = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def _dec_float(value: Any, context: _DecodeContext) -> Any:
    kind = type(value)
    if kind is float or kind is int:
        return value
    if kind is dict and len(value) == 1:
        special = value.get(_FLOAT)
        if type(special) is str and special in _SPECIAL_FLOATS:  # a list is unhashable
            return _SPECIAL_FLOATS[special]
    raise _wrong("a number", value)


def _dec_datetime(value: Any, context: _DecodeContext) -> Any:
    if type(value) is dict and len(value) == 1:
        text = value.get(_TIME)
        if type(text) is str:
            try:
                return datetime.fromisoformat(text)
            except ValueError:
                raise CodecError(f"{text!r} is not an RFC 3339 time") from None
    raise _wrong("a time ({'~t': ...})", value)


def _enum_decoder(cls: type[Enum]) -> _Dec:
    def dec(value: Any, context: _DecodeContext) -> Any:
        try:
            return cls(value)
        except (ValueError, TypeError):
            allowed = ", ".join(repr(m.value) for m in cls)
            raise _wrong(f"a {cls.__name__} ({allowed})", value) from None

    return dec


def _dec_enum_tagged(value: dict[str, Any], context: _DecodeContext) -> Any:
    name = value[_ENUM]
    cls = _enums.get(name) if type(name) is str else None
    if cls is None:
        raise CodecError(f"unknown enum type {_show(name)}")
    if "v" not in value:
        raise CodecError(f"enum {name} without its value ('v')")
    return _enum_decoder(cls)(value["v"], context)


def _record_decoder(cls: type) -> _Dec:
    def dec(value: Any, context: _DecodeContext) -> Any:
        if type(value) is dict:
            name = value.get(_RECORD)
            plan = _plans_named.get(name) if type(name) is str else None
            if plan is not None and plan.cls is cls:  # the common case, in one step
                return plan.decode(value, context)
            if _RECORD in value:
                obj = _decode_record(value, context)
            elif _REF in value:
                obj = context.resolve(value)
            else:
                raise _wrong(f"a {cls.__name__} record", value)
            if isinstance(obj, cls):
                return obj
            raise CodecError(f"expected a {cls.__name__}, got a {type(obj).__name__}")
        raise _wrong(f"a {cls.__name__} record", value)

    return dec


def _literal_decoder(options: tuple[Any, ...]) -> _Dec:
    allowed = frozenset((type(option), option) for option in options)
    shown = ", ".join(repr(option) for option in options)

    def dec(value: Any, context: _DecodeContext) -> Any:
        kind = type(value)
        if kind is not list and kind is not dict and (kind, value) in allowed:
            return value
        raise _wrong(f"one of {shown}", value)

    return dec


def _optional_decoder(inner: _Dec) -> _Dec:
    def dec(value: Any, context: _DecodeContext) -> Any:
        return None if value is None else inner(value, context)

    return dec


def _sequence_decoder(inner: _Dec, make: Callable[[list[Any]], Any]) -> _Dec:
    def dec(value: Any, context: _DecodeContext) -> Any:
        if type(value) is not list:
            raise _wrong("an array", value)
        if inner is _dec_str and all(type(item) is str for item in value):
            return make(value)
        out = []
        for index, item in enumerate(value):
            try:
                out.append(inner(item, context))
            except CodecError as err:
                raise err.within(f"[{index}]") from None
        return make(out)

    return dec


def _fixed_decoder(inner: list[_Dec]) -> _Dec:
    def dec(value: Any, context: _DecodeContext) -> Any:
        if type(value) is not list or len(value) != len(inner):
            raise _wrong(f"an array of {len(inner)}", value)
        out = []
        for index, (item_dec, item) in enumerate(zip(inner, value, strict=True)):
            try:
                out.append(item_dec(item, context))
            except CodecError as err:
                raise err.within(f"[{index}]") from None
        return tuple(out)

    return dec


_decode_array: Final = _sequence_decoder(_decode_any, tuple)


def _loads_opaque(text: Any, name: str) -> Any:
    if type(text) is not str:
        raise _wrong("JSON text", text).within(f".{name}{_JSON_SUFFIX}")
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as err:
        raise CodecError(f"not JSON: {err}").within(f".{name}{_JSON_SUFFIX}") from None


def _show(value: Any) -> str:
    kind = {
        dict: "object",
        list: "array",
        str: "string",
        int: "integer",
        float: "number",
        bool: "boolean",
        type(None): "null",
    }.get(type(value), type(value).__name__)
    text = repr(value)
    return f"{kind} {text if len(text) <= 60 else text[:57] + '...'}"


# --- lines ----------------------------------------------------------------------


def dumps_line(value: Any) -> bytes:
    """`value` as one line of JSON, ending in a newline (the garbage collector
    paused meanwhile: see `collector.paused`)."""
    with collector.paused():
        encoded = encode(value)
        return _write_line(encoded)


def _write_line(encoded: Any) -> bytes:
    try:
        return orjson.dumps(encoded, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        pass  # lone surrogates or deep opaque values: take the careful path
    try:
        return orjson.dumps(_portable(encoded, 0), option=orjson.OPT_APPEND_NEWLINE)
    except (orjson.JSONEncodeError, RecursionError) as err:
        raise CodecError(f"cannot be written as JSON: {err}") from None


def loads_line(line: bytes | bytearray | memoryview | str) -> Any:
    """The value of one line `dumps_line` wrote."""
    with collector.paused():
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError as err:
            raise CodecError(f"not JSON: {err}") from None
        return decode(data)


def _portable(value: Any, depth: int) -> Any:
    """Encoded data made writable by orjson: escaped lone surrogates, and opaque
    values too deep for one line turned into JSON text."""
    kind = type(value)
    if kind is str:
        return value if _utf8(value) else {_TEXT: value.encode("unicode_escape").decode("ascii")}
    if kind is list:
        return [_portable(item, depth + 1) for item in value]
    if kind is not dict:
        return value
    _check_keys(value)
    if _RECORD in value:
        name = value[_RECORD]
        cls = _records.get(name) if type(name) is str else None
        opaque = _plan_for(cls).opaque if cls is not None else frozenset[str]()
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key not in opaque:
                out[key] = _portable(item, depth + 1)
            elif _deeper_than(item, _INLINE_DEPTH - depth):
                out[key + _JSON_SUFFIX] = _dumps_deep(item).decode("utf-8")
            else:
                out[key] = item
        return out
    if _MAP in value and type(value[_MAP]) is dict:
        inner = value[_MAP]
        _check_keys(inner)
        return {_MAP: {key: _portable(item, depth + 2) for key, item in inner.items()}}
    return {key: _portable(item, depth + 1) for key, item in value.items()}


def _utf8(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_keys(value: dict[Any, Any]) -> None:
    for key in value:
        if type(key) is str and not _utf8(key):
            raise CodecError(f"key {key!r} is not valid UTF-8")


def _deeper_than(value: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is not dict and kind is not list:
            continue
        if depth > limit:
            return True
        children = item.values() if kind is dict else item
        stack.extend((child, depth + 1) for child in children)
    return False


def _dumps_deep(value: Any) -> bytes:
    """JSON text for a value of any depth orjson could read (it reads 1024 levels,
    writes 254): containers by hand, without recursion; scalars by orjson."""
    parts: list[bytes] = []
    # (items left, closing bracket, whether it is an object, is it the first item)
    stack: list[tuple[Iterator[Any], bytes, bool, list[bool]]] = []
    pending: Any = value
    has_pending = True
    while True:
        if has_pending:
            has_pending = False
            kind = type(pending)
            if kind is dict and pending:
                parts.append(b"{")
                stack.append((iter(pending.items()), b"}", True, [True]))
            elif kind is list and pending:
                parts.append(b"[")
                stack.append((iter(pending), b"]", False, [True]))
            else:
                parts.append(orjson.dumps(pending))
        if not stack:
            break
        items, closing, is_object, first = stack[-1]
        item: Any = next(items, _ABSENT)
        if item is _ABSENT:
            parts.append(closing)
            stack.pop()
            continue
        if not first[0]:
            parts.append(b",")
        first[0] = False
        if is_object:
            key, pending = item
            if type(key) is not str:
                raise CodecError(f"dict keys must be strings, got {_show(key)}")
            parts.append(orjson.dumps(key) + b":")
        else:
            pending = item
        has_pending = True
    return b"".join(parts)


register(
    Holder,
    Reason,
    Lock,
    ProcessFacts,
    State,
    Verdict,
    SourceStatus,
    ScanError,
)
register_base(Facts)
