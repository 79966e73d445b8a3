"""Speed of the decode simulation: a 256-token Mixtral-8x7B decode with and without speculation.

    python validation/bench_decode.py [--repeats 3]

Issue 16 asks for under 2 s on 2 cores for the speculative run. Reported: wall seconds per
simulation (the fastest of ``--repeats``, trace already loaded), simulated events, and the ratio
of the speculative run to plain decoding measured in the same run (machines here are noisy).
Writes validation/decode_bench.md.
"""

from __future__ import annotations

import argparse
import sys
import time

from _script import count, write_page

from moesim.config.decode import DecodeRun
from moesim.simulate.decode import simulate_decode

SETTINGS = {
    "plain (lru)": {},
    "speculative confidence": {"selector": "confidence"},
    "speculative cache-aware": {"selector": "cache-aware"},
    "prefetch next-layer": {"prefetch": "next-layer"},
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=count, default=3)
    args = ap.parse_args(argv)
    simulate_decode(DecodeRun(model="mixtral-8x7b", tokens=4))    # load the trace once
    rows = []
    for name, kw in SETTINGS.items():
        best, events = float("inf"), 0
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            m = simulate_decode(DecodeRun(model="mixtral-8x7b", tokens=256, **kw)).metrics  # type: ignore[arg-type]
            best, events = min(best, time.perf_counter() - t0), int(m.sim["events"])
        rows.append((name, best, events, m.steps))
    base = rows[0][1]
    lines = ["# Decode simulation speed (written by validation/bench_decode.py)", "",
             "Mixtral-8x7B, 256 tokens, sd8-elite-gen5 defaults, fastest of "
             f"{args.repeats}; ratio to plain decoding measured in the same run.", "",
             "| setting | wall s | events | steps | ratio to plain |", "|---|---|---|---|---|"]
    lines += [f"| {n} | {w:.3f} | {e:,} | {s} | {w / base:.2f} |" for n, w, e, s in rows]
    write_page(lines, "decode_bench.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
