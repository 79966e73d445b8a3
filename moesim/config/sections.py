"""Base class for profile sections: every number carries a unit suffix and a provenance.

A section's ``provenance`` table maps each numeric field to a note that starts with its
kind: ``spec:``, ``paper:``, ``measured:``, ``fitted:``, ``derived:`` or ``assumed:``.
A number that is not known yet is left out of the file and given the provenance
``fitted: pending ...``; an optional number with neither value nor note is "not given"; code that needs it
calls :meth:`Section.require`, which raises
:class:`~moesim.errors.NotFittedError` instead of inventing a default.
"""

from __future__ import annotations

import math
import types
import typing
from typing import Any

from pydantic import BaseModel, Field, model_validator

from moesim.config.base import Frozen
from moesim.errors import NotFittedError
from moesim.units import unit_of

__all__ = ["PROVENANCE_KINDS", "UNIT_BOUNDS", "RATE_FLOORS", "Section", "ProfileBase", "numeric_fields",
           "provenance_kind"]

PROVENANCE_KINDS = ("spec", "paper", "measured", "fitted", "derived", "assumed")
_MAX_MAGNITUDE = 1e12
_TiB64 = 64 * 2**40
_BW = "100 TB/s: B200 HBM3e 8,000 GB/s, NVLink 5 1,800 GB/s, NVMe about 15 GB/s"
_RATE = "one device: B200 dense FP4 about 9,000 TFLOPS"
_CLOCK = "the fastest shipping cores clock about 6.2 GHz"
_STEP = "a per-operation latency or overhead: no device step takes 10 s"
_SIZE = "64 TiB: the largest single systems hold 32 TiB of DRAM"

_SLOW = "1 MB/s, 1 MFLOP/s, 1 MHz: slower than any storage, processor or clock a device profile describes"
#: Rate unit suffix -> the smallest value a device's rate can have. A positive rate far below it is
#: a typo or a unit mistake, and would make every time in the run overflow (2e-311 GB/s -> inf ns).
RATE_FLOORS: dict[str, tuple[float, str]] = {
    "_TBps": (1e-6, _SLOW), "_GBps": (1e-3, _SLOW), "_MBps": (1.0, _SLOW), "_MTps": (1.0, _SLOW),
    "_TFLOPS": (1e-6, _SLOW), "_GFLOPS": (1e-3, _SLOW), "_TOPS": (1e-6, _SLOW),
    "_GHz": (1e-3, _SLOW), "_MHz": (1.0, _SLOW),
}

#: Unit suffix -> (the largest physical value of a device number in that unit, the evidence).
#: Each bound is several times the largest shipping part, so that only a typo or a unit
#: mistake is refused (a 1e12 MiB runtime overhead, 1e6 GHz); a number without a bound here
#: is held to 1e12. Checked when a profile is loaded, and again on every ``--set``.
UNIT_BOUNDS: dict[str, tuple[float, str]] = {
    "_TBps": (100.0, _BW),
    "_GBps": (100_000.0, _BW),
    "_MBps": (1e8, _BW),
    "_MTps": (100_000.0, "GDDR7 32,000 MT/s, LPDDR5X 10,667 MT/s"),
    "_TFLOPS": (100_000.0, _RATE),
    "_GFLOPS": (1e8, _RATE),
    "_TOPS": (100_000.0, _RATE),
    "_GHz": (10.0, _CLOCK),
    "_MHz": (10_000.0, _CLOCK),
    "_s": (10.0, _STEP),
    "_ms": (10_000.0, _STEP),
    "_us": (1e7, _STEP),
    "_ns": (1e10, _STEP),
    "_GiB": (65_536.0, _SIZE),
    "_MiB": (_TiB64 / 2**20, _SIZE),
    "_KiB": (_TiB64 / 2**10, _SIZE),
    "_B": (float(_TiB64), _SIZE),
    "_bits": (8.0 * _TiB64, _SIZE),
    "_W": (100_000.0, "a phone's parts draw under 20 W, a GPU about 1 kW; 100 kW is a rack"),
    "_pJpB": (100_000.0, "DRAM about 10-200 pJ a byte, flash about 1,000"),
    "_pct": (100.0, "a percentage"),
    "_count": (1_048_576.0, "cores, SMs, contexts, queue slots: NVMe's 65,535 queue entries, a B200's 148 SMs"),
}


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
                if isinstance(v, float) and not math.isfinite(v):
                    raise ValueError(f"{name} must be a finite number, got {v}")
                if isinstance(v, (int, float)) and not (abs(v) <= _MAX_MAGNITUDE):
                    raise ValueError(f"{name} must be a finite number of at most {_MAX_MAGNITUDE:g}, got {v}")
                bound = UNIT_BOUNDS.get(unit_of(name) or "")
                if bound is not None and isinstance(v, (int, float)) and v > bound[0]:
                    raise ValueError(f"{name} must be <= {bound[0]:,.10g} (physical range; {bound[1]}), got {v}")
                floor = RATE_FLOORS.get(unit_of(name) or "")
                if floor is not None and isinstance(v, (int, float)) and 0 < v < floor[0]:
                    raise ValueError(f"{name} must be >= {floor[0]:g} (physical range; {floor[1]}), got {v}")
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



class ProfileBase(Frozen):
    """What every device profile has: a file-safe name, a display name, a description, and its
    sections (the fields that are a :class:`Section`)."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    display_name: str
    description: str = ""

    def sections(self) -> dict[str, Section]:
        """The profile's sections by name, in the order of its fields; an absent optional one left out."""
        return {name: sec for name in type(self).model_fields if isinstance(sec := getattr(self, name), Section)}
