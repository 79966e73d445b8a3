"""Native Hexagon reference: bit-exact HVX kernels under qemu-hexagon, the ISA guard, the packet model.

Tests marked ``needs_toolchain`` build native_ref/hexagon and run it under emulation; they
skip (with the reason) where clang-19, lld-19, llvm-19, qemu-user, gcc or make is missing.
CI installs them (.ci/run), so there they run. The rest check the committed data and the
pure cost functions and always run.
"""

from __future__ import annotations

import math
import re
import subprocess
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from moesim.calibrate.hvx import HELD_OUT_TOLERANCE, PLAN, fit, measure, read_csv
from moesim.cost import hvx
from moesim.errors import InputError
from moesim.native import hexagon

REPO = Path(__file__).resolve().parents[2]
CSV = REPO / "validation" / "hexagon_packets.csv"


@cache
def _toolchain_problem() -> str | None:
    try:
        hexagon.toolchain()
    except hexagon.HexagonToolchainError as err:
        return str(err)
    return None


needs_toolchain = pytest.mark.skipif(_toolchain_problem() is not None,
                                     reason=f"Hexagon toolchain absent: {_toolchain_problem()}")


@cache
def _built() -> tuple[hexagon.Toolchain, Path]:
    tc = hexagon.toolchain()
    return tc, hexagon.build(tc)


# ---- under emulation ------------------------------------------------------------------------

#: every kernel at a few shapes, including the remainder paths of the unrolled loops
BITEXACT = [("q4_dequant_i8", "nb=8"), ("q4_dequant_i8", "nb=72"), ("q4_dequant_i16", "nb=8"),
            ("q4_dequant_i16", "nb=40"), ("q4q8_dot", "nb=32"), ("q4q8_dot", "nb=160"),
            ("q4_gemm", "R=3,nb=32,T=1"), ("q4_gemm", "R=5,nb=64,T=6"), ("route_gather_scatter", "n=1,H=128,N=1"),
            ("route_gather_scatter", "n=7,H=384,N=11")]


@needs_toolchain
@pytest.mark.parametrize(("program", "shape"), BITEXACT)
@pytest.mark.parametrize("seed", [0, 1])
def test_hvx_and_scalar_equal_numpy_bit_for_bit(program: str, shape: str, seed: int) -> None:
    tc, build_dir = _built()
    run = hexagon.run_case(tc, build_dir, hexagon.make_case(program, shape, seed))
    assert run.hvx_matches_numpy and run.scalar_matches_numpy and run.program_mismatch_B == 0


@needs_toolchain
def test_a_wrong_kernel_is_caught() -> None:
    tc, build_dir = _built()
    case = hexagon.make_case("q4_dequant_i8", "nb=64")
    run = hexagon.run_case(tc, build_dir, case, program="q4_dequant_i8_wrong")
    assert not run.hvx_matches_numpy and run.scalar_matches_numpy   # numpy sees it
    assert run.program_mismatch_B > 0                               # so does the program's own check
    assert not run.ok


