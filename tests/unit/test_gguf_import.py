"""``moesim models import model.gguf``: the header and tensor table of a GGUF file (written here with the
``gguf`` package's own writer, small shapes, no downloads) give the shape and each expert tensor's real
type, so that the model's expert bytes equal the tensor table's."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest

from moesim.config.catalog import load_model
from moesim.config.formats import WeightFormat
from moesim.config.gguf_import import model_from_gguf
from moesim.config.model import TensorClass

Q = gguf.GGMLQuantizationType
HIDDEN, INTER, EXPERTS, LAYERS, VOCAB, HEADS, KV_HEADS = 256, 512, 4, 2, 64, 4, 2


def _tensor(w: object, name: str, shape: tuple[int, ...], qtype: object) -> None:
    """A tensor of ``shape`` (numpy order, the row last) in ``qtype``, zero bytes."""
    if qtype in (Q.F32, Q.F16):
        w.add_tensor(name, np.zeros(shape, dtype=np.float32 if qtype == Q.F32 else np.float16))
        return
    byte_shape = gguf.quants.quant_shape_to_byte_shape(shape, qtype)
    w.add_tensor(name, np.zeros(byte_shape, dtype=np.uint8), raw_dtype=qtype)


def write_gguf(path: Path, expert_type: object = Q.Q4_K, *, down_type: object | None = None,
               experts: bool = True, dense_first: bool = False, shared: bool = False,
               arch: str = "qwen3moe", header: bool = True) -> Path:
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(LAYERS)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(4 * HIDDEN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HIDDEN // HEADS)
    w.add_vocab_size(VOCAB)
    if experts:
        w.add_expert_count(EXPERTS)
        w.add_expert_used_count(2)
        w.add_expert_feed_forward_length(INTER)
    _tensor(w, "token_embd.weight", (VOCAB, HIDDEN), Q.Q8_0)
    _tensor(w, "output.weight", (VOCAB, HIDDEN), Q.Q6_K)
    _tensor(w, "output_norm.weight", (HIDDEN,), Q.F32)
    for i in range(LAYERS):
        b = f"blk.{i}"
        _tensor(w, f"{b}.attn_norm.weight", (HIDDEN,), Q.F32)
        for name, rows in (("attn_q", HIDDEN), ("attn_k", KV_HEADS * 64), ("attn_v", KV_HEADS * 64),
                           ("attn_output", HIDDEN)):
            _tensor(w, f"{b}.{name}.weight", (rows, HIDDEN), Q.Q8_0)
        _tensor(w, f"{b}.ffn_norm.weight", (HIDDEN,), Q.F32)
        if not experts or (dense_first and i == 0):
            for name, shape in (("ffn_gate", (4 * HIDDEN, HIDDEN)), ("ffn_up", (4 * HIDDEN, HIDDEN)),
                                ("ffn_down", (HIDDEN, 4 * HIDDEN))):
                _tensor(w, f"{b}.{name}.weight", shape, Q.Q8_0)
            continue
        _tensor(w, f"{b}.ffn_gate_inp.weight", (EXPERTS, HIDDEN), Q.F32)
        _tensor(w, f"{b}.ffn_gate_exps.weight", (EXPERTS, INTER, HIDDEN), expert_type)
        _tensor(w, f"{b}.ffn_up_exps.weight", (EXPERTS, INTER, HIDDEN), expert_type)
        _tensor(w, f"{b}.ffn_down_exps.weight", (EXPERTS, HIDDEN, INTER), down_type or expert_type)
        if shared:
            for name, shape in (("ffn_gate_shexp", (INTER, HIDDEN)), ("ffn_up_shexp", (INTER, HIDDEN)),
                                ("ffn_down_shexp", (HIDDEN, INTER))):
                _tensor(w, f"{b}.{name}.weight", shape, Q.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def table_expert_bytes(path: Path) -> int:
    """One routed expert's bytes straight from the reader's tensor table (blk.1: always MoE)."""
    reader = gguf.GGUFReader(path)
    return sum(int(t.n_bytes) for t in reader.tensors if t.name.startswith("blk.1.ffn_")
               and t.name.endswith("_exps.weight")) // EXPERTS


TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS", "IQ4_NL", "MXFP4",
         "IQ2_XXS", "IQ3_S", "TQ2_0", "F16", "BF16"]


@pytest.mark.parametrize("type_name", TYPES)
def test_expert_bytes_equal_the_tensor_table(type_name: str, tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf", Q[type_name])
    got = model_from_gguf(path)
    assert got.exact
    assert got.model.expert_bytes() == table_expert_bytes(path)
    fmt = WeightFormat({"F16": "FP16"}.get(type_name, type_name))
    assert got.model.recipe().format_of(TensorClass.EXPERT) is fmt


def test_shape_from_the_header_and_table(tmp_path: Path) -> None:
    m = model_from_gguf(write_gguf(tmp_path / "m.gguf", dense_first=True, shared=True)).model
    assert (m.num_layers, m.num_dense_layers, m.hidden_size, m.vocab_size) == (LAYERS, 1, HIDDEN, VOCAB)
    assert (m.moe.num_routed_experts, m.moe.top_k, m.moe.expert_intermediate_size) == (EXPERTS, 2, INTER)
    assert (m.moe.num_shared_experts, m.shared_intermediate_size, m.dense_intermediate_size) == (1, INTER, 4 * HIDDEN)
    assert (m.attention.num_heads, m.attention.num_kv_heads, m.attention.head_dim) == (HEADS, KV_HEADS, 64)
    assert m.native_formats.model_dump(exclude_none=True) == {
        "default": WeightFormat.Q8_0, "lm_head": WeightFormat.Q6_K, "norm": WeightFormat.FP32,
        "router": WeightFormat.FP32, "expert": WeightFormat.Q4_K}
    assert not m.tie_word_embeddings


def test_mixed_types_get_the_closest_format_and_a_note(tmp_path: Path) -> None:
    """Q4_K gate and up with a Q6_K down projection (a llama.cpp ``_M`` mix): ModelSpec has one expert format,
    so the closest one is taken and the notes give the tensor table's bytes."""
    path = write_gguf(tmp_path / "m.gguf", Q.Q4_K, down_type=Q.Q6_K)
    got = model_from_gguf(path)
    table = table_expert_bytes(path)
    assert table == 2 * INTER * HIDDEN // 256 * 144 + HIDDEN * INTER // 256 * 210
    assert not got.exact
    assert got.model.native_formats.expert is WeightFormat.Q4_K      # 221,184 B against Q6_K's 322,560
    assert f"the tensor table's are {table:,} to {table:,}" in got.model.notes


