"""moesim: simulate and cost Mixture-of-Experts inference hardware.

The public API is the names in ``__all__``; everything else is internal. A notebook needs
only these::

    import moesim
    run = moesim.PrefillRun(model="olmoe-1b-7b", device="sd8-elite-gen5", tokens=1024)
    result = moesim.simulate_prefill(run)
    result.to_pandas()          # one flat row; result.spans is the timeline

The names are imported on first use (PEP 562), so ``import moesim`` and ``moesim --version``
load neither the simulator nor pandas.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from moesim._version import __version__

if TYPE_CHECKING:
    from moesim.config.catalog import list_models, load_model
    from moesim.config.decode import DecodeRun
    from moesim.config.device import GPUServerProfile, MobileNPUProfile
    from moesim.config.formats import WeightFormat, tensor_bytes
    from moesim.config.model import ModelSpec
    from moesim.config.prefill import (
        CPUPolicy,
        EStreamPolicy,
        LayerB2Policy,
        MmapPolicy,
        NaivePolicy,
        PrefillRun,
        ResidentPolicy,
    )
    from moesim.config.profiles import list_profiles, load_profile, profile_hash
    from moesim.config.specdecode import SpecDecodeRun
    from moesim.errors import InputError, MoesimError, NotFittedError
    from moesim.results import DecodeResult, PrefillResult, SpecDecodeResult
    from moesim.simulate.decode import simulate_decode
    from moesim.simulate.prefill import simulate_prefill
    from moesim.simulate.rerun import rerun
    from moesim.simulate.specdecode import simulate_specdecode
    from moesim.traces import RoutingTrace, read_trace

#: public name -> the module that defines it
_WHERE: dict[str, str] = {
    "simulate_prefill": "moesim.simulate.prefill",
    "simulate_specdecode": "moesim.simulate.specdecode",
    "simulate_decode": "moesim.simulate.decode",
    "rerun": "moesim.simulate.rerun",
    "read_trace": "moesim.traces",
    **dict.fromkeys(("PrefillRun", "EStreamPolicy", "ResidentPolicy", "NaivePolicy", "LayerB2Policy", "CPUPolicy",
                     "MmapPolicy"), "moesim.config.prefill"),
    "SpecDecodeRun": "moesim.config.specdecode",
    **dict.fromkeys(("PrefillResult", "SpecDecodeResult", "DecodeResult"), "moesim.results"),
    "DecodeRun": "moesim.config.decode",
    "RoutingTrace": "moesim.traces",
    "ModelSpec": "moesim.config.model",
    "MobileNPUProfile": "moesim.config.device",
    "GPUServerProfile": "moesim.config.device",
    "WeightFormat": "moesim.config.formats",
    "tensor_bytes": "moesim.config.formats",
    "load_model": "moesim.config.catalog",
    "list_models": "moesim.config.catalog",
    **dict.fromkeys(("load_profile", "list_profiles", "profile_hash"), "moesim.config.profiles"),
    **dict.fromkeys(("InputError", "MoesimError", "NotFittedError"), "moesim.errors"),
}

__all__ = [
    "__version__",
    # entry points
    "simulate_prefill",
    "simulate_specdecode",
    "simulate_decode",
    "rerun",
    "read_trace",
    # runs and results
    "PrefillRun",
    "EStreamPolicy",
    "ResidentPolicy",
    "NaivePolicy",
    "LayerB2Policy",
    "CPUPolicy",
    "MmapPolicy",
    "SpecDecodeRun",
    "PrefillResult",
    "SpecDecodeResult",
    "DecodeRun",
    "DecodeResult",
    "RoutingTrace",
    # models and devices
    "ModelSpec",
    "MobileNPUProfile",
    "GPUServerProfile",
    "WeightFormat",
    "tensor_bytes",
    "load_model",
    "list_models",
    "load_profile",
    "list_profiles",
    "profile_hash",
    # errors
    "InputError",
    "MoesimError",
    "NotFittedError",
]


def __getattr__(name: str) -> Any:
    """Import a public name on first use and keep it in the module."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'moesim' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
