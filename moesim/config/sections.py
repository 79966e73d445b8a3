"""Base class for profile sections: every number carries a unit suffix and a provenance.

A section's ``provenance`` table maps each numeric field to a note that starts with its
kind: ``spec:``, ``paper:``, ``measured:``, ``fitted:``, ``derived:`` or ``assumed:``.
A number that is not known yet is left out of the file and given the provenance
``fitted: pending ...``; an optional number with neither value nor note is "not given"; code that needs it
calls :meth:`Section.require`, which raises
:class:`~moesim.errors.NotFittedError` instead of inventing a default.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, Field, model_validator

from moesim.config.base import Frozen
from moesim.errors import NotFittedError

__all__ = ["PROVENANCE_KINDS", "Section", "numeric_fields", "provenance_kind"]

PROVENANCE_KINDS = ("spec", "paper", "measured", "fitted", "derived", "assumed")
_MAX_MAGNITUDE = 1e12


def _is_numeric(annotation: Any) -> bool:
    if annotation in (int, float):
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Annotated, list):      # list[float]: a sampled distribution, one unit
        return _is_numeric(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_is_numeric(a) for a in typing.get_args(annotation))
    return False


def numeric_fields(cls: type[BaseModel]) -> list[str]:
    """Names of the int/float fields of a pydantic model class, in declaration order."""
    return [n for n, f in cls.model_fields.items() if _is_numeric(f.annotation)]


def provenance_kind(note: str) -> str:
    """The kind prefix of a provenance note (``'spec: JEDEC'`` -> ``'spec'``)."""
    return note.split(":", 1)[0].strip().lower()


class Section(Frozen):
    """A profile section: numeric fields with unit suffixes plus their provenance notes."""

    provenance: dict[str, str] = Field(
        default_factory=dict, description="field name -> 'kind: note' for every number")

    @model_validator(mode="before")
    @classmethod
    def _plain_finite_numbers(cls, data: Any) -> Any:
        """A boolean is not a number (TOML ``true`` would read as 1), and no physical quantity of a
        device is infinite, NaN or above 1e12 in moesim's units (1e308 GiB is a typo)."""
        if not isinstance(data, dict):
            return data
        for name in numeric_fields(cls):
            value = data.get(name)
            values = value if isinstance(value, list) else [value]
            for v in values:
                if isinstance(v, bool):
                    raise ValueError(f"{name} must be a number, not a boolean, got {v}")
                if isinstance(v, (int, float)) and not (abs(v) <= _MAX_MAGNITUDE):
                    raise ValueError(f"{name} must be a finite number of at most {_MAX_MAGNITUDE:g}, got {v}")
        return data

    @model_validator(mode="after")
    def _every_number_sourced(self) -> Section:
        numeric = numeric_fields(type(self))
        kinds = ", ".join(f"'{k}:'" for k in PROVENANCE_KINDS)
        for name in numeric:
            note = self.provenance.get(name)
            if note is None and getattr(self, name) is None:
                continue  # not given (optional and not needed by this device)
            if note is None:
                raise ValueError(f"provenance.{name} is required: every number needs a source note")
            kind = provenance_kind(note)
            if kind not in PROVENANCE_KINDS:
                raise ValueError(f"provenance.{name} must start with one of {kinds}, got {note!r}")
            if getattr(self, name) is None and kind != "fitted":
                raise ValueError(f"{name} may be left out only while its provenance is "
                                 f"'fitted: pending ...', got {note!r}")
        for key in self.provenance:
            if key not in numeric:
                raise ValueError(f"provenance.{key} names no numeric field of this section")
        return self

    def require(self, name: str, profile: str = "profile") -> float:
        """The value of ``name``; NotFittedError when it is still pending a fit."""
        value = getattr(self, name)
        if value is None:
            raise NotFittedError(profile, f"{type(self).__name__}.{name}")
        return float(value)

    def pending(self) -> list[str]:
        """Numeric fields marked 'fitted: pending' that have no value yet."""
        return [n for n in numeric_fields(type(self)) if getattr(self, n) is None and n in self.provenance]

