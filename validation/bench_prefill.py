"""Benchmark: wall time of simulating OLMoE-1B-7B prefill of 4,096 tokens (estream).

    python validation/bench_prefill.py [--repeats 5]

Reports the median wall time of ``simulate_prefill`` (routing already loaded: the trace
import is timed separately), events per second and simulated seconds per wall second.
Numbers are for the machine it runs on; compare ratios within one run.
"""

from __future__ import annotations

import argparse
import statistics
import time

from moesim.config.prefill import EStreamPolicy, PrefillRun
from moesim.config.profiles import phone_profile
from moesim.simulate.prefill import simulate_prefill
from moesim.traces.sources import default_trace


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=4096)
    args = parser.parse_args()
    t0 = time.perf_counter()
    default_trace("olmoe-1b-7b")
    load_s = time.perf_counter() - t0
    profile = phone_profile("sd8-elite-gen5")
    run = PrefillRun(model="olmoe-1b-7b", device="sd8-elite-gen5", tokens=args.tokens, policy=EStreamPolicy())
    walls, metrics = [], {}
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        metrics = simulate_prefill(run, profile=profile).to_dict()
        walls.append(time.perf_counter() - t0)
    wall = statistics.median(walls)
    events = metrics["sim"]["events"]
    print(f"trace import (first use, cached after): {load_s:.3f} s")
    print(f"simulate_prefill OLMoE {args.tokens} tokens estream: median {wall:.4f} s over {args.repeats} "
          f"(min {min(walls):.4f}, max {max(walls):.4f})")
    print(f"events: {events:,}  events/s: {events / wall:,.0f}  simulated s per wall s: {metrics['ttft_s'] / wall:.2f}")


if __name__ == "__main__":
    main()
