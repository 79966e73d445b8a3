"""Configuration of a speculative-decoding run (EcoSpec workload): pydantic data only.

The draft itself (tree, accuracy, routing of wrong drafts, expert predictor) is in
:mod:`moesim.config.draft`, shared with the phone decode, and re-exported here; this module adds
the selection rules, the run, its realistic defaults (:func:`default_predictor`,
:func:`fitted_draft`) and which options its settings leave unread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, NonNegativeFloat, PositiveInt, model_validator

from moesim.config.base import Finite
from moesim.config.catalog import DEFAULT_GPU_DEVICE, DEFAULT_GPU_MODEL, load_model
from moesim.config.draft import (
    DRAFT_NAMES,
    FITTED_CONTEXT_FREE_SHARE,
    FITTED_TOP1_LOGIT,
    MTP_ACCEPTANCE,
    MTP_CHAIN_TAU,
    MTP_DEPTH_DRIFT,
    MTP_MAX_DEPTH,
    MTP_MODELS,
    MTP_TOP1_LOGIT,
    AccuracyPredictor,
    AlternativeRouting,
    DraftAccuracy,
    DraftRouting,
    DraftTree,
    LearnedPredictor,
    MixtureRouting,
    NearbyRouting,
    OraclePredictor,
    Predictor,
    RequestRouting,
    SamePositionRouting,
    Temperature,
    TraceRouting,
    check_temperature,
    mtp_draft,
    parse_predictor,
    parse_routing,
)
from moesim.config.model import FittedDraft
from moesim.config.schema import Flat, params
from moesim.config.selectors import SELECTORS, Selector, needs_predictor, spell_rules
from moesim.errors import MoesimError

__all__ = ["SELECTORS", "Selector", "Temperature", "check_temperature", "DraftTree", "DraftAccuracy",
           "NearbyRouting", "RequestRouting", "TraceRouting", "SamePositionRouting", "MixtureRouting",
           "AlternativeRouting", "DraftRouting", "OraclePredictor", "AccuracyPredictor", "LearnedPredictor",
           "Predictor", "SpecDecodeRun", "parse_predictor",
           "parse_routing", "FITTED_TOP1_LOGIT", "FITTED_CONTEXT_FREE_SHARE", "MTP_TOP1_LOGIT", "MTP_ACCEPTANCE",
           "MTP_MODELS", "MTP_DEPTH_DRIFT", "MTP_CHAIN_TAU", "MTP_MAX_DEPTH", "mtp_draft",
           "PUBLISHED_PREDICTOR_ACCURACY", "DRAFT_NAMES",
           "FALLBACK_PREDICTOR_ACCURACY", "default_predictor", "fitted_draft", "OPTIONS_DEPEND_ON", "predictor_rules",
           "ignored_option"]

#: The top-k accuracy of the EcoSpec paper's expert predictors (they read the draft's hidden
#: states): "80% for DeepSeek-V3.1, 82% for Qwen3-235B, 93% for GPT-OSS-120B" (BRIEF.md section 2).
PUBLISHED_PREDICTOR_ACCURACY = {"deepseek-v3.1": 0.80, "qwen3-235b-a22b": 0.82, "gpt-oss-120b": 0.93}
#: a model with neither a real trace nor a published figure: the lowest published accuracy (assumed)
FALLBACK_PREDICTOR_ACCURACY = 0.80


def default_predictor(model: str, real_trace: bool) -> tuple[LearnedPredictor | AccuracyPredictor, str]:
    """The predictor of a run that names none, and why: what a runtime could really have.

    ``learned`` (2 folds) on a real trace; else the published accuracy for the model; else
    :data:`FALLBACK_PREDICTOR_ACCURACY`, labelled assumed. Never the oracle.

    >>> default_predictor("qwen3-235b-a22b", real_trace=False)[0].fraction
    0.82
    """
    if real_trace:
        return LearnedPredictor(), "default: learned, cross-fitted on the model's real trace"
    if model in PUBLISHED_PREDICTOR_ACCURACY:
        return (AccuracyPredictor(fraction=PUBLISHED_PREDICTOR_ACCURACY[model]),
                f"default: the EcoSpec paper's published predictor accuracy for {model} (no real trace)")
    return (AccuracyPredictor(fraction=FALLBACK_PREDICTOR_ACCURACY),
            f"default: assumed {FALLBACK_PREDICTOR_ACCURACY}, the lowest accuracy the EcoSpec paper published "
            f"(no real trace and no published figure for {model})")


def _catalog_draft(model: str) -> tuple[str, FittedDraft] | None:
    try:
        spec = load_model(model)
    except MoesimError:   # an unknown model is refused when the run is simulated, not here
        return None
    return None if spec.eagle3_draft is None else (spec.name, spec.eagle3_draft)


def fitted_draft(model: str) -> tuple[float, float, str]:
    """The EAGLE-3 draft of a run of ``model`` that gives none: its top-1 logit, the mixture share of
    its wrong drafts and where they come from. The catalog model's ``eagle3_draft`` (fitted to its
    published alpha and E), else the generic draft: the default model's fit (:data:`FITTED_TOP1_LOGIT`,
    :data:`FITTED_CONTEXT_FREE_SHARE`).

    >>> fitted_draft("qwen3-235b-a22b")[:2], fitted_draft("olmoe-1b-7b")[2].split(":")[0]
    ((0.8479, 0.9423), 'generic default (no draft fitted for olmoe-1b-7b)')
    """
    own = _catalog_draft(model)
    if own is not None:
        return own[1].top1_logit_mean, own[1].context_free_share, f"{own[0]}'s draft, fitted to {own[1].source}"
    generic = _catalog_draft(DEFAULT_GPU_MODEL)
    where = "" if generic is None else f": {generic[0]}'s draft, fitted to {generic[1].source}"
    return FITTED_TOP1_LOGIT, FITTED_CONTEXT_FREE_SHARE, f"generic default (no draft fitted for {model}){where}"


class SpecDecodeRun(Finite):
    """Everything one speculative-decoding simulation needs."""

    model: str = DEFAULT_GPU_MODEL
    device: str = DEFAULT_GPU_DEVICE
    trace: str | None = Field(None, description="canonical trace file; None = the model's real trace")
    selector: Selector = "confidence"
    gamma: PositiveInt = Field(4, le=64, description="tokens verified per step, the root (bonus) token included")
    epsilon: Annotated[float, Field(gt=0, allow_inf_nan=False)] = Field(
        1.0, description="the score's epsilon: P / (cost + epsilon)")
    predictor: Annotated[Predictor | None, Flat(parse=parse_predictor)] = Field(
        None, description="the expert predictor; None = the realistic default (default_predictor): learned on a "
                          "real trace, else the model's published accuracy")
    tree: Annotated[DraftTree, Flat(prefix="")] = Field(default_factory=DraftTree)
    draft: Annotated[DraftAccuracy, DRAFT_NAMES] = Field(default_factory=DraftAccuracy)
    routing: Annotated[DraftRouting, Flat(parse=parse_routing)] = Field(default_factory=MixtureRouting)
    t_draft_ms: Annotated[NonNegativeFloat, Field(allow_inf_nan=False)] | None = Field(
        None, description="draft time per step; None = published or estimated")
    t_pred_ms: Annotated[NonNegativeFloat, Field(allow_inf_nan=False)] | None = Field(
        None, description="predictor time per step; None = 4 ms when used")
    passes: Annotated[int, Field(ge=1, le=100)] = Field(8, description="replays of the whole trace")
    requests: Annotated[str, Field(min_length=1)] | None = Field(
        None, description="replay only the trace's requests whose label contains this (a dataset: 'code', 'gsm8k')")
    drafter: Literal["eagle3", "mtp"] = Field(
        "eagle3", description="the draft: an EAGLE-3 tree, or the model's own MTP module reused at every draft step "
                              "(MTP-Eagle), drafting the same tree")
    batch_size: Annotated[int, Field(ge=1, le=64)] = Field(
        1, description="requests decoded together: one verification forward over the union of their trees' experts")
    temperature: Temperature = Field(0.0, description="sampling temperature: 0 (greedy) or 1 (rejection sampling)")
    seed: Annotated[int, Field(ge=0, le=2**63 - 1)] = 0
    overrides: dict[str, float] = Field(default_factory=dict,
                                        description="profile numbers changed for a what-if: {'section.field': value}")
    draft_source: Annotated[str | None, Flat(derived=True)] = Field(
        None, description="where the draft numbers the run left out came from (the model's fitted draft or the "
                          "generic one: fitted_draft), set when the run is built; None = the run gave them")

    @model_validator(mode="before")
    @classmethod
    def _model_draft(cls, data: Any) -> Any:
        """A run that leaves out the EAGLE-3 draft's accuracy, or the mixture share of its wrong drafts'
        routing (no routing, or mixture without a share), gets its model's (:func:`fitted_draft`)."""
        if not isinstance(data, dict) or "draft_source" in data:
            return data
        given, routing = data.get("draft"), data.get("routing")
        draft = data.get("drafter", "eagle3") == "eagle3" and (
            given is None or (isinstance(given, dict) and "top1_logit_mean" not in given))
        share = routing is None or (isinstance(routing, dict) and routing.get("kind") == "mixture"
                                    and "context_free_share" not in routing)
        if not (draft or share):
            return data
        model = data.get("model", DEFAULT_GPU_MODEL)
        mu, cf, source = fitted_draft(model if isinstance(model, str) else DEFAULT_GPU_MODEL)
        parts = "" if draft and share else "top-1 logit: " if draft else "mixture share: "
        return {**data, **({"draft": {**(given or {}), "top1_logit_mean": mu}} if draft else {}),
                **({"routing": {"kind": "mixture", **(routing or {}), "context_free_share": cf}} if share else {}),
                "draft_source": parts + source}

    @model_validator(mode="after")
    def _measured_temperature(self) -> SpecDecodeRun:
        check_temperature(self.temperature)
        return self

    @model_validator(mode="before")
    @classmethod
    def _mtp_draft_accuracy(cls, data: Any) -> Any:
        """An MTP run gets the MTP module's draft accuracy (:func:`mtp_draft`) for what it leaves out:
        all of it, or the fields a partial draft (``{"top1_logit_mean": 2.0}``, ``--draft-mu``) does not give."""
        if isinstance(data, dict) and data.get("drafter") == "mtp" and data.get("draft") is None:
            return {**data, "draft": mtp_draft()}
        if isinstance(data, dict) and data.get("drafter") == "mtp" and isinstance(data.get("draft"), dict):
            return {**data, "draft": {**mtp_draft().model_dump(), **data["draft"]}}
        return data

    @model_validator(mode="after")
    def _mtp_runs(self) -> SpecDecodeRun:
        if self.drafter != "mtp":
            return self
        if self.model not in MTP_MODELS:
            raise ValueError(f"drafter 'mtp' needs a model with an MTP module ({', '.join(MTP_MODELS)}), "
                             f"got {self.model!r}")
        if self.tree.depth > MTP_MAX_DEPTH:
            raise ValueError(f"drafter 'mtp' tree depth must be <= {MTP_MAX_DEPTH} (the deepest chain whose MTP "
                             f"acceptance is published, nebius K = 7), got {self.tree.depth}")
        return self

    @model_validator(mode="after")
    def _gamma_fits_tree(self) -> SpecDecodeRun:
        if self.gamma > self.tree.n_nodes:
            raise ValueError(f"gamma must be <= the {self.tree.n_nodes} nodes of a {self.tree.depth} x "
                             f"{self.tree.width} draft tree, got {self.gamma}")
        return self


