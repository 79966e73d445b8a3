"""Reading a Hugging Face ``config.json``: typed field access and the per-layer structure (which
layers are MoE, which attend, slide or convolve), shared by the ``config.json`` and GGUF importers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from moesim.errors import InputError

__all__ = ["Fields", "Layout", "dense_layers", "attention_layout"]

#: ``layer_types`` entries that are attention layers, and those that are LFM2 short convolutions
_ATTENTION_TYPES = frozenset({"full_attention", "attention", "sliding_attention"})
_CONV_TYPES = frozenset({"conv", "short_conv"})


class Fields:
    """The fields of one config, read with the source named in every error."""

    def __init__(self, data: Mapping[str, Any], source: str) -> None:
        self.data, self.source = data, source

    def get(self, *keys: str) -> Any:
        """The first of ``keys`` that is set (not missing, not null)."""
        return next((self.data[k] for k in keys if self.data.get(k) is not None), None)

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def int_(self, *keys: str, rule: str = "") -> int:
        """A required positive integer: the first of ``keys`` set."""
        value = self.get(*keys)
        if value is None:
            names = " / ".join(keys)
            raise InputError(keys[0], f"must be set{' (' + names + ')' if len(keys) > 1 else ''}{rule}",
                             show_value=False, source=self.source)
        return self.check_int(keys[0], value)

    def opt_int(self, *keys: str) -> int | None:
        value = self.get(*keys)
        return None if value is None else self.check_int(keys[0], value)

    def check_int(self, key: str, value: Any, minimum: int = 1) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise InputError(key, f"must be an integer >= {minimum}", value, source=self.source)
        return value

    def int_list(self, key: str, length: int | None = None) -> list[int]:
        """A list of non-negative integers (``mlp_only_layers``, Megatron's ``moe_layer_freq``)."""
        value = self.data.get(key)
        if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in value):
            raise InputError(key, "must be a list of non-negative integers", value, source=self.source)
        if length is not None and len(value) != length:
            raise InputError(key, f"must list one entry per layer ({length})", len(value), source=self.source)
        return value


def _moe_layers(f: Fields, n: int) -> set[int]:
    """Indices of the layers with routed experts, by whichever rule the family uses."""
    freq = f.get("moe_layer_freq")
    if isinstance(freq, list):                          # Megatron: one 0 (dense) or 1 (MoE) per layer
        return {i for i, v in enumerate(f.int_list("moe_layer_freq", n)) if v}
    if f.has("moe_layers"):                             # Llama 4: the MoE layers listed
        return set(f.int_list("moe_layers")) & set(range(n))
    first_k, leading = f.get("first_k_dense_replace"), f.get("num_dense_layers")
    if first_k is not None and leading is not None and first_k != leading:
        raise InputError("first_k_dense_replace", f"must equal num_dense_layers ({leading}) when both are set",
                         first_k, source=f.source)
    k = f.check_int("first_k_dense_replace", first_k if first_k is not None else leading or 0, minimum=0)
    every = f.check_int("moe_layer_freq", freq if freq is not None else 1)               # DeepSeek
    step = f.check_int("decoder_sparse_step", f.get("decoder_sparse_step", "interleave_moe_layer_step") or 1)
    dense_only = set(f.int_list("mlp_only_layers")) if f.has("mlp_only_layers") else set()
    return {i for i in range(n) if i >= k and i % every == 0 and (i + 1) % step == 0 and i not in dense_only}


def dense_layers(f: Fields, n: int) -> tuple[int, str]:
    """How many of the ``n`` layers have a dense FFN, and a note where they are not the leading ones
    (ModelSpec places them first; the bytes are the same)."""
    moe = _moe_layers(f, n)
    if not moe:
        raise InputError("MoE layers", "must be at least one (first_k_dense_replace, decoder_sparse_step, "
                         "mlp_only_layers and moe_layer_freq leave none)", show_value=False, source=f.source)
    dense = sorted(set(range(n)) - moe)
    if dense == list(range(len(dense))):
        return len(dense), ""
    return len(dense), f"dense FFN layers {dense} modelled as the leading {len(dense)}"


@dataclass(frozen=True)
class Layout:
    """What ``layer_types`` says beyond attention's shape: extra ``attention`` fields, the
    short-conv kernel of the other layers, and a note."""

    attention: dict[str, Any] = field(default_factory=dict)
    short_conv_kernel: int | None = None
    note: str = ""


def attention_layout(f: Fields, n: int) -> Layout:
    """Attention, sliding-window and short-conv layers from ``layer_types``; a layer kind that
    moesim cannot price (linear attention, Mamba) is refused naming the field."""
    chunk = f.get("attention_chunk_size")
    note = f"attention_chunk_size {chunk} (chunked local attention) not modelled: every layer attends to the " \
           "whole context" if chunk else ""
    types = f.get("layer_types")
    if types is None:
        interval = f.get("full_attention_interval")
        if interval is not None and interval != 1:
            raise InputError("full_attention_interval", "must be 1: the other layers are linear attention (Gated "
                             "DeltaNet), which moesim cannot price", interval, source=f.source)
        if f.has("hybrid_override_pattern"):
            raise InputError("hybrid_override_pattern", "must not be set: Mamba layers cannot be priced by moesim",
                             f.get("hybrid_override_pattern"), source=f.source)
        return Layout(note=note)
    if not isinstance(types, list) or len(types) != n:
        raise InputError("layer_types", f"must list one type per layer ({n})", types, source=f.source)
    other = next((t for t in types if t not in _ATTENTION_TYPES | _CONV_TYPES), None)
    if other is not None:
        raise InputError("layer_types", f"must hold only attention and short-conv layers ({other!r} layers cannot "
                         "be priced by moesim)", other, source=f.source)
    conv, sliding = sum(t in _CONV_TYPES for t in types), types.count("sliding_attention")
    extra: dict[str, Any] = {}
    if conv:
        extra["num_attention_layers"] = n - conv
    if sliding:
        extra |= {"sliding_window": f.int_("sliding_window"), "num_sliding_layers": sliding}
    kernel = f.int_("conv_L_cache", "conv_kernel") if conv else None
    return Layout(extra, kernel, note)
