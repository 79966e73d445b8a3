"""The in-process entry points, one module per workload, and the registry that serves every
surface that runs a workload by name (``moesim rerun``, ``moesim sweep``, the command line).

Each module is an entry point and no library of another: what they share (profiles by kind,
routing resolution, the draft's temperature model) lives in ``config/``, ``traces/`` and
``policies/``. Adding a workload is one module here and one :class:`Workload` entry: a grid's
parameters and a command's options are its run model's flat parameters (:mod:`moesim.config.schema`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from moesim.config import decode as decode_config
from moesim.config import specdecode as specdecode_config
from moesim.config.decode import DecodeRun
from moesim.config.device import GPUServerProfile, MobileNPUProfile
from moesim.config.prefill import PrefillRun
from moesim.config.profiles import gpu_profile, phone_profile
from moesim.config.specdecode import SpecDecodeRun
from moesim.results import DecodeResult, PrefillResult, SpecDecodeResult
from moesim.simulate.decode import simulate_decode
from moesim.simulate.prefill import simulate_prefill
from moesim.simulate.specdecode import simulate_specdecode

__all__ = ["Workload", "WORKLOADS", "OptionRule"]



class OptionRule(Protocol):
    """Why a run with ``values`` (flat parameters by name) does not read option ``name``, or None
    where it does; ``flag`` spells a parameter as the caller's user wrote it."""

    def __call__(self, name: str, values: Mapping[str, Any], flag: Callable[[str], str] = ...) -> str | None: ...


@dataclass(frozen=True, kw_only=True)
class Workload:
    """One workload: its run model, the kind of device it runs on, how to get that device's
    profile (with a run's overrides), how to simulate a run, and what a run returns; which options
    a run's settings leave unread (``ignored_option``, looking at ``options_depend_on``), where any."""

    name: str
    run_type: type[PrefillRun] | type[SpecDecodeRun] | type[DecodeRun]
    profile_kind: type[MobileNPUProfile] | type[GPUServerProfile]
    profile: Callable[..., MobileNPUProfile | GPUServerProfile]
    simulate: Callable[[Any], PrefillResult | SpecDecodeResult | DecodeResult]
    result_type: type[PrefillResult] | type[SpecDecodeResult] | type[DecodeResult]
    ignored_option: OptionRule | None = None
    options_depend_on: tuple[str, ...] = ()


#: every workload by the name results and grids carry (``config.workload``, ``fixed.workload``)
WORKLOADS: dict[str, Workload] = {
    "prefill": Workload(name="prefill", run_type=PrefillRun, profile_kind=MobileNPUProfile,
                        profile=lambda device, overrides: phone_profile(device, overrides, "prefill"),
                        simulate=simulate_prefill, result_type=PrefillResult),
    "specdecode": Workload(name="specdecode", run_type=SpecDecodeRun, profile_kind=GPUServerProfile,
                           profile=lambda device, overrides: gpu_profile(device, overrides, "specdecode"),
                           simulate=simulate_specdecode, result_type=SpecDecodeResult,
                           ignored_option=specdecode_config.ignored_option,
                           options_depend_on=specdecode_config.OPTIONS_DEPEND_ON),
    "decode": Workload(name="decode", run_type=DecodeRun, profile_kind=MobileNPUProfile,
                       profile=lambda device, overrides: phone_profile(device, overrides, "decode"),
                       simulate=simulate_decode, result_type=DecodeResult,
                       ignored_option=decode_config.ignored_option, options_depend_on=decode_config.OPTIONS_DEPEND_ON),
}
