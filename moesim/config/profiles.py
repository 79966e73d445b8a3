"""Load device profiles from ``device_profiles/*.toml`` (bundled) or any TOML path.

Before schema validation every numeric key is checked for a unit suffix, so a field
written without its unit gets a message that says so rather than "unknown field". What-ifs on
a loaded profile (:func:`override_profile`) are in :mod:`moesim.config.overrides`, re-exported here.
"""

from __future__ import annotations

import hashlib
import json
import typing
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from moesim.config.base import Frozen
from moesim.config.capabilities import DecodeDevice, PrefillDevice, ProfileData, lacking
from moesim.config.device import PROFILE_ADAPTER, AnyProfile, GPUServerProfile, HostProfile, MobileNPUProfile
from moesim.config.loading import bundled_or_path, check_own_name, read_toml, validate_union
from moesim.config.overrides import check_override_key, override_profile, settable_fields
from moesim.errors import InputError
from moesim.files import atomic_path
from moesim.inputs import exists
from moesim.typing_ import TOMLValue
from moesim.units import UNIT_SUFFIXES, unit_of

__all__ = ["profile_dir", "profile_names", "load_profile", "load_profile_of", "list_profiles", "profile_hash",
           "override_profile", "check_override_key", "settable_fields", "write_profile", "AnyProfile",
           "phone_profile", "prefill_device", "decode_device", "gpu_profile"]

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


def _check_sections(data: dict[str, TOMLValue], source: str) -> None:
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


def _check_units(data: dict[str, TOMLValue], source: str, prefix: str = "") -> None:
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
    return validate_union(PROFILE_ADAPTER, data, source=str(path))


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
    refused for it, and so is one that lacks a number prefill reads (the error names it)."""
    if isinstance(device, (str, Path, MobileNPUProfile, GPUServerProfile, HostProfile)):
        return phone_profile(device, overrides, "prefill")
    return _built(device, overrides, PrefillDevice, "prefill")


def decode_device(device: str | Path | AnyProfile | DecodeDevice,
                  overrides: dict[str, float] | None = None) -> DecodeDevice:
    """The device a decode runs on, as :func:`prefill_device` resolves prefill's: a phone
    profile, or any object with the numbers decode reads
    (:class:`~moesim.config.capabilities.DecodeDevice`)."""
    if isinstance(device, (str, Path, MobileNPUProfile, GPUServerProfile, HostProfile)):
        return phone_profile(device, overrides, "decode")
    return _built(device, overrides, DecodeDevice, "decode")


D = TypeVar("D", bound=ProfileData)


def _built(device: D, overrides: dict[str, float] | None, capability: type, workload: str) -> D:
    """``device``, built in Python, when it has every number of ``capability`` and no ``overrides``."""
    built = f"{device.name} is a {type(device).__name__} built in Python"
    if overrides:
        raise InputError("overrides (--set)", f"apply to a device profile (TOML); {built}: build it with the numbers "
                         "instead", show_value=False)
    missing = lacking(device, capability)
    if missing is not None:
        raise InputError(missing, f"is a number {workload} reads of a device; {built} without it (None where the "
                         "device does not know it)", show_value=False)
    return device


def gpu_profile(device: str | Path | AnyProfile, overrides: dict[str, float] | None = None,
                workload: str = "specdecode") -> GPUServerProfile:
    """The GPU profile ``device`` (a name, a path or a profile) with ``overrides`` applied."""
    profile = load_profile_of(device, GPUServerProfile, workload)
    return load_profile_of(override_profile(profile, overrides), GPUServerProfile, workload) if overrides else profile
