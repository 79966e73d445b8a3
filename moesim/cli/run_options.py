"""Command-line options derived from a run model's flat parameters (:mod:`moesim.config.schema`).

A command spells the options it has always had (their help, defaults and order are its own) and
names them in ``spelled``; :func:`schema_options` adds one option for every other parameter of its
run model, typed, described and defaulted by the field, so that a field added to a run model is an
option of its command with no edit here or there. A derived option is None when not given: the
run's own default applies (shown in its help).
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Callable, Collection
from typing import Any, TypeVar

import click
from pydantic import BaseModel

from moesim.config.schema import Param, surface_params
from moesim.errors import InputError

__all__ = ["FLAGS", "option_flag", "FiniteFloat", "FINITE", "schema_options", "derived_names"]

F = TypeVar("F", bound=Callable[..., Any])

#: parameters a command spells otherwise than ``--name`` (the name's words joined by dashes, lower case)
FLAGS = {"routing": "--draft-routing", "drafter": "--draft"}


def option_flag(name: str) -> str:
    """The option of a flat parameter: ``cache_GiB`` -> ``--cache-gib``, ``drafter`` -> ``--draft``."""
    return FLAGS.get(name, "--" + name.lower().replace("_", "-"))


class FiniteFloat(click.types.FloatParamType):
    """A float option that must be a finite number: ``nan`` and ``inf`` are refused as such when the
    option is read, before a range or an applicability check could call ``nan`` something else."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        number = float(super().convert(value, param, ctx))
        if not math.isfinite(number):
            flags = [o for o in (param.opts if param is not None else []) if o.startswith("--")]
            raise InputError(flags[0] if flags else "value", "must be a finite number", number)
        return number


#: the type of every float option of a run
FINITE = FiniteFloat()


def _leaves(annotation: Any) -> list[Any]:
    """The plain types of an annotation, through ``Annotated`` and unions, None left out."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _leaves(args[0])
    if origin in (typing.Union, types.UnionType):
        return [leaf for a in args for leaf in _leaves(a)]
    return [] if annotation is type(None) else [annotation]


def _type(param: Param) -> click.ParamType[Any, Any] | None:
    """The option's type: a choice of a Literal's names, an integer, a finite number, a text; None
    for a switch."""
    leaves = _leaves(param.annotation)
    if any(typing.get_origin(leaf) is typing.Literal for leaf in leaves):
        return click.Choice([str(v) for leaf in leaves for v in typing.get_args(leaf)])
    if bool in leaves:
        return None
    if float in leaves:
        return FINITE
    return click.INT if int in leaves else click.STRING


def _help(param: Param) -> str:
    """The field's description as option help: which kinds take it, and the default."""
    text = param.description or param.name.replace("_", " ")
    text = text[0].upper() + text[1:]
    if param.kinds is not None:
        text += f" ({param.field} {', '.join(sorted(param.kinds))})"
    if param.default is not None:
        shown = str(param.default).lower() if isinstance(param.default, bool) else param.default
        text += f" [default: {shown}]"
    return text + "."


def _option(param: Param) -> Callable[[F], F]:
    flag, kind = option_flag(param.name), _type(param)
    if kind is None:
        return click.option(f"{flag}/--no-{flag[2:]}", param.name, default=None, help=_help(param))
    return click.option(flag, param.name, type=kind, default=None, help=_help(param))


def derived_names(run_type: type[BaseModel], spelled: Collection[str]) -> list[str]:
    """The parameters of ``run_type`` a command with options ``spelled`` gets from :func:`schema_options`."""
    return [name for name in surface_params(run_type) if name not in spelled]


def schema_options(run_type: type[BaseModel], spelled: Collection[str]) -> Callable[[F], F]:
    """A decorator adding, where it stands among the command's options, one option for each
    parameter of ``run_type`` that the command does not spell itself (in the run model's order)."""
    def decorate(command: F) -> F:
        for name in reversed(derived_names(run_type, spelled)):
            command = _option(surface_params(run_type)[name])(command)
        return command

    return decorate
