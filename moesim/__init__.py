"""moesim: simulate and cost Mixture-of-Experts inference hardware.

The public API is the names in ``__all__``; everything else is internal. A notebook needs
only these::

    import moesim
    run = moesim.PrefillRun(model="olmoe-1b-7b", device="sd8-elite-gen5", tokens=1024)
    result = moesim.simulate_prefill(run)
    result.to_pandas()          # one flat row; result.spans is the timeline
"""

from __future__ import annotations

from moesim._version import __version__
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
