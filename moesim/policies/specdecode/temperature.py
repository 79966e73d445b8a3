"""Sampling at temperature 1: the draft's acceptance from published T = 1 / T = 0 ratios.

At T = 0 the target accepts a draft token when it is its argmax; at T = 1 it accepts by
rejection sampling, and the same draft is accepted less often (EAGLE, EAGLE-2, EAGLE-3 and the
MoE targets below all measure it). moesim keeps the draft's calibrated confidences (which the
selection rules read) and scales the chance that the true token is each of a node's children
by one factor ``a`` (:attr:`~moesim.config.draft.DraftAccuracy.acceptance_scale`), the
rest going to "none of them". ``a`` is solved per model so that the mean acceptance length
of a 7-token chain (the published measurement) falls by the published ratio:

    tau(a) = 1 + sum_{d=1..7} prod_{i<=d} a * m_i,   m_i = E[sigmoid(mu + (i - 1) drift + sd z)]
    tau(a) / tau(1) = ratio

(``m_i`` by Gauss-Hermite quadrature; ``a`` by bisection; tau is increasing in ``a``). The
ratios (docs/background/temperature-figures.md): EAGLE-3 (standard training) chains of 7 on
MT-bench, HumanEval and GSM8K, Nebius LK-losses model cards (arXiv 2602.23881):
Qwen3-235B-A22B 0.887, gpt-oss-120b 0.891, gpt-oss-20b 0.916, DeepSeek-V3 with its MTP draft
0.925. Other models: 0.93, the median of the large-target ratios found (range 0.89-0.97).
"""

from __future__ import annotations

import numpy as np

from moesim.config.specdecode import MTP_CHAIN_TAU, DraftAccuracy

__all__ = ["T1_TAU_RATIO", "DEFAULT_T1_TAU_RATIO", "MTP_T1_TAU_RATIO", "CHAIN_TOKENS", "t1_ratio", "acceptance_scale",
           "chain_tau",
           "draft_at_temperature"]

#: model -> (tau at T = 1 / tau at T = 0, source)
T1_TAU_RATIO: dict[str, tuple[float, str]] = {
    "qwen3-235b-a22b": (0.887, "EAGLE-3 chain of 7, Nebius LK-losses model card (arXiv 2602.23881)"),
    "gpt-oss-120b": (0.891, "EAGLE-3 chain of 7, Nebius LK-losses model card (arXiv 2602.23881)"),
    "gpt-oss-20b": (0.916, "EAGLE-3 chain of 7, Nebius LK-losses model card (arXiv 2602.23881)"),
    "deepseek-v3.1": (0.925, "DeepSeek-V3 MTP draft, chain of 7, Nebius LK-losses model card (arXiv 2602.23881)"),
}
DEFAULT_T1_TAU_RATIO = (0.93, "assumed: median of the large-target T=1/T=0 ratios found, range 0.89-0.97 "
                              "(docs/background/temperature-figures.md)")
CHAIN_TOKENS = 7
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(40)


#: DeepSeek-V3's original MTP module as the draft (``drafter = "mtp"``): 3.09 / 3.20
MTP_T1_TAU_RATIO = (round(MTP_CHAIN_TAU[1.0] / MTP_CHAIN_TAU[0.0], 4),
                    "original MTP module, chain of 7, tau 3.09 at T=1 / 3.20 at T=0, nebius/MTP-DeepSeek-V3-0324 "
                    "model card")


def t1_ratio(model: str, drafter: str = "eagle3") -> tuple[float, str]:
    """The published T = 1 / T = 0 acceptance-length ratio of ``model``'s draft and its source."""
    if drafter == "mtp":
        return MTP_T1_TAU_RATIO
    return T1_TAU_RATIO.get(model, DEFAULT_T1_TAU_RATIO)


def _mean_confidence(acc: DraftAccuracy, depth: int) -> float:
    logit = acc.top1_logit_mean + (depth - 1) * acc.depth_drift + acc.top1_logit_sd * _NODES
    return float(np.sum(_WEIGHTS / (1.0 + np.exp(-logit))) / np.sqrt(2.0 * np.pi))


def chain_tau(acc: DraftAccuracy, scale: float, tokens: int = CHAIN_TOKENS) -> float:
    """Mean tokens per step of a ``tokens``-long chain (the bonus token included).

    >>> round(chain_tau(DraftAccuracy(top1_logit_mean=0.0, top1_logit_sd=0.0), 1.0, 2), 3)   # 1 + 0.5 + 0.25
    1.75
    """
    tau, run = 1.0, 1.0
    for d in range(1, tokens + 1):
        run *= scale * _mean_confidence(acc, d)
        tau += run
    return tau


def acceptance_scale(acc: DraftAccuracy, ratio: float, tokens: int = CHAIN_TOKENS) -> float:
    """``a`` in (0, 1] with ``chain_tau(acc, a) = ratio * chain_tau(acc, 1)``.

    >>> acc = DraftAccuracy()
    >>> a = acceptance_scale(acc, 0.9)
    >>> round(chain_tau(acc, a) / chain_tau(acc, 1.0), 6)
    0.9
    """
    if not 0.0 < ratio <= 1.0:
        raise ValueError(f"ratio must be in (0, 1], got {ratio}")
    target = ratio * chain_tau(acc, 1.0, tokens)
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if chain_tau(acc, mid, tokens) < target else (lo, mid)
    return (lo + hi) / 2


def draft_at_temperature(draft: DraftAccuracy, model: str, temperature: float,
                         drafter: str = "eagle3") -> tuple[DraftAccuracy, str]:
    """The draft as it behaves at ``temperature``: unchanged at 0; at 1 with the acceptance scale
    that reproduces the model's published T = 1 / T = 0 ratio."""
    if temperature == 0.0:
        return draft, "greedy: the draft's acceptance as calibrated"
    ratio, source = t1_ratio(model, drafter)
    scale = acceptance_scale(draft.model_copy(update={"acceptance_scale": 1.0}), ratio)
    return draft.model_copy(update={"acceptance_scale": scale}), f"T=1/T=0 acceptance-length ratio {ratio}: {source}"
