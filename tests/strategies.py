"""Shared hypothesis strategies: small MoE models, routings and streaming configurations."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from moesim.config.model import GQAttention, ModelSpec, MoEShape, WeightRecipe
from moesim.config.formats import WeightFormat


@st.composite
def small_models(draw: st.DrawFn) -> ModelSpec:
    experts = draw(st.integers(2, 12))
    return ModelSpec(
        name="tiny", display_name="tiny", hf_repo="test/tiny", provenance="hypothesis-generated test model",
        num_layers=draw(st.integers(1, 4)), hidden_size=64 * draw(st.integers(1, 4)), vocab_size=256,
        attention=GQAttention(num_heads=2, num_kv_heads=2, head_dim=32),
        moe=MoEShape(num_routed_experts=experts, top_k=draw(st.integers(1, min(4, experts))),
                     expert_intermediate_size=32 * draw(st.integers(1, 8))),
        native_formats=WeightRecipe(default=WeightFormat.BF16))


def routings(model: ModelSpec, tokens: int, seed: int, skew: float) -> np.ndarray:
    """[tokens, layers, k] distinct expert ids with a popularity skew (0 = uniform)."""
    rng = np.random.default_rng(seed)
    e, k = model.moe.num_routed_experts, model.moe.top_k
    out = np.empty((tokens, model.num_moe_layers, k), dtype=np.int16)
    for layer in range(model.num_moe_layers):
        weights = rng.random(e) ** (1 + 8 * skew)
        p = weights / weights.sum()
        for t in range(tokens):
            out[t, layer] = rng.choice(e, size=k, replace=False, p=p)
    return out


def estream_configs(model: ModelSpec) -> st.SearchStrategy[dict[str, object]]:
    return st.fixed_dictionaries({
        "group_size": st.integers(1, model.moe.num_routed_experts),
        "banks": st.integers(2, 6),
        "queue_depth": st.integers(1, 4),
        "prefetch": st.sampled_from(["non-ffn", "after-routing", "on-demand"]),
    })


#: shared hypothesis settings of the pipeline property tests (MOESIM_HYPOTHESIS_EXAMPLES for deep runs)
PROPERTY_SETTINGS = settings(max_examples=int(os.environ.get("MOESIM_HYPOTHESIS_EXAMPLES", "40")), deadline=None,
                             suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def model_routings(draw: st.DrawFn) -> tuple[ModelSpec, np.ndarray]:
    """A small model and a skewed routing of 1-96 tokens through it."""
    model = draw(small_models())
    tokens = draw(st.integers(1, 96))
    return model, routings(model, tokens, draw(st.integers(0, 2**16)), draw(st.floats(0, 1)))
