"""Measure the native Hexagon kernels' packet counts, fit the HVX packet model, write both.

    python validation/fit_hvx.py [--no-write] [--from-csv]

Builds native_ref/hexagon (clang-19, lld-19, gcc), runs every kernel of
moesim.calibrate.hvx.PLAN under qemu-hexagon -cpu v67 with the packet-counting plugin,
checks each output against numpy bit for bit, writes validation/hexagon_packets.csv,
fits packets = coefficients . features per kernel on the "fit" shapes, reports the error
on the "held_out" shapes (acceptance: within 5 %), writes moesim/cost/hvx_packets.toml,
and compares the resulting HVX lower bound with the profile's fitted dequantisation rate.
``--from-csv`` refits the committed CSV without running anything (no toolchain needed).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from moesim.calibrate.hvx import HELD_OUT_TOLERANCE, fit, measure, provenance, read_csv, write_csv, write_packet_model
from moesim.config.profiles import phone_profile
from moesim.cost import hvx

ROOT = Path(__file__).resolve().parent.parent
CSV = ROOT / "validation" / "hexagon_packets.csv"
CLOCKS_GHz = (0.5, 1.0, 1.5, 2.0)


def main() -> int:
    t0 = time.perf_counter()
    if "--from-csv" in sys.argv:
        rows = read_csv(CSV)
        notes = [ln[2:] for ln in CSV.read_text().splitlines() if ln.startswith("# ")]
    else:
        rows = measure()
        notes = provenance()
    print(f"{len(rows)} rows, every output equal to numpy's ({time.perf_counter() - t0:.1f} s)")
    print(f"{'kernel':18s} {'shape':20s} {'split':8s} {'packets':>8s} {'hvx':>8s} {'MACs':>9s} {'scalar':>9s}")
    for r in rows:
        print(f"{r.kernel:18s} {r.shape:20s} {r.split:8s} {r.packets:8d} {r.hvx_packets:8d} {r.macs:9d} "
              f"{r.scalar_packets:9d}")
    fits = fit(rows)
    ok = True
    for f in fits.values():
        coef = ", ".join(f"{c:.4g}" for c in f.coefficients)
        print(f"{f.kernel:18s} coefficients [{coef}]  fit max |err| {f.fit_max_rel_error:.2%}  "
              f"held-out max |err| {f.heldout_max_rel_error:.2%}")
        ok &= f.heldout_max_rel_error <= HELD_OUT_TOLERANCE
    if "--no-write" not in sys.argv:
        if "--from-csv" not in sys.argv:
            write_csv(rows, CSV, notes)
        write_packet_model(fits, hvx.MODEL_PATH, "validation/hexagon_packets.csv", notes)
        print("written:", CSV.relative_to(ROOT), hvx.MODEL_PATH.relative_to(ROOT))
    report_bounds(fits["q4_dequant_i16"].coefficients[2] / 4, fits["q4_gemm"].coefficients[4])
    return 0 if ok else 1


def report_bounds(packets_per_8_blocks: float, packets_per_gemm_unit: float) -> None:
    """HVX limits from the fitted slopes against the profile's fitted dequantisation rate."""
    htp = phone_profile("sd8-elite-gen5").htp
    fitted = htp.q4_0_dequant_GBps or float("nan")
    bytes_per_packet = 8 * hvx.Q4_0_BLOCK_B / packets_per_8_blocks
    print(f"dequant (int16): {packets_per_8_blocks / 8:.3f} packets per Q4_0 block = {bytes_per_packet:.2f} Q4_0 bytes "
          f"per packet per context; gemm: {4 * 1024 / packets_per_gemm_unit:.1f} int8 MACs per packet")
    print(f"sd8-elite-gen5: {htp.hvx_contexts_count} HVX contexts, fitted q4_0_dequant_GBps = {fitted:.4g}")
    for clock in CLOCKS_GHz:
        limit = bytes_per_packet * clock * htp.hvx_contexts_count
        tops = 2 * 4 * 1024 / packets_per_gemm_unit * clock * htp.hvx_contexts_count / 1e3
        print(f"  at {clock:.1f} GHz: HVX dequant limit {limit:6.1f} GB/s = {limit / fitted:5.1f}x the fitted rate; "
              f"int8 GEMM limit {tops:.2f} TOPS")
    print(f"  the fitted rate needs only {fitted / (bytes_per_packet * htp.hvx_contexts_count) * 1e3:.0f} MHz of "
          "HVX packets at this kernel's density: HVX issue is not what limits it")


if __name__ == "__main__":
    sys.exit(main())
