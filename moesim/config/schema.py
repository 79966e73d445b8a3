"""One schema for every surface: a run model read as flat parameters, and back.

A run model (:class:`~moesim.config.prefill.PrefillRun`, :class:`~moesim.config.decode.DecodeRun`,
:class:`~moesim.config.specdecode.SpecDecodeRun`) nests sections: the policy, the draft tree, the
draft, the routing of wrong drafts, the expert predictor. A command's options, a grid's ``[fixed]``
and ``[axes]`` and ``moesim rerun`` all read one flat list of parameters made here from the model's
fields (as Vidur's ``flat_dataclass`` makes its command line from nested dataclasses), so that a
field added to a run model is a parameter everywhere with no other edit:

- a plain field is the parameter of its name (``tokens``, ``cache_policy``);
- a section's field is ``section_field`` (``draft_rank_share``), or what the section's :class:`Flat`
  marker says (the tree's ``depth``, the draft's ``draft_mu``, a policy's bare ``group_size``);
- a section with a ``kind`` (a discriminated union: a policy, a routing, a predictor) is also the
  parameter of its own name, the kind (``policy = "naive"``), or the kind with its argument where
  the marker names a parser (``routing = "mixture:0.5"``); each variant's field applies to the
  variants that have it (``banks`` to ``estream``);
- ``overrides`` is every dotted name (``ufs.effective_read_bw_GBps``);
- a field marked ``Flat(derived=True)`` is set when the run is built: it is carried by
  :func:`flatten` and :func:`unflatten` (a saved run keeps it) but is no option of any surface.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from moesim.errors import InputError
from moesim.typing_ import JSONValue

__all__ = ["Flat", "Param", "OVERRIDES", "params", "surface_params", "flatten", "unflatten", "flag"]

#: the run field that holds the device-profile overrides: every dotted parameter name
OVERRIDES = "overrides"


@dataclass(frozen=True)
class Flat:
    """How a run field reads as flat parameters, where it is not the default rule (put it in the
    field's ``Annotated``): ``prefix`` of its section's fields (default ``field_``), ``names`` of
    single section fields, ``parse`` of the kind's spelling with an argument, ``derived``: not an input."""

    prefix: str | None = None
    names: tuple[tuple[str, str], ...] = ()
    parse: Callable[[str], dict[str, object]] | None = None
    derived: bool = False


@dataclass(frozen=True)
class Param:
    """One flat parameter: the run ``field`` it sets, and the ``key`` within that field's section
    (None: the field itself; ``"kind"``: the section's kind). ``kinds``: the section kinds that take
    it (None: every run). ``default``: the run's (a variant's, where its variants agree). A kind's
    ``choices`` are its section's kinds, ``parse`` reads its spelling with an argument."""

    name: str
    field: str
    key: str | None
    annotation: Any
    default: Any
    description: str | None
    kinds: frozenset[str] | None = None
    parse: Callable[[str], dict[str, object]] | None = None
    derived: bool = False
    choices: tuple[str, ...] = ()


def flag(name: str) -> str:
    """A parameter as an option in a message: ``group_size`` -> ``--group-size``."""
    return "--" + name.replace("_", "-")


def _marker(info: FieldInfo) -> Flat:
    return next((m for m in info.metadata if isinstance(m, Flat)), Flat())


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation is made of (through ``Annotated``, unions, ``Optional``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _models(args[0])
    if origin in (typing.Union, types.UnionType):
        return [m for a in args for m in _models(a)]
    return []


def _kinds(model: type[BaseModel]) -> tuple[str, ...]:
    info = model.model_fields.get("kind")
    return () if info is None else tuple(typing.get_args(info.annotation))


def _typed(info: FieldInfo) -> Any:
    """A field's type with its constraints, as an annotation another model can take."""
    return typing.Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation


def _default(info: FieldInfo) -> Any:
    """A field's default (what its factory makes), None for a required field."""
    return None if info.is_required() else info.get_default(call_default_factory=True)


def _plain(name: str, info: FieldInfo, mark: Flat) -> Param:
    return Param(name, name, None, _typed(info), _default(info), info.description, derived=mark.derived)


def _kind_param(name: str, info: FieldInfo, variants: list[type[BaseModel]], mark: Flat) -> Param:
    kinds = tuple(k for v in variants for k in _kinds(v))
    default = _default(info)
    base: Any = str if mark.parse is not None else Literal[kinds]
    optional = default is None and not info.is_required()
    return Param(name, name, "kind", base | None if optional else base, None if default is None else default.kind,
                 info.description, parse=mark.parse, derived=mark.derived, choices=kinds)


def _section(name: str, info: FieldInfo, variants: list[type[BaseModel]], mark: Flat) -> list[Param]:
    """The parameters of a section field: its kind (where it has one), then each variant's fields."""
    union = any(_kinds(v) for v in variants)
    out = [_kind_param(name, info, variants, mark)] if union else []
    prefix = f"{name}_" if mark.prefix is None else mark.prefix
    names = dict(mark.names)
    seen: dict[str, list[type[BaseModel]]] = {}
    for variant in variants:
        for key in variant.model_fields:
            if key != "kind":
                seen.setdefault(key, []).append(variant)
    for key, owners in seen.items():
        fields = [o.model_fields[key] for o in owners]
        defaults = {repr(_default(f)) for f in fields}
        default = _default(fields[0]) if len(defaults) == 1 else None
        kinds = frozenset(k for o in owners for k in _kinds(o)) if union else None
        kinds = None if kinds == frozenset(k for v in variants for k in _kinds(v)) else kinds   # every kind takes it
        description = next((f.description for f in fields if f.description), None)
        out.append(Param(names.get(key, prefix + key), name, key, _typed(fields[0]), default, description, kinds,
                         derived=mark.derived))
    return out


@functools.cache
def params(run_type: type[BaseModel]) -> dict[str, Param]:
    """Every flat parameter of ``run_type`` by name, in the order of its fields (``overrides`` aside).

    >>> from moesim.config.prefill import PrefillRun
    >>> [p for p in params(PrefillRun)][:8]
    ['model', 'device', 'tokens', 'policy', 'group_size', 'banks', 'queue_depth', 'prefetch']
    >>> sorted(params(PrefillRun)["banks"].kinds)
    ['estream']
    """
    out: dict[str, Param] = {}
    for name, info in run_type.model_fields.items():
        if name == OVERRIDES:
            continue
        mark, variants = _marker(info), _models(info.annotation)
        for param in _section(name, info, variants, mark) if variants else [_plain(name, info, mark)]:
            assert param.name not in out, f"{run_type.__name__}: two fields read as {param.name}"
            out[param.name] = param
    return out


def surface_params(run_type: type[BaseModel]) -> dict[str, Param]:
    """The parameters a user sets (every one but the derived): a command's options, a grid's."""
    return {n: p for n, p in params(run_type).items() if not p.derived}


def flatten(run: BaseModel) -> dict[str, JSONValue]:
    """A run as flat parameters (JSON values; a variant's fields only where the run's variant has
    them), its overrides as dotted names: what :func:`unflatten` reads back into the same run."""
    data = run.model_dump(mode="json")
    out: dict[str, JSONValue] = {}
    for param in params(type(run)).values():
        value = data[param.field]
        if param.key is None:
            out[param.name] = value
        elif isinstance(value, dict) and param.key in value:
            out[param.name] = value[param.key]
    return {**out, **data.get(OVERRIDES, {})}


def unflatten(run_type: type[BaseModel], flat: Mapping[str, object], *, strict: bool = True) -> dict[str, object]:
    """Flat parameters (a value None: not given) -> the data of a ``run_type``, to be validated as one.

    A variant's field given for a kind that does not take it raises :class:`InputError` named as an
    option; with ``strict=False`` it is dropped instead (a grid axis applies to the points whose
    kind takes it). A section none of whose parameters is given keeps the run's default.

    >>> from moesim.config.prefill import PrefillRun
    >>> unflatten(PrefillRun, {"tokens": 64, "policy": "naive", "group_size": 4, "banks": None})
    {'tokens': 64, 'policy': {'kind': 'naive', 'group_size': 4}}
    >>> unflatten(PrefillRun, {"policy": "resident", "banks": 3})
    Traceback (most recent call last):
    moesim.errors.InputError: --banks applies to policy estream, not resident, got 3
    """
    schema = params(run_type)
    data: dict[str, object] = {}
    sections: dict[str, dict[str, object]] = {}
    for name, value in flat.items():
        if value is None:
            continue
        if "." in name:
            overrides = data.setdefault(OVERRIDES, {})
            assert isinstance(overrides, dict)
            overrides[name] = value
        elif name not in schema:
            raise InputError(flag(name), f"is not a parameter of a {run_type.__name__}", value)
        elif schema[name].key is None:
            data[name] = value
        else:
            sections.setdefault(schema[name].field, {})[name] = value
    for field, given in sections.items():
        section = _section_data(schema, field, given, strict)
        if section:
            data[field] = section
    return data


def _section_data(schema: dict[str, Param], field: str, given: dict[str, object], strict: bool) -> dict[str, object]:
    """One section's data from its given parameters: the kind (parsed where it has a spelling), then
    the fields its kind takes ({} where nothing applies)."""
    kind_param = next((p for p in schema.values() if p.field == field and p.key == "kind"), None)
    section: dict[str, object] = {}
    kind = None if kind_param is None else kind_param.default
    text = None if kind_param is None else given.get(kind_param.name)
    if kind_param is not None and text is not None:
        section = _kind_data(kind_param, text, with_fields=len(given) > 1)
        kind = section["kind"]
    for name, value in given.items():
        param = schema[name]
        key = str(param.key)
        if key == "kind":
            continue
        if param.kinds is not None and kind not in param.kinds:
            if not strict:
                continue
            takes = ", ".join(sorted(param.kinds))
            raise InputError(flag(name), f"applies to {field} {takes}, not {kind}" if kind is not None
                             else f"applies to {field} {takes}, and no {field} is given", value)
        if key in section and section[key] != value:
            raise InputError(flag(name), f"is given twice: {field} {text} sets it to {section[key]}", value)
        section[key] = value
    if section and kind is not None:
        section.setdefault("kind", kind)
    return section


def _kind_data(param: Param, text: object, with_fields: bool) -> dict[str, object]:
    """The section a kind parameter names: as its spelling reads (``accuracy:0.9``), or a bare kind
    (``accuracy``) whose fields the section's own parameters give (``predictor_fraction``)."""
    if param.parse is None or not isinstance(text, str):     # not a spelling: the run's check names it
        return {"kind": text}
    try:
        return dict(param.parse(text))
    except InputError:
        if with_fields and text in param.choices:
            return {"kind": text}
        raise
