"""How a result was produced: the configuration every workload's metrics carry (built by
:func:`run_config` for all of them) and the records of a speculative run's expert predictor."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, TypeVar

from pydantic import SerializerFunctionWrapHandler, model_serializer

from moesim._version import __version__
from moesim.config.base import Frozen
from moesim.config.catalog import model_names
from moesim.config.decode import DecodePredictor, DecodeRun
from moesim.config.loading import file_ref
from moesim.config.prefill import PageCache, PrefillRun, TTFTFrom
from moesim.config.profiles import profile_names
from moesim.config.specdecode import DraftAccuracy, DraftRouting, DraftTree, SpecDecodeRun
from moesim.traces.provenance import DecodeProvenance, PromptProvenance, ReplayProvenance

__all__ = ["Workload", "Sparse", "PredictorChoice", "PredictorUse", "RunConfig", "PrefillConfig",
           "SpecDecodeConfig", "DecodeConfig", "run_config", "saved_run"]

Workload = Literal["prefill", "specdecode", "decode"]


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
               profile_hash: str) -> dict[str, object]:
    """The fields every :class:`RunConfig` starts with, for ``run``: its model as the catalog
    name (or file path) a re-run resolves, and the profile's name and hash (checked when the
    workload's configuration is built from them)."""
    return {"workload": workload, "model": file_ref(run.model, model_names()), "device": device,
            "overrides": dict(run.overrides), "seed": run.seed, "profile_hash": profile_hash,
            "moesim_version": __version__}


def saved_run(run: R) -> R:
    """``run`` as a result stores it (``config.run``): model and device as catalog names or file
    paths, a trace file as its absolute path, so that ``moesim rerun`` resolves the same inputs."""
    update: dict[str, str] = {"model": file_ref(run.model, model_names()), "device": file_ref(run.device,
                                                                                            profile_names())}
    if run.trace:
        update["trace"] = str(Path(run.trace).resolve())
    return run.model_copy(update=update)
