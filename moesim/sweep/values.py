"""Grid values, checked one by one before any point runs (a grid's rows become one Parquet table).

- **Of the kind the parameter takes:** TOML has types, and a grid keeps them: ``"256"`` is a
  string, not a prompt length, and a date-time, an array or a table is no parameter's value;
  an integer is one of TOML's 64 bits (a larger one cannot be a column of the table).
  (pydantic would read ``"256"`` as 256 for the run while the table kept the string, and a column
  of ``[256, "256"]`` cannot be written as Parquet: the sweep failed after its points ran.)
- **No value twice, once read as the run reads it:** ``tokens = [4, 4.0]``, ``cache_GiB = [1, 1.0]``,
  a profile number ``[3, 3.0]``, predictors ``["learned", "learned:2"]`` would each run every point twice.
- **Profile overrides:** a dotted name is ``SECTION.FIELD`` of one number of the device profile,
  as for ``--set`` (:func:`moesim.config.profiles.check_override_key`), given a finite number.
"""

from __future__ import annotations

import datetime
import json
import math
import types
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from moesim.config.profiles import AnyProfile, check_override_key
from moesim.config.specdecode import Predictor, parse_predictor
from moesim.errors import InputError, format_value
from moesim.typing_ import TOMLValue

__all__ = ["takes_switch", "check_kinds", "check_duplicates", "check_override_names", "check_override_values"]

_PREDICTOR: TypeAdapter[Any] = TypeAdapter(Predictor)
_INT64 = 2**63 - 1


def _kinds(annotation: Any) -> set[str]:
    """What a field takes, in TOML terms: ``number``, ``name`` (a string) or ``switch`` (a boolean)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _kinds(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_kinds(a) for a in typing.get_args(annotation)))
    if origin is typing.Literal:
        return {"name" if isinstance(a, str) else "number" for a in typing.get_args(annotation)}
    if annotation is type(None):
        return set()
    if annotation is bool:
        return {"switch"}
    if annotation in (int, float):
        return {"number"}
    if annotation is str:
        return {"name"}
    return {"number", "name", "switch"}      # a type this check does not know: the run's validation decides


def takes_switch(annotation: Any) -> bool:
    """Whether a field takes true or false (TOML's booleans are no number's value elsewhere)."""
    return "switch" in _kinds(annotation)


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "switch"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "name"
    if isinstance(value, (datetime.date, datetime.time)):    # datetime is a date
        return "a TOML date or time"
    return "an array" if isinstance(value, list) else "a table"


_WORDS = {"number": "a number", "name": "a name (a string)", "switch": "a switch (true or false)"}


def _refuse_kind(where: str, annotation: Any, value: Any, source: str) -> None:
    """A value of another kind than its field takes. A string in a number's place is refused here
    when it reads as a number (the run would take it, the table would keep the string); any other
    string is left to the field's validation, which names the rule (``must be a valid integer``)."""
    takes, kind = _kinds(annotation), _kind_of(value)
    if kind == "number" and isinstance(value, int) and not -_INT64 - 1 <= value <= _INT64:
        raise InputError(where, f"must be a 64-bit integer, at most {_INT64:,} in size (TOML's integers; a column of "
                         "the results table holds no more)", value, source=source)
    if kind in takes or (kind == "name" and not _numeric(value)):
        return
    if kind == "name":
        number = "integer" if int in _leaves(annotation) and float not in _leaves(annotation) else "number"
        raise InputError(where, f"must be a valid {number}, not a string (write {value} without quotes)", value,
                         source=source)
    wanted = " or ".join(_WORDS[k] for k in sorted(takes))
    raise InputError(where, f"must be {wanted}, not {_WORDS.get(kind, kind)}", value, source=source)


def _leaves(annotation: Any) -> set[Any]:
    """The plain types an annotation is made of (through ``Annotated`` and unions)."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Annotated,):
        return _leaves(args[0])
    return set().union(*(_leaves(a) for a in args)) if args else {annotation}


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def check_kinds(params: type[BaseModel], fixed: Mapping[str, TOMLValue], axes: Mapping[str, list[TOMLValue]],
                source: str) -> None:
    """Every known parameter's value (each one of an axis) is of the kind its field takes."""
    fields = params.model_fields
    for name, value in fixed.items():
        if name in fields:
            _refuse_kind(f"fixed.{name}", fields[name].annotation, value, source)
    for name, values in axes.items():
        if name in fields:
            for i, value in enumerate(values):
                _refuse_kind(f"axes.{name}[{i}]", fields[name].annotation, value, source)


def _normal(workload: str, name: str, value: Any) -> str:
    """``value`` as the run reads it, as text to compare (a predictor spelled two ways is one)."""
    if workload == "specdecode" and name == "predictor" and isinstance(value, str):
        try:
            value = _PREDICTOR.validate_python(parse_predictor(value)).model_dump()
        except (InputError, ValidationError):
            pass                              # refused when its run is built
    return json.dumps(value, sort_keys=True, default=str)


def check_duplicates(workload: str, normal: dict[str, list[Any]], raw: dict[str, list[Any]], source: str) -> None:
    """Refuse an axis that lists a value twice once read as its parameter reads it (``normal``:
    each axis as validated; ``raw``: as written, for the message)."""
    for name, values in normal.items():
        seen: dict[str, int] = {}
        for j, value in enumerate(values):
            text = _normal(workload, name, value)
            i = seen.setdefault(text, j)
            if i != j:
                a, b = raw[name][i], raw[name][j]
                same = "" if a == b and type(a) is type(b) else f" (both read as {text})"
                raise InputError(f"axes.{name}", f"must not list a value twice (every point would run twice): "
                                 f"[{j}] = {format_value(b)} duplicates [{i}] = {format_value(a)}{same}",
                                 show_value=False, source=source)


def check_override_names(profile: AnyProfile, fixed: Mapping[str, object], axes: Mapping[str, object], source: str
                         ) -> None:
    """Each dotted name is ``SECTION.FIELD`` of one number of ``profile`` (a grid's ``--set``)."""
    for key in [*fixed, *axes]:
        if "." in key:
            where = f"{'axes' if key in axes else 'fixed'}.{key}"
            try:
                check_override_key(profile, key, where)
            except InputError as exc:
                raise InputError(str(exc), "", show_value=False, source=source) from None


def check_override_values(fixed: Mapping[str, TOMLValue], axes: Mapping[str, TOMLValue], source: str) -> None:
    """Each profile override is a finite number (one number of an axis each)."""
    for section, table in (("fixed", fixed), ("axes", axes)):
        for key, value in table.items():
            values = value if section == "axes" and isinstance(value, list) else [value]
            for i, item in enumerate(values):
                if not isinstance(item, (int, float)) or isinstance(item, bool) or not math.isfinite(item):
                    where = f"{section}.{key}" + (f"[{i}]" if section == "axes" else "")
                    rule = "must be a finite number" if isinstance(item, float) else "must be a number"
                    raise InputError(where, f"{rule} (a device profile override)", item, source=source)
