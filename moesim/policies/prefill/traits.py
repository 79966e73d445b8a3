"""What a prefill policy is, as data: the record every policy declares once (its row of
:data:`moesim.policies.prefill.registry.TRAITS`), read instead of the policy's name.

The record says what the policy needs from a device, how experts reach the compute unit
(streamed into an arena, resident, or demand-paged), which weights it keeps resident and how
its runtime loads them, its smallest arena and its memory formula, and the function that sizes
its plan. Nothing here imports SimPy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from moesim.config.capabilities import PrefillDevice
from moesim.config.model import ModelSpec
from moesim.config.prefill import PrefillRun
from moesim.cost.coldstart import LoadPath
from moesim.cost.memory import MemoryBreakdown
from moesim.policies.prefill.plan import PlanBackend, PlanFloor, PlanIO, StreamPlan

__all__ = ["Need", "MemoryFormula", "PlanBuilder", "PolicyTraits"]

#: What a policy's request runs on, by the part of a device profile that prices it: ``npu`` the
#: HTP's matrix and vector units (``[htp]``; a policy that streams also maps an ``[arena]``),
#: ``flash`` the UFS (``[ufs]``: expert reads during the request), ``cpu`` the CPU cores
#: (``[cpu]``), ``gpu`` the mobile GPU (``[adreno]``), ``qnn`` QNN's precompiled graphs and context
#: binaries (``[qnn]``). Every policy also needs DRAM (``[memory]``), and its load phase reads flash.
Need = Literal["npu", "flash", "cpu", "gpu", "qnn"]
#: The memory outside the arena: ``(model, device, run, resident weights in bytes, the most tokens
#: routed to one expert of a layer) -> MemoryBreakdown`` (moesim.policies.prefill.memory).
MemoryFormula = Callable[[ModelSpec, PrefillDevice, PrefillRun, int, int], MemoryBreakdown]
#: The plan of one policy: ``(its options, model, device, routing counts [moe_layers, experts], what a
#: budget leaves the arena or None) -> StreamPlan``; the options are the policy's own model (``Any``:
#: each builder takes its own class, and the registry hands each the options of its kind).
PlanBuilder = Callable[[Any, ModelSpec, PrefillDevice, np.ndarray, int | None], StreamPlan]


@dataclass(frozen=True, kw_only=True)
class PolicyTraits:
    """One prefill policy, declared once.

    ``kind`` is its name (the ``kind`` of its options model in :data:`moesim.config.prefill.PrefillPolicy`);
    ``holds_every_weight``: it keeps every weight resident in DRAM (a non-offloading policy),
    else the non-expert weights only; ``min_arena_B``: the smallest arena it can run in, a
    function of the model (a budget check needs it before the plan is sized); ``load_path``: how
    its runtime reads the resident weights when the process loads (moesim.cost.coldstart);
    ``memory``: its memory outside the arena; ``plan``: its plan's builder.
    """

    kind: str
    needs: frozenset[Need]
    io: PlanIO
    backend: PlanBackend
    holds_every_weight: bool
    min_arena_B: Callable[[ModelSpec], int]
    load_path: LoadPath
    memory: MemoryFormula
    plan: PlanBuilder

    @property
    def streams(self) -> bool:
        """Whether it reads experts from flash into an arena during the request (G, B and Q mean something)."""
        return self.io == "stream"

    def floor(self, model: ModelSpec) -> PlanFloor:
        """What it holds before any plan is sized (Q4_0 weights): its resident weights, its
        smallest arena and how the load reads the resident weights."""
        weights = (model.total_weight_bytes("q4_0") if self.holds_every_weight
                   else model.resident_non_expert_bytes("q4_0"))
        return PlanFloor(resident_weights_B=weights, min_arena_B=self.min_arena_B(model), load_path=self.load_path)
