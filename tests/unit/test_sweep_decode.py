"""Phone decode in the sweep grid (issue 24, part): ``workload = "decode"`` runs the points of
``moesim decode``, with its parameters taken from DecodeRun itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from moesim.config.decode import DecodeRun
from moesim.config.schema import surface_params
from moesim.sweep import load_grid, run_sweep
from moesim.sweep.params import grid_params

GRID = """
[fixed]
workload = "decode"
model = "olmoe-1b-7b"
tokens = 16

[axes]
cache_policy = ["lru", "lfu"]
cache_GiB = [0.5, 1.0]
"""


def test_decode_params_are_decode_runs_fields() -> None:
    """One schema: the grid's decode parameters are DecodeRun's flat parameters (moesim.config.schema),
    its plain fields with its defaults, its sections' fields (the draft tree's depth and width, the
    draft, the routing and the predictor) unset by default: the run's own apply."""
    mine = grid_params("decode").model_fields
    flat = surface_params(DecodeRun)
    assert set(mine) == set(flat) and {"depth", "width", "draft_mu", "routing", "predictor"} <= set(mine)
    run = DecodeRun.model_fields
    assert all(mine[k].default == run[k].default for k in set(run) & set(mine) - {"routing", "predictor"})
    assert all(mine[k].default is None for k in mine if flat[k].key not in (None, "kind"))


def test_a_decode_grid_runs_the_points_of_moesim_decode(tmp_path: Path, run_cli: Any) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID)
    frame = run_sweep(load_grid(grid), tmp_path / "out.parquet", workers=1).frame
    assert list(frame["status"]) == ["ok"] * 4 and list(frame["workload"]) == ["decode"] * 4
    res = run_cli("decode", "--model", "olmoe-1b-7b", "--tokens", "16", "--cache-policy", "lfu",
                  "--cache-gib", "1.0", "--json")
    import json

    alone = json.loads(res.out)
    row = frame[(frame["cache_policy"] == "lfu") & (frame["cache_GiB"] == 1.0)].iloc[0]
    assert row["tokens_per_s"] == pytest.approx(alone["tokens_per_s"], rel=0, abs=0)
    assert isinstance(pd.read_parquet(tmp_path / "out.parquet"), pd.DataFrame)


@pytest.mark.parametrize(("edit", "message"), [
    ('device = "h200x8-hf"', "fixed.device = 'h200x8-hf' cannot run any point: device must be a mobile-npu profile "
                             "for decode"),
    ('cache_policy = "none"\ncache_GiB = 1.0', "cache_policy"),
])
def test_a_decode_grid_is_checked_before_any_point_runs(tmp_path: Path, run_cli: Any, edit: str,
                                                        message: str) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text(f'[fixed]\nworkload = "decode"\nmodel = "olmoe-1b-7b"\ntokens = 16\n{edit}\n')
    res = run_cli("sweep", str(grid), "-o", str(tmp_path / "out.parquet"), "--workers", "1", "--quiet")
    assert res.code == 2 and message in res.err and len(res.err.splitlines()) == 1, res.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.toml"]


@pytest.mark.slow
def test_a_decode_grid_gives_the_same_table_on_dask(tmp_path: Path) -> None:
    """The decode points go through the same run_point on a cluster: same rows as in this process."""
    from dask.distributed import Client, LocalCluster

    from moesim.sweep.store import WALL_CLOCK_COLUMNS

    grid_file = tmp_path / "grid.toml"
    grid_file.write_text(GRID)
    grid = load_grid(grid_file)
    here = run_sweep(grid, tmp_path / "here.parquet", workers=1).frame
    cluster = LocalCluster(n_workers=1, threads_per_worker=2, processes=False,  # type: ignore[no-untyped-call]
                           dashboard_address=None)
    with cluster, Client(cluster) as client:  # type: ignore[no-untyped-call]
        there = run_sweep(grid, tmp_path / "dask.parquet", scheduler=client).frame
    drop = [c for c in WALL_CLOCK_COLUMNS if c in here.columns]
    pd.testing.assert_frame_equal(here.drop(columns=drop), there.drop(columns=drop))


def test_a_grid_with_the_old_selector_name_runs_with_a_deprecation_line(tmp_path: Path, run_cli: Any) -> None:
    """``spec`` (before the one-word renames) still names decode's selector for one release."""
    body = '[fixed]\nworkload = "decode"\nmodel = "olmoe-1b-7b"\ntokens = 4\n[axes]\n{} = ["none", "confidence"]\n'
    tables = []
    for name in ("selector", "spec"):
        grid = tmp_path / f"{name}.toml"
        grid.write_text(body.format(name))
        out = tmp_path / f"{name}.parquet"
        res = run_cli("sweep", str(grid), "-o", str(out), "--workers", "1")
        assert res.code == 0, res.err
        assert ("grid parameter 'spec' is deprecated; use 'selector'" in res.err) == (name == "spec")
        tables.append(pd.read_parquet(out)[["selector", "tokens_per_s", "cache_hit_rate"]])
    pd.testing.assert_frame_equal(tables[0], tables[1])
