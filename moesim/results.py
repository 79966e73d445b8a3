"""Results of both workloads: typed, frozen metrics that carry their whole configuration.

A result says how it was produced: ``metrics.config`` holds the model, the device name, every
profile override, the profile hash, the seed, the provenance of the routing, every resolved
option and the run configuration itself (``config.run``), built by :func:`run_config` for both
workloads; ``moesim rerun RESULT.json`` re-runs a saved result from that alone. The JSON of
``--json`` is ``metrics.model_dump(mode="json")``; ``to_pandas()`` is one flat row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias, TypedDict, TypeVar

import pandas as pd
from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from moesim._version import __version__
from moesim.config.base import Frozen
from moesim.config.catalog import model_names
from moesim.config.decode import DecodePredictor, DecodeRun
from moesim.config.loading import file_ref
from moesim.config.prefill import PageCache, PrefillRun, TTFTFrom
from moesim.config.profiles import profile_names
from moesim.config.specdecode import DraftAccuracy, DraftRouting, DraftTree, SpecDecodeRun
from moesim.cost.coldstart import LoadPath
from moesim.traces.provenance import DecodeProvenance, PromptProvenance, ReplayProvenance

__all__ = ["RunConfig", "PrefillConfig", "SpecDecodeConfig", "DecodeConfig", "PrefillMetrics",
           "SpecDecodeMetrics", "DecodeMetrics", "PrefillResult", "SpecDecodeResult", "DecodeResult",
           "HOST_CLOCK_FIELDS", "run_config", "saved_run", "flatten_metrics", "chrome_trace", "PredictorChoice",
           "PredictorUse", "RunFields", "JSONValue"]

Workload = Literal["prefill", "specdecode", "decode"]

#: a JSON value (what ``--json`` writes and ``moesim rerun`` reads back)
JSONValue: TypeAlias = "str | int | float | bool | None | list[JSONValue] | dict[str, JSONValue]"
#: a flat row's value (``flatten_metrics``): lists become JSON strings
Scalar: TypeAlias = "str | int | float | bool | None"

#: fields measured on the host clock, which a re-run cannot reproduce (dotted paths)
HOST_CLOCK_FIELDS = ("sim.wall_s", "sim.steps_per_wall_s", "config.selection_ms")


class Sparse(Frozen):
    """A record whose fields that do not apply to it (None) are left out of its JSON: a learned
    predictor has ``folds`` and no ``fraction``, an accuracy predictor the other way round."""

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        return {k: v for k, v in handler(self).items() if v is not None}


class PredictorChoice(Sparse):
    """The expert predictor a speculative run resolved: the run's own, or the default for its
    trace (``default``), and why (``source``)."""

    kind: Literal["oracle", "accuracy", "learned"]
    fraction: float | None = None        # accuracy
    folds: int | None = None             # learned
    default: bool
    source: str


class PredictorUse(Sparse):
    """... and what the replay made of it: ``used`` (only the cost-aware rules read it) and, when
    used, what was built (the learned model's held-out accuracy per lag, whether it read token ids)."""

    kind: Literal["oracle", "accuracy", "learned"]
    used: bool
    default: bool
    source: str
    fraction: float | None = None
    folds: int | None = None
    uses_token_ids: bool | None = None
    heldout_accuracy_by_lag: list[float] | None = None


class RunFields(TypedDict):
    """The fields every workload's configuration starts with (:func:`run_config`)."""

    workload: Workload
    model: str
    device: str
    overrides: dict[str, float]
    seed: int
    profile_hash: str
    moesim_version: str


class RunConfig(Frozen):
    """How a result was produced; the same fields for every workload, then each one's own."""

    workload: Workload
    model: str
    device: str
    overrides: dict[str, float]
    seed: int
    profile_hash: str
    moesim_version: str
    trace: PromptProvenance | ReplayProvenance | DecodeProvenance
    run: PrefillRun | SpecDecodeRun | DecodeRun


class PrefillConfig(RunConfig):
    """... and the prefill options as resolved (defaults and auto-configured choices filled in)."""

    trace: PromptProvenance
    run: PrefillRun
    tokens: int
    policy: str
    group_size: int | None
    banks: int | None
    queue_depth: int | None
    prefetch: str | None
    ubatch_tokens: int | None
    memory_budget_GiB: float | None
    page_cache: PageCache = "cold"
    ttft_from: TTFTFrom = "request"
    autoconfigured: bool
    predicted_ttft_s: float | None = None
    selection_ms: float | None = None


class SpecDecodeConfig(RunConfig):
    """... and the speculative-decoding options as resolved."""

    trace: ReplayProvenance
    run: SpecDecodeRun
    selector: str
    gamma: int
    epsilon: float
    passes: int
    tree: DraftTree
    draft: DraftAccuracy
    drafter: str = "eagle3"
    requests: str | None = None
    routing: DraftRouting
    predictor: PredictorChoice
    t_draft_ms: float | None
    t_pred_ms: float | None


class DecodeConfig(RunConfig):
    """... and the phone-decode options as resolved (the cache in slots, the pinned set's size)."""

    trace: DecodeProvenance
    run: DecodeRun
    tokens: int
    context: int
    cache_policy: str
    cache_GiB: float
    cache_slots: int
    pinned_slots: int
    prefetch: str
    selector: str
    gamma: int
    backend: str
    queue_depth: int
    predictor: DecodePredictor
    t_draft_ms: float


R = TypeVar("R", PrefillRun, SpecDecodeRun, DecodeRun)


def run_config(workload: Workload, run: PrefillRun | SpecDecodeRun | DecodeRun, device: str,
               profile_hash: str) -> RunFields:
    """The fields every :class:`RunConfig` starts with, for ``run``: its model as the catalog
    name (or file path) a re-run resolves, and the profile's name and hash."""
    return RunFields(workload=workload, model=file_ref(run.model, model_names()), device=device,
                     overrides=dict(run.overrides), seed=run.seed, profile_hash=profile_hash,
                     moesim_version=__version__)


def saved_run(run: R) -> R:
    """``run`` as a result stores it (``config.run``): model and device as catalog names or file
    paths, a trace file as its absolute path, so that ``moesim rerun`` resolves the same inputs."""
    update: dict[str, str] = {"model": file_ref(run.model, model_names()), "device": file_ref(run.device,
                                                                                            profile_names())}
    if run.trace:
        update["trace"] = str(Path(run.trace).resolve())
    return run.model_copy(update=update)


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


def flatten_metrics(metrics: Mapping[str, object], prefix: str = "") -> dict[str, Scalar]:
    """``{"a": {"b": 1}, "c": [1, 2]}`` -> ``{"a.b": 1, "c": "[1, 2]"}``.

    >>> flatten_metrics({"a": {"b": 1}, "c": [1, 2]})
    {'a.b': 1, 'c': '[1, 2]'}
    """
    out: dict[str, Scalar] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_metrics(value, name + "."))
        elif isinstance(value, (list, tuple)):
            out[name] = json.dumps(value, sort_keys=True)
        else:
            assert value is None or isinstance(value, (str, int, float, bool)), name
            out[name] = value
    return out


