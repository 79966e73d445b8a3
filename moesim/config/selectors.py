"""The draft selection rules of speculative decoding, as data: each rule's name in the workloads
that offer it and one row of :data:`SELECTOR_TRAITS`, read instead of the rule's name.

Adding a rule touches two files: here its name (in :data:`Selector` for ``moesim specdecode``, in
:data:`DecodeSelector` for ``moesim decode``) and its row; and, when it selects by a new
function, :mod:`moesim.policies.specdecode.select` (the function and its entry of ``SELECTIONS``).
Which options a run reads (a predictor, epsilon, the predictor's time), whether the replay
builds a predictor and how the phone decode prices an expert all follow from the row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, get_args

__all__ = ["Selector", "SELECTORS", "DecodeSelector", "DECODE_SELECTOR_NAMES", "Pricing", "SelectorTraits",
           "SELECTOR_TRAITS", "selector_traits", "needs_predictor", "spell_rules"]

#: The rules of the GPU replay (``moesim specdecode``): which tree nodes the target verifies.
Selector = Literal["confidence", "ecospec", "global-cost"]
SELECTORS: tuple[Selector, ...] = get_args(Selector)
#: The rules of the phone decode (``moesim decode``); ``none`` is plain decoding (no rule).
DecodeSelector = Literal["none", "confidence", "ecospec", "cache-aware"]
DECODE_SELECTOR_NAMES: tuple[str, ...] = get_args(DecodeSelector)
#: What verifying a new expert costs a rule: the same for every expert (``uniform``: one more read
#: from HBM on the GPU, and EcoSpec's own rule), or its compute when the phone's expert cache holds
#: it and its UFS read as well when not (``cache``: it needs the decode's expert cache).
Pricing = Literal["uniform", "cache"]


@dataclass(frozen=True, kw_only=True)
class SelectorTraits:
    """One selection rule, declared once: ``needs_predictor``: it scores drafts by their predicted
    experts (the expert predictor is built, and its options, its time and epsilon are read);
    ``runs``: the selection function of the one speculative step it runs
    (:func:`moesim.policies.specdecode.select.select_nodes`); ``prices_by``: its cost of a new expert."""

    needs_predictor: bool
    runs: Selector
    prices_by: Pricing


#: every rule of either workload (``none`` is no rule)
SELECTOR_TRAITS: dict[str, SelectorTraits] = {
    # EAGLE-3: the gamma - 1 most probable drafts
    "confidence": SelectorTraits(needs_predictor=False, runs="confidence", prices_by="uniform"),
    # EcoSpec: greedy, each round the node of best probability per new expert
    "ecospec": SelectorTraits(needs_predictor=True, runs="ecospec", prices_by="uniform"),
    # the gamma - 1 drafts of best probability per expert on their path
    "global-cost": SelectorTraits(needs_predictor=True, runs="global-cost", prices_by="uniform"),
    # EcoSpec's greedy rule priced by the decode's expert cache
    "cache-aware": SelectorTraits(needs_predictor=True, runs="ecospec", prices_by="cache"),
}


def selector_traits(name: str) -> SelectorTraits | None:
    """The row of rule ``name``; None for ``none`` (plain decoding)."""
    return SELECTOR_TRAITS.get(name)


def needs_predictor(name: str) -> bool:
    """Whether rule ``name`` reads the expert predictor (``none``: no).

    >>> [r for r in DECODE_SELECTOR_NAMES if needs_predictor(r)]
    ['ecospec', 'cache-aware']
    """
    traits = selector_traits(name)
    return traits is not None and traits.needs_predictor


def spell_rules(names: Iterable[str]) -> str:
    """Rule names as a message lists them.

    >>> spell_rules(r for r in SELECTORS if needs_predictor(r)), spell_rules(DECODE_SELECTOR_NAMES[1:])
    ('ecospec or global-cost', 'confidence, ecospec or cache-aware')
    """
    listed = list(names)
    return listed[0] if len(listed) == 1 else f"{', '.join(listed[:-1])} or {listed[-1]}"
