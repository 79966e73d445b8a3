"""A model spec from a GGUF file's header and tensor table (``moesim models import model.gguf``).

The ``gguf`` package (llama.cpp's reader) parses the header; the tensor data is memory-mapped by the
reader and never read. The shape comes from the ``{arch}.*`` metadata and the tensor table, mapped onto
the fields of a Hugging Face ``config.json`` so that one builder (:mod:`moesim.config.hf_import`) holds
every rule; the formats come from each tensor's real ggml type. The routed experts' format is the one
whose bytes equal the tensor table's (exact for a file whose expert tensors share one type, or whose
other types are the fallbacks moesim applies); a file that mixes types across layers (llama.cpp's
``_M`` mixes) gets the closest format, and its notes say by how much.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moesim.config.gguf_tensors import (
    TableTensor,
    expert_bytes_by_layer,
    expert_formats,
    native_recipe,
    tensor_class,
)
from moesim.config.hf_import import model_from_hf_config, model_name_from
from moesim.config.model import ModelSpec, TensorClass, WeightRecipe
from moesim.errors import InputError
from moesim.inputs import is_regular
from moesim.typing_ import JSONValue

__all__ = ["GgufImport", "model_from_gguf"]


@dataclass(frozen=True)
class GgufImport:
    """A model read from a GGUF file, and its expert bytes as the tensor table gives them."""

    model: ModelSpec
    table_expert_bytes: dict[int, int]   # MoE block -> bytes of one routed expert

    @property
    def exact(self) -> bool:
        return set(self.table_expert_bytes.values()) == {self.model.expert_bytes()}


def _read(path: Path, flag: str) -> tuple[dict[str, JSONValue], list[TableTensor]]:
    """The header's key-value pairs and the tensor table."""
    if not is_regular(path):
        raise InputError(flag, "must name a readable GGUF file", str(path))
    from gguf import GGUFReader

    try:
        reader = GGUFReader(path)
        meta = {name: field.contents() for name, field in reader.fields.items()}
        table = [TableTensor(t.name, t.tensor_type.name, tuple(int(d) for d in t.shape), int(t.n_bytes))
                 for t in reader.tensors]
    except (ValueError, IndexError, KeyError, TypeError, OSError) as exc:
        reason = " ".join(str(exc).split())[:160]
        raise InputError("GGUF header", f"must be a complete GGUF file (header, tensor table and the data it "
                         f"points to): {reason}", show_value=False, source=str(path)) from None
    return meta, table


class _Meta:
    def __init__(self, meta: dict[str, JSONValue], source: str) -> None:
        arch = meta.get("general.architecture")
        if not isinstance(arch, str):
            raise InputError("general.architecture", "must be set in the GGUF header", show_value=False,
                             source=source)
        self.meta, self.arch, self.source = meta, arch, source

    def get(self, key: str) -> Any:
        return self.meta.get(f"{self.arch}.{key}")

    def widest(self, key: str) -> Any:
        """A per-layer array (LFM2's head_count_kv) as its largest entry."""
        value = self.get(key)
        return max(value) if isinstance(value, list) and value else value


def _list(value: JSONValue) -> list[JSONValue]:
    """A header array, [] where the key is absent."""
    return value if isinstance(value, list) else []


def _by_role(table: list[TableTensor]) -> dict[str, TableTensor]:
    """The first block's tensor of each role (``ffn_gate_exps``), and the global ones by name."""
    out: dict[str, TableTensor] = {}
    for t in table:
        out.setdefault(t.role, t)
    return out


def _layer_fields(m: _Meta, table: list[TableTensor], layers: int) -> dict[str, JSONValue]:
    moe_blocks = {t.block for t in table if tensor_class(t) is TensorClass.EXPERT}
    dense: list[JSONValue] = [*sorted(set(range(layers)) - moe_blocks)]
    out: dict[str, JSONValue] = {"mlp_only_layers": dense}
    kv = m.get("attention.head_count_kv")
    if isinstance(kv, list) and 0 in kv:              # LFM2: no KV heads on the short-conv layers
        out["layer_types"] = ["full_attention" if n else "conv" for n in kv]
        out["conv_L_cache"] = m.get("shortconv.l_cache")
    return out


