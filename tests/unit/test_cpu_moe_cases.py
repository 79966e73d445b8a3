"""cpu-moe/ validation cases (issue 25, hypothesis 2): registered, held out, and each at the
status its record states (both are ratios of figures from other SoCs)."""

from moesim.validate.cases import registry
from moesim.validate.cpu_moe import (
    SPACEMIT_QWEN3_4B_PP128,
    SPACEMIT_QWEN3_30B_A3B_PP128,
    cpu_moe_cases,
)
from moesim.validate.registry import evaluate


def test_cpu_moe_cases_are_registered_and_held_out() -> None:
    names = [c.name for c in registry()]
    ours = [c.name for c in cpu_moe_cases()]
    assert ours and all(n.startswith("cpu-moe/") for n in ours)
    assert all(names.count(n) == 1 for n in ours)
    assert not any(c.fitted_to for c in cpu_moe_cases())


def test_cpu_moe_cases_match_their_records() -> None:
    results = {c.name: evaluate(c) for c in cpu_moe_cases()}
    assert {n: r.status for n, r in results.items()} == {
        "cpu-moe/x-elite/olmoe-1b-7b-pp128-over-llama-3.1-8b-pp16": "pass",
        "cpu-moe/spacemit-a100/qwen3-30b-a3b-over-qwen3-4b-pp128": "pass",
    }
    ratio = results["cpu-moe/spacemit-a100/qwen3-30b-a3b-over-qwen3-4b-pp128"]
    assert ratio.reference == SPACEMIT_QWEN3_30B_A3B_PP128 / SPACEMIT_QWEN3_4B_PP128
    assert 0.0 < ratio.predicted < 1.0       # the MoE is slower a token than the dense model, with fewer FLOPs a token
