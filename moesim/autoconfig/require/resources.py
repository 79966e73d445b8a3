"""The resources ``moesim require`` can size: the profile field (or run field) each sets, its
unit and the physical range searched.

The range is 1/64x to 64x of the profile's value (:data:`SPAN`), cut where the profile's own
validators stop: the physical range of the field's unit (``moesim.config.sections.UNIT_BOUNDS``
and ``RATE_FLOORS``: e.g. at most 100 TB/s of HBM), the flash's peak read rate below the DRAM
bus (``memory.peak_bw_GBps``), HBM above the host's DRAM bus; the memory budget runs from 1/64
of the phone's usable DRAM to all of it (a larger budget constrains nothing), and the GPU count
from 1 to 64 (8 nodes of 8).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from moesim.config.device import GPUServerProfile, MobileNPUProfile
from moesim.config.profiles import AnyProfile
from moesim.config.sections import RATE_FLOORS, UNIT_BOUNDS
from moesim.errors import InputError
from moesim.units import unit_of

__all__ = ["Resource", "RESOURCES", "SPAN", "MAX_GPUS", "resource_of", "resources_for", "physical_range",
           "profile_value", "overrides_at"]

#: the searched range around the profile's value, each way
SPAN = 64.0
#: the most GPUs searched (8 nodes of 8)
MAX_GPUS = 64
#: how far inside a validator's strict bound the range stops
_INSIDE = 1e-4

Kind = Literal["mobile-npu", "gpu-server"]


@dataclass(frozen=True, kw_only=True)
class Resource:
    """One resource: ``field`` is ``SECTION.FIELD`` of the profile, or ``memory_budget_GiB`` (the run's)."""

    name: str
    kind: Kind
    field: str
    unit: str
    what: str
    carried: tuple[str, ...] = ()     # fields scaled by the same ratio (a faster or slower part of the same kind)
    integer: bool = False


RESOURCES: dict[str, Resource] = {r.name: r for r in (
    Resource(name="ufs", kind="mobile-npu", field="ufs.peak_read_bw_GBps", unit="GB/s",
             what="flash peak read rate (every UFS rate derived from it scales with it)"),
    Resource(name="memory", kind="mobile-npu", field="memory_budget_GiB", unit="GiB",
             what="peak-memory budget of the prefill (at most the phone's usable DRAM)"),
    Resource(name="npu", kind="mobile-npu", field="htp.hmx_fp16_TFLOPS", unit="TFLOPS",
             what="NPU matrix (HMX) fp16 rate"),
    Resource(name="hbm", kind="gpu-server", field="gpu.hbm_peak_bw_TBps", unit="TB/s",
             what="HBM peak bandwidth per GPU (the measured read and triad rates scale with it)",
             carried=("gpu.hbm_measured_read_bw_TBps", "gpu.hbm_measured_triad_bw_TBps")),
    Resource(name="gpus", kind="gpu-server", field="gpu.gpus_count", unit="GPUs",
             what="GPUs the model is split over (tensor parallel)", integer=True),
)}


def resources_for(kind: str) -> list[Resource]:
    return [r for r in RESOURCES.values() if r.kind == kind]


def resource_of(name: str, profile: AnyProfile) -> Resource:
    """The resource ``name`` for ``profile``'s kind (InputError naming the choices)."""
    res = RESOURCES.get(name)
    mine = ", ".join(r.name for r in resources_for(profile.kind))
    if res is None:
        raise InputError("--resource", f"must be one of {', '.join(RESOURCES)}", name)
    if res.kind != profile.kind:
        raise InputError("--resource", f"is not a resource of the {profile.kind} profile {profile.name} "
                         f"(its resources: {mine})", name)
    return res


def _get(profile: AnyProfile, dotted: str) -> float | None:
    section, _, field = dotted.partition(".")
    value = getattr(getattr(profile, section), field)
    return None if value is None else float(value)


def profile_value(res: Resource, profile: AnyProfile) -> float:
    """The profile's own value of ``res`` (the memory budget's: the usable DRAM)."""
    if res.field == "memory_budget_GiB":
        assert isinstance(profile, MobileNPUProfile)
        return profile.memory.usable_GiB
    value = _get(profile, res.field)
    if value is None:
        raise InputError(res.field, f"is not set in profile {profile.name}, so --resource {res.name} has no "
                         "value to search around", show_value=False)
    return value


def physical_range(res: Resource, profile: AnyProfile) -> tuple[float, float]:
    """The range searched (module doc)."""
    v = profile_value(res, profile)
    if res.integer:
        return 1.0, float(MAX_GPUS)
    if res.name == "memory":
        return v / SPAN, v
    low, high = v / SPAN, v * SPAN
    unit = unit_of(res.field) or ""
    if unit in UNIT_BOUNDS:
        high = min(high, UNIT_BOUNDS[unit][0])
    if unit in RATE_FLOORS:
        low = max(low, RATE_FLOORS[unit][0])
    if isinstance(profile, MobileNPUProfile) and res.name == "ufs":
        high = min(high, profile.memory.peak_bw_GBps * (1 - _INSIDE))
    if isinstance(profile, GPUServerProfile) and res.name == "hbm":
        low = max(low, profile.memory.peak_bw_GBps / 1000 * (1 + _INSIDE))
    return low, high


def overrides_at(res: Resource, profile: AnyProfile, value: float) -> dict[str, float]:
    """The ``--set`` overrides that put ``res`` at ``value`` ({} for the run's memory budget)."""
    if res.field == "memory_budget_GiB":
        return {}
    out = {res.field: float(round(value)) if res.integer else value}
    ratio = value / profile_value(res, profile)
    for dotted in res.carried:
        current = _get(profile, dotted)
        if current is not None:
            out[dotted] = current * ratio
    return out
