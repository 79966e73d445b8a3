"""A model spec from a Hugging Face ``config.json`` (``moesim models import config.json``).

The fields the common MoE families use are read (DeepSeek, GLM-4.5, Qwen MoE, Mixtral, OLMoE,
Granite MoE, gpt-oss, LFM2-MoE, Llama 4, Phi-MoE); a field that is missing or that contradicts
another is refused in one line that names it. What ``config.json`` cannot say (the weight formats
of an unquantised checkpoint) comes from ``quantization_config`` and ``torch_dtype``, or from the
caller (:class:`ImportFormats`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field

from moesim.config.base import Frozen
from moesim.config.formats import WeightFormat
from moesim.config.hf_fields import Fields, attention_layout, dense_layers
from moesim.config.loading import validate_data
from moesim.config.model import ModelSpec, WeightRecipe
from moesim.errors import InputError
from moesim.inputs import parse_json, read_input
from moesim.typing_ import JSONValue

__all__ = ["ImportFormats", "read_hf_config", "model_from_hf_config", "model_name_from", "model_toml"]

#: ``torch_dtype`` (or ``dtype``) -> the format of an unquantised checkpoint's weights
_DTYPES = {"bfloat16": WeightFormat.BF16, "float16": WeightFormat.FP16, "float32": WeightFormat.FP32}
#: families whose shared expert has a sigmoid gate of its own (one more router row)
_GATED_SHARED = frozenset({"qwen2_moe", "qwen3_next"})


class ImportFormats(Frozen):
    """Weight formats an import takes from its caller; None = what the file says (for a
    ``config.json``: ``quantization_config``, else ``torch_dtype``, else BF16)."""

    default: WeightFormat | None = Field(None, description="every tensor (replaces the file's recipe)")
    expert: WeightFormat | None = Field(None, description="routed experts only")


def read_hf_config(path: str | Path, flag: str = "SRC") -> dict[str, JSONValue]:
    """The JSON object of a ``config.json`` file (read within the size cap of a config)."""
    data = parse_json(read_input(path, flag, "config"), flag, source=str(path), what="a JSON config.json")
    if not isinstance(data, dict):
        raise InputError("config.json", "must be a JSON object", type(data).__name__, source=str(path))
    return data


def model_name_from(path: str | Path) -> str:
    """A catalog-style name for a model read from ``path``: the file's stem, or its folder's
    name for a ``config.json`` (a Hugging Face snapshot folder is named after the model)."""
    p = Path(path)
    stem = p.parent.resolve().name if p.stem == "config" else p.stem
    slug = re.sub(r"[^a-z0-9.\-]+", "-", stem.lower()).strip("-.")
    return slug or "imported-model"


def _text_fields(config: Mapping[str, Any], source: str) -> Fields:
    """A multimodal config (Llama 4) keeps the language model's fields in ``text_config``."""
    text = config.get("text_config")
    if isinstance(text, dict):
        merged = {**config, **text}
        merged.setdefault("model_type", config.get("model_type"))
        return Fields(merged, source)
    return Fields(config, source)


def _moe(f: Fields, family: str) -> dict[str, int | bool]:
    experts = f.int_("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts",
                     rule=": a MoE config names its expert count, this one has none (a dense model?)")
    top_k = f.int_("num_experts_per_tok", "experts_per_token", "moe_k")
    out: dict[str, int | bool] = {"num_routed_experts": experts, "top_k": top_k,
                           "expert_intermediate_size": f.int_("moe_intermediate_size", "intermediate_size")}
    shared_size = f.get("shared_expert_intermediate_size", "shared_intermediate_size")
    shared = f.get("n_shared_experts", "num_shared_experts", "moe_num_shared_experts")
    if family.startswith("llama4"):       # one shared expert as wide as a routed one, always
        shared = 1
    if shared_size:
        out["shared_expert_intermediate_size"] = f.check_int("shared_expert_intermediate_size", shared_size)
        shared = 1 if shared is None else shared
        gate = f.get("shared_expert_gate")
        out["shared_expert_gate"] = family in _GATED_SHARED if gate is None else bool(gate)
    if shared:
        out["num_shared_experts"] = f.check_int("n_shared_experts", shared)
    return out


def _attention(f: Fields, hidden: int) -> dict[str, str | int]:
    heads = f.int_("num_attention_heads", "n_head")
    if f.has("kv_lora_rank"):
        out: dict[str, str | int] = {"kind": "mla", "num_heads": heads, "kv_lora_rank": f.int_("kv_lora_rank"),
                               "qk_nope_head_dim": f.int_("qk_nope_head_dim"),
                               "qk_rope_head_dim": f.int_("qk_rope_head_dim"), "v_head_dim": f.int_("v_head_dim")}
        if f.has("q_lora_rank"):
            out["q_lora_rank"] = f.int_("q_lora_rank")
        return out
    head_dim = f.opt_int("head_dim")
    if head_dim is None:
        if hidden % heads:
            raise InputError("head_dim", f"must be set when hidden_size ({hidden}) is not a multiple of "
                             f"num_attention_heads ({heads})", show_value=False, source=f.source)
        head_dim = hidden // heads
    return {"kind": "gqa", "num_heads": heads, "num_kv_heads": f.opt_int("num_key_value_heads") or heads,
            "head_dim": head_dim}


