"""The phone decode run: an expert cache in DRAM, experts read from UFS on a miss.

Checks that need the device (the cache against the DRAM, resident against the model's size)
happen when the run is resolved, with the same one-line errors; the run's size against what a
decode may simulate (:func:`moesim.limits.decode_size_rule`) is checked with the run, its
model read from the catalog. Which options a run reads (:func:`ignored_option`) is one rule for
``moesim decode`` and a decode grid.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, PositiveFloat, PositiveInt, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from moesim.config.base import Finite
from moesim.config.catalog import DEFAULT_DECODE_MODEL, DEFAULT_PHONE_DEVICE, load_model
from moesim.config.draft import (
    DRAFT_NAMES,
    DraftAccuracy,
    DraftRouting,
    DraftTree,
    MixtureRouting,
    Temperature,
    check_temperature,
    parse_routing,
)
from moesim.config.schema import Flat, params
from moesim.config.selectors import DECODE_SELECTOR_NAMES, DecodeSelector, needs_predictor, spell_rules
from moesim.errors import InputError, MoesimError, deprecated
from moesim.limits import MAX_DECODE_SLOTS, decode_size_rule

__all__ = ["CachePolicy", "CACHE_POLICY_NAMES", "DecodeSelector", "DECODE_SELECTOR_NAMES", "DecodePrefetch",
           "DECODE_PREFETCH_NAMES", "DecodePredictor", "DecodeRun", "parse_decode_predictor", "OPTIONS_DEPEND_ON",
           "ignored_option"]

#: ``none``: every routed expert is read from UFS; ``lru``/``lfu``: a cache of ``cache_GiB``;
#: ``pinned``: a static hot set chosen offline from the trace, the rest LRU; ``resident``: all
#: experts in DRAM (only where they fit); ``mmap``: llama.cpp-like demand paging on the CPU, the
#: page cache (LRU) as the cache, synchronous faults in read-ahead windows.
CachePolicy = Literal["none", "lru", "lfu", "pinned", "resident", "mmap"]
CACHE_POLICY_NAMES: tuple[str, ...] = get_args(CachePolicy)
DecodePrefetch = Literal["none", "next-layer"]
DECODE_PREFETCH_NAMES: tuple[str, ...] = get_args(DecodePrefetch)


class DecodePredictor(Finite):
    """What names the experts a token will use before its router runs: used by ``next-layer``
    prefetch (the next layer's experts) and by the cost-aware selection rules (a draft's).

    ``oracle``: exact; ``accuracy``: each true expert kept with probability ``fraction``, the
    others drawn by popularity; ``learned``: learned from the trace outside the decoded window
    (the next layer's experts from this layer's: :class:`moesim.policies.predictors.LayerAheadPredictor`;
    a draft's from the last verified token's: the ``learned`` predictor of ``specdecode``)."""

    kind: Literal["oracle", "accuracy", "learned"] = "learned"
    fraction: Annotated[float, Field(ge=0.0, le=1.0)] | None = Field(
        None, description="kind accuracy: the share of each token's true experts the predictor names")

    @model_validator(mode="before")
    @classmethod
    def _old_kind(cls, data: object) -> object:
        if isinstance(data, dict) and data.get("kind") == "trace":
            deprecated("predictor kind 'trace'", "'learned'")
            return {**data, "kind": "learned"}
        return data

    @model_validator(mode="after")
    def _fraction_iff_accuracy(self) -> DecodePredictor:
        if (self.kind == "accuracy") != (self.fraction is not None):
            raise ValueError("fraction is set exactly when kind is 'accuracy'")
        return self


def parse_decode_predictor(text: str) -> dict[str, object]:
    """``"oracle"``, ``"learned"`` or ``"accuracy:0.9"`` -> config data (``"trace"``: ``learned``'s old name).

    >>> parse_decode_predictor("accuracy:0.9")
    {'kind': 'accuracy', 'fraction': 0.9}
    """
    kind, _, arg = text.partition(":")
    try:
        if kind in ("oracle", "learned") and not arg:
            return {"kind": kind}
        if kind == "trace" and not arg:
            deprecated("--predictor trace", "--predictor learned")
            return {"kind": "learned"}
        if kind == "accuracy" and arg and 0.0 <= float(arg) <= 1.0:
            return {"kind": "accuracy", "fraction": float(arg)}
    except ValueError:
        pass
    raise InputError("predictor", "must be oracle, learned or accuracy:P (0 <= P <= 1)", text)


class DecodeRun(Finite):
    """Everything one phone decode simulation needs."""

    model: str = DEFAULT_DECODE_MODEL
    device: str = DEFAULT_PHONE_DEVICE
    tokens: Annotated[int, Field(gt=0, le=MAX_DECODE_SLOTS)] = Field(
        128, description="tokens to generate; with warmup_tokens at most moesim.limits.MAX_DECODE_SLOTS routed "
                         "expert slots (tokens x MoE layers x top-k): 4,096 tokens of mixtral-8x7b")
    context: Annotated[int, Field(ge=0, le=1_000_000)] = Field(512, description="prompt tokens already in the KV cache")
    cache_GiB: Annotated[float, Field(ge=0.0, le=1e4, allow_inf_nan=False)] | None = Field(
        None, description="DRAM for cached experts; None = what the device's usable DRAM leaves")
    cache_policy: CachePolicy = "lru"
    pinned_by: Literal["graph", "frequency"] = Field(
        "graph", description="pinned: hot set from the co-activation graph or by routing frequency alone")
    pinned_share: Annotated[float, Field(ge=0.0, le=1.0)] = Field(
        0.5, description="pinned: share of cache slots pinned")
    prefetch: DecodePrefetch = "none"
    expert_format: Literal["Q4_0", "Q4_K", "Q5_K", "Q6_K", "Q8_0", "MXFP4"] = Field(
        "Q4_0", description="storage of the routed experts (the rest stays Q4_0): Q4_0 as EStream; Q4_K / Q5_K "
                            "for llama.cpp's Q4_K_M / Q5_K_M files (their base format); MXFP4 for gpt-oss's experts")
    read_group_size: Annotated[int, Field(ge=1, le=256)] = Field(
        1, description="experts stored together and read whole on a miss (1: one read per expert)")
    read_grouping: Literal["graph", "id"] = Field(
        "graph", description="read groups from the co-activation graph, or by expert id (the naive layout)")
    selector: DecodeSelector = Field("none", description="the draft selection rule of speculative decoding "
                                                          "(none: plain decoding)")
    gamma: PositiveInt = Field(4, le=64, description="tokens verified per step, the root included")
    epsilon: PositiveFloat = Field(1.0, allow_inf_nan=False, description="the score's epsilon: P / (cost + epsilon)")
    tree: Annotated[DraftTree, Flat(prefix="")] = Field(default_factory=DraftTree)
    draft: Annotated[DraftAccuracy, DRAFT_NAMES] = Field(default_factory=DraftAccuracy)
    temperature: Temperature = Field(0.0, description="sampling temperature: 0 (greedy) or 1 (rejection sampling)")
    routing: Annotated[DraftRouting, Flat(parse=parse_routing)] = Field(default_factory=MixtureRouting)
    predictor: Annotated[DecodePredictor, Flat(parse=parse_decode_predictor)] = Field(default_factory=DecodePredictor)
    backend: Literal["cpu", "npu"] = Field(
        "cpu", description="the CPU (llama.cpp-like, what published flash-streaming decoders run) or the HTP")
    queue_depth: PositiveInt | None = Field(None, description="UFS reads in flight; None = the profile's default")
    trace: str | None = Field(None, description="canonical trace file; None = the model's default source")
    seed: Annotated[int, Field(ge=0, le=2**63 - 1)] = 0
    warmup_tokens: Annotated[int, Field(ge=0, le=MAX_DECODE_SLOTS)] = Field(
        0, description="tokens decoded before measuring (cache warm-up)")
    overrides: dict[str, float] = Field(default_factory=dict,
                                        description="profile numbers changed for a what-if: {'section.field': value}")

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: object) -> object:
        """``spec`` (a result or grid saved before the rename) is ``selector``."""
        if isinstance(data, dict) and "spec" in data and "selector" not in data:
            deprecated("decode field 'spec'", "'selector'")
            data = {("selector" if k == "spec" else k): v for k, v in data.items()}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> DecodeRun:
        check_temperature(self.temperature)
        if self.selector != "none" and self.gamma > self.tree.n_nodes:
            raise ValueError(f"gamma must be <= the {self.tree.n_nodes} nodes of a {self.tree.depth} x "
                             f"{self.tree.width} draft tree, got {self.gamma}")
        if self.cache_policy == "resident" and self.cache_GiB is not None:
            raise ValueError("cache_GiB must be unset with cache_policy 'resident' (every expert is in DRAM)")
        if self.cache_policy == "none" and self.cache_GiB is not None:
            raise ValueError("cache_GiB must be unset with cache_policy 'none' (no expert is cached)")
        if self.prefetch != "none" and self.cache_policy in ("none", "resident"):
            raise ValueError(f"prefetch {self.prefetch!r} needs an expert cache to read into (lru, lfu, pinned or "
                             f"mmap), got cache_policy {self.cache_policy!r}")
        if self.read_group_size > 1 and self.cache_policy in ("mmap", "none", "resident"):
            raise ValueError(f"read_group_size > 1 needs an expert cache to hold the group (lru, lfu or pinned), "
                             f"got cache_policy {self.cache_policy!r}")
        if self.expert_format != "Q4_0" and self.backend == "npu":
            raise ValueError(f"expert_format {self.expert_format} needs backend 'cpu': the HTP model dequantises "
                             "Q4_0 only")
        if self.cache_policy == "mmap" and self.backend == "npu":
            raise ValueError("cache_policy 'mmap' runs on the CPU (llama.cpp-like); backend must be 'cpu'")
        return self

    @field_validator("tokens", "warmup_tokens")
    @classmethod
    def _simulable_size(cls, value: int, info: ValidationInfo) -> int:
        """Refused before the first event: a decode of more routed slots than a run may simulate
        (:func:`moesim.limits.decode_size_rule`; an unknown model is refused when the run is resolved)."""
        if info.field_name == "warmup_tokens" and ("tokens" not in info.data or not value):
            return value
        try:
            model = load_model(info.data.get("model", DEFAULT_DECODE_MODEL))
        except MoesimError:
            return value
        decoded = info.data["tokens"] if info.field_name == "warmup_tokens" else None
        rule = decode_size_rule(value, model.name, model.num_moe_layers, model.moe.top_k, decoded)
        if rule is not None:
            raise PydanticCustomError("decode_size", rule)
        return value


#: the run fields that decide whether an option is read (what :func:`ignored_option` looks at)
OPTIONS_DEPEND_ON = ("selector", "prefetch", "cache_policy", "read_group_size")
#: run fields that only speculation reads (the draft tree, the draft, the routing of wrong drafts)
_SPECULATIVE = ("gamma", "tree", "draft", "routing", "temperature")
#: the rules of a speculative decode, and those of them that read the expert predictor
_RULES = tuple(r for r in DECODE_SELECTOR_NAMES if r != "none")
_COST_AWARE = tuple(r for r in _RULES if needs_predictor(r))


def ignored_option(name: str, values: Mapping[str, Any], flag: Callable[[str], str] = str) -> str | None:
    """Why a decode run with ``values`` (fields by name; DecodeRun's defaults for those missing)
    does not read option ``name`` (a flat parameter: :func:`moesim.config.schema.params`), or None
    where it does: the one rule behind ``moesim decode``'s refusal of an option the run would ignore
    and a decode grid's of an axis that would run the same point for each of its values. ``flag``
    spells a field as the caller's user wrote it.

    >>> ignored_option("pinned_share", {"cache_policy": "lru"})
    'applies to cache_policy pinned only (here lru)'
    >>> ignored_option("gamma", {"selector": "ecospec"}) is None
    True
    >>> ignored_option("routing_window", {})
    'applies to speculative decoding only (it needs selector confidence, ecospec or cache-aware)'
    """
    v = {k: DecodeRun.model_fields[k].default for k in OPTIONS_DEPEND_ON} | dict(values)
    flat = params(DecodeRun)
    field = flat[name].field if name in flat else name
    if field in _SPECULATIVE and v["selector"] == "none":
        return f"applies to speculative decoding only (it needs {flag('selector')} {spell_rules(_RULES)})"
    if field == "epsilon" and v["selector"] not in _COST_AWARE:
        return f"is read only by {flag('selector')} {spell_rules(_COST_AWARE)} (here {v['selector']})"
    if field == "predictor" and v["prefetch"] == "none" and v["selector"] not in _COST_AWARE:
        return (f"is read only by {flag('prefetch')} next-layer and by {flag('selector')} {spell_rules(_COST_AWARE)} "
                f"(here prefetch {v['prefetch']}, selector {v['selector']})")
    if name in ("pinned_by", "pinned_share") and v["cache_policy"] != "pinned":
        return f"applies to {flag('cache_policy')} pinned only (here {v['cache_policy']})"
    if name == "read_grouping" and v["read_group_size"] <= 1:
        return f"needs {flag('read_group_size')} > 1 (one expert a read forms no groups)"
    return None
