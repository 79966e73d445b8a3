"""Benchmark trace import and load throughput (tokens per second) and load memory.

    python validation/bench_traces.py [--tokens 100000] [--repeat 3] [--json]

* import: every source in ../shared/traces (or $MOESIM_SHARED_TRACES), best of ``repeat``;
* load: ``read_trace`` of a ``--tokens``-token synthetic gpt-oss-120b trace (36 layers,
  top-4; fitted to the nvmoe trace when available) and OLMoE trace (16 layers, top-8),
  best of ``repeat``, and the peak resident memory a fresh process adds while loading;
* statistics: ``trace_stats`` on the same traces.

No pass/fail: numbers only (STYLE.md: benchmarks never assert timings).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from moesim.traces import (
    TargetStats,
    import_trace,
    read_trace,
    shared_traces_dir,
    synthesize,
    trace_stats,
    write_trace,
)

SOURCES = [
    ("nvmoe_llamacpp/gptoss-all.tokens.jsonl", "nvmoe", "gpt-oss-120b"),
    ("nvmoe_llamacpp/dsv2lite-all.tokens.jsonl", "nvmoe", "deepseek-v2-lite"),
    ("nvmoe_llamacpp/olmoe-all.tokens.jsonl", "nvmoe", "olmoe-1b-7b"),
    ("gnf4_cold_engine/olmoe_1b_7b_0924", "gnf4", "olmoe-1b-7b"),
    ("gnf4_cold_engine/gpt_oss_20b", "gnf4", "gpt-oss-20b"),
    ("mixtral8x7b_speculative_moe", "mixtral-jsonl", "mixtral-8x7b"),
    ("flame_moe_290m_dynande/flame290m_iter5473_stream2048.npz", "flame-npz", "flame-moe-290m"),
    ("qwen15_moe_a27b_vllm_logger", "vllm-logger", "qwen1.5-moe-a2.7b"),
]
# peak RSS (VmHWM, KiB) after a warm-up read of the small bundled trace, then after the load;
# ru_maxrss is not used: Linux carries it over from the parent across fork and exec
_MEMORY_PROBE = """
import sys
from moesim.traces import bundled_trace_path, read_trace
def peak():
    return int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0])
read_trace(bundled_trace_path())
before = peak()
t = read_trace(sys.argv[1])
print(before, peak(), t.experts.nbytes)
"""


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def bench_imports(repeat: int) -> list[dict[str, Any]]:
    rows = []
    for rel, fmt, model in SOURCES:
        src = shared_traces_dir() / rel
        if not src.exists():
            continue
        seconds, t = best_of(repeat, lambda src=src, fmt=fmt, model=model: import_trace(src, fmt, model))
        rows.append({"source": rel, "format": fmt, "tokens": t.num_tokens, "layers": t.num_layers,
                     "seconds": seconds, "tokens_per_s": t.num_tokens / seconds,
                     "token_layers_per_s": t.num_tokens * t.num_layers / seconds})
    return rows


def _big_trace(model: str, fit_rel: str, tokens: int) -> tuple[Any, str]:
    fit_path = shared_traces_dir() / fit_rel
    if fit_path.is_file():
        return synthesize(model, tokens, fit=import_trace(fit_path, "nvmoe", model), seed=0), f"fitted to {fit_rel}"
    return synthesize(model, tokens, stats=TargetStats(entropy=0.93, reuse=0.4), seed=0), "user statistics"


def bench_load(tokens: int, repeat: int, tmp: Path) -> list[dict[str, Any]]:
    rows = []
    for model, fit_rel in (("gpt-oss-120b", "nvmoe_llamacpp/gptoss-all.tokens.jsonl"),
                           ("olmoe-1b-7b", "nvmoe_llamacpp/olmoe-all.tokens.jsonl")):
        synth_s, (t, how) = best_of(1, lambda model=model, fit_rel=fit_rel: _big_trace(model, fit_rel, tokens))
        path = tmp / f"{model}.parquet"
        write_s, _ = best_of(1, lambda t=t, path=path: write_trace(t, path))
        load_s, _ = best_of(repeat, lambda path=path: read_trace(path))
        stats_s, _ = best_of(1, lambda t=t: trace_stats(t))
        probe = subprocess.run([sys.executable, "-c", _MEMORY_PROBE, str(path)], capture_output=True, text=True,
                               check=True).stdout.split()
        before_kib, after_kib, experts_bytes = (int(x) for x in probe)
        rows.append({
            "model": model, "tokens": t.num_tokens, "layers": t.num_layers, "k": t.top_k, "synthetic": how,
            "file_bytes": path.stat().st_size, "synthesize_s": synth_s, "write_s": write_s,
            "load_s": load_s, "load_tokens_per_s": t.num_tokens / load_s,
            "stats_s": stats_s, "stats_tokens_per_s": t.num_tokens / stats_s,
            "load_peak_rss_added_MiB": (after_kib - before_kib) / 1024, "experts_array_MiB": experts_bytes / 2**20,
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        result = {"import": bench_imports(args.repeat), "load": bench_load(args.tokens, args.repeat, Path(tmp))}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"import (best of {args.repeat:d})")
    for r in result["import"]:
        print(f"  {r['source']:<60} {r['tokens']:>6,} tok  {r['seconds'] * 1e3:8.1f} ms  "
              f"{r['tokens_per_s']:>10,.0f} tok/s")
    print(f"load (read_trace, best of {args.repeat:d}) and statistics")
    for r in result["load"]:
        print(f"  {r['model']:<14} {r['tokens']:,} tok x {r['layers']} layers x k={r['k']} ({r['synthetic']}): "
              f"file {r['file_bytes'] / 2**20:.1f} MiB, load {r['load_s'] * 1e3:.0f} ms = "
              f"{r['load_tokens_per_s']:,.0f} tok/s, peak RSS +{r['load_peak_rss_added_MiB']:.0f} MiB "
              f"(experts array {r['experts_array_MiB']:.1f} MiB); write {r['write_s']:.2f} s; "
              f"stats {r['stats_s']:.2f} s; synthesize {r['synthesize_s']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
