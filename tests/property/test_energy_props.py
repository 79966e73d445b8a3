"""Issue 18: energy is additive over components, never negative, monotone in time for a fixed
power state, and zero for a zero-power profile."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from moesim.cost.energy import RunActivity, energy_breakdown_j
from tests.strategies import PURE_SETTINGS

_KEYS = ("soc_base", "npu_active", "npu_idle", "cpu_active", "cpu_idle", "ufs_read", "ufs_idle", "dram_pJpB")
_powers = st.fixed_dictionaries({k: st.floats(0.0, 50.0) for k in _KEYS})


@st.composite
def activities(draw: st.DrawFn) -> RunActivity:
    t = draw(st.floats(0.0, 1e3))
    busy = [draw(st.floats(0.0, 2e3)) for _ in range(3)]
    return RunActivity(t, *busy, dram_B=draw(st.floats(0.0, 1e12)), npu_in_use=draw(st.booleans()))


@PURE_SETTINGS
@given(run=activities(), power=_powers)
def test_energy_is_non_negative_and_additive(run: RunActivity, power: dict[str, float]) -> None:
    parts = energy_breakdown_j(run, power)
    assert set(parts) == {"base", "npu", "cpu", "ufs", "dram"}
    assert all(v >= 0 for v in parts.values())
    # additive: the energy of each component does not depend on the others' power figures
    for key in _KEYS:
        zeroed = {**power, key: 0.0}
        other = energy_breakdown_j(run, zeroed)
        changed = [c for c in parts if abs(parts[c] - other[c]) > 1e-9 * max(1.0, parts[c])]
        assert len(changed) <= 1


@PURE_SETTINGS
@given(run=activities(), power=_powers, extra=st.floats(0.0, 100.0))
def test_energy_is_monotone_in_time_at_fixed_busy(run: RunActivity, power: dict[str, float], extra: float) -> None:
    busy = min(run.time_s, run.npu_busy_s, run.cpu_busy_s, run.ufs_busy_s)
    base = RunActivity(run.time_s, busy, busy, busy, run.dram_B, run.npu_in_use)
    longer = RunActivity(run.time_s + extra, busy, busy, busy, run.dram_B, run.npu_in_use)
    assert sum(energy_breakdown_j(longer, power).values()) >= sum(energy_breakdown_j(base, power).values()) - 1e-9


@PURE_SETTINGS
@given(run=activities())
def test_zero_power_gives_zero_energy(run: RunActivity) -> None:
    assert sum(energy_breakdown_j(run, dict.fromkeys(_KEYS, 0.0)).values()) == 0.0


def test_unused_npu_draws_nothing() -> None:
    power = dict.fromkeys(_KEYS, 1.0)
    off = energy_breakdown_j(RunActivity(5.0, 0.0, 5.0, 0.0, 0.0, npu_in_use=False), power)
    assert off["npu"] == 0.0 and off["cpu"] == 5.0 and off["base"] == 5.0
