"""Benchmark the start-up and the synthetic-routing cache, as ratios to a previous release.

    python validation/bench_startup.py [--previous PATH] [--repeat 5] [--json] [--write-md PATH]

Times, as wall seconds of a fresh ``python -m moesim`` process (the median of ``--repeat``):

* ``--version`` and ``--help``;
* a Qwen3-30B-A3B 4K prefill with a cold cache (an empty ``$MOESIM_CACHE_DIR``: the trace is
  generated from the fit shipped in moesim/data/synth/) and with a warm one (the same command
  again: the trace is read from the cache);
* in one process, ``synthesize("qwen3-30b-a3b", 4096)``: fit and generate (no cache), and
  generate from a cached fit (a token count not seen before); the previous release has no
  cache, so its second figure is its first.

``--previous`` is a checkout of the previous release (for example
``git worktree add /tmp/moesim-prev f9b79b1``); each timing is run there too (with the same
empty cache folder; a release without the cache is cold every time) and reported as a ratio
``previous / now`` (above 1 = faster now). The prefill's stdout must be the same in both
checkouts and with and without the cache: the script says so if it is not.

No pass/fail: numbers only (STYLE.md: benchmarks never assert timings).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
PREFILL = ["prefill", "--model", "qwen3-30b-a3b", "--tokens", "4096"]


def _run(checkout: Path, args: list[str], cache: Path) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(checkout), "MOESIM_CACHE_DIR": str(cache)}
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "moesim", *args], cwd=checkout, env=env, capture_output=True,
                          text=True, check=True)
    return time.perf_counter() - t0, done.stdout


def measure(checkout: Path, repeat: int) -> tuple[dict[str, float], str, str]:
    """Median wall seconds of each timing in ``checkout``; the cold and the warm prefill output."""
    with tempfile.TemporaryDirectory() as folder:
        cache = Path(folder)
        out: dict[str, float] = {}
        for name, args in (("version", ["--version"]), ("help", ["--help"])):
            out[name] = statistics.median(_run(checkout, args, cache)[0] for _ in range(repeat))
        cold, cold_out = _run(checkout, PREFILL, cache / "cold")
        warm_times, warm_out = [], ""
        for _ in range(max(1, repeat // 2)):
            t, warm_out = _run(checkout, PREFILL, cache / "cold")
            warm_times.append(t)
        out["prefill_cold"], out["prefill_warm"] = cold, statistics.median(warm_times)
    return out, cold_out, warm_out


#: prints the seconds of a synthesize without cache, then of one from a cached fit
_SYNTH = """
import os, sys, tempfile, time
os.environ["MOESIM_CACHE_DIR"] = tempfile.mkdtemp()
from moesim.traces import synthesize
cached = "cache" in synthesize.__code__.co_varnames
t = time.perf_counter(); synthesize("qwen3-30b-a3b", 4096, seed=0, **({"cache": False} if cached else {}))
cold = time.perf_counter() - t
if cached:
    synthesize("qwen3-30b-a3b", 1024, seed=0)
    t = time.perf_counter(); synthesize("qwen3-30b-a3b", 4096, seed=0); fitted = time.perf_counter() - t
else:
    fitted = cold
print(cold, fitted)
"""


def measure_synth(checkout: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run([sys.executable, "-c", _SYNTH], cwd=checkout, env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    return {"synth_cold": float(out[-2]), "synth_fitted": float(out[-1])}


def _table(now: dict[str, float], prev: dict[str, float] | None) -> str:
    lines = ["| timing | now (s) | previous (s) | previous / now |", "|---|---:|---:|---:|"]
    labels = {"version": "`moesim --version`", "help": "`moesim --help`",
              "prefill_cold": "Qwen3-30B-A3B 4K prefill, first run (empty user cache)",
              "prefill_warm": "Qwen3-30B-A3B 4K prefill, repeated (warm cache)",
              "synth_cold": "synthesize qwen3-30b-a3b 4096: fit + generate",
              "synth_fitted": "synthesize qwen3-30b-a3b 4096 from a cached fit"}
    for key, label in labels.items():
        p = "" if prev is None else f"{prev[key]:.2f}"
        ratio = "" if prev is None else f"{prev[key] / now[key]:.1f}x"
        lines.append(f"| {label} | {now[key]:.2f} | {p} | {ratio} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--previous", type=Path, help="a checkout of the previous release")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--write-md", type=Path, help="also write the table to this markdown file")
    args = ap.parse_args()
    now, cold_out, warm_out = measure(HERE, args.repeat)
    now.update(measure_synth(HERE))
    notes = [] if cold_out == warm_out else ["the warm-cache prefill output differs from the cold one"]
    prev = None
    if args.previous is not None:
        prev, prev_out, _ = measure(args.previous.resolve(), args.repeat)
        prev.update(measure_synth(args.previous.resolve()))
        if prev_out != cold_out:
            notes.append("the prefill output differs from the previous release's")
    result: dict[str, Any] = {"now": now, "previous": prev, "notes": notes or ["prefill output identical"]}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(_table(now, prev))
        print("; ".join(result["notes"]))
    if args.write_md is not None:
        head = (f"# Start-up and synthetic-routing cache (validation/bench_startup.py)\n\n"
                f"`python validation/bench_startup.py --previous <checkout> --repeat {args.repeat} --write-md "
                f"{args.write_md}`, on {os.cpu_count()} cores (load average {os.getloadavg()[0]:.1f} at the "
                f"end: other work shares this machine); median wall seconds of a fresh process (the synthesize rows: "
                f"one run each, in one process). Previous: {args.previous or 'not given'}.\n\n")
        args.write_md.write_text(head + _table(now, prev) + "\n\n" + "; ".join(result["notes"]) + "\n")


if __name__ == "__main__":
    main()
