"""Run configurations: one pydantic model per prefill policy, in a discriminated union.

Checks that need the model or the device (group size vs expert count, queue depth vs
the UFS queue) happen when the run is resolved, with the same one-line errors.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

__all__ = ["Prefetch", "EStreamPolicy", "ResidentPolicy", "NaivePolicy", "LayerB2Policy", "CPUPolicy",
           "MmapPolicy", "PrefillPolicy", "PrefillRun", "POLICY_NAMES"]

Prefetch = Literal["non-ffn", "after-routing", "on-demand"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EStreamPolicy(_Frozen):
    """Expert streaming through B banks of G experts with Q reads in flight."""

    kind: Literal["estream"] = "estream"
    group_size: PositiveInt | None = Field(None, description="experts per group; None = default rule")
    banks: Annotated[int, Field(ge=2)] | None = Field(None, description="banks in the arena; None = default rule")
    queue_depth: PositiveInt | None = Field(None, description="reads in flight; None = the profile's default")
    prefetch: Prefetch = Field("non-ffn", description="when a layer's reads may start")


class ResidentPolicy(_Frozen):
    """All experts resident in DRAM; the NPU never waits for I/O."""

    kind: Literal["resident"] = "resident"


class NaivePolicy(_Frozen):
    """Load a group, then compute it: one buffer, no overlap."""

    kind: Literal["naive"] = "naive"
    group_size: PositiveInt = 1


class LayerB2Policy(_Frozen):
    """Two layer-sized buffers: the next layer's experts load while this one computes."""

    kind: Literal["layer-b2"] = "layer-b2"
    queue_depth: PositiveInt | None = None


class CPUPolicy(_Frozen):
    """llama.cpp-like execution on the CPU cores with all weights resident."""

    kind: Literal["cpu"] = "cpu"
    ubatch_tokens: PositiveInt = Field(512, description="prompt tokens per forward (llama.cpp n_ubatch)")


class MmapPolicy(_Frozen):
    """llama.cpp-like CPU execution with experts demand-paged from a memory-mapped file."""

    kind: Literal["mmap"] = "mmap"
    ubatch_tokens: PositiveInt = Field(512, description="prompt tokens per forward (llama.cpp n_ubatch)")


PrefillPolicy = Annotated[
    EStreamPolicy | ResidentPolicy | NaivePolicy | LayerB2Policy | CPUPolicy | MmapPolicy,
    Field(discriminator="kind"),
]
POLICY_NAMES = ("estream", "resident", "naive", "layer-b2", "cpu", "mmap")


class PrefillRun(_Frozen):
    """Everything one prefill simulation needs, fully resolved names included."""

    model: str
    device: str
    tokens: PositiveInt
    policy: PrefillPolicy = Field(default_factory=EStreamPolicy)
    memory_budget_GiB: PositiveFloat | None = None
    trace: str | None = Field(None, description="canonical trace file; None = the model's default source")
    seed: int = 0
