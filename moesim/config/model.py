"""ModelSpec: the shape of an MoE transformer and its per-tensor weight formats.

Byte counts (per expert, per tensor class, resident non-expert) are computed from the
shape and a weight recipe, never typed in. A tensor of ``rows`` x ``row_len`` follows
the GGUF convention: ``row_len`` is the input dimension, along which blocks run.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Literal

from pydantic import Field, PositiveInt, model_validator

from moesim.config.base import Frozen
from moesim.config.formats import WeightFormat, storage_format, tensor_bytes

__all__ = [
    "TensorClass", "Tensor", "GQAttention", "MLAttention", "MoEShape", "ModelSpec",
    "WeightRecipe", "RECIPES", "FittedDraft",
]


class TensorClass(str, Enum):
    """What a weight tensor is for; recipes assign a format per class."""

    EMBEDDING = "embedding"
    LM_HEAD = "lm_head"
    ATTENTION = "attention"
    CONV = "conv"
    NORM = "norm"
    ROUTER = "router"
    DENSE_FFN = "dense_ffn"
    SHARED_EXPERT = "shared_expert"
    EXPERT = "expert"


@dataclass(frozen=True)
class Tensor:
    """One weight tensor repeated ``count`` times (e.g. per layer or per expert)."""

    name: str
    cls: TensorClass
    rows: int
    row_len: int
    count: int = 1

    @property
    def weights(self) -> int:
        return self.rows * self.row_len * self.count


#: Physical ranges of a model's shape, checked when a model file is loaded: each is a few times
#: the largest published value (named in the field's description), so that a typo (a 1e10
#: hidden size, a million layers) is refused with the field's name instead of overflowing later.
MAX_LAYERS = 1_024
MAX_HIDDEN = 65_536
MAX_VOCAB = 2_097_152
MAX_HEADS = 1_024
MAX_HEAD_DIM = 1_024
MAX_WINDOW = 2**24
MAX_EXPERTS = 4_096
MAX_TOP_K = 64
MAX_SHARED = 64
MAX_INTERMEDIATE = 262_144
MAX_CONV_KERNEL = 64
MAX_PARAMS = 10**14     # 100 T weights: 60x the largest published (Switch-C, 1.6 T)
_HEADS_NOTE = "published: at most 128, Llama-3.1-405B and DeepSeek-V3"
_HEAD_DIM_NOTE = "published: at most 256, Gemma"
_INTER_NOTE = "FFN width; published: PaLM-540B dense 73,728, Grok-1 expert 32,768"


class GQAttention(Frozen):
    """Multi-head / grouped-query attention (MHA when ``num_kv_heads == num_heads``)."""

    kind: Literal["gqa"] = "gqa"
    num_heads: PositiveInt = Field(le=MAX_HEADS, description=_HEADS_NOTE)
    num_kv_heads: PositiveInt = Field(le=MAX_HEADS, description=_HEADS_NOTE)
    head_dim: PositiveInt = Field(le=MAX_HEAD_DIM, description=_HEAD_DIM_NOTE)
    num_attention_layers: Annotated[int, Field(gt=0, le=MAX_LAYERS)] | None = Field(
        None, description="layers with attention; the others are short-conv (LFM2). None = all")
    sliding_window: Annotated[int, Field(gt=0, le=MAX_WINDOW)] | None = Field(
        None, description="window of sliding layers, tokens; at most 2**24, a context of 16M tokens")
    num_sliding_layers: int = Field(0, ge=0, le=MAX_LAYERS, description="how many attention layers slide")

    @model_validator(mode="after")
    def _heads_divide(self) -> GQAttention:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads must be a multiple of num_kv_heads, got {self.num_heads} and {self.num_kv_heads}")
        if self.num_sliding_layers and self.sliding_window is None:
            raise ValueError("sliding_window must be set when num_sliding_layers > 0 (it is not set)")
        return self

    def tensors(self, hidden: int) -> list[Tensor]:
        q, kv = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        return [
            Tensor("attn_q", TensorClass.ATTENTION, q, hidden),
            Tensor("attn_k", TensorClass.ATTENTION, kv, hidden),
            Tensor("attn_v", TensorClass.ATTENTION, kv, hidden),
            Tensor("attn_output", TensorClass.ATTENTION, hidden, q),
        ]

    def kv_cache_elems_per_token(self) -> int:
        """K and V elements cached per token per attention layer."""
        return 2 * self.num_kv_heads * self.head_dim


class MLAttention(Frozen):
    """DeepSeek multi-head latent attention."""

    kind: Literal["mla"] = "mla"
    num_heads: PositiveInt = Field(le=MAX_HEADS, description=_HEADS_NOTE)
    q_lora_rank: Annotated[int, Field(gt=0, le=MAX_HIDDEN)] | None = Field(
        None, description="None: queries are not low-rank; DeepSeek-V3: 1,536, at most the largest hidden size")
    kv_lora_rank: PositiveInt = Field(le=MAX_HIDDEN, description="DeepSeek-V2/V3: 512, at most the largest hidden size")
    qk_nope_head_dim: PositiveInt = Field(le=MAX_HEAD_DIM, description=_HEAD_DIM_NOTE)
    qk_rope_head_dim: PositiveInt = Field(le=MAX_HEAD_DIM, description=_HEAD_DIM_NOTE)
    v_head_dim: PositiveInt = Field(le=MAX_HEAD_DIM, description=_HEAD_DIM_NOTE)
    num_attention_layers: None = None

    def tensors(self, hidden: int) -> list[Tensor]:
        qk = self.num_heads * (self.qk_nope_head_dim + self.qk_rope_head_dim)
        out: list[Tensor] = []
        if self.q_lora_rank is None:
            out.append(Tensor("attn_q", TensorClass.ATTENTION, qk, hidden))
        else:
            out += [Tensor("attn_q_a", TensorClass.ATTENTION, self.q_lora_rank, hidden),
                    Tensor("attn_q_b", TensorClass.ATTENTION, qk, self.q_lora_rank)]
        kv_b = self.num_heads * (self.qk_nope_head_dim + self.v_head_dim)
        return out + [
            Tensor("attn_kv_a_mqa", TensorClass.ATTENTION, self.kv_lora_rank + self.qk_rope_head_dim, hidden),
            Tensor("attn_kv_b", TensorClass.ATTENTION, kv_b, self.kv_lora_rank),
            Tensor("attn_output", TensorClass.ATTENTION, hidden, self.num_heads * self.v_head_dim),
        ]

    def kv_cache_elems_per_token(self) -> int:
        """Compressed latent plus the shared rope key, per token per layer."""
        return self.kv_lora_rank + self.qk_rope_head_dim


class MoEShape(Frozen):
    """Routed and shared experts of every MoE layer (all MoE layers are alike)."""

    num_routed_experts: Annotated[int, Field(ge=2, le=MAX_EXPERTS)] = Field(
        description="per MoE layer; published: Switch-C 2,048, Qwen3-Next 512, DeepSeek-V3 256")
    top_k: PositiveInt = Field(le=MAX_TOP_K,
                               description="experts a token is routed to; published: at most 10, Qwen3-Next")
    expert_intermediate_size: PositiveInt = Field(le=MAX_INTERMEDIATE, description=_INTER_NOTE)
    num_shared_experts: int = Field(0, ge=0, le=MAX_SHARED, description="published: DeepSeek-V2 2, "
                                                                        "DeepSeekMoE-16B 2")
    shared_expert_intermediate_size: Annotated[int, Field(gt=0, le=MAX_INTERMEDIATE)] | None = Field(
        None, description="per shared expert; None = expert_intermediate_size")
    shared_expert_gate: bool = Field(False, description="a sigmoid gate on the shared expert (Qwen1.5-MoE)")

    @model_validator(mode="after")
    def _k_fits(self) -> MoEShape:
        if self.top_k > self.num_routed_experts:
            raise ValueError(
                f"top_k must be <= num_routed_experts ({self.num_routed_experts}), got {self.top_k}")
        return self


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
        None, description=_INTER_NOTE)
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
