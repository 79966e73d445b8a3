"""Benchmark of ``moesim sweep``: a 200-point prefill grid with 1 and with 2 local workers.

    python validation/bench_sweep.py [--workers 1 2] [--dask]

Prints points per second for each worker count (``--dask`` adds a LocalCluster run with
2 worker processes). The results of every run are checked to be identical (wall-clock
columns aside). Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd

from moesim.sweep import WALL_CLOCK_COLUMNS, parse_grid, run_sweep

#: 2 models x 5 prompt lengths x 4 policies x 5 UFS bandwidths = 200 points
GRID = {
    "fixed": {"workload": "prefill", "device": "sd8-elite-gen5"},
    "axes": {"model": ["flame-moe-290m", "olmoe-1b-7b"], "tokens": [64, 96, 128, 192, 256],
             "policy": ["estream", "resident", "naive", "layer-b2"],
             "ufs": {"effective_read_bw_GBps": [2.0, 2.5, 3.0, 3.5, 4.3]}},
}


def _content(path: Path) -> pd.DataFrame:
    frame = pd.read_parquet(path)
    return frame.drop(columns=[c for c in WALL_CLOCK_COLUMNS if c in frame.columns])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--dask", action="store_true", help="also run on a dask LocalCluster of 2 workers")
    args = parser.parse_args()
    grid = parse_grid(GRID, source="bench_sweep")
    print(f"{len(grid.points)} points, grid {grid.hash}")
    frames = []
    with tempfile.TemporaryDirectory() as tmp:
        for workers in args.workers:
            out = Path(tmp) / f"w{workers}.parquet"
            t0 = time.perf_counter()
            report = run_sweep(grid, out, workers=workers, progress=False)
            wall = time.perf_counter() - t0
            ok = int((report.frame["status"] == "ok").sum())
            print(f"workers={workers}: {len(grid.points) / wall:6.1f} points/s ({wall:.2f} s incl. start-up, "
                  f"{report.points_per_s:.1f} points/s in the loop; {ok} ok) on {report.executor}")
            frames.append(_content(out))
        if args.dask:
            from dask.distributed import Client, LocalCluster

            cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None)  # type: ignore[no-untyped-call]
            with cluster, Client(cluster) as client:  # type: ignore[no-untyped-call]
                out = Path(tmp) / "dask.parquet"
                t0 = time.perf_counter()
                run_sweep(grid, out, scheduler=client, progress=False)
                wall = time.perf_counter() - t0
                print(f"dask LocalCluster (2 processes): {len(grid.points) / wall:6.1f} points/s ({wall:.2f} s)")
                frames.append(_content(out))
    for frame in frames[1:]:
        pd.testing.assert_frame_equal(frames[0], frame)
    print("identical results across runs: yes")


if __name__ == "__main__":
    main()
