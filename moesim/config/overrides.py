"""What-ifs on a device profile: ``{"section.field": value}`` set on a copy, validated again
(:func:`override_profile`); only a number can be set (:func:`settable_fields`), and a key that
names anything else is refused with what it is (:func:`check_override_key`)."""

from __future__ import annotations

import math
from typing import Any

from moesim.config.device import PROFILE_ADAPTER, AnyProfile, MobileNPUProfile
from moesim.config.loading import validate_union
from moesim.config.sections import Section, numeric_fields
from moesim.errors import InputError, format_value
from moesim.units import unit_of

__all__ = ["settable_fields", "check_override_key", "override_profile"]

_FLASH_RATES = ("effective_read_bw_GBps", "random_read_bw_512KiB_GBps", "random_read_bw_4KiB_GBps")
#: a rate and the measured range around it (the ends of the load's interval): overriding the
#: rate alone carries its range with it
_RANGES = (("ufs", "effective_read_bw_GBps", ("read_bw_low_GBps", "read_bw_high_GBps")),
           ("runtime", "buffered_read_bw_GBps", ("buffered_read_bw_low_GBps", "buffered_read_bw_high_GBps")))


def _carry_range(profile: MobileNPUProfile, values: dict[str, float], scaled: dict[str, float], cap: float) -> None:
    """Each rate of :data:`_RANGES` set in ``values`` takes its measured range along, scaled by
    the same ratio (an end set in ``values`` too is left as given). An end never passes the rate
    it was set around, not even by float rounding, and the flash's high end is at most ``cap``."""
    for name, rate, (low, high) in _RANGES:
        section, given = getattr(profile, name), values.get(f"{name}.{rate}")
        current = getattr(section, rate)
        if given is None or not given > 0 or not current:
            continue
        for field, side in ((low, min), (high, max)):
            end = getattr(section, field)
            if f"{name}.{field}" in values or end is None:
                continue
            moved = side(end * given / current, given)
            scaled[f"{name}.{field}"] = min(moved, cap) if name == "ufs" and side is max else moved


def _scale_flash(profile: AnyProfile, values: dict[str, float]) -> dict[str, float]:
    """A faster or slower part of the same kind. A rate of :data:`_RANGES` set carries its
    measured range with it, so the range keeps its place around the rate; then
    ``ufs.peak_read_bw_GBps`` scales every UFS rate derived from it, and the flash's range when no
    rate set has placed it, by the peak's ratio. A number overridden too is left as given."""
    if not isinstance(profile, MobileNPUProfile):
        return values
    scaled = dict(values)
    peak = values.get("ufs.peak_read_bw_GBps")
    peak = peak if peak is not None and peak > 0 else None
    _carry_range(profile, values, scaled, peak or profile.ufs.peak_read_bw_GBps)
    if peak is not None:
        ratio = peak / profile.ufs.peak_read_bw_GBps
        for field in _FLASH_RATES + _RANGES[0][2]:
            current = getattr(profile.ufs, field)
            if f"ufs.{field}" not in scaled and current is not None:
                scaled[f"ufs.{field}"] = current * ratio
    return scaled


def settable_fields(section: Section) -> list[str]:
    """The fields of ``section`` a what-if may set: its numbers, one value each (a list of numbers,
    a name, a switch or the provenance table is not one number)."""
    fields = type(section).model_fields
    return [n for n in numeric_fields(type(section)) if "list" not in str(fields[n].annotation)]


def _range_of(section: Section, field: str) -> str | None:
    """The ``[low, high]`` list field that holds the range of ``field`` (``ufs_read_W`` ->
    ``ufs_read_range_W``), if the section has one."""
    unit = unit_of(field)
    name = f"{field[: -len(unit)]}_range{unit}" if unit else ""
    return name if name in type(section).model_fields else None


