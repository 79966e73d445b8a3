"""The in-process entry points, one module per workload, and the registry that serves every
surface that runs a workload by name (``moesim rerun``, ``moesim sweep``).

Each module is an entry point and no library of another: what they share (profiles by kind,
routing resolution, the draft's temperature model) lives in ``config/``, ``traces/`` and
``policies/``. Adding a workload is one module here and one :class:`Workload` entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from moesim.config.decode import DecodeRun
from moesim.config.device import GPUServerProfile, MobileNPUProfile
from moesim.config.prefill import PrefillRun
from moesim.config.profiles import gpu_profile, phone_profile
from moesim.config.specdecode import SpecDecodeRun
from moesim.results import DecodeResult, PrefillResult, SpecDecodeResult
from moesim.simulate.decode import simulate_decode
from moesim.simulate.prefill import simulate_prefill
from moesim.simulate.specdecode import simulate_specdecode

__all__ = ["Workload", "WORKLOADS"]


@dataclass(frozen=True, kw_only=True)
class Workload:
    """One workload: its run model, the kind of device it runs on, how to get that device's
    profile (with a run's overrides), how to simulate a run, and what a run returns."""

    name: str
    run_type: type[PrefillRun] | type[SpecDecodeRun] | type[DecodeRun]
    profile_kind: type[MobileNPUProfile] | type[GPUServerProfile]
    profile: Callable[..., MobileNPUProfile | GPUServerProfile]
    simulate: Callable[[Any], PrefillResult | SpecDecodeResult | DecodeResult]
    result_type: type[PrefillResult] | type[SpecDecodeResult] | type[DecodeResult]


#: every workload by the name results and grids carry (``config.workload``, ``fixed.workload``)
WORKLOADS: dict[str, Workload] = {
    "prefill": Workload(name="prefill", run_type=PrefillRun, profile_kind=MobileNPUProfile,
                        profile=lambda device, overrides: phone_profile(device, overrides, "prefill"),
                        simulate=simulate_prefill, result_type=PrefillResult),
    "specdecode": Workload(name="specdecode", run_type=SpecDecodeRun, profile_kind=GPUServerProfile,
                           profile=lambda device, overrides: gpu_profile(device, overrides, "specdecode"),
                           simulate=simulate_specdecode, result_type=SpecDecodeResult),
    "decode": Workload(name="decode", run_type=DecodeRun, profile_kind=MobileNPUProfile,
                       profile=lambda device, overrides: phone_profile(device, overrides, "decode"),
                       simulate=simulate_decode, result_type=DecodeResult),
}