#: the run fields that decide whether an option is read (what :func:`ignored_option` looks at)
OPTIONS_DEPEND_ON = ("selector", "gamma")


def predictor_rules() -> str:
    """The rules that read the expert predictor, as a message lists them."""
    return spell_rules(r for r in SELECTORS if needs_predictor(r))


def ignored_option(name: str, values: Mapping[str, Any], flag: Callable[[str], str] = str) -> str | None:
    """Why a speculative-decoding run with ``values`` (fields by name; SpecDecodeRun's defaults for
    those missing) does not read option ``name`` (a flat parameter: :func:`moesim.config.schema.params`),
    or None where it does: the expert predictor (any of its parameters), its time and epsilon are
    read by the cost-aware rules only, the draft and predictor times not at gamma 1 (it verifies no
    draft). A grid refuses an option that no point reads.

    >>> ignored_option("epsilon", {"selector": "confidence"}, lambda n: "--" + n)
    'is read only by the cost-aware rules (--selector ecospec or global-cost), not by confidence selection'
    """
    v = {k: SpecDecodeRun.model_fields[k].default for k in OPTIONS_DEPEND_ON} | dict(values)
    flat = params(SpecDecodeRun)
    field = flat[name].field if name in flat else name
    if field in ("predictor", "epsilon", "t_pred_ms") and not needs_predictor(v["selector"]):
        return f"is read only by the cost-aware rules ({flag('selector')} {predictor_rules()}), not by " \
               f"{v['selector']} selection"
    if name in ("t_draft_ms", "t_pred_ms") and v["gamma"] == 1:
        return "needs gamma > 1 (gamma 1 verifies no draft)"
    return None
