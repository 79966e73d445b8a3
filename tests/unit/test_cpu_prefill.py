"""The CPU baseline on its own evidence (issue 25, hypothesis 2): llama.cpp's MUL_MAT_ID runs a
routed expert one GEMV per routed token, dense products run the GEMM on blocks of 4 rows, weights
come from DRAM at the cores' measured rate, and the rates come from CPU figures."""

from __future__ import annotations

from dataclasses import replace

import pytest

from moesim.calibrate.cpu_anchor import MNN_QWEN3_1_7B, attention_to_gemm_ratio, cpu_gemm_GFLOPS
from moesim.calibrate.estream import with_values
from moesim.config.catalog import load_model
from moesim.config.device import MobileNPUProfile
from moesim.config.model import TensorClass
from moesim.config.prefill import CPUPolicy, EStreamPolicy, PrefillRun
from moesim.config.profiles import phone_profile
from moesim.cost.memory import MemoryBreakdown
from moesim.cost.ops import GEMM_ROW_BLOCK, expert_op, matmul
from moesim.cost.params import Backend, cpu_backend
from moesim.errors import InputError
from moesim.simulate.prefill import simulate_prefill
from moesim.traces import bundled_trace_path
from moesim.units import GiB

#: a CPU with round numbers: GEMM 400 FLOP/ns, GEMV 100 FLOP/ns, weights from DRAM at 20 B/ns
CPU = Backend(name="cpu", mat_flop_per_ns=400.0, weight_B_per_ns=20.0, elem_B_per_ns=80.0, tile_rows=1,
              call_overhead_ns=0.0, gemv_flop_per_ns=100.0)


@pytest.fixture(scope="module")
def phone() -> MobileNPUProfile:
    return phone_profile("sd8-elite-gen5")


def test_a_routed_expert_costs_one_gemv_per_routed_token() -> None:
    """1024 x 2048 weights: one GEMV from cache is 2 x 2,097,152 / 100 = 41,943 ns, streaming the
    1,179,648 B from DRAM at 20 B/ns 58,982 ns. The first routed token's GEMV waits for the DRAM
    stream, the other 63 run from cache (no GEMM), while a dense product of 64 rows runs the GEMM."""
    w = 1024 * 2048
    gemv, dram = 2 * w / 100.0, w * 18 / 32 / 20.0
    assert matmul(1, 1024, 2048, w * 18 / 32, CPU, expert=True).mat_ns == pytest.approx(dram)
    assert matmul(64, 1024, 2048, w * 18 / 32, CPU, expert=True).mat_ns == pytest.approx(dram + 63 * gemv)
    assert matmul(64, 1024, 2048, w * 18 / 32, CPU).mat_ns == pytest.approx(64 * 2 * w / 400.0)


def test_an_expert_slice_larger_than_a_core_s_cache_streams_at_every_token() -> None:
    """llama.cpp's forward_mul_mat_id gives each of 8 threads a fixed slice of the rows: 1,179,648 B
    / 3 matrices / 8 threads = 49,152 B a thread. With 40 KiB of cache a core it no longer stays
    cached, so each of 8 routed tokens streams the weights again; with 64 KiB it does."""
    w = 1024 * 2048
    dram, gemv = w * 18 / 32 / 20.0, 2 * w / 100.0
    small = replace(CPU, threads=8, cache_share_B=40 * 1024.0)
    big = replace(CPU, threads=8, cache_share_B=64 * 1024.0)
    assert matmul(8, 1024, 2048, w * 18 / 32, small, expert=True).mat_ns == pytest.approx(8 * dram)
    assert matmul(8, 1024, 2048, w * 18 / 32, big, expert=True).mat_ns == pytest.approx(dram + 7 * gemv)


def test_dense_products_run_the_gemm_on_whole_blocks_of_rows_and_a_gemv_on_the_rest() -> None:
    """llama.cpp's repack matmul: 6 rows are one GEMM block of 4 and 2 GEMV rows; 3 rows are all GEMV."""
    w = 512 * 512
    gemm_row, gemv_row = 2 * w / 400.0, 2 * w / 100.0
    assert GEMM_ROW_BLOCK == 4
    assert matmul(6, 512, 512, 0.0, CPU).mat_ns == pytest.approx(4 * gemm_row + 2 * gemv_row)
    assert matmul(3, 512, 512, 0.0, CPU).mat_ns == pytest.approx(3 * gemv_row)


