"""The draft of speculative decoding, as run configuration (pydantic data only): the draft tree, the
draft's accuracy, the routing given to draft tokens that are not the true continuation
(:data:`DraftRouting`), the expert predictor (:data:`Predictor`), and their spellings on the command
line (``mixture:0.5``, ``accuracy:0.93``). Both the GPU speculative decoding
(:mod:`moesim.config.specdecode`) and the phone decode (:mod:`moesim.config.decode`) read them.

One discriminated union per pluggable family. The defaults of :class:`DraftAccuracy` and
:class:`MixtureRouting` are the values fitted to the published EAGLE-3 figures on gpt-oss-120b
(``validation/fit_ecospec.py`` refits them and fails when they disagree).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, NonNegativeFloat, PositiveInt

from moesim.config.base import Finite
from moesim.config.schema import Flat
from moesim.errors import InputError

__all__ = ["Temperature", "check_temperature", "DraftTree", "DraftAccuracy", "DRAFT_NAMES", "NearbyRouting",
           "RequestRouting", "TraceRouting", "SamePositionRouting", "MixtureRouting", "AlternativeRouting",
           "DraftRouting", "OraclePredictor", "AccuracyPredictor", "LearnedPredictor", "Predictor", "parse_predictor",
           "parse_routing", "FITTED_TOP1_LOGIT", "FITTED_CONTEXT_FREE_SHARE", "MTP_TOP1_LOGIT", "MTP_ACCEPTANCE",
           "MTP_MODELS", "MTP_DEPTH_DRIFT", "MTP_CHAIN_TAU", "MTP_MAX_DEPTH", "mtp_draft"]

#: Fitted by ``validation/fit_ecospec.py`` (confidence selection, gamma 4, gpt-oss-120b,
#: its real nvmoe trace, seed 0): the draft's mean top-1 logit matches alpha = 1.88, the
#: context-free share of non-true draft routing matches E = 11.6 (BRIEF.md section 6).
FITTED_TOP1_LOGIT = -0.3127
#: DeepSeek-V3's multi-token-prediction module as the draft (``drafter = "mtp"``): "the acceptance
#: rate of the second token prediction ranges between 85% and 90%" (DeepSeek-V3 technical report,
#: arXiv 2412.19437, section 5.4.3); the draft's mean top-1 logit that gives E[sigmoid(mu + 1.5 z)]
#: = 0.875, the middle of that range (0.85: 2.371, 0.90: 2.953; tests/unit/test_specdecode.py).
MTP_TOP1_LOGIT = 2.6397
MTP_ACCEPTANCE = (0.85, 0.90)
#: The module is reused for later draft positions ("MTP-Eagle", TensorRT-LLM tech blog 2): it was
#: "trained primarily for first-token prediction ... causing degraded acceptance rates at later draft
#: positions" (nebius/MTP-DeepSeek-V3-0324 model card): the original module's mean accepted length
#: with K = 7 chained drafts is 3.20 at T = 0 and 3.09 at T = 1 (MT-bench, HumanEval, GSM8K). The
#: logit drift per draft depth that gives a 7-chain tau of 3.20 with MTP_TOP1_LOGIT at depth 1
#: (moesim.policies.specdecode.temperature.chain_tau; tests/unit/test_specdecode.py).
MTP_DEPTH_DRIFT = -0.9893
MTP_CHAIN_TAU = {0.0: 3.20, 1.0: 3.09}
#: the longest draft chain whose acceptance is measured (nebius K = 7)
MTP_MAX_DEPTH = 7
#: models that ship an MTP module (DeepSeek-V3 and its updates)
MTP_MODELS = ("deepseek-v3.1",)
FITTED_CONTEXT_FREE_SHARE = 0.9557


#: the temperatures whose acceptance is known from published measurements
Temperature = Annotated[float, Field(ge=0.0, le=1.0)]


def check_temperature(value: float) -> float:
    """0 or 1: acceptance at other temperatures has no published data here."""
    if value not in (0.0, 1.0):
        raise ValueError(f"temperature must be 0 or 1 (the two measured settings), got {value}")
    return value


class DraftTree(Finite):
    """Draft tree shape: ``depth`` draft steps; at each step the ``width`` most probable
    nodes of the previous depth are expanded into their top-``width`` tokens."""

    depth: Annotated[int, Field(ge=1, le=8)] = 3
    width: Annotated[int, Field(ge=1, le=8)] = 2

    @property
    def n_nodes(self) -> int:
        """Nodes of the tree, the root included: ``DraftTree(depth=3, width=2).n_nodes == 11``."""
        total, level = 1, 1
        for _ in range(self.depth):
            level = min(self.width, level) * self.width
            total += level
        return total


class DraftAccuracy(Finite):
    """How good the draft is (docs/specdecode.md, "draft-accuracy model").

    At an expanded node of depth ``d - 1`` the draft's top-1 confidence is
    ``q1 = sigmoid(top1_logit_mean + (d - 1) * depth_drift + top1_logit_sd * z)``, ``z ~ N(0, 1)``;
    rank ``r >= 2`` gets ``(1 - q1) * rank_share * (1 - rank_share) ** (r - 2)``. The draft is
    calibrated: when the node is on the true path, the true token is its rank-r child with
    probability ``q_r`` and none of them with the remaining mass.
    """

    top1_logit_mean: float = Field(
        FITTED_TOP1_LOGIT, ge=-10.0, le=10.0,
        description="the draft's mean top-1 logit (its acceptance); a run that leaves it out gets its model's fitted "
                    "draft's")
    top1_logit_sd: NonNegativeFloat = Field(
        1.5, le=10.0, description="the spread of the top-1 logit from node to node (its standard deviation)")
    rank_share: Annotated[float, Field(gt=0.0, lt=1.0)] = Field(
        0.3, description="the share of the confidence the ranks above leave that each next rank takes (rank 2 on)")
    depth_drift: float = Field(
        0.0, ge=-5.0, le=5.0,
        description="the change of the mean top-1 logit per draft depth (the MTP module's: -0.9893)")
    acceptance_scale: Annotated[float, Field(gt=0.0, le=1.0)] = Field(
        1.0, description="the chance that the true token is a node's child, relative to greedy decoding (the "
                         "draft's confidences unchanged): 1 at T = 0, below 1 at T = 1 (set from --temperature)")


#: the draft's mean top-1 logit is ``draft_mu`` on every surface (its other fields: ``draft_rank_share``, ...)
DRAFT_NAMES = Flat(names=(("top1_logit_mean", "draft_mu"),))


def mtp_draft(top1_logit_mean: float = MTP_TOP1_LOGIT) -> DraftAccuracy:
    """The MTP module's draft accuracy: 85-90% at the first draft, decaying with depth as published.

    >>> mtp_draft().depth_drift
    -0.9893
    """
    return DraftAccuracy(top1_logit_mean=top1_logit_mean, depth_drift=MTP_DEPTH_DRIFT)


class NearbyRouting(Finite):
    """A non-true draft at position ``i`` routes like a token drawn uniformly from
    ``i - window .. i + window`` of the same request (``i`` itself excluded)."""

    kind: Literal["nearby"] = "nearby"
    window: PositiveInt = Field(
        8, description="a wrong draft at position i routes like a token drawn from i - window .. i + window")


class RequestRouting(Finite):
    """... like a token drawn uniformly from the same request (segment)."""

    kind: Literal["request"] = "request"


class TraceRouting(Finite):
    """... like a token drawn uniformly from the whole trace (no context locality)."""

    kind: Literal["trace"] = "trace"


class SamePositionRouting(Finite):
    """... exactly like the true token at its position (the optimistic bound)."""

    kind: Literal["same-position"] = "same-position"


class MixtureRouting(Finite):
    """With probability ``context_free_share`` like :class:`TraceRouting`, else like
    :class:`NearbyRouting` with ``window`` (the fitted default)."""

    kind: Literal["mixture"] = "mixture"
    context_free_share: Annotated[float, Field(ge=0.0, le=1.0)] = Field(
        FITTED_CONTEXT_FREE_SHARE,
        description="the share of wrong drafts routed like a token of the whole trace, the rest like a nearby one; "
                    "a run that leaves it out gets its model's fitted draft's")
    window: PositiveInt = Field(
        8, description="a wrong draft at position i routes like a token drawn from i - window .. i + window")


class AlternativeRouting(Finite):
    """A non-true draft is an alternative continuation of the same prefix: at each MoE layer it
    routes like the true token at its position with probability ``layer_share`` (the shared
    context drives that layer's router), else like a token drawn from the whole trace."""

    kind: Literal["alternative"] = "alternative"
    layer_share: Annotated[float, Field(ge=0.0, le=1.0)] = Field(
        0.5, description="the chance, at each MoE layer, that a wrong draft routes like the true token at its position")


DraftRouting = Annotated[NearbyRouting | RequestRouting | TraceRouting | SamePositionRouting | MixtureRouting
                         | AlternativeRouting, Field(discriminator="kind")]


class OraclePredictor(Finite):
    """Predicts every token's experts exactly."""

    kind: Literal["oracle"] = "oracle"


class AccuracyPredictor(Finite):
    """Recovers each of a token's true top-k experts with probability ``fraction``; the
    others are replaced by experts drawn by that layer's popularity in the trace."""

    kind: Literal["accuracy"] = "accuracy"
    fraction: Annotated[float, Field(ge=0.0, le=1.0, description="fraction of the true top-k recovered")]


class LearnedPredictor(Finite):
    """A count-based model (previous tokens' and previous layer's experts, token ids when
    the trace has them) trained on the other folds of the trace (cross-fitting)."""

    kind: Literal["learned"] = "learned"
    folds: Annotated[int, Field(ge=2, le=10)] = Field(
        2, description="folds of the trace: each is predicted by the model learned on the others")


Predictor = Annotated[OraclePredictor | AccuracyPredictor | LearnedPredictor, Field(discriminator="kind")]


def parse_predictor(text: str) -> dict[str, object]:
    """``"oracle"``, ``"learned"``, ``"learned:3"`` (folds) or ``"accuracy:0.93"`` -> config data.

    >>> parse_predictor("accuracy:0.93")
    {'kind': 'accuracy', 'fraction': 0.93}
    """
    kind, _, arg = text.partition(":")
    try:
        if kind == "oracle" and not arg:
            return {"kind": "oracle"}
        if kind == "learned":
            return {"kind": "learned", "folds": int(arg)} if arg else {"kind": "learned"}
        if kind == "accuracy" and arg and 0.0 <= float(arg) <= 1.0:
            return {"kind": "accuracy", "fraction": float(arg)}
    except ValueError:
        pass
    raise InputError("predictor", "must be oracle, learned[:FOLDS] or accuracy:P (0 <= P <= 1)", text)


def parse_routing(text: str) -> dict[str, object]:
    """``"mixture"``, ``"mixture:0.5"``, ``"nearby:8"``, ``"request"``, ``"trace"``,
    ``"same-position"``, ``"alternative:0.5"`` -> config data."""
    kind, _, arg = text.partition(":")
    try:
        if kind in ("request", "trace", "same-position") and not arg:
            return {"kind": kind}
        if kind == "nearby":
            return {"kind": "nearby", "window": int(arg)} if arg else {"kind": "nearby"}
        if kind == "mixture":
            return {"kind": "mixture", "context_free_share": float(arg)} if arg else {"kind": "mixture"}
        if kind == "alternative":
            return {"kind": "alternative", "layer_share": float(arg)} if arg else {"kind": "alternative"}
    except ValueError:
        pass
    raise InputError("draft-routing", "must be mixture[:SHARE], nearby[:WINDOW], request, trace, same-position or "
                     "alternative[:SHARE]", text)
