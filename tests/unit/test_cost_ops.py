"""Pure cost functions on hand-computed examples."""

import pytest

from moesim.config.catalog import load_model
from moesim.cost.bounds import stream_bounds
from moesim.cost.ops import OpCost, _causal_pairs, expert_op, group_op, matmul, padded
from moesim.cost.params import Backend, UFSParams

BE = Backend(name="test", mat_flop_per_ns=1000.0, weight_B_per_ns=10.0, elem_B_per_ns=100.0, tile_rows=32,
             call_overhead_ns=500.0)


def test_partial_tiles_cost_a_full_tile() -> None:
    assert padded(1, 32) == 32 and padded(32, 32) == 32 and padded(33, 32) == 64
    one = matmul(1, 64, 64, 0, BE)
    full = matmul(32, 64, 64, 0, BE)
    assert one.mat_ns == full.mat_ns == 2 * 32 * 64 * 64 / 1000.0
    assert matmul(33, 64, 64, 0, BE).mat_ns == 2 * full.mat_ns


def test_matmul_is_a_roofline_of_flops_and_weight_bytes() -> None:
    c = matmul(32, 10, 10, 1000, BE)
    assert c.mat_ns == pytest.approx(6.4) and c.vec_ns == pytest.approx(100.0)
    assert c.total_ns == pytest.approx(100.0)
    assert matmul(0, 10, 10, 1000, BE) == OpCost()


def test_expert_path_of_olmoe() -> None:
    m = load_model("olmoe-1b-7b")
    c = expert_op(64, m, BE)
    flops = 2 * 64 * 3 * 2048 * 1024
    assert c.mat_ns == pytest.approx(flops / 1000.0)
    elem = 64 * (1024 * 4 * 3 + 2048 * 4 * 5)
    assert c.vec_ns == pytest.approx(3_538_944 / 10.0 + elem / 100.0)
    assert expert_op(0, m, BE) == OpCost()


def test_group_call_pays_one_descriptor() -> None:
    m = load_model("olmoe-1b-7b")
    g = group_op([10, 0, 5], m, BE)
    assert g.overhead_ns == 500.0
    assert g.mat_ns == pytest.approx(expert_op(10, m, BE).mat_ns + expert_op(5, m, BE).mat_ns)
    assert group_op([0, 0], m, BE) == OpCost()  # an inactive group is not called


def test_causal_pairs() -> None:
    assert _causal_pairs(32, 32, None) == 32 * 32                 # one diagonal tile
    assert _causal_pairs(64, 32, None) == 3 * 32 * 32             # lower triangle of 2x2 tiles
    assert _causal_pairs(32, 32, None, past=32) == 2 * 32 * 32    # one new row against 2 tiles
    assert _causal_pairs(4096, 32, 128) < _causal_pairs(4096, 32, None) / 10


def test_bounds() -> None:
    u = UFSParams(latency_ns=10.0, B_per_ns=2.0)
    b = stream_bounds([100, 100], [100, 100, 100], compute_ns=50.0, ufs=u)
    assert b.io_only_ns == 110.0 and b.compute_only_ns == 50.0 and b.lower_ns == 110.0
    assert b.serial_ns == 50.0 + 150.0 + 30.0