def _what_it_is(section: Section, name: str, field: str) -> str:
    """What a field that is not one number is, for the refusal of a what-if that sets it."""
    if field == "provenance":
        return f"is the source notes of [{name}] (text), not a number"
    annotation = str(type(section).model_fields[field].annotation)
    nominal = next((f for f in settable_fields(section) if _range_of(section, f) == field), None)
    if nominal is not None:
        return (f"is the [low, high] range of {name}.{nominal} (a list), not one number: set {name}.{nominal} and "
                "the range widens to hold it")
    if "list" in annotation:
        return "is a list of numbers, not one number"
    if "bool" in annotation:
        return "is a switch (true or false), not a number"
    if "dict" in annotation:
        return "is a table, not a number"
    return "is a name (text), not a number"


def check_override_key(profile: AnyProfile, dotted: str, where: str | None = None) -> None:
    """Refuse a what-if key that is not ``SECTION.FIELD`` of one number of ``profile``, naming what
    the field is and the fields of its section that can be set (``where``: how the key is named to
    the user; ``--set <key>`` by default)."""
    where = where or f"--set {dotted}"
    sections = profile.sections()
    section, _, field = dotted.partition(".")
    if not section or not field or "." in field or section not in sections:
        inside = f"{section}: {', '.join(settable_fields(sections[section]))}" if section in sections and field \
            else f"sections: {', '.join(sections)}"
        raise InputError("overrides (--set)" if where.startswith("--set") else where,
                         f"must name SECTION.FIELD of the profile, got {format_value(dotted)} (one number of the "
                         f"{profile.kind} profile {profile.name}; {inside})", show_value=False)
    sec = sections[section]
    names = ", ".join(settable_fields(sec))
    if field not in type(sec).model_fields:
        raise InputError(where, f"is not a field of the profile's [{section}] (its numbers: {names})",
                         show_value=False)
    if field not in settable_fields(sec):
        raise InputError(where, f"cannot be set: it {_what_it_is(sec, section, field)}; a what-if (--set, a "
                         f"grid's SECTION.FIELD) sets one number ([{section}]: {names})", show_value=False)


def _widen_ranges(profile: AnyProfile, data: dict[str, Any], values: dict[str, float], note: str) -> None:
    """A number set outside the ``[low, high]`` range beside it (``power.ufs_read_W`` and
    ``power.ufs_read_range_W``) widens the range to hold it; a number inside leaves it as measured."""
    sections = profile.sections()
    for dotted, value in values.items():
        name, _, field = dotted.partition(".")
        rng = _range_of(sections[name], field)
        if rng is None or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        low, high = data[name][rng]
        if not low <= value <= high:
            data[name][rng] = [min(low, value), max(high, value)]
            data[name]["provenance"][rng] = f"assumed: {note} (the range widened to hold {dotted} = {value:g})"


def override_profile(profile: AnyProfile, values: dict[str, float], note: str = "what-if override") -> AnyProfile:
    """A copy of ``profile`` with ``{"section.field": value}`` set and validated again.

    Only a number can be set (:func:`settable_fields`): a name, a switch, a list or the
    provenance table is refused with what it is (:func:`check_override_key`). Each overridden
    number gets the provenance ``"assumed: <note>"`` unless a note of kind ``fitted`` is
    already there (calibration trials keep their note).

    One override scales the flash: setting ``ufs.peak_read_bw_GBps`` alone scales every UFS
    read rate derived from it (effective, random 512 KiB and 4 KiB) and the measured range of
    the large read (``read_bw_low_GBps`` / ``_high_``) by the same ratio, unless those are
    overridden too (a faster or slower part of the same kind); ``ufs.effective_read_bw_GBps``
    alone carries the range with it. A number that has a ``[low, high]`` range beside it (the
    power figures: ``power.ufs_read_W`` and ``power.ufs_read_range_W``) keeps the measured range
    when set inside it, and widens it to hold a value set outside (the range is what the sources
    allow; the what-if is one more value to allow).
    """
    for dotted in values:
        check_override_key(profile, dotted)
    values = _scale_flash(profile, values)
    data = profile.model_dump(mode="python")
    for dotted, value in values.items():
        section, _, field = dotted.partition(".")
        data[section][field] = value
        old = data[section]["provenance"].get(field, "")
        if not old.startswith("fitted") or "pending" in old:
            data[section]["provenance"][field] = f"assumed: {note}"
    _widen_ranges(profile, data, values, note)
    return validate_union(PROFILE_ADAPTER, data, source=f"{profile.name} with overrides")
