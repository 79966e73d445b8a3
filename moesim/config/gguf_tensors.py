"""The tensor table of a GGUF file: each tensor's class, its real type and byte size, the checkpoint's
formats per class, and the bytes of one routed expert in each MoE layer.

Only the table is used (names, shapes, ggml types); the bytes of a tensor are ggml's
``elements / block_weights * block_bytes``, which moesim's :data:`~moesim.config.formats.FORMAT_INFO`
gives for every type it prices.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from moesim.config.formats import WeightFormat
from moesim.config.model import TensorClass, WeightRecipe
from moesim.errors import InputError

__all__ = ["TableTensor", "tensor_class", "weight_format", "native_recipe", "expert_bytes_by_layer",
           "expert_formats"]

_BLOCK = re.compile(r"^blk\.(\d+)\.(.+)\.weight$")
#: ggml type names that moesim spells differently
_GGML_NAMES = {"F32": WeightFormat.FP32, "F16": WeightFormat.FP16}


@dataclass(frozen=True)
class TableTensor:
    """One row of the tensor table: ``shape`` in GGUF order (the row length first)."""

    name: str
    ggml_type: str
    shape: tuple[int, ...]
    n_bytes: int

    @property
    def block(self) -> int | None:
        found = _BLOCK.match(self.name)
        return int(found.group(1)) if found else None

    @property
    def role(self) -> str:
        """``ffn_gate_exps`` for ``blk.3.ffn_gate_exps.weight``; the whole name without
        ``.weight`` outside the blocks."""
        found = _BLOCK.match(self.name)
        return found.group(2) if found else self.name.removesuffix(".weight")


def tensor_class(t: TableTensor) -> TensorClass | None:
    """What a weight is for, from its llama.cpp name; None for biases and tensors moesim does not
    count (rope frequencies, expert score biases)."""
    if not t.name.endswith(".weight"):
        return None
    role = t.role
    fixed = {"token_embd": TensorClass.EMBEDDING, "output": TensorClass.LM_HEAD}
    if role in fixed:
        return fixed[role]
    rules = [(role.endswith("norm"), TensorClass.NORM), (role.startswith("ffn_gate_inp"), TensorClass.ROUTER),
             (role.endswith("_exps"), TensorClass.EXPERT), (role.endswith("_shexp"), TensorClass.SHARED_EXPERT),
             (role.startswith("attn_"), TensorClass.ATTENTION), (role.startswith("shortconv"), TensorClass.CONV),
             (role in ("ffn_gate", "ffn_up", "ffn_down"), TensorClass.DENSE_FFN)]
    return next((cls for hit, cls in rules if hit), None)


def weight_format(t: TableTensor, source: str) -> WeightFormat:
    """The :class:`WeightFormat` of a tensor's ggml type; a type moesim does not price is refused."""
    fmt = _GGML_NAMES.get(t.ggml_type)
    if fmt is not None:
        return fmt
    try:
        return WeightFormat(t.ggml_type)
    except ValueError:
        names = ", ".join(f.value for f in WeightFormat if f is not WeightFormat.FP8)
        raise InputError(f"{t.name} type", f"must be a ggml type moesim prices ({names})", t.ggml_type,
                         source=source) from None


def _dominant(tensors: list[TableTensor], source: str) -> WeightFormat:
    """The format holding most of these tensors' bytes."""
    weight: Counter[WeightFormat] = Counter()
    for t in tensors:
        weight[weight_format(t, source)] += t.n_bytes
    return weight.most_common(1)[0][0]


def native_recipe(table: list[TableTensor], source: str) -> WeightRecipe:
    """The file's formats per tensor class (the type holding most of each class's bytes); the
    expert entry is settled by :func:`expert_formats`."""
    by_class: dict[TensorClass, list[TableTensor]] = defaultdict(list)
    for t in table:
        cls = tensor_class(t)
        if cls is not None:
            by_class[cls].append(t)
    default = _dominant(by_class.get(TensorClass.ATTENTION) or table, source)
    per_class = {cls.value: _dominant(ts, source) for cls, ts in by_class.items()}
    return WeightRecipe(default=default, **{k: v for k, v in per_class.items() if v is not default})


def expert_bytes_by_layer(table: list[TableTensor], experts: int, source: str) -> dict[int, int]:
    """Bytes of one routed expert (every ``*_exps`` weight of the block / ``experts``) per MoE block."""
    total: dict[int, int] = defaultdict(int)
    for t in table:
        if tensor_class(t) is TensorClass.EXPERT and t.block is not None:
            if len(t.shape) != 3 or t.shape[2] != experts:
                raise InputError(f"{t.name} shape", f"must be 3-D with expert_count ({experts}) experts last",
                                 list(t.shape), source=source)
            total[t.block] += t.n_bytes
    return {block: n // experts for block, n in sorted(total.items())}


def expert_formats(table: list[TableTensor], source: str) -> list[WeightFormat]:
    """The formats the expert tensors are stored in, the most bytes first."""
    weight: Counter[WeightFormat] = Counter()
    for t in table:
        if tensor_class(t) is TensorClass.EXPERT:
            weight[weight_format(t, source)] += t.n_bytes
    return [fmt for fmt, _ in weight.most_common()]
