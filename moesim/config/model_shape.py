"""The parts of a model's shape: its attention (grouped-query or DeepSeek's latent), its MoE
layers, the weight tensors they make, and the physical ranges a model file is checked against."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Literal

from pydantic import Field, PositiveInt, model_validator

from moesim.config.base import Frozen

__all__ = ["TensorClass", "Tensor", "GQAttention", "MLAttention", "MoEShape", "MAX_LAYERS", "MAX_HIDDEN",
           "MAX_VOCAB", "MAX_HEADS", "MAX_HEAD_DIM", "MAX_WINDOW", "MAX_EXPERTS", "MAX_TOP_K", "MAX_SHARED",
           "MAX_INTERMEDIATE", "MAX_CONV_KERNEL", "MAX_PARAMS", "INTER_NOTE"]


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
INTER_NOTE = "FFN width; published: PaLM-540B dense 73,728, Grok-1 expert 32,768"


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
    expert_intermediate_size: PositiveInt = Field(le=MAX_INTERMEDIATE, description=INTER_NOTE)
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
