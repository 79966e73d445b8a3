"""Wall time of one ``moesim require`` (one resource), each run in a fresh process, as a user
would run it: ``python validation/bench_require.py``. Reports, never asserts (STYLE.md 11);
the issue's budget is 2 s a require on 2 cores."""

from __future__ import annotations

import subprocess
import sys
import time

CASES = [
    ("olmoe-1b-7b", "sd8-elite-gen5", "ufs", ["--tokens", "1024", "--ttft-s", "1.2"]),
    ("olmoe-1b-7b", "sd8-elite-gen5", "memory", ["--tokens", "1024", "--ttft-s", "1.2"]),
    ("olmoe-1b-7b", "sd8-elite-gen5", "npu", ["--tokens", "1024", "--ttft-s", "1.2"]),
    ("qwen3-30b-a3b", "sd8-elite-gen5", "ufs", ["--tokens", "1024", "--ttft-s", "8"]),
    ("gpt-oss-120b", "h200x8-fused", "hbm", ["--tokens-per-s", "200"]),
    ("gpt-oss-120b", "h200x8-fused", "gpus", ["--tokens-per-s", "200"]),
]


def main() -> int:
    print(f"{'model':<16}{'device':<16}{'resource':<10}{'wall_s':>8}  rc")
    worst = 0.0
    for model, device, resource, extra in CASES:
        cmd = [sys.executable, "-m", "moesim", "require", "--model", model, "--device", device,
               "--resource", resource, "--json", *extra]
        t0 = time.perf_counter()
        rc = subprocess.run(cmd, capture_output=True, text=True).returncode
        wall = time.perf_counter() - t0
        worst = max(worst, wall)
        print(f"{model:<16}{device:<16}{resource:<10}{wall:>8.2f}  {rc}")
    print(f"slowest require: {worst:.2f} s (budget 2 s on 2 cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
