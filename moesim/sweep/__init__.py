"""Capacity-planning sweeps: a grid of runs (TOML), executed locally or on Dask, stored as Parquet.

``load_grid`` validates a grid file and expands it into points; ``run_sweep`` runs the
points that have no result yet, appending one part file per finished point, and
consolidates them into one Parquet table sorted by point index.
"""

from __future__ import annotations

from moesim.sweep.grid import Grid, Point, load_grid, parse_grid
from moesim.sweep.runner import SweepReport, run_sweep
from moesim.sweep.store import WALL_CLOCK_COLUMNS

__all__ = ["Grid", "Point", "load_grid", "parse_grid", "run_sweep", "SweepReport", "WALL_CLOCK_COLUMNS"]