class _Rows:
    """What both results share: their JSON and one flat row."""

    metrics: BaseModel

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``moesim prefill --json`` (or ``specdecode --json``)."""
        return self.metrics.model_dump(mode="json")

    def to_pandas(self) -> pd.DataFrame:
        """One flat row (nested keys joined with dots), ready to concatenate across runs.

        A metric this run does not have (None) is a float NaN column, not an all-None object
        one, so that ``pd.concat`` of rows from several policies keeps the numeric dtypes on every
        pandas release (pandas 2.2 warns on all-NA object entries, pandas 3 keeps them as object).
        """
        row = pd.DataFrame([flatten_metrics(self.to_dict())])
        missing = [name for name in row.columns if row[name].isna().all()]
        return row.astype(dict.fromkeys(missing, "float64")) if missing else row


@dataclass(frozen=True)
class PrefillResult(_Rows):
    """One prefill simulation: the metrics and one span per unit activity (flat records)."""

    metrics: PrefillMetrics
    spans: pd.DataFrame = field(repr=False)

    @property
    def ttft_s(self) -> float:
        return self.metrics.ttft_s

    def to_chrome_trace(self) -> dict[str, JSONValue]:
        return chrome_trace(self.spans, process=f"moesim prefill {self.metrics.config.policy}")


@dataclass(frozen=True)
class SpecDecodeResult(_Rows):
    """One speculative-decoding simulation: the metrics and one row per verification step."""

    metrics: SpecDecodeMetrics
    steps: pd.DataFrame = field(repr=False)


@dataclass(frozen=True)
class DecodeResult(_Rows):
    """One phone-decode simulation: the metrics and one span per unit activity."""

    metrics: DecodeMetrics
    spans: pd.DataFrame = field(repr=False)
    #: every set the cache was asked for, in order (warm-up included): keys ``layer * E + expert``
    accesses: list[list[int]] = field(default_factory=list, repr=False)

    def to_chrome_trace(self) -> dict[str, JSONValue]:
        return chrome_trace(self.spans, process=f"moesim decode {self.metrics.config.cache_policy}")


def chrome_trace(spans: pd.DataFrame, process: str = "moesim") -> dict[str, JSONValue]:
    """Chrome/Perfetto trace-event JSON: one track (thread) per unit, times in microseconds."""
    units = sorted(spans["unit"].unique(), key=_unit_order)
    tid = {u: i + 1 for i, u in enumerate(units)}
    events: list[JSONValue] = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": process}}]
    events += [{"ph": "M", "pid": 1, "tid": tid[u], "name": "thread_name", "args": {"name": u}} for u in units]
    for row in spans.itertuples(index=False):
        events.append({"ph": "X", "pid": 1, "tid": tid[row.unit], "name": row.op, "ts": row.start_ns / 1e3,
                       "dur": (row.end_ns - row.start_ns) / 1e3,
                       "args": {"layer": int(row.layer), "group": int(row.group), "bytes": int(row.bytes)}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def _unit_order(unit: str) -> tuple[int, int, str]:
    fixed = ["ufs", "npu", "hmx", "hvx", "cpu", "cpu_mat", "cpu_vec"]
    if unit.startswith("bank"):
        return (1, int(unit[4:]), unit)
    return (0 if unit in fixed else 2, fixed.index(unit) if unit in fixed else 0, unit)