@needs_toolchain
def test_isa_check_refuses_float_and_newer_hvx() -> None:
    tc, _ = _built()
    proc = subprocess.run([tc["MAKE"], "-C", str(hexagon.source_dir()), "--no-print-directory", "isa-selftest"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "HVX floating-point type .qf32" in proc.stderr
    assert "probe_v69_int_hvx" in proc.stderr and "newer than scalar v67 / HVX v66" in proc.stderr
    assert "probe_v66_int_hvx" not in proc.stderr                   # integer HVX v66 passes


@needs_toolchain
def test_packet_counts_per_function_are_exact_and_deterministic() -> None:
    tc, build_dir = _built()
    case = hexagon.make_case("route_gather_scatter", "n=3,H=256,N=8")
    first = hexagon.run_case(tc, build_dir, case, count_packets=True).counts
    again = hexagon.run_case(tc, build_dir, case, count_packets=True).counts
    assert first == again and first is not None
    gather = first["route_gather_hvx"]
    assert gather.packets == 10 + 8 * 3 + 3 * 256 // 128              # straight-line code, counted exactly
    assert 0 < gather.hvx_packets < gather.packets
    assert first["route_gather_scalar"].hvx_packets == 0


@needs_toolchain
def test_plugin_hvx_flag_agrees_with_llvm_objdump(tmp_path: Path) -> None:
    tc, build_dir = _built()
    elf = build_dir / "q4_gemm.elf"
    dis = subprocess.run([tc["OBJDUMP"], "-d", "--no-show-raw-insn", "--mattr=+hvxv66,+hvx-length128b", str(elf)],
                         capture_output=True, text=True, check=True).stdout
    packets: dict[int, str] = {}
    start = 0
    for addr, text in re.findall(r"^\s*([0-9a-f]+):\s*(.*)$", dis, re.M):
        start = int(addr, 16) if text.startswith("{") else start
        packets[start] = packets.get(start, "") + text
    counts = tmp_path / "c.txt"
    subprocess.run([tc["QEMU_HEXAGON"], "-cpu", "v67", "-plugin", f"{build_dir / 'packet_count.so'},out={counts}",
                    str(elf)], input=hexagon.make_case("q4_gemm", "R=5,nb=64,T=6").request(), check=True,
                   capture_output=True)
    rows = [line.split() for line in counts.read_text().splitlines()[1:]]
    assert len(rows) > 100
    for addr, _, _, flag in rows:
        assert (flag == "1") == bool(re.search(r"\b[vq]\d|vmem", packets[int(addr, 16)])), addr


@needs_toolchain
def test_packet_model_predicts_held_out_shapes_within_5_percent() -> None:
    rows = measure()
    fits = fit(rows)
    assert set(fits) == set(hvx.FEATURES)
    for f in fits.values():
        assert f.heldout_max_rel_error <= HELD_OUT_TOLERANCE, f
    committed = hvx.load_packet_models()   # the stored model on today's measurements
    for r in rows:
        dims = hexagon.parse_shape(next(p for p in PLAN if any(r.kernel == k[0] for k in hexagon.KERNELS[p][2])),
                                   r.shape)
        assert committed[r.kernel].packets(dims) == pytest.approx(r.packets, rel=HELD_OUT_TOLERANCE)


# ---- without the toolchain --------------------------------------------------------------------

def test_missing_tool_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QEMU_HEXAGON", "no-such-qemu-hexagon")
    with pytest.raises(hexagon.HexagonToolchainError) as err:
        hexagon.toolchain()
    assert "no-such-qemu-hexagon" in str(err.value) and "apt-get install" in str(err.value)
    assert "\n" not in str(err.value)


def test_shapes_are_checked() -> None:
    with pytest.raises(InputError, match="nb must be a multiple of 32, got 40"):
        hexagon.parse_shape("q4q8_dot", "nb=40")
    with pytest.raises(InputError, match="must give positive R, nb, T"):
        hexagon.parse_shape("q4_gemm", "R=4,nb=32")
    assert hexagon.parse_shape("q4_gemm", "T=2, nb=32,R=4") == {"T": 2, "nb": 32, "R": 4}


def test_q4_0_quantisation_and_tile_layout() -> None:
    w = np.random.default_rng(0).normal(0, 1, 64 * 32).astype(np.float32)
    qs, d = hexagon.quantize_q4_0(w)
    q = np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.int32) - 8
    err = np.abs(q * d.astype(np.float32)[:, None] - w.reshape(-1, 32))
    assert np.all(err <= np.abs(d.astype(np.float32))[:, None] * 1.001)   # one step at most (clipped at +7)
    tiles = hexagon.tile_q4_x32(qs).reshape(-1, 4, 32, 4)   # tile, m, block w, i
    assert tiles[0, 1, 5, 2] & 15 == q[5, 8 + 2] + 8 and tiles[0, 1, 5, 2] >> 4 == q[5, 12 + 2] + 8
    fx, shift = hexagon.fixed_point_scales(d)
    assert np.abs(fx).max() <= 4095 and np.allclose(fx / 2.0 ** shift, d.astype(float), atol=2.0 ** -shift)


def test_committed_csv_refits_to_the_committed_model() -> None:
    rows = read_csv(CSV)
    assert {r.split for r in rows} == {"fit", "held_out"} and "qemu-hexagon" in CSV.read_text().split("kernel,")[0]
    fits = fit(rows)
    models = hvx.load_packet_models()
    for kernel, f in fits.items():
        assert f.heldout_max_rel_error <= HELD_OUT_TOLERANCE
        assert np.allclose(f.coefficients, models[kernel].coefficients, rtol=1e-5, atol=1e-5)


def test_dequant_lower_bound() -> None:
    n_B = 3 * 2048 * 1024 // 32 * hvx.Q4_0_BLOCK_B                     # one OLMoE expert in Q4_0
    t1 = hvx.hvx_dequant_lower_bound_ns(n_B, clock_GHz=1.0, contexts=4)
    assert hvx.hvx_dequant_lower_bound_ns(n_B, clock_GHz=2.0, contexts=4) == pytest.approx(t1 / 2)
    assert hvx.hvx_dequant_lower_bound_ns(n_B, clock_GHz=1.0, contexts=1) == pytest.approx(4 * t1, rel=1e-3)
    assert n_B / t1 == pytest.approx(hvx.hvx_dequant_GBps_limit(1.0, 4), rel=0.01)   # large-tensor limit
    assert hvx.dequant_packets(65536) == pytest.approx(86029, rel=0.01)              # measured (CSV)
    assert hvx.hvx_dequant_lower_bound_ns(0, 1.0, 4) == 0.0
    with pytest.raises(InputError, match="clock_GHz must be > 0"):
        hvx.hvx_dequant_lower_bound_ns(n_B, 0.0, 4)


def test_gemm_bound_and_int8_rate_are_consistent() -> None:
    t, rows, k = 64, 4096, 65536            # long rows: per-row overheads vanish, the limit applies
    ns = hvx.hvx_gemm_lower_bound_ns(t, rows, k, clock_GHz=1.0, contexts=4)
    tops = 2 * t * rows * k / ns / 1e3
    assert tops == pytest.approx(hvx.hvx_gemm_int8_TOPS_limit(1.0, 4), rel=0.02)
    olmoe = 2 * t * 1024 * 2048 / hvx.hvx_gemm_lower_bound_ns(t, 1024, 2048, 1.0, 4) / 1e3
    assert olmoe < tops                      # 2 tiles a row: the overheads show
    assert math.isclose(hvx.gemm_packets(4, 8, 2048), hvx.predict_packets("q4_gemm", {"R": 8, "nb": 64, "T": 4}))