def _attention_fields(m: _Meta) -> dict[str, JSONValue]:
    out = {"num_attention_heads": m.widest("attention.head_count"),
           "num_key_value_heads": m.widest("attention.head_count_kv"), "head_dim": m.get("attention.key_length")}
    if m.get("attention.kv_lora_rank") is not None:
        rope = m.get("rope.dimension_count")
        key = m.get("attention.key_length_mla") or m.get("attention.key_length")
        out |= {"kv_lora_rank": m.get("attention.kv_lora_rank"), "q_lora_rank": m.get("attention.q_lora_rank"),
                "qk_rope_head_dim": rope, "qk_nope_head_dim": key - rope if key and rope else None,
                "v_head_dim": m.get("attention.value_length_mla") or m.get("attention.value_length")}
    return out


def _config(m: _Meta, table: list[TableTensor]) -> dict[str, JSONValue]:
    """The header and tensor table as the fields of a ``config.json``."""
    roles = _by_role(table)
    gate = roles.get("ffn_gate_exps") or roles.get("ffn_gate_up_exps") or roles.get("ffn_down_exps")
    if gate is None:
        raise InputError("expert tensors", "must be in the tensor table (blk.N.ffn_*_exps.weight): this GGUF has "
                         "none, a dense model?", show_value=False, source=m.source)
    layers = m.get("block_count")
    shexp = roles.get("ffn_gate_shexp") or roles.get("ffn_up_shexp")
    shared = m.get("expert_shared_count") or (1 if shexp else None)
    embd = roles.get("token_embd")
    cfg: dict[str, JSONValue] = {
        "model_type": f"gguf {m.arch}", "num_hidden_layers": layers, "hidden_size": m.get("embedding_length"),
        "num_experts": m.get("expert_count") or gate.shape[-1], "num_experts_per_tok": m.get("expert_used_count"),
        "moe_intermediate_size": m.get("expert_feed_forward_length") or (
            gate.shape[0] if gate.role == "ffn_down_exps" else gate.shape[1] // (2 if "gate_up" in gate.role else 1)),
        "intermediate_size": m.widest("feed_forward_length"),
        "vocab_size": m.get("vocab_size") or len(_list(m.meta.get("tokenizer.ggml.tokens"))) or (
            embd.shape[1] if embd else None),
        "tie_word_embeddings": "output.weight" not in {t.name for t in table},
        "n_shared_experts": shared, "shared_expert_gate": "ffn_gate_inp_shexp" in roles,
        **_attention_fields(m), **_layer_fields(m, table, layers if isinstance(layers, int) else 0),
    }
    if shexp is not None and shared:
        cfg["shared_expert_intermediate_size"] = shexp.shape[1] // shared
    return cfg


def model_from_gguf(path: str | Path, *, name: str | None = None, flag: str = "SRC",
                    hf_repo: str | None = None) -> GgufImport:
    """The model a GGUF file holds, its formats those of its tensors."""
    src = Path(path)
    meta, table = _read(src, flag)
    m = _Meta(meta, str(src))
    cfg = _config(m, table)
    recipe = native_recipe(table, m.source)
    repo = hf_repo if hf_repo is not None else str(meta.get("general.source.huggingface.repository") or "")
    chosen = name or model_name_from(src)

    def build(recipe: WeightRecipe) -> ModelSpec:
        return model_from_hf_config(cfg, name=chosen, source=str(src), hf_repo=repo,
                                    native=(recipe, "the GGUF tensor table"))

    first = build(recipe)
    per_layer = expert_bytes_by_layer(table, first.moe.num_routed_experts, m.source)
    target = sum(per_layer.values()) / len(per_layer)
    best = min(expert_formats(table, m.source),
               key=lambda fmt: abs(first.expert_bytes(recipe.model_copy(update={"expert": fmt})) - target))
    recipe = recipe.model_copy(update={"expert": best})
    model = build(recipe)
    result = GgufImport(model, per_layer)
    if not result.exact:
        note = (f"expert bytes {model.expert_bytes():,} as {best.value}; the tensor table's are "
                f"{min(per_layer.values()):,} to {max(per_layer.values()):,} (mean {target:,.0f}): its expert "
                "tensors mix types")
        model = model.model_copy(update={"notes": "; ".join(n for n in (model.notes, note) if n)})
        result = GgufImport(model, per_layer)
    return result
