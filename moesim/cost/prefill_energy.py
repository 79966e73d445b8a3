"""A prefill's energy from its simulated busy times (moesim.cost.energy's pure pricing of them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moesim.config.capabilities import PrefillDevice
from moesim.config.model import ModelSpec
from moesim.cost.coldstart import PricedLoad
from moesim.cost.energy import RunActivity, activation_bytes_moved, energy_breakdown_j
from moesim.cost.ops import expert_slice_cached
from moesim.cost.params import cpu_backend

__all__ = ["RequestTimes", "Energy", "prefill_energy"]


@dataclass(frozen=True, kw_only=True)
class RequestTimes:
    """What the energy needs of a simulated request: its time, the busy shares, the flash bytes,
    and how the backend ran the prompt."""

    ttft_s: float
    utilization: dict[str, float]
    io_bytes: int
    backend: str                   # "npu", "cpu" or "gpu"
    ubatch_tokens: int | None      # the CPU's micro-batch (weights stream once per pass)


@dataclass(frozen=True, kw_only=True)
class Energy:
    energy_j: float
    energy_j_interval: tuple[float, float]
    j_per_token: float
    tokens_per_j: float | None
    mean_power_w: float
    energy_breakdown_j: dict[str, float]


def prefill_energy(run: RequestTimes, request_interval: tuple[float, float] | None, device: PrefillDevice,
                   tokens: int, model: ModelSpec, counts: np.ndarray, load: PricedLoad) -> Energy | None:
    """Joules of the run (moesim.cost.energy), if the profile has power figures: nominal, and the
    90% interval from the request's time interval and the power ranges (low with low, high with
    high); a counted load adds its own activity at the same end."""
    power = device.power
    if power is None or run.backend == "gpu":   # the Adreno's power is not in the profile
        return None
    t, util = run.ttft_s, run.utilization
    passes = -(-tokens // run.ubatch_tokens) if run.backend == "cpu" and run.ubatch_tokens else 1
    w, active = model.expert_bytes("q4_0"), int((counts > 0).sum())
    weights_B = model.resident_non_expert_bytes("q4_0") + active * w
    dram_B = (run.io_bytes + passes * weights_B
              + activation_bytes_moved(tokens, model.num_layers, model.hidden_size, model.moe.top_k))
    if run.backend == "cpu" and not expert_slice_cached(w, cpu_backend(device)):   # each routed token streams
        dram_B += max(0, int(counts.sum()) - passes * active) * w

    def at(scale: float, end: str) -> dict[str, float]:
        activity = RunActivity(t * scale, util.get("npu", 0.0) * t * scale, util.get("cpu", 0.0) * t * scale,
                               util.get("ufs", 0.0) * t * scale, dram_B, run.backend == "npu")
        parts = energy_breakdown_j(activity, power.at(end))
        loading = load.activity(end, run.backend == "npu")
        if loading is not None:
            parts = {k: v + energy_breakdown_j(loading, power.at(end))[k] for k, v in parts.items()}
        return parts

    parts = at(1.0, "nominal")
    energy = sum(parts.values())
    lo_t, hi_t = request_interval or (t, t)
    low = sum(at(lo_t / t if t else 1.0, "low").values())
    high = sum(at(hi_t / t if t else 1.0, "high").values())
    total_t = t + load.counted_s()
    return Energy(energy_j=energy, energy_j_interval=(min(low, energy), max(high, energy)),
                  j_per_token=energy / tokens, tokens_per_j=tokens / energy if energy > 0 else None,
                  mean_power_w=energy / total_t if total_t > 0 else 0.0, energy_breakdown_j=parts)
