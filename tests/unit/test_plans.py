"""Each prefill policy's plan, stated as a literal table (issue 24): what a reader of
``policies/prefill/plan.py`` should find, for OLMoE-1B-7B (16 MoE layers of 64 experts,
3,538,944 B per Q4_0 expert) on the bundled phone, with the policies' defaults and no budget.

Derivations:
- estream: groups of ``default_group_size`` = 4 experts (16 a layer), ``DEFAULT_BANKS`` = 4
  banks, the UFS's default queue depth 2, prefetch during the non-FFN operators; an arena of
  4 banks x 4 experts x 3,538,944 B = 56,623,104 B.
- naive: one expert a group, read on demand into one bank, one read in flight.
- layer-b2: a whole layer (64 experts) a group, double-buffered (2 banks), eager reads:
  2 x 64 x 3,538,944 B = 452,984,832 B.
- resident: every expert in DRAM, no reads, no arena.
- cpu / mmap: llama.cpp-like CPU runtimes, 512-token micro-batches; mmap pages experts in on
  demand (one fault at a time), the CPU policy holds them resident.
- gpu-resident: the CPU runtimes' micro-batches on the Adreno (backend gpu), every expert resident.
- qnn-switch: QNN's static graphs on the HTP: a layer's 64 experts one group, nothing streamed (its
  context switches are in ``plan.qnn``, tests/unit/test_baselines.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from moesim.config.catalog import load_model
from moesim.config.prefill import PrefillRun
from moesim.config.profiles import load_profile
from moesim.policies.prefill.registry import plan_prefill

#: policy -> (io, backend, group_size, banks, queue_depth, gate, skip_inactive, ubatch_tokens,
#:            groups per MoE layer, arena bytes)
PLANS = {
    "estream":  ("stream", "npu", 4, 4, 2, "non-ffn", True, None, 16, 56_623_104),
    "naive":    ("stream", "npu", 1, 1, 1, "on-demand", True, None, 64, 3_538_944),
    "layer-b2": ("stream", "npu", 64, 2, 2, "non-ffn", False, None, 1, 452_984_832),
    "resident": ("none", "npu", 64, 0, 0, "eager", False, None, 1, 0),
    "cpu":      ("none", "cpu", 1, 0, 0, "eager", False, 512, 64, 0),
    "mmap":     ("mmap", "cpu", 1, 0, 1, "on-demand", True, 512, 64, 0),
    "gpu-resident": ("none", "gpu", 1, 0, 0, "eager", False, 512, 64, 0),
    "qnn-switch": ("none", "npu", 64, 0, 0, "eager", False, None, 1, 0),
}


@pytest.mark.parametrize("policy", sorted(PLANS))
def test_each_policy_plans_as_stated(policy: str) -> None:
    model, device = load_model("olmoe-1b-7b"), load_profile("sd8-elite-gen5")
    counts = np.ones((model.num_moe_layers, model.moe.num_routed_experts), dtype=np.int64)
    run = PrefillRun(model=model.name, device=device.name, tokens=64, policy={"kind": policy})
    plan = plan_prefill(run.policy, model, device, counts)  # type: ignore[arg-type]
    moe_layers = [layer for layer in plan.layers if layer]
    got = (plan.io, plan.backend, plan.group_size, plan.banks, plan.queue_depth, plan.gate, plan.skip_inactive,
           plan.ubatch_tokens, len(moe_layers[0]), plan.arena_bytes)
    assert plan.policy == policy and len(moe_layers) == model.num_moe_layers
    assert got == PLANS[policy]
