"""The HTP tile pipeline (moesim.cost.htp): DMA into VTCM, HVX dequantisation, HMX, with
double-buffered weight tiles and activation chunks that re-stream the weights."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moesim.calibrate.estream import with_values
from moesim.config.prefill import PrefillRun, ResidentPolicy
from moesim.config.profiles import load_profile, phone_profile
from moesim.cost.htp import TilePipeline, tile_cost, tile_matmul
from moesim.errors import InputError
from moesim.simulate.prefill import simulate_prefill
from tests.strategies import PURE_SETTINGS

P = TilePipeline(hmx_flop_per_ns=8e3, dequant_B_per_ns=20.0, dma_B_per_ns=60.0, act_B_per_ns=40.0,
                 vtcm_B=8 << 20)
Q4 = 18 / 32   # Q4_0 bytes per weight


def test_one_expert_projection_by_hand() -> None:
    """128 tokens x (1024 x 2048) Q4_0: 3 weight tiles of 384 rows (two 384 x 2048 tiles,
    stored + fp16, fit half of VTCM); DMA 7,373 ns, dequant 22,118 ns, HMX 25,166 ns, output
    7,373 ns a tile; fill + 2 x max(DMA, dequant + output, HMX) + fp32->fp16 of the activations."""
    c = tile_cost(128, 1024, 2048, 1024 * 2048 * Q4, P)
    assert (c.chunks, c.tiles) == (1, 3)
    assert [round(x) for x in (c.dma_ns, c.dequant_ns, c.hmx_ns, c.act_ns)] == [7373, 22118, 25166, 26214]
    fill = c.dma_ns + c.dequant_ns + c.hmx_ns + 128 * 384 * 6 / 40
    assert c.total_ns == pytest.approx(fill + 2 * (c.dequant_ns + 128 * 384 * 6 / 40) + c.act_ns)


def test_long_prompts_stream_the_weights_once_per_activation_chunk() -> None:
    """A 2048-wide fp16 row is 4 KiB; half of 8 MiB holds 1,024 rows: 4,096 tokens are 4 chunks,
    and the dequantisation work is paid 4 times."""
    w = 1024 * 2048 * Q4
    one, four = tile_cost(1024, 1024, 2048, w, P), tile_cost(4096, 1024, 2048, w, P)
    assert (one.chunks, four.chunks) == (1, 4)
    assert tile_matmul(4096, 1024, 2048, w, P)[1] > 3.9 * tile_matmul(1024, 1024, 2048, w, P)[1] * 0.9


def test_fp16_weights_skip_the_dequantisation() -> None:
    fp16 = tile_matmul(64, 1024, 2048, 1024 * 2048 * 2, P, dequantise=False)
    q4 = tile_matmul(64, 1024, 2048, 1024 * 2048 * Q4, P)
    assert fp16[1] < q4[1]


def test_a_slow_dma_sets_the_pace() -> None:
    slow = TilePipeline(hmx_flop_per_ns=8e3, dequant_B_per_ns=20.0, dma_B_per_ns=1.0, act_B_per_ns=40.0,
                        vtcm_B=8 << 20)
    w = 1024 * 2048 * Q4
    c = tile_cost(32, 1024, 2048, w, slow)
    assert w / 1.0 <= c.total_ns <= 1.2 * w / 1.0     # DMA-bound: the other stages hide but for the fill
    mat, vec, rest = tile_matmul(32, 1024, 2048, w, slow)
    assert rest > max(mat, vec)     # exposed: neither compute unit is busy while DMA runs


@given(tokens=st.integers(1, 6000), rows=st.sampled_from([32, 96, 768, 1024, 4096]),
       row_len=st.sampled_from([256, 2048, 4096]), dequantise=st.booleans())
@PURE_SETTINGS
def test_pipeline_invariants(tokens: int, rows: int, row_len: int, dequantise: bool) -> None:
    w = rows * row_len * (Q4 if dequantise else 2.0)
    mat, vec, rest = tile_matmul(tokens, rows, row_len, w, P, dequantise)
    total = tile_cost(tokens, rows, row_len, w, P, dequantise).total_ns
    assert rest >= -1e-6 and rest + max(mat, vec) == pytest.approx(total)
    assert total >= w / P.dma_B_per_ns - 1e-6                                  # every byte is DMA'd
    assert total >= 2.0 * tokens * rows * row_len / P.hmx_flop_per_ns - 1e-6    # every MAC on HMX
    more = tile_cost(tokens + 32, rows, row_len, w, P, dequantise).total_ns
    assert more >= total - 1e-6                                                 # more tokens never faster


def _tiled_phone(attention: str = "hmx") -> object:
    phone = phone_profile("sd8-elite-gen5")
    data = phone.model_dump()
    data["htp"]["attention_unit"] = attention
    return with_values(type(phone).model_validate(data), {"htp.hvx_efficiency_ratio": 0.35, "htp.dma_GBps": 40.0})


def test_prefill_runs_on_the_tile_pipeline_and_attention_unit_matters() -> None:
    runs = {}
    for unit in ("hmx", "hvx"):
        run = PrefillRun(model="olmoe-1b-7b", device="sd8-elite-gen5", tokens=2048, policy=ResidentPolicy())
        runs[unit] = simulate_prefill(run, profile=_tiled_phone(unit)).metrics   # type: ignore[arg-type]
    assert 0 < runs["hmx"].ttft_s < runs["hvx"].ttft_s        # the quadratic products on 6 HVX contexts cost more
    assert runs["hvx"].utilization["hvx"] > runs["hmx"].utilization["hvx"]


def test_tile_pipeline_numbers_are_bounded() -> None:
    phone = load_profile("sd8-elite-gen5")
    with pytest.raises(InputError, match="hvx_efficiency_ratio"):
        with_values(phone, {"htp.hvx_efficiency_ratio": 1.5})      # type: ignore[arg-type]
    with pytest.raises(InputError, match="htp.dma_GBps must be <= memory.peak_bw_GBps"):
        with_values(phone, {"htp.dma_GBps": 100.0})               # type: ignore[arg-type]


def test_a_group_call_keeps_every_expert_pipeline_exposed_time(tiny_tiled_profile) -> None:  # type: ignore[no-untyped-def]
    """One expert in a group costs its pipeline plus the call; the exposed part (fill, one-buffer
    stalls) is not lost when experts are summed into a group (a bug caught on 2026-11-30)."""
    from moesim.config.catalog import load_model
    from moesim.cost.ops import expert_op, group_op
    from moesim.cost.params import npu_backend

    be, olmoe = npu_backend(tiny_tiled_profile), load_model("olmoe-1b-7b")
    one = expert_op(40, olmoe, be)
    assert one.overhead_ns > 0
    assert group_op([40], olmoe, be).total_ns == pytest.approx(one.total_ns + be.call_overhead_ns)
    two = group_op([40, 40], olmoe, be)
    assert two.overhead_ns == pytest.approx(2 * one.overhead_ns + be.call_overhead_ns)


def test_absorbed_mla_attends_in_the_latent(tiny_tiled_profile) -> None:  # type: ignore[no-untyped-def]
    """DeepSeek-V2-Lite, 16 heads: absorbed, a score costs kv_lora_rank + rope = 576 and a value
    512 per head; decompressed, 128 + 64 and 128 (3.4x fewer products)."""
    from dataclasses import replace

    from moesim.config.catalog import load_model
    from moesim.cost.ops import attention_op
    from moesim.cost.params import npu_backend

    be, dsv2 = npu_backend(tiny_tiled_profile), load_model("deepseek-v2-lite")
    assert be.mla_absorbed
    absorbed = attention_op(dsv2, 2048, 1, be).total_ns
    per_head = attention_op(dsv2, 2048, 1, replace(be, mla_absorbed=False)).total_ns
    assert absorbed > 1.3 * per_head       # on HMX here; the products alone grow 3.4x


def test_hmx_attention_runs_its_softmax_on_hvx_beside_the_products() -> None:
    """Attention on HMX (llama.cpp's HMX flash attention): the score and value products on HMX at
    its rate; the online softmax on HVX, ``ops`` instructions a score at one a cycle per context x
    the efficiency; the two overlap. OLMoE layer 0, 1,024 tokens: 528 x 32 x 32 causal tile pairs."""
    from moesim.config.catalog import load_model
    from moesim.cost.ops import attention_op
    from moesim.cost.params import npu_backend

    olmoe = load_model("olmoe-1b-7b")
    phone = _tiled_phone("hmx")
    be = npu_backend(phone)   # type: ignore[arg-type]
    htp = phone.htp           # type: ignore[attr-defined]
    pairs, heads = 528 * 32 * 32, 16
    per_score = htp.attention_softmax_instr_per_score_ratio / (htp.hvx_contexts_count * htp.clock_GHz * 0.35)
    assert be.softmax_vec_ns_per_score == pytest.approx(per_score)
    bare = attention_op(olmoe, 1024, 0, be)
    no_softmax = attention_op(olmoe, 1024, 0, replace(be, softmax_vec_ns_per_score=0.0))
    assert bare.mat_ns == pytest.approx(no_softmax.mat_ns)                 # the products stay on HMX
    assert bare.vec_ns - no_softmax.vec_ns == pytest.approx(pairs * heads * per_score)
    assert bare.overhead_ns == pytest.approx(no_softmax.overhead_ns)      # overlapped, not added


def test_decode_keeps_attention_on_hvx_whatever_the_prefill_unit() -> None:
    """One token cannot fill a 32-row HMX tile: decode attends on HVX with the prefill's HVX rate."""
    from moesim.cost.params import npu_backend
    from moesim.simulate.decode import npu_decode_backend

    for unit in ("hmx", "hvx"):
        phone = _tiled_phone(unit)
        dec = npu_decode_backend(phone)   # type: ignore[arg-type]
        assert dec.attention_on_vec and dec.softmax_vec_ns_per_score == 0.0
        assert dec.attention_flop_per_ns == npu_backend(phone).vec_flop_per_ns   # type: ignore[arg-type]
