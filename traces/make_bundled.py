"""Regenerate the bundled synthetic OLMoE trace, deterministically.

    python traces/make_bundled.py            # write moesim/data/olmoe-1b-7b.synthetic.parquet
    python traces/make_bundled.py --check    # regenerate to a temp file; exit 1 if bytes differ

The trace is the project's own data: 2,048 synthetic tokens (seed 0) fitted to the real
llama.cpp OLMoE trace ``nvmoe_llamacpp/olmoe-all.tokens.jsonl`` (read from
``$MOESIM_SHARED_TRACES`` or ``../shared/traces``; never copied here).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from moesim.traces import bundled_trace_path, import_trace, shared_traces_dir, synthesize, write_trace

MODEL = "olmoe-1b-7b"
FIT_FILE = "nvmoe_llamacpp/olmoe-all.tokens.jsonl"
TOKENS = 2048
SEED = 0


def build(out: Path) -> Path:
    real = import_trace(shared_traces_dir() / FIT_FILE, "nvmoe", MODEL)
    return write_trace(synthesize(MODEL, TOKENS, fit=real, seed=SEED), out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the bundled file instead of writing")
    args = parser.parse_args(argv)
    if not (shared_traces_dir() / FIT_FILE).is_file():
        print(f"make_bundled: {shared_traces_dir() / FIT_FILE} not found (set MOESIM_SHARED_TRACES)", file=sys.stderr)
        return 2
    target = bundled_trace_path()
    if not args.check:
        print(f"wrote {build(target)} ({target.stat().st_size:,} bytes)")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = build(Path(tmp) / target.name)
        same = target.is_file() and fresh.read_bytes() == target.read_bytes()
    print(f"{target}: {'identical' if same else 'DIFFERS from a fresh build'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
