"""Redo the EStream calibration of the sd8-elite-gen5 profile and write it back.

    python validation/fit_estream.py [--no-write]

Fits HMX throughput, Q4_0 dequantisation rate, per-call overhead and effective UFS
bandwidth to the four OLMoE figures of BRIEF.md section 6 (moesim.calibrate.estream),
then the CPU GEMM rate to the 4.4x NPU/CPU ratio, and prints predictions and errors.
"""

from __future__ import annotations

import sys
import time

from moesim.calibrate.estream import CALIBRATED_AT, fit_cpu_gemm, fit_estream, with_values, write_fit
from moesim.config.profiles import profile_dir
from moesim.simulate.prefill import mobile_profile


def main() -> int:
    t0 = time.perf_counter()
    profile = mobile_profile("sd8-elite-gen5")
    fit = fit_estream(profile)
    cpu = fit_cpu_gemm(with_values(profile, fit.values))
    for key, value in {**fit.values, "cpu.q4_0_gemm_GFLOPS": cpu}.items():
        print(f"{key:32s} {value:.6g}")
    for name, pred in fit.predictions.items():
        print(f"{name:40s} predicted {pred:.4f}  error {fit.errors[name]:+.4f}")
    print(f"configuration: G={fit.group_size}, B={fit.banks}")
    print(f"cost {fit.cost:.4g}, {time.perf_counter() - t0:.1f} s")
    if (fit.group_size, fit.banks) != CALIBRATED_AT:
        print(f"the fit identified G={fit.group_size}, B={fit.banks}; update CALIBRATED_AT {CALIBRATED_AT}")
        return 1
    if "--no-write" not in sys.argv:
        write_fit(profile_dir() / "sd8-elite-gen5.toml", fit, cpu)
        print("written to", profile_dir() / "sd8-elite-gen5.toml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