def _recipe(f: Fields, formats: ImportFormats) -> tuple[WeightRecipe, str]:
    """The checkpoint's formats and where they came from."""
    if formats.default is not None:
        recipe, said = WeightRecipe(default=formats.default), f"--format {formats.default.value}"
    else:
        recipe, said = _file_recipe(f)
    if formats.expert is not None:
        recipe = recipe.model_copy(update={"expert": formats.expert})
        said += f", --expert-format {formats.expert.value}"
    return recipe, said


def _file_recipe(f: Fields) -> tuple[WeightRecipe, str]:
    dtype_name = f.get("torch_dtype", "dtype") or "bfloat16"
    base = _DTYPES.get(str(dtype_name))
    if base is None:
        raise InputError("torch_dtype", f"must be one of {', '.join(_DTYPES)} (or give --format)", dtype_name,
                         source=f.source)
    quant = f.get("quantization_config")
    method = quant.get("quant_method") if isinstance(quant, dict) else None
    if method is None:
        return WeightRecipe(default=base), f"torch_dtype {dtype_name}"
    if method == "mxfp4":
        return WeightRecipe(default=base, expert=WeightFormat.MXFP4), "quantization_config mxfp4 (experts)"
    if method == "fp8":
        block = quant.get("weight_block_size") if isinstance(quant, dict) else None
        if block != [128, 128]:
            raise InputError("quantization_config.weight_block_size", "must be [128, 128] (moesim's FP8 has one "
                             "scale per 128 x 128 block; or give --format)", block, source=f.source)
        bf16 = WeightFormat.BF16
        return (WeightRecipe(default=WeightFormat.FP8, embedding=bf16, lm_head=bf16, norm=bf16, router=bf16),
                "quantization_config fp8 128x128 (embedding, head, norms, router BF16)")
    raise InputError("quantization_config.quant_method", "must be fp8 or mxfp4, or the formats given with "
                     "--format / --expert-format", method, source=f.source)


def _notes(f: Fields, *found: str) -> str:
    mtp = f.get("num_nextn_predict_layers")
    said = [*found, f"the {mtp} multi-token-prediction layer(s) not counted" if mtp else "",
            "" if f.has("tie_word_embeddings") or f.has("tie_embedding") else "tie_word_embeddings not set: untied "
                                                                              "assumed"]
    return "; ".join(n for n in said if n)


def model_from_hf_config(config: Mapping[str, Any], *, name: str, source: str,
                         formats: ImportFormats | None = None, hf_repo: str | None = None,
                         native: tuple[WeightRecipe, str] | None = None) -> ModelSpec:
    """The :class:`ModelSpec` a ``config.json`` describes; ``source`` names the file in errors
    and in the provenance line. ``native`` (a recipe and where it came from) replaces the formats
    the config would give (the GGUF importer reads them from the tensor table)."""
    f = _text_fields(config, source)
    family = str(f.get("model_type") or "unknown")
    moe = _moe(f, family)                   # first: a dense model's config is refused for what it lacks
    layers, hidden = f.int_("num_hidden_layers", "n_layer"), f.int_("hidden_size", "d_model")
    dense, dense_note = dense_layers(f, layers)
    layout = attention_layout(f, layers)
    recipe, said = native if native is not None else _recipe(f, formats or ImportFormats())
    repo = hf_repo if hf_repo is not None else str(f.get("_name_or_path") or "")
    tie = f.get("tie_word_embeddings", "tie_embedding")
    data: dict[str, object] = {
        "name": name, "display_name": repo.rsplit("/", 1)[-1] or name, "hf_repo": repo,
        "provenance": f"{source} (model_type {family}), imported by moesim models import; "
                      f"weight formats: {said}",
        "num_layers": layers, "num_dense_layers": dense, "hidden_size": hidden,
        "vocab_size": f.int_("vocab_size", "padded_vocab_size"), "tie_word_embeddings": bool(tie),
        "attention": {**_attention(f, hidden), **layout.attention}, "moe": moe,
        "native_formats": recipe.model_dump(mode="json", exclude_none=True),
        "notes": _notes(f, dense_note, layout.note),
    }
    if layout.short_conv_kernel is not None:
        data["short_conv_kernel"] = layout.short_conv_kernel
    if dense:
        key = "intermediate_size_mlp" if family.startswith("llama4") else "intermediate_size"
        if key == "intermediate_size" and not f.has("moe_intermediate_size"):
            raise InputError("moe_intermediate_size", "must be set when some layers are dense (intermediate_size is "
                             "then the dense FFN's)", show_value=False, source=source)
        data["dense_intermediate_size"] = f.int_(key)
    return validate_data(ModelSpec, data, source=source)


def model_toml(model: ModelSpec) -> str:
    """The model as a TOML file in the catalog's layout (round-trips through :func:`load_model`)."""
    import tomlkit

    data = model.model_dump(mode="json", exclude_defaults=True)
    data["attention"] = {"kind": model.attention.kind, **data.get("attention", {})}
    doc = tomlkit.document()
    for key in ("name", "display_name", "hf_repo", "provenance", "num_layers", "num_dense_layers", "hidden_size",
                "vocab_size", "tie_word_embeddings", "dense_intermediate_size", "short_conv_kernel", "notes"):
        if key in data:
            doc[key] = data[key]
    for table in ("attention", "moe", "native_formats"):
        doc[table] = data[table]
    return tomlkit.dumps(doc)
