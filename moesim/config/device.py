"""Device profiles: hardware as data, one pydantic model per profile kind.

``kind = "mobile-npu"``: a phone SoC streaming experts from UFS to a Hexagon HTP
(:mod:`moesim.config.phone`, its units in :mod:`moesim.config.phone_units`).
``kind = "gpu-server"``: GPUs with HBM, with a separate *runtime* section so that the
software (a Transformers per-expert loop, a fused MoE kernel) can be swapped in a what-if
(:mod:`moesim.config.gpu_server`).
``kind = "host"``: the machine moesim runs on (:mod:`moesim.config.host`).
Every number has a unit suffix and a provenance note (see :mod:`moesim.config.sections`).
This module is the one import path for all of them and the union :data:`DeviceProfile`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, TypeAdapter

from moesim.config.gpu_server import (
    CodePathSection,
    GPURuntimeSection,
    GPUSection,
    GPUServerProfile,
    WeightOnlyKernel,
)
from moesim.config.host import HostCPUSection, HostMemorySection, HostProfile, StorageSection
from moesim.config.phone import (
    AdrenoSection,
    MobileNPUProfile,
    NPURuntimeSection,
    PowerSection,
    QNNSection,
    UncertaintySection,
)
from moesim.config.phone_units import ArenaSection, CPUSection, HTPSection, MemorySection, UFSSection

__all__ = [
    "MemorySection", "UFSSection", "HTPSection", "ArenaSection", "CPUSection",
    "NPURuntimeSection", "UncertaintySection", "PowerSection", "AdrenoSection", "QNNSection", "GPUSection",
    "GPURuntimeSection", "CodePathSection", "WeightOnlyKernel",
    "MobileNPUProfile", "GPUServerProfile", "HostProfile", "HostMemorySection", "StorageSection",
    "HostCPUSection", "DeviceProfile", "AnyProfile", "PROFILE_ADAPTER",
]

DeviceProfile = Annotated[MobileNPUProfile | GPUServerProfile | HostProfile, Field(discriminator="kind")]
#: a profile of any kind, as loaded (the union's members)
AnyProfile = MobileNPUProfile | GPUServerProfile | HostProfile
PROFILE_ADAPTER: TypeAdapter[AnyProfile] = TypeAdapter(DeviceProfile)
