"""What a grid of a workload may fix or sweep: its run model's flat parameters (:mod:`moesim.config.schema`).

One parameter per option of the run, named as on the command line without the dashes: a field
added to a run model is a grid parameter with no edit here. A parameter takes the kind of value
its field takes (a number, a name, a switch) without the field's ranges: every value is built
into a run before any point runs (:func:`moesim.sweep.check.check_values`), so that a range is
checked once, by the run, and its refusal names the axis and the value. A plain field defaults to
the run's default; a section's field (``depth``, ``banks``) to None: the section's own applies.
"""

from __future__ import annotations

import functools
import types
import typing
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, create_model

from moesim.config.base import Frozen
from moesim.config.schema import Param, surface_params
from moesim.simulate import WORKLOADS

__all__ = ["grid_params", "axes_model", "kind_of", "GridValue"]

#: one value of a grid's ``[fixed]`` table or of an axis, once the grid is checked: a number, a name
#: or a switch (a parameter's kind; TOML has no null, so a value not given is absent, not None)
GridValue: TypeAlias = str | int | float | bool


def _loose(annotation: Any) -> Any:
    """An annotation without its constraints (``Annotated`` metadata), through unions."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _loose(args[0])
    if origin in (typing.Union, types.UnionType):
        return functools.reduce(lambda a, b: a | b, [_loose(a) for a in args])
    return annotation


def _field(param: Param) -> tuple[Any, Any]:
    default = param.default if param.key in (None, "kind") else None
    annotation = _loose(param.annotation)
    return (annotation if default is not None else annotation | None,
            Field(default, description=param.description))


@functools.cache
def grid_params(workload: str) -> type[Frozen]:
    """The model of what a grid of ``workload`` may fix or sweep, with its defaults.

    >>> list(grid_params("prefill").model_fields)[:5]
    ['model', 'device', 'tokens', 'policy', 'group_size']
    """
    run_type = WORKLOADS[workload].run_type
    fields: dict[str, Any] = {p.name: _field(p) for p in surface_params(run_type).values()}
    model: type[Frozen] = create_model(f"{run_type.__name__}Params", __base__=Frozen,
                                       __doc__=f"What a {workload} grid may fix or sweep.", **fields)
    return model


@functools.cache
def axes_model(workload: str) -> type[BaseModel]:
    """A model whose fields are non-empty lists of the parameters' types."""
    fields: dict[str, Any] = {name: (list[info.annotation] | None, None)  # type: ignore[name-defined]
                              for name, info in grid_params(workload).model_fields.items()}
    return create_model(f"{grid_params(workload).__name__}Axes", __config__=ConfigDict(extra="forbid"), **fields)


def kind_of(param: Param, value: Any) -> Any:
    """The kind a section's parameter value names (``"mixture:0.5"`` -> ``"mixture"``); the value
    as it is where it does not parse (the run's check refuses it, naming the axis)."""
    if param.parse is None or not isinstance(value, str):
        return value
    try:
        return param.parse(value)["kind"]
    except ValueError:
        return value
