"""Dense models a ``llama-bench`` log may name, with their shapes, so that moesim's operator
costs can price each measured row (``moesim calibrate device``).

The key is llama-bench's ``model_type`` less its quantisation ("qwen3 4B" of "qwen3 4B Q4_0");
each shape is the model's ``config.json``. Only GGUF Q4_0 files are priced (the format moesim's
cost model knows for dense weights on the HTP and the CPU).
"""

from __future__ import annotations

from dataclasses import dataclass

from moesim.calibrate.dense_anchor import DenseDecode
from moesim.config.model import GQAttention, ModelSpec
from moesim.errors import InputError

__all__ = ["BenchModel", "BENCH_MODELS", "DENSE_MODELS", "bench_model"]


@dataclass(frozen=True)
class BenchModel:
    """A dense decoder: the spec :func:`moesim.calibrate.dense_anchor.dense_prefill_s` prices and its FFN width."""

    spec: ModelSpec
    ffn: int

    def decode_shape(self, tokens_per_s: float, source: str) -> DenseDecode:
        """The shape :class:`DenseDecode` reads per generated token (the LM head too)."""
        a = self.spec.attention
        assert isinstance(a, GQAttention), "bench models are dense GQA decoders"
        return DenseDecode(name=self.spec.name, layers=self.spec.num_layers, hidden=self.spec.hidden_size,
                           q_dim=a.num_heads * a.head_dim, kv_dim=a.num_kv_heads * a.head_dim, ffn=self.ffn,
                           vocab=self.spec.vocab_size, tokens_per_s=tokens_per_s, source=source)


def _dense(name: str, repo: str, layers: int, hidden: int, heads: int, kv: int, head_dim: int, ffn: int, vocab: int,
           tied: bool) -> BenchModel:
    spec = ModelSpec.model_validate({
        "name": name, "display_name": f"{repo.split('/')[1]} (dense)", "hf_repo": repo,
        "provenance": f"config.json of {repo}; dense, priced only for llama-bench rows",
        "num_layers": layers, "hidden_size": hidden, "vocab_size": vocab, "tie_word_embeddings": tied,
        "attention": {"kind": "gqa", "num_heads": heads, "num_kv_heads": kv, "head_dim": head_dim},
        "moe": {"num_routed_experts": 2, "top_k": 1, "expert_intermediate_size": ffn},   # placeholder: dense
        "native_formats": {"default": "BF16"},
    })
    return BenchModel(spec, ffn)


#: moesim's name -> a dense decoder's shape (config.json of each repository): the models that llama-bench
#: logs and the device cases (moesim.validate.phones) price
DENSE_MODELS = {m.spec.name: m for m in (
    _dense("qwen3-0.6b", "Qwen/Qwen3-0.6B", 28, 1024, 16, 8, 128, 3072, 151936, True),
    _dense("qwen3-1.7b", "Qwen/Qwen3-1.7B", 28, 2048, 16, 8, 128, 6144, 151936, True),
    _dense("qwen3-4b", "Qwen/Qwen3-4B", 36, 2560, 32, 8, 128, 9728, 151936, True),
    _dense("qwen3-8b", "Qwen/Qwen3-8B", 36, 4096, 32, 8, 128, 12288, 151936, False),
    _dense("llama-3.2-1b", "meta-llama/Llama-3.2-1B", 16, 2048, 32, 8, 64, 8192, 128256, True),
    _dense("qwen2-1.5b", "Qwen/Qwen2-1.5B", 28, 1536, 12, 2, 128, 8960, 151936, True),
    _dense("qwen1.5-1.8b", "Qwen/Qwen1.5-1.8B", 24, 2048, 16, 16, 128, 5504, 151936, False),
    _dense("qwen2.5-7b", "Qwen/Qwen2.5-7B", 28, 3584, 28, 4, 128, 18944, 152064, False),
    _dense("llama-2-7b", "meta-llama/Llama-2-7b-hf", 32, 4096, 32, 32, 128, 11008, 32000, False),
    _dense("llama-3.1-8b", "meta-llama/Llama-3.1-8B", 32, 4096, 32, 8, 128, 14336, 128256, False),
    _dense("phi-3.5-mini", "microsoft/Phi-3.5-mini-instruct", 32, 3072, 32, 32, 96, 8192, 32064, False),
)}

#: llama-bench model_type (less the quantisation) -> shape
BENCH_MODELS = {"qwen3 0.6B": DENSE_MODELS["qwen3-0.6b"], "qwen3 1.7B": DENSE_MODELS["qwen3-1.7b"],
                "qwen3 4B": DENSE_MODELS["qwen3-4b"], "qwen3 8B": DENSE_MODELS["qwen3-8b"],
                "llama 1B": DENSE_MODELS["llama-3.2-1b"]}


def bench_model(model_type: str, source: str) -> BenchModel:
    """The shape of a llama-bench ``model_type`` ("qwen3 4B Q4_0"); one-line error otherwise."""
    key, _, quant = model_type.strip().rpartition(" ")
    if quant.upper() != "Q4_0":
        raise InputError("model_type", "must be a Q4_0 model (moesim prices GGUF Q4_0 weights)", model_type,
                         source=source)
    if key not in BENCH_MODELS:
        raise InputError("model_type", f"must be one of the dense shapes moesim knows ({', '.join(BENCH_MODELS)}, "
                         "each Q4_0)", model_type, source=source)
    return BENCH_MODELS[key]