def test_cli_import_and_model_option(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    path = write_gguf(tmp_path / "tiny-moe.Q4_K.gguf")
    out = tmp_path / "tiny.toml"
    res = run_cli("models", "import", str(path), "-o", str(out))
    assert res.code == 0, res.err
    table = table_expert_bytes(path)
    assert res.out == (f"wrote {out}: tiny, {LAYERS} MoE layers of {EXPERTS} experts, top-2, expert bytes "
                       f"{table:,} (tensor table: {table:,}, exact)\n")
    assert load_model(out).expert_bytes() == table
    res = run_cli("models", "--model", str(path), "--json")
    assert res.code == 0, res.err
    assert '"name": "tiny-moe.q4-k"' in res.out


BAD = {
    "no experts": ("expert tensors must be in the tensor table (blk.N.ffn_*_exps.weight): this GGUF has none, a "
                   "dense model?"),
    "truncated": "GGUF header must be a complete GGUF file (header, tensor table and the data it points to)",
    "formats": "--format / --expert-format must not be given for a GGUF file (its formats are its tensors' types)",
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_gguf_refused_in_one_line(case: str, tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    path = write_gguf(tmp_path / "m.gguf", experts=case != "no experts")
    if case == "truncated":
        path.write_bytes(path.read_bytes()[:200])
    extra = ["--expert-format", "Q4_0"] if case == "formats" else []
    res = run_cli("models", "import", str(path), *extra)
    assert (res.code, res.out) == (2, "")
    assert res.err.count("\n") == 1 and BAD[case] in res.err
