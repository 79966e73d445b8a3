"""The workloads ``moesim require`` prices: a value of one resource -> the target metric.

Each workload has a fast evaluator (``fast``: the number the search bisects on) and a
confirmation (``confirm``: the full model at one value, with what binds there).

- :class:`PrefillWorkload` (phone): TTFT of EStream prefill with G and B chosen by the
  auto-configurator's rule for that hardware (Q the profile's default), as ``moesim prefill``
  does; fast = the max-plus evaluator through :func:`moesim.policies.prefill.search.select`,
  confirmed by the discrete-event simulation (:func:`moesim.simulate.prefill.simulate_routing`).
- :class:`GPUDecodeWorkload` (GPU server): tokens/s of batch-1 autoregressive decoding, the
  closed form :func:`moesim.cost.verify.ar_time` (what ``moesim specdecode`` reports as ``ar``);
  the model must fit the HBM of the GPUs it spans.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from moesim.config.device import GPUServerProfile, MobileNPUProfile
from moesim.config.model import ModelSpec
from moesim.config.prefill import EStreamPolicy, PrefillRun
from moesim.config.profiles import override_profile
from moesim.cost.params import Backend, npu_backend, ufs_params
from moesim.cost.pipeline import ServiceTimes, service_times, with_flash
from moesim.cost.verify import ar_time, comm_time, forward_bytes, runtime_time, verify_params
from moesim.errors import InputError
from moesim.limits import check_prompt_tokens
from moesim.policies.prefill.memory import budget_check
from moesim.policies.prefill.registry import non_arena_memory, plan_floor
from moesim.policies.prefill.search import StoredProfile, build_profile, select
from moesim.simulate.prefill import routing_counts, simulate_routing
from moesim.traces.sources import prompt_routing
from moesim.units import GiB

from .resources import Resource, overrides_at

__all__ = ["Metric", "Confirmed", "PrefillWorkload", "GPUDecodeWorkload", "fits_hbm"]

Metric = Literal["ttft_s", "tokens_per_s"]


@dataclass(frozen=True, kw_only=True)
class Confirmed:
    """The full model at one value: the metric (None: the run does not fit), what binds, details."""

    metric: float | None
    binding: str = ""
    detail: dict[str, float | int | str] = field(default_factory=dict)


@dataclass(kw_only=True)
class PrefillWorkload:
    """EStream prefill of ``tokens`` tokens on a phone, the routing drawn once."""

    model: ModelSpec
    device: MobileNPUProfile
    device_arg: str
    tokens: int
    budget_GiB: float | None = None
    overrides: dict[str, float] = field(default_factory=dict)
    trace: str | None = None
    seed: int = 0
    metric: Metric = "ttft_s"

    def __post_init__(self) -> None:
        check_prompt_tokens(self.tokens, self.model.name, self.model.num_moe_layers, self.model.moe.top_k)
        self.routing, self.provenance = prompt_routing(self.model, self.tokens, path=self.trace, seed=self.seed)
        self.counts = routing_counts(self.routing, self.model.moe.num_routed_experts)
        self._profiles: dict[tuple[tuple[str, float], ...], StoredProfile] = {}
        self._times: dict[Backend, ServiceTimes] = {}    # one compute side per NPU, whatever the flash

    def _run(self, res: Resource, value: float) -> tuple[PrefillRun, MobileNPUProfile]:
        extra = overrides_at(res, self.device, value)
        device = override_profile(self.device, extra) if extra else self.device
        assert isinstance(device, MobileNPUProfile)
        budget = value if res.field == "memory_budget_GiB" else self.budget_GiB
        run = PrefillRun(model=self.model.name, device=self.device_arg, tokens=self.tokens, trace=self.trace,
                         seed=self.seed, memory_budget_GiB=budget, policy=EStreamPolicy(),
                         overrides={**self.overrides, **extra})
        return run, device

    def _stored(self, device: MobileNPUProfile, key: tuple[tuple[str, float], ...]) -> StoredProfile:
        if key not in self._profiles:
            be = npu_backend(device)
            known = self._times.get(be)
            st = (service_times(self.model, be, ufs_params(device), self.counts, self.tokens) if known is None
                  else with_flash(known, ufs_params(device)))
            self._times.setdefault(be, st)
            self._profiles[key] = build_profile(st)
        return self._profiles[key]

    def fast(self, res: Resource, value: float) -> float | None:
        """Predicted TTFT (s) at ``value`` by the max-plus evaluator (None: nothing fits)."""
        run, device = self._run(res, value)
        base = non_arena_memory(self.model, device, run, "estream", int(self.counts.max()))
        try:
            arena = budget_check(run, base, plan_floor("estream", self.model).min_arena_B, device.memory.usable_GiB)
        except InputError:
            return None
        limit = min(int(device.arena.max_mapped_GiB * GiB), int(device.memory.usable_GiB * GiB) - base.total_B)
        if arena is not None:
            limit = min(limit, arena)
        profile = self._stored(device, tuple(sorted(overrides_at(res, self.device, value).items())))
        choice = select(profile, limit, EStreamPolicy().prefetch, queue_depth=device.ufs.default_queue_depth_count)
        return None if choice is None else choice.ttft_ns / 1e9

    def confirm(self, res: Resource, value: float) -> Confirmed:
        """The discrete-event simulation at ``value``: TTFT and what binds (flash or NPU)."""
        run, device = self._run(res, value)
        try:
            m = simulate_routing(run, self.model, device, self.routing, self.provenance).metrics
        except InputError:
            return Confirmed(metric=None, binding="does not fit")
        ufs, npu = m.utilization.get("ufs", 0.0), m.utilization.get("npu", 0.0)
        binding = "flash reads (UFS)" if ufs >= npu else "NPU compute"
        cfg = m.config
        detail: dict[str, float | int | str] = {
            "ufs_busy_share": ufs, "npu_busy_share": npu, "bubble_share": m.bubble_share,
            "peak_memory_GiB": m.peak_memory_GiB, "config": f"G={cfg.group_size} B={cfg.banks} Q={cfg.queue_depth}"}
        return Confirmed(metric=m.ttft_s, binding=binding, detail=detail)


def fits_hbm(model: ModelSpec, device: GPUServerProfile) -> bool:
    """Whether the model's weights fit the HBM of the GPUs one forward spans (the rule of
    :func:`moesim.simulate.specdecode.simulate_specdecode`)."""
    return model.total_weight_bytes() <= device.weight_gpus() * device.gpu.hbm_capacity_GiB * GiB


@dataclass(kw_only=True)
class GPUDecodeWorkload:
    """Batch-1 autoregressive decoding on a GPU server (closed form)."""

    model: ModelSpec
    device: GPUServerProfile
    metric: Metric = "tokens_per_s"

    def _device(self, res: Resource, value: float) -> GPUServerProfile:
        out = override_profile(self.device, overrides_at(res, self.device, value))
        assert isinstance(out, GPUServerProfile)
        return out

    def fast(self, res: Resource, value: float) -> float | None:
        try:
            device = self._device(res, value)
        except InputError:
            return None                  # e.g. fewer GPUs than the runtime's tensor-parallel count
        if not fits_hbm(self.model, device):
            return None
        return 1.0 / ar_time(verify_params(device, self.model))

    def confirm(self, res: Resource, value: float) -> Confirmed:
        tps = self.fast(res, value)
        if tps is None:
            return Confirmed(metric=None, binding="does not fit")
        p = verify_params(self._device(res, value), self.model)
        active = float(p.n_moe_layers * p.top_k)
        parts = {"hbm_s": float(np.asarray(forward_bytes(p, active))) / p.hbm_Bps,
                 "runtime_s": float(runtime_time(p, active, 1)), "comm_s": float(comm_time(p, 1))}
        names = {"hbm_s": "HBM bandwidth", "runtime_s": "software runtime (launches, host)",
                 "comm_s": "GPU communication"}
        top = max(parts, key=lambda k: parts[k])
        return Confirmed(metric=tps, binding=names[top],
                         detail={**parts, "t_token_s": 1.0 / tps, "gpus": self._device(res, value).gpu.gpus_count})

