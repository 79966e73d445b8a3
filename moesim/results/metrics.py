"""The metrics of each workload: the stable keys of its ``--json`` (docs/metrics.md,
docs/specdecode.md and docs/decode.md define each), the resolved configuration last."""

from __future__ import annotations

from pydantic import Field

from moesim.config.base import Frozen
from moesim.cost.coldstart import LoadPath
from moesim.results.config import DecodeConfig, PredictorUse, PrefillConfig, SpecDecodeConfig
from moesim.traces.provenance import DecodeProvenance

__all__ = ["PrefillMetrics", "SpecDecodeMetrics", "DecodeMetrics"]


class PrefillMetrics(Frozen):
    """The stable keys of ``moesim prefill --json`` (docs/metrics.md defines each)."""

    ttft_s: float
    tokens_per_s: float
    peak_memory_GiB: float
    ttft_s_interval: tuple[float, float] | None = None        # 90%; None: the profile states no uncertainty
    tokens_per_s_interval: tuple[float, float] | None = None
    peak_memory_GiB_interval: tuple[float, float] | None = None
    load_s: float | None = None                   # the load phase before the request; in ttft_s if ttft_from=launch
    load_s_interval: tuple[float, float] | None = None
    load_io_bytes: int | None = None              # bytes the load read from flash (0: a warm page cache)
    load_path: LoadPath | None = None                 # "page-cache" or "direct" (None: the profile cannot price it)
    memory_interval_over_budget: bool | None = None   # the interval's upper end > the budget (None: no budget)
    energy_j: float | None = None                 # None: the profile has no [power] figures
    energy_j_interval: tuple[float, float] | None = None
    j_per_token: float | None = None
    tokens_per_j: float | None = None
    mean_power_w: float | None = None
    energy_breakdown_j: dict[str, float] | None = None
    fits_device_memory: bool
    memory_GiB: dict[str, float]
    bubble_share: float
    bubble_share_total: float
    io_bytes: int
    io_amplification: float
    utilization: dict[str, float]
    bounds_s: dict[str, float]
    wasted_reads: int | None = None          # streaming policies
    max_reads_in_flight: int | None = None   # streaming policies
    page_faults: int | None = None           # cpu and mmap policies
    refaults: int | None = None              # cpu and mmap policies
    sim: dict[str, int | float]
    config: PrefillConfig


class SpecDecodeMetrics(Frozen):
    """The stable keys of ``moesim specdecode --json`` (docs/specdecode.md defines each)."""

    batch_size: int = 1
    temperature: float = 0.0                   # 0 greedy, 1 rejection sampling
    acceptance_scale: float = 1.0              # the draft's acceptance at this temperature relative to greedy
    mean_active_experts: float
    acceptance_length: float
    hbm_bytes_per_step: float
    hbm_expert_bytes_estimate_per_step: float = 0.0   # the paper's estimate: E x MoE layers x one expert's bytes
    t_draft_s: float
    t_pred_s: float
    t_verify_s: float
    t_step_s: float
    tokens_per_s: float
    speedup_vs_ar: float
    rho: float                                 # plain decoding's step time / T_verify at the same batch
    steps: int
    predictor_accuracy: float | None
    per_layer_active_experts: list[float]
    t_verify_runtime_s: float
    t_verify_comm_s: float = 0.0               # collectives of the verification forward (tensor / expert parallel)
    mean_verified_tokens: float
    ar: dict[str, float]
    predictor: PredictorUse
    sources: dict[str, str]
    sim: dict[str, int | float]
    config: SpecDecodeConfig
    runtime_path: str | None = None            # the model's MoE code path on the runtime (None: the generic form)
    verify_depends_on_union: bool = True       # False: cost-aware selection cannot save verification time
    parallel: dict[str, int] = Field(default_factory=dict)   # tensor_parallel, expert_parallel (GPUs)
    notes: list[str] = Field(default_factory=list)


class DecodeMetrics(Frozen):
    """The stable keys of ``moesim decode --json`` (docs/decode.md defines each)."""

    tokens_per_s: float
    ms_per_token: dict[str, float]          # mean, p50, p90, p99 over generated tokens
    cache_hit_rate: float
    belady_hit_rate: float                  # Belady's optimal policy on the same accesses, same slots
    ufs_bytes_per_token: float
    peak_memory_GiB: float
    peak_memory_GiB_interval: tuple[float, float] | None = None   # 90%, from the runtime overhead's range
    fits_device_memory: bool
    memory_GiB: dict[str, float]
    bubble_share_total: float               # waiting for expert reads / the whole measured time (as prefill's)
    mean_active_experts: float              # (layer, expert) pairs a step touches
    acceptance_length: float | None         # tokens a speculative step produces (None: plain decoding)
    mean_verified_tokens: float
    steps: int
    cache: dict[str, int | float]           # hits, misses, late hits, prefetches and their use
    utilization: dict[str, float]
    predictor_accuracy: float | None        # cost-aware rules: predicted sets of the verified nodes
    notes: list[str] = []                   # what the run sized for the user (printed once on stderr)
    trace: DecodeProvenance
    sim: dict[str, int | float]
    config: DecodeConfig
