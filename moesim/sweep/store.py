"""Durable sweep results: one JSON part per finished point in ``<out>.parts/``, then one Parquet.

Every part is written to a temporary file and renamed into place, so a sweep killed at any
moment leaves only whole parts; ``--resume`` runs the points that have none. The folder's
``manifest.json`` holds the grid hash: a resume with a changed grid is refused. A folder that
holds no finished point (a sweep that failed or was killed before its first) is started
afresh by a plain run. Only the holder of the output's lock (:mod:`moesim.sweep.lock`) opens it.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from moesim.errors import InputError, MoesimError
from moesim.files import atomic_path, write_json_atomic, write_text_atomic
from moesim.inputs import exists, is_dir, is_regular, parse_json, read_input
from moesim.sweep.grid import Grid
from moesim.sweep.run_point import point_index
from moesim.typing_ import JSONValue, Scalar

__all__ = ["PartStore", "PartsLost", "parts_dir", "WALL_CLOCK_COLUMNS", "consolidate"]

#: columns that measure the host's wall clock: everything else is a function of the inputs
WALL_CLOCK_COLUMNS = ("point.wall_s", "sim.wall_s", "sim.steps_per_wall_s", "config.selection_ms")
_MANIFEST = "manifest.json"


class PartsLost(MoesimError):
    """Parts that were written are gone at consolidation (removed by hand): --resume reruns them."""


def parts_dir(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".parts")


def _clean(value: Scalar) -> Scalar:
    return None if isinstance(value, float) and not math.isfinite(value) else value


class PartStore:
    """The part folder of one output file and one grid."""

    def __init__(self, out: str | Path, grid: Grid) -> None:
        self.out = Path(out)
        self.dir = parts_dir(out)
        self.grid = grid

    def _refuse_other_grid_results(self) -> None:
        """An existing output of a *different* grid is not overwritten (the same grid's is)."""
        if not is_regular(self.out):      # nothing there (or a special file, which the writer refuses)
            return
        try:
            hashes = pd.read_parquet(self.out, columns=["grid.hash"])["grid.hash"].dropna().unique().tolist()
        except Exception:          # not a sweep's Parquet (or unreadable): not ours to overwrite
            hashes = []
        if not hashes:
            raise InputError("-o", "is not a moesim sweep result (no Parquet table with a grid.hash column): choose "
                             "another file or delete it first", str(self.out))
        if hashes != [self.grid.hash]:
            raise InputError("-o", f"holds the results of another grid (grid.hash {hashes[0]}, this grid "
                             f"{self.grid.hash}); choose another file or delete it first", str(self.out))

    def open(self, resume: bool) -> set[int]:
        """Create (or, with ``resume``, reopen) the folder; return the indices already done."""
        manifest = self.dir / _MANIFEST
        self._refuse_other_grid_results()
        if exists(self.dir) and not is_dir(self.dir):
            raise InputError("-o", f"keeps its parts in the folder {self.dir}, and something that is not a folder "
                             "is in the way: move it, or choose another output", str(self.out))
        if self.dir.exists() and not resume and self.done():
            raise InputError("--resume", f"is needed: {self.dir} holds {len(self.done())} finished points of an "
                             "unfinished sweep (resume it, or delete the folder to start again)", show_value=False)
        if resume and manifest.exists():
            stored = _read_json(manifest)
            if stored.get("grid_hash") != self.grid.hash:
                raise InputError("--resume", f"refused: the grid changed since the interrupted sweep (grid hash "
                                 f"{self.grid.hash}, the parts in {self.dir} are of {stored.get('grid_hash')}); "
                                 "rerun without --resume after deleting the folder", show_value=False)
        else:
            self.dir.mkdir(parents=True, exist_ok=True)
            write_json_atomic({"grid_hash": self.grid.hash, "grid": self.grid.source, "workload": self.grid.workload,
                               "points": len(self.grid.points)}, manifest)
        return self.done()

    def discard_if_empty(self) -> None:
        """Remove the part folder when no point finished (a sweep that failed before its first
        point, e.g. an unreachable scheduler, leaves nothing behind)."""
        if self.dir.is_dir() and not any(self.dir.glob("part-*.json")):
            shutil.rmtree(self.dir, ignore_errors=True)

    def _part(self, index: int) -> Path:
        return self.dir / f"part-{index:07d}.json"

    def done(self) -> set[int]:
        out = set()
        for path in self.dir.glob("part-*.json"):
            _read_json(path)          # a damaged part is named before any point runs
            out.add(int(path.stem.removeprefix("part-")))
        return out

    def write(self, row: Mapping[str, Scalar]) -> None:
        """Append one finished point durably (fsync, then an atomic rename)."""
        write_text_atomic(json.dumps({k: _clean(v) for k, v in row.items()}, sort_keys=True),
                          self._part(point_index(row)), durable=True)

    def rows(self) -> list[dict[str, JSONValue]]:
        rows = [_read_json(p) for p in sorted(self.dir.glob("part-*.json"))]
        return sorted(rows, key=point_index)

    def finish(self) -> pd.DataFrame:
        """Consolidate every part into ``out`` (sorted by point index), then remove the parts."""
        rows = self.rows()
        indices = [point_index(r) for r in rows]
        if indices != list(range(len(self.grid.points))):     # a part removed by hand while the sweep ran
            missing = sorted(set(range(len(self.grid.points))) - set(indices))
            raise PartsLost(f"{self.dir} lost {len(missing)} finished points while the sweep ran (first: point "
                            f"{missing[0] if missing else '?'}); rerun with --resume to run them again")
        frame = consolidate(rows, self.grid)
        with atomic_path(self.out) as tmp:
            frame.to_parquet(tmp, index=False)
        shutil.rmtree(self.dir)
        return frame


def _read_json(path: Path) -> dict[str, JSONValue]:
    """A part or the manifest; one that is not moesim's JSON (edited or damaged by hand: moesim
    writes them whole), or not a regular file (a FIFO is never waited on), is named with what
    to do, not trusted."""
    what = "the manifest" if path.name == _MANIFEST else "a finished point"
    todo = ("the parts folder and rerun without --resume" if what == "the manifest"
            else "that file and rerun with --resume to run the point again")
    try:
        data = read_input(path, str(path), "result")
    except InputError as exc:
        raise InputError(str(path), f"{exc.rule}; delete {todo}", show_value=False) from None
    try:
        parsed = parse_json(data, str(path))
        if not isinstance(parsed, dict) or (path.name.startswith("part-") and "point.index" not in parsed):
            raise ValueError("not a sweep part")
    except ValueError as exc:
        reason = exc.rule if isinstance(exc, InputError) else str(exc)
        raise InputError(str(path), f"is damaged and cannot be read as {what} ({reason}); delete {todo}",
                         show_value=False) from None
    return parsed


def consolidate(rows: list[dict[str, JSONValue]], grid: Grid) -> pd.DataFrame:
    """Rows -> DataFrame: inputs in grid order, point columns, status, then metrics by name."""
    first = grid.columns + ["workload", "point.index", "point.id", "status", "error"]
    rest = sorted({k for r in rows for k in r} - set(first))
    frame = pd.DataFrame.from_records(rows, columns=first + rest)
    frame["grid.hash"] = grid.hash
    return frame
