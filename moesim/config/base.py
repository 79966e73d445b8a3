"""The base of every pydantic data model in moesim: unknown fields rejected, instances immutable.

:mod:`moesim.config` is the lowest layer that uses pydantic, so the one base lives here and
the layers above (traces, results, sweep) import it.
"""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["Frozen", "Finite", "field_choices", "field_default"]


class Frozen(BaseModel):
    """A pydantic model that forbids unknown fields (a typo is an error) and cannot be changed."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Finite(Frozen):
    """A :class:`Frozen` model whose every float must be finite: the settings of a run (its
    options, policy, draft, routing). ``nan`` or ``inf`` given for any of them, on the command
    line, in a grid or in a saved result, is refused as "must be a finite number" before a
    range check could call it "less than or equal to 10".

    >>> class Draft(Finite):
    ...     mu: float = 0.0
    >>> from pydantic import ValidationError
    >>> try:
    ...     Draft(mu=float("nan"))
    ... except ValidationError as exc:
    ...     print(exc.errors()[0]["msg"])
    Input should be a finite number
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def field_choices(model: type[BaseModel], name: str) -> list[str]:
    """The values a ``Literal`` field of ``model`` takes, in declaration order: what a CLI
    option offers, derived from the run model so that a choice exists once.

    >>> class Run(Frozen):
    ...     backend: typing.Literal["cpu", "npu"] = "cpu"
    >>> field_choices(Run, "backend"), field_default(Run, "backend")
    (['cpu', 'npu'], 'cpu')
    """
    annotation = model.model_fields[name].annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)] if typing.get_origin(
        annotation) is not typing.Literal else typing.get_args(annotation)
    if len(args) == 1 and typing.get_origin(args[0]) is typing.Literal:      # Optional[Literal[...]]
        args = typing.get_args(args[0])
    assert args and all(isinstance(a, str) for a in args), f"{model.__name__}.{name} is not a Literal of strings"
    return list(args)


def field_default(model: type[BaseModel], name: str) -> Any:
    """The default of a field of ``model`` (what a CLI option shows as its default); a field with
    a ``default_factory`` gives what the factory makes (a default policy, a default routing).

    >>> from pydantic import Field
    >>> class Run(Frozen):
    ...     sizes: list[int] = Field(default_factory=lambda: [1, 2])
    >>> field_default(Run, "sizes")
    [1, 2]
    """
    return model.model_fields[name].get_default(call_default_factory=True)