def test_a_lightly_routed_expert_waits_for_its_weights_from_dram() -> None:
    """One token: the GEMV takes 41,943 ns, reading 1,179,648 B at 20 B/ns 58,982 ns."""
    w = 1024 * 2048
    cost = matmul(1, 1024, 2048, w * 18 / 32, CPU, expert=True)
    assert cost.total_ns == pytest.approx(w * 18 / 32 / 20.0)
    assert matmul(8, 1024, 2048, w * 18 / 32, CPU, expert=True).total_ns == pytest.approx(
        w * 18 / 32 / 20.0 + 7 * 2 * w / 100.0)


def test_the_phone_cpu_reads_weights_at_its_measured_rate_and_runs_experts_as_gemv(phone: MobileNPUProfile) -> None:
    be = cpu_backend(phone)
    assert be.weight_B_per_ns == phone.cpu.q4_0_gemv_GBps
    assert be.gemv_flop_per_ns == phone.cpu.routed_gemv_GFLOPS
    assert be.threads == phone.cpu.cores and be.cache_share_B == (phone.cpu.l2_per_core_KiB or 0.0) * 1024
    olmoe = load_model("olmoe-1b-7b")
    per_token = (expert_op(256, olmoe, be).mat_ns - expert_op(128, olmoe, be).mat_ns) / 128
    weights = 3 * olmoe.hidden_size * olmoe.moe.expert_intermediate_size
    assert per_token == pytest.approx(2 * weights / be.gemv_flop_per_ns, rel=1e-3)
    first = expert_op(1, olmoe, be).mat_ns                       # the first row streams the expert from DRAM
    assert first == pytest.approx(olmoe.expert_bytes("q4_0") / be.weight_B_per_ns, rel=1e-3)


def test_a_gemv_faster_than_the_gemm_is_refused(phone: MobileNPUProfile) -> None:
    with pytest.raises(InputError, match="routed_gemv_GFLOPS must be <= q4_0_gemm_GFLOPS"):
        with_values(phone, {"cpu.routed_gemv_GFLOPS": 2 * float(phone.cpu.q4_0_gemm_GFLOPS or 0.0)})


def test_cpu_anchors_derive_the_gemm_and_attention_rates(phone: MobileNPUProfile) -> None:
    """MNN's Qwen3-1.7B: 2.82 GFLOP a token; llama.cpp on a Neoverse-V2: the two-term model
    fits its prompt-length curve within 2% (flash attention off), 5% (on)."""
    assert MNN_QWEN3_1_7B.flop_per_token() == pytest.approx(2.8185e9, rel=1e-3)
    off, worst_off = attention_to_gemm_ratio("off")
    on, worst_on = attention_to_gemm_ratio("on")
    assert worst_off < 0.02 and worst_on < 0.05
    assert 0.10 < off < 0.14 and 0.015 < on < 0.03           # flash attention on is ~5x slower on this CPU
    assert phone.cpu.q4_0_gemm_GFLOPS == pytest.approx(cpu_gemm_GFLOPS(), rel=1e-5)
    assert phone.cpu.attention_GFLOPS == pytest.approx(off * cpu_gemm_GFLOPS(), rel=1e-4)


def test_the_fitted_gemv_sits_inside_its_bounds(phone: MobileNPUProfile) -> None:
    low, high = 2 * float(phone.cpu.q4_0_gemv_GBps or 0.0) / (18 / 32), float(phone.cpu.q4_0_gemm_GFLOPS or 0.0)
    gemv = float(phone.cpu.routed_gemv_GFLOPS or 0.0)
    assert low * 1.01 < gemv < high * 0.99
    assert phone.cpu.provenance["routed_gemv_GFLOPS"].startswith("fitted: root of OLMoE-1B-7B's 4,096-token")


def test_cpu_wins_only_the_shortest_prompts() -> None:
    """The paper: the CPU runtime wins only at tens of tokens. With experts as per-token GEMVs the
    CPU's time grows with every routed token while EStream's short prompts pay their UFS reads."""
    def ttft(tokens: int, policy: CPUPolicy | EStreamPolicy) -> float:
        run = PrefillRun(model="olmoe-1b-7b", device="sd8-elite-gen5", tokens=tokens, policy=policy,
                         trace=str(bundled_trace_path()))
        return simulate_prefill(run).metrics.ttft_s

    assert ttft(16, CPUPolicy()) < ttft(16, EStreamPolicy())
    assert ttft(256, CPUPolicy()) > ttft(256, EStreamPolicy())


