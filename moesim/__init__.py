"""moesim: simulate and cost Mixture-of-Experts inference hardware.

The public API is the names in ``__all__``; everything else is internal.
"""

from __future__ import annotations

__version__ = "0.1.0"

from moesim.errors import InputError, MoesimError, NotFittedError
from moesim.config.catalog import list_models, load_model
from moesim.config.device import GPUServerProfile, MobileNPUProfile
from moesim.config.formats import WeightFormat, tensor_bytes
from moesim.config.model import ModelSpec
from moesim.config.profiles import list_profiles, load_profile, profile_hash

__all__ = [
    "__version__",
    "InputError",
    "MoesimError",
    "NotFittedError",
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
]
