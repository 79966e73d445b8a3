"""Energy of a run from its timeline and the profile's power figures: pure.

Each component spends its active power while busy and its idle power for the rest of the
run; DRAM spends energy per byte moved; the SoC's base power (uncore, DRAM background,
rails) runs for the whole request:

    E = P_base T + sum_c [P_c,active B_c + P_c,idle (T - B_c)] + e_DRAM x bytes

with ``T`` the run's time and ``B_c`` component ``c``'s busy time (from the simulated
utilisation). An engine a policy never uses is powered off (the NPU for the CPU baseline).
DRAM bytes are estimated, not simulated: what UFS writes into the arena, every weight the
compute engine reads once per pass over the prompt (micro-batches on the CPU; the NPU's
re-streaming of weights for VTCM chunks is left out, so this is a lower estimate), and the
activations: per token, layer and hidden element 4 B x (8 + 2 k) for the residual stream,
norms, attention input and output, and the gather and scatter of the k routed rows.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RunActivity", "energy_breakdown_j", "activation_bytes_moved"]

_RESIDUAL_PASSES = 8       # per layer: 2 norms (r/w), attention in and out, 2 residual adds
_FP32_B = 4


@dataclass(frozen=True)
class RunActivity:
    """What a run kept busy, in seconds, and the DRAM bytes it moved."""

    time_s: float
    npu_busy_s: float
    cpu_busy_s: float
    ufs_busy_s: float
    dram_B: float
    npu_in_use: bool


def activation_bytes_moved(tokens: int, layers: int, hidden: int, top_k: int) -> float:
    """DRAM bytes of activations a prefill moves (the estimate in the module docstring).

    >>> activation_bytes_moved(1, 1, 1, 8)
    96.0
    """
    return float(tokens * layers * hidden * _FP32_B * (_RESIDUAL_PASSES + 2 * top_k))


def energy_breakdown_j(run: RunActivity, power: dict[str, float]) -> dict[str, float]:
    """Joules by component (``base``, ``npu``, ``cpu``, ``ufs``, ``dram``) for power figures
    ``power`` (W, and ``dram_pJpB``; :meth:`moesim.config.device.PowerSection.at`).

    >>> p = {"soc_base": 1.0, "npu_active": 4.0, "npu_idle": 0.5, "cpu_active": 10.0, "cpu_idle": 0.25,
    ...      "ufs_read": 2.0, "ufs_idle": 0.0, "dram_pJpB": 10.0}
    >>> energy_breakdown_j(RunActivity(2.0, 1.0, 0.0, 2.0, 1e11, True), p)
    {'base': 2.0, 'npu': 4.5, 'cpu': 0.5, 'ufs': 4.0, 'dram': 1.0}
    """
    t = max(run.time_s, 0.0)

    def part(active: str, idle: str, busy: float) -> float:
        b = min(max(busy, 0.0), t)
        return power[active] * b + power[idle] * (t - b)

    return {
        "base": power["soc_base"] * t,
        "npu": part("npu_active", "npu_idle", run.npu_busy_s) if run.npu_in_use else 0.0,
        "cpu": part("cpu_active", "cpu_idle", run.cpu_busy_s),
        "ufs": part("ufs_read", "ufs_idle", run.ufs_busy_s),
        "dram": max(run.dram_B, 0.0) * power["dram_pJpB"] * 1e-12,
    }