def _cpu_memory(model: str, **policy: bool) -> dict[str, object]:
    run = PrefillRun(model=model, device="sd8-elite-gen5", tokens=256, policy=CPUPolicy(**policy))
    return simulate_prefill(run).to_dict()


def test_the_cpu_runtime_keeps_the_mapped_file_beside_its_repacked_copy() -> None:
    """llama.cpp's default mmap + repack on ARM: the repack buffer holds every matrix weight and
    the GGUF's populated pages stay mapped (#16761, #19578): the resident set holds both."""
    olmoe = load_model("olmoe-1b-7b")
    file_B = olmoe.total_weight_bytes("q4_0")
    embed_B = olmoe.bytes_by_class("q4_0").get(TensorClass.EMBEDDING, 0)
    both, copy_only = _cpu_memory("olmoe-1b-7b"), _cpu_memory("olmoe-1b-7b", source_mapped=False)
    mem = both["memory_GiB"]
    assert mem["mapped_file"] * GiB == pytest.approx(file_B)                    # type: ignore[index]
    assert mem["weights"] * GiB == pytest.approx(file_B - embed_B)              # type: ignore[index]
    assert copy_only["memory_GiB"]["mapped_file"] == 0.0                        # type: ignore[index]
    assert both["peak_memory_GiB"] - copy_only["peak_memory_GiB"] == pytest.approx(  # type: ignore[operator]
        (file_B - embed_B) / GiB, rel=1e-6)
    assert both["fits_device_memory"] and both["ttft_s"] == copy_only["ttft_s"]


def test_mapped_file_pages_give_way_under_pressure_but_the_copy_does_not() -> None:
    """DeepSeek-V2-Lite: the 8 GiB copy fits the 15.1 GiB phone and the kernel reclaims the mapped
    pages it leaves no room for (the run completes at the device's memory); Qwen3-30B-A3B's copy
    alone is over it: the run would not complete."""
    ds = _cpu_memory("deepseek-v2-lite")
    assert ds["fits_device_memory"] and ds["peak_memory_GiB"] == pytest.approx(15.1)
    assert 0 < ds["memory_GiB"]["mapped_file"] < load_model("deepseek-v2-lite").total_weight_bytes("q4_0") / GiB  # type: ignore[index]
    qwen = _cpu_memory("qwen3-30b-a3b")
    assert not qwen["fits_device_memory"] and qwen["memory_GiB"]["mapped_file"] == 0.0  # type: ignore[index]


def test_under_pressure_reclaims_only_mapped_pages() -> None:
    m = MemoryBreakdown(weights_B=6, arena_B=0, activations_B=1, kv_cache_B=1, runtime_B=1, mapped_B=5)
    assert m.anonymous_B == 9 and m.total_B == 14
    assert m.under_pressure(12).mapped_B == 3 and m.under_pressure(8).mapped_B == 0
    assert m.under_pressure(20) == m


def test_a_budget_reclaims_the_mapped_pages_before_refusing_the_cpu_run() -> None:
    """The mapped file pages are clean: a budget under the resident set squeezes them (the run is
    the same), and only a budget under the anonymous part (the repack copy, KV, activations,
    runtime) is refused. DeepSeek-V2-Lite at the device's own 15.1 GiB runs."""
    base = {"model": "olmoe-1b-7b", "device": "sd8-elite-gen5", "tokens": 256, "policy": {"kind": "cpu"}}
    free = simulate_prefill(PrefillRun.model_validate(base)).to_dict()
    tight = simulate_prefill(PrefillRun.model_validate({**base, "memory_budget_GiB": 5.0})).to_dict()
    assert free["peak_memory_GiB"] > 7 and tight["peak_memory_GiB"] == pytest.approx(5.0, abs=1e-6)
    assert tight["ttft_s"] == free["ttft_s"]
    assert tight["peak_memory_GiB_interval"][1] <= 5.0 + 1e-9                   # type: ignore[index]
    with pytest.raises(InputError, match="memory_budget_GiB must be >= 3.8"):
        simulate_prefill(PrefillRun.model_validate({**base, "memory_budget_GiB": 3.0}))
    ds = {**base, "model": "deepseek-v2-lite", "memory_budget_GiB": 15.1}
    assert simulate_prefill(PrefillRun.model_validate(ds)).to_dict()["fits_device_memory"]
