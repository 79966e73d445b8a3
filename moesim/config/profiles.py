"""Load device profiles from ``device_profiles/*.toml`` (bundled) or any TOML path.

Before schema validation every numeric key is checked for a unit suffix, so a field
written without its unit gets a message that says so rather than "unknown field".
"""

from __future__ import annotations

import hashlib
import json
import math
import typing
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from pydantic import TypeAdapter

from moesim.config.base import Frozen
from moesim.config.capabilities import PrefillDevice, ProfileData
from moesim.config.device import DeviceProfile, GPUServerProfile, HostProfile, MobileNPUProfile
from moesim.config.loading import bundled_or_path, check_own_name, read_toml, validate_union
from moesim.config.sections import Section, numeric_fields
from moesim.errors import InputError, format_value
from moesim.files import atomic_path
from moesim.inputs import exists
from moesim.units import UNIT_SUFFIXES, unit_of

__all__ = ["profile_dir", "profile_names", "load_profile", "load_profile_of", "list_profiles", "profile_hash",
           "override_profile", "check_override_key", "settable_fields", "write_profile", "AnyProfile",
           "phone_profile", "prefill_device", "gpu_profile"]

AnyProfile = MobileNPUProfile | GPUServerProfile | HostProfile
_ADAPTER: TypeAdapter[AnyProfile] = TypeAdapter(DeviceProfile)
_NON_NUMERIC_TABLES = {"provenance"}


def profile_dir() -> Path:
    """Bundled profiles: inside the wheel, or ``device_profiles/`` of a source checkout."""
    here = Path(__file__).resolve().parent.parent
    bundled = here / "_bundled" / "device_profiles"
    return bundled if bundled.is_dir() else here.parent / "device_profiles"


def profile_names() -> list[str]:
    return sorted(p.stem for p in profile_dir().glob("*.toml"))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_sections(data: dict[str, Any], source: str) -> None:
    """An unknown ``[section]`` is named as such (before its numbers are checked for units)."""
    kinds: dict[str, type[Frozen]] = {"mobile-npu": MobileNPUProfile, "gpu-server": GPUServerProfile,
                                      "host": HostProfile}
    cls = kinds.get(str(data.get("kind")))
    if cls is None:
        return
    for key, value in data.items():
        if isinstance(value, dict) and key not in cls.model_fields:
            known = ", ".join(k for k, f in cls.model_fields.items() if k not in ("name", "kind", "display_name",
                                                                                  "description"))
            raise InputError(f"[{key}]", f"is not a section of a {data['kind']} profile (sections: {known})",
                             show_value=False, source=source)


def _check_units(data: dict[str, Any], source: str, prefix: str = "") -> None:
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            if key not in _NON_NUMERIC_TABLES:
                _check_units(value, source, path + ".")
        elif _is_number(value) or (isinstance(value, list) and value and all(_is_number(v) for v in value)):
            if unit_of(key) is not None:
                continue
            units = ", ".join(UNIT_SUFFIXES)
            raise InputError(path, f"is a number without a unit suffix (name it with one of {units})",
                             value, source=source)


def _read(path: Path) -> AnyProfile:
    data = read_toml(path, "device")
    _check_sections(data, str(path))
    _check_units(data, str(path))
    if "kind" not in data:
        raise InputError("kind", "is required (\"mobile-npu\", \"gpu-server\" or \"host\")", show_value=False,
                         source=str(path))
    return validate_union(_ADAPTER, data, source=str(path))


@cache
def _bundled(name: str) -> AnyProfile:
    profile = _read(profile_dir() / f"{name}.toml")
    assert profile.name == name, f"{name}.toml declares name {profile.name!r}"
    return profile


def load_profile(name_or_path: str | Path) -> AnyProfile:
    """A bundled profile by name (``sd8-elite-gen5``) or a profile TOML file by path."""
    names = profile_names()
    path = bundled_or_path(name_or_path, names, "device", f"a bundled profile ({', '.join(names)}) or a .toml file")
    if isinstance(path, str):
        return _bundled(path)
    if path.suffix == ".toml" or exists(path):
        profile = _read(path)
        check_own_name(profile.name, path, profile_dir(), "profile")
        return profile
    raise InputError("device", f"must be a bundled profile ({', '.join(names)}) or a .toml file", str(name_or_path))


def write_profile(text: str, path: Path) -> Path:
    """Replace the profile file ``path`` with ``text`` atomically, once ``text`` loads as a
    profile; on any error the old file is left as it was."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
        _read(tmp)
    return path


P = TypeVar("P", MobileNPUProfile, GPUServerProfile, HostProfile)


def load_profile_of(device: str | Path | AnyProfile, kind: type[P], purpose: str) -> P:
    """A profile (name, path or object) that must be of ``kind`` for ``purpose``."""
    profile = device if isinstance(device, (MobileNPUProfile, GPUServerProfile, HostProfile)) else load_profile(device)
    if not isinstance(profile, kind):
        wanted = typing.get_args(kind.model_fields["kind"].annotation)[0]  # the Literal's value
        raise InputError("device", f"must be a {wanted} profile for {purpose}, {profile.name} is {profile.kind}",
                         profile.name)
    return profile


def list_profiles() -> list[AnyProfile]:
    return [_bundled(n) for n in profile_names()]


def profile_hash(profile: ProfileData) -> str:
    """sha256 of the profile's canonical JSON: identifies the exact numbers a run used."""
    canonical = json.dumps(profile.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


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
    return validate_union(_ADAPTER, data, source=f"{profile.name} with overrides")


def phone_profile(device: str | Path | AnyProfile, overrides: dict[str, float] | None = None,
                  workload: str = "prefill") -> MobileNPUProfile:
    """The phone profile ``device`` (a name, a path or a profile) with ``overrides`` applied;
    ``workload`` (prefill, decode, ...) is named when the profile is of another kind."""
    profile = load_profile_of(device, MobileNPUProfile, workload)
    return load_profile_of(override_profile(profile, overrides), MobileNPUProfile, workload) if overrides else profile


def prefill_device(device: str | Path | AnyProfile | PrefillDevice,
                   overrides: dict[str, float] | None = None) -> PrefillDevice:
    """The device a prefill runs on: a phone profile (a name, a path or a profile, ``overrides``
    applied; another kind of profile is refused), or any other object with the numbers prefill
    reads (:class:`~moesim.config.capabilities.PrefillDevice`, built in Python), as it is: a
    what-if on such a device is another device built with other numbers, so ``overrides`` are
    refused for it."""
    if isinstance(device, (str, Path, MobileNPUProfile, GPUServerProfile, HostProfile)):
        return phone_profile(device, overrides)
    if overrides:
        raise InputError("overrides (--set)", f"apply to a device profile (TOML); {device.name} is a "
                         f"{type(device).__name__} built in Python: build it with the numbers instead",
                         show_value=False)
    return device


def gpu_profile(device: str | Path | AnyProfile, overrides: dict[str, float] | None = None,
                workload: str = "specdecode") -> GPUServerProfile:
    """The GPU profile ``device`` (a name, a path or a profile) with ``overrides`` applied."""
    profile = load_profile_of(device, GPUServerProfile, workload)
    return load_profile_of(override_profile(profile, overrides), GPUServerProfile, workload) if overrides else profile
