"""ModelSpec: the shape of an MoE transformer and its per-tensor weight formats.

Byte counts (per expert, per tensor class, resident non-expert) are computed from the
shape and a weight recipe, never typed in. A tensor of ``rows`` x ``row_len`` follows
the GGUF convention: ``row_len`` is the input dimension, along which blocks run.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Annotated

from pydantic import Field, PositiveInt, model_validator

from moesim.config.base import Frozen
from moesim.config.formats import WeightFormat, storage_format, tensor_bytes
from moesim.config.model_shape import (
    INTER_NOTE,
    MAX_CONV_KERNEL,
    MAX_HEAD_DIM,
    MAX_HIDDEN,
    MAX_INTERMEDIATE,
    MAX_LAYERS,
    MAX_PARAMS,
    MAX_VOCAB,
    GQAttention,
    MLAttention,
    MoEShape,
    Tensor,
    TensorClass,
)

__all__ = [
    "TensorClass", "Tensor", "GQAttention", "MLAttention", "MoEShape", "ModelSpec",
    "WeightRecipe", "RECIPES", "FittedDraft", "MAX_HEAD_DIM",
]


class WeightRecipe(Frozen):
    """A format per tensor class; ``default`` covers classes not listed."""

    default: WeightFormat
    embedding: WeightFormat | None = None
    lm_head: WeightFormat | None = None
    attention: WeightFormat | None = None
    conv: WeightFormat | None = None
    norm: WeightFormat | None = None
    router: WeightFormat | None = None
    dense_ffn: WeightFormat | None = None
    shared_expert: WeightFormat | None = None
    expert: WeightFormat | None = None

    def format_of(self, cls: TensorClass) -> WeightFormat:
        fmt: WeightFormat | None = getattr(self, cls.value)
        return self.default if fmt is None else fmt


#: Deployment recipes shared by all models. ``q4_0`` is the EStream / llama.cpp Q4_0 file:
#: every 2-D weight Q4_0 except the output head (Q6_K); norms and router stay FP32.
RECIPES: dict[str, WeightRecipe] = {
    "q4_0": WeightRecipe(default=WeightFormat.Q4_0, lm_head=WeightFormat.Q6_K,
                         norm=WeightFormat.FP32, router=WeightFormat.FP32),
}


class FittedDraft(Frozen):
    """The EAGLE-3 draft fitted to this model's published speculative-decoding figures: what a
    speculative run of the model uses when it gives no draft (docs/specdecode.md, "Draft-accuracy
    model"). Bounds as in ``moesim.config.specdecode``."""

    top1_logit_mean: float = Field(ge=-10.0, le=10.0, description="the draft's mean top-1 logit "
                                   "(DraftAccuracy.top1_logit_mean), fitted to the published acceptance length")
    context_free_share: float = Field(ge=0.0, le=1.0, description="the share of wrong drafts routed like a token "
                                      "of the whole trace (MixtureRouting), fitted to the published E")
    source: str = Field(min_length=8, description="what the draft was fitted to and the validation file "
                        "that writes the fit")


class ModelSpec(Frozen):
    """An MoE transformer: shape, checkpoint formats and where the numbers came from."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    display_name: str
    hf_repo: str
    provenance: str = Field(min_length=8, description="config source the shape was read from")
    num_layers: PositiveInt = Field(le=MAX_LAYERS, description="published: Llama-3.1-405B 126, PaLM-540B 118, "
                                                             "Qwen3-235B-A22B 94")
    num_dense_layers: int = Field(0, ge=0, description="leading layers with a dense FFN")
    hidden_size: PositiveInt = Field(le=MAX_HIDDEN, description="the residual width; published: PaLM-540B 18,432, "
                                                             "Llama-3.1-405B 16,384, DeepSeek-V3 7,168")
    vocab_size: PositiveInt = Field(le=MAX_VOCAB, description="published: Gemma 3 262,144, gpt-oss 201,088")
    tie_word_embeddings: bool = False
    dense_intermediate_size: Annotated[int, Field(gt=0, le=MAX_INTERMEDIATE)] | None = Field(
        None, description=INTER_NOTE)
    short_conv_kernel: Annotated[int, Field(gt=0, le=MAX_CONV_KERNEL)] | None = Field(
        None, description="LFM2 conv layers' kernel; LFM2: 3")
    attention: GQAttention | MLAttention = Field(discriminator="kind")
    moe: MoEShape
    native_formats: WeightRecipe
    # not in the model's dumps: what hashes a model (the synthetic routing's fit key) hashes its shape
    eagle3_draft: FittedDraft | None = Field(
        None, exclude=True, description="the EAGLE-3 draft fitted to the model's published alpha and E; None = no "
                                        "fit (a speculative run uses the generic draft, gpt-oss-120b's)")
    notes: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        if self.num_dense_layers >= self.num_layers:
            raise ValueError(f"num_dense_layers must be < num_layers ({self.num_layers}), got {self.num_dense_layers}")
        if self.num_dense_layers and self.dense_intermediate_size is None:
            raise ValueError("dense_intermediate_size must be set when num_dense_layers > 0 (it is not set)")
        n_attn = self.attention.num_attention_layers
        if n_attn is not None and n_attn > self.num_layers:
            raise ValueError(f"attention.num_attention_layers must be <= num_layers ({self.num_layers}), got {n_attn}")
        if n_attn is not None and n_attn < self.num_layers and self.short_conv_kernel is None:
            raise ValueError("short_conv_kernel must be set when some layers have no attention (it is not set)")
        if self.total_params() > MAX_PARAMS:
            raise ValueError(f"num_layers x hidden_size x moe.num_routed_experts x moe.expert_intermediate_size "
                             f"(the shape) must give at most {MAX_PARAMS:.0e} weights (60x the largest published "
                             f"model, Switch-C's 1.6e12), got {self.total_params():.3g}")
        return self

    # ----- derived shape -------------------------------------------------------------
    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.num_dense_layers

    @property
    def num_attention_layers(self) -> int:
        n = self.attention.num_attention_layers
        return self.num_layers if n is None else n

    @property
    def shared_intermediate_size(self) -> int:
        return self.moe.shared_expert_intermediate_size or self.moe.expert_intermediate_size

    def expert_tensors(self) -> list[Tensor]:
        """The three matrices of one routed expert (gate, up, down)."""
        h, i = self.hidden_size, self.moe.expert_intermediate_size
        return [Tensor("ffn_gate_exp", TensorClass.EXPERT, i, h),
                Tensor("ffn_up_exp", TensorClass.EXPERT, i, h),
                Tensor("ffn_down_exp", TensorClass.EXPERT, h, i)]

    def tensors(self) -> list[Tensor]:
        """Every weight tensor of the model with its repeat count."""
        h, m = self.hidden_size, self.moe
        n_moe, n_attn = self.num_moe_layers, self.num_attention_layers
        out = [Tensor("token_embd", TensorClass.EMBEDDING, self.vocab_size, h)]
        if not self.tie_word_embeddings:
            out.append(Tensor("output", TensorClass.LM_HEAD, self.vocab_size, h))
        out.append(Tensor("norms", TensorClass.NORM, 1, h, 2 * self.num_layers + 1))
        out += [Tensor(t.name, t.cls, t.rows, t.row_len, n_attn) for t in self.attention.tensors(h)]
        n_conv = self.num_layers - n_attn
        if n_conv:
            assert self.short_conv_kernel is not None
            out += [Tensor("conv_in_proj", TensorClass.CONV, 3 * h, h, n_conv),
                    Tensor("conv_kernel", TensorClass.CONV, h, self.short_conv_kernel, n_conv),
                    Tensor("conv_out_proj", TensorClass.CONV, h, h, n_conv)]
        if self.num_dense_layers:
            assert self.dense_intermediate_size is not None
            d = self.dense_intermediate_size
            out += [Tensor("ffn_gate", TensorClass.DENSE_FFN, d, h, self.num_dense_layers),
                    Tensor("ffn_up", TensorClass.DENSE_FFN, d, h, self.num_dense_layers),
                    Tensor("ffn_down", TensorClass.DENSE_FFN, h, d, self.num_dense_layers)]
        gate_rows = m.num_routed_experts + (1 if m.shared_expert_gate else 0)
        out.append(Tensor("ffn_gate_inp", TensorClass.ROUTER, gate_rows, h, n_moe))
        if m.num_shared_experts:
            s, reps = self.shared_intermediate_size, n_moe * m.num_shared_experts
            out += [Tensor("ffn_gate_shexp", TensorClass.SHARED_EXPERT, s, h, reps),
                    Tensor("ffn_up_shexp", TensorClass.SHARED_EXPERT, s, h, reps),
                    Tensor("ffn_down_shexp", TensorClass.SHARED_EXPERT, h, s, reps)]
        reps = n_moe * m.num_routed_experts
        out += [Tensor(t.name, t.cls, t.rows, t.row_len, reps) for t in self.expert_tensors()]
        return out

    # ----- bytes ---------------------------------------------------------------------
    def recipe(self, recipe: str | WeightRecipe = "native") -> WeightRecipe:
        if isinstance(recipe, WeightRecipe):
            return recipe
        if recipe == "native":
            return self.native_formats
        try:
            return RECIPES[recipe]
        except KeyError:
            names = ", ".join(["native", *RECIPES])
            raise KeyError(f"recipe must be one of {names}, got {recipe!r}") from None

    def expert_bytes(self, recipe: str | WeightRecipe = "native") -> int:
        """Bytes of one routed expert (gate + up + down), excluding biases."""
        r = self.recipe(recipe)
        fmt = r.format_of(TensorClass.EXPERT)
        return sum(tensor_bytes(fmt, t.rows, t.row_len) for t in self.expert_tensors())

    def bytes_by_class(self, recipe: str | WeightRecipe = "native") -> dict[TensorClass, int]:
        r = self.recipe(recipe)
        totals: dict[TensorClass, int] = defaultdict(int)
        for t in self.tensors():
            totals[t.cls] += t.count * tensor_bytes(r.format_of(t.cls), t.rows, t.row_len)
        return {c: totals[c] for c in TensorClass if c in totals}

    def resident_non_expert_bytes(self, recipe: str | WeightRecipe = "native") -> int:
        """Weights that stay resident under expert streaming: all but routed experts."""
        by = self.bytes_by_class(recipe)
        return sum(v for c, v in by.items() if c is not TensorClass.EXPERT)

    def total_weight_bytes(self, recipe: str | WeightRecipe = "native") -> int:
        return sum(self.bytes_by_class(recipe).values())

    def fallbacks(self, recipe: str | WeightRecipe = "native") -> list[str]:
        """Tensors stored in a fallback format because their rows do not fit the block."""
        r = self.recipe(recipe)
        out = []
        for t in self.tensors():
            asked = r.format_of(t.cls)
            got = storage_format(asked, t.row_len)
            if got is not asked:
                out.append(f"{t.name}: {asked.value} -> {got.value} (row of {t.row_len})")
        return out

    def kv_cache_bytes_per_token(self, bytes_per_elem: int = 2) -> int:
        """KV cache per token over all attention layers (FP16 by default)."""
        return self.num_attention_layers * self.attention.kv_cache_elems_per_token() * bytes_per_elem

    def total_params(self) -> int:
        return sum(t.weights for t in self.tensors())

    def active_params(self) -> int:
        """Weights touched per token: all but the (num_routed - top_k) idle experts."""
        idle = self.num_moe_layers * (self.moe.num_routed_experts - self.moe.top_k)
        per_expert = sum(t.weights for t in self.expert_tensors())
        return self.total_params() - idle * per_expert
