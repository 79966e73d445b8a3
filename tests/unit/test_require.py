"""``moesim require``: the least resource value meeting a target, confirmed by the full model."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from moesim.autoconfig.require.answer import BELOW, Answer, meets_target, require
from moesim.autoconfig.require.evaluate import GPUDecodeWorkload, PrefillWorkload
from moesim.autoconfig.require.resources import RESOURCES
from moesim.autoconfig.require.search import least_integer, least_meeting, round_up
from moesim.cli.require_cmd import _RESOURCES
from moesim.config.catalog import load_model
from moesim.config.profiles import gpu_profile, phone_profile

PHONE, GPU = "sd8-elite-gen5", "h200x8-fused"


@pytest.fixture(scope="module")
def prefill() -> PrefillWorkload:
    return PrefillWorkload(model=load_model("olmoe-1b-7b"), device=phone_profile(PHONE), device_arg=PHONE,
                           tokens=512)


@pytest.fixture(scope="module")
def decode() -> GPUDecodeWorkload:
    return GPUDecodeWorkload(model=load_model("gpt-oss-120b"), device=gpu_profile(GPU))


def _check(a: Answer) -> None:
    """The full model meets the target at the threshold and misses it below (0.99x, half the GPUs)."""
    assert a.threshold is not None and a.at_threshold is not None and a.below is not None
    assert meets_target(a.metric, a.at_threshold.metric, a.target)
    assert not meets_target(a.metric, a.below.metric, a.target)
    assert a.below_value == pytest.approx(a.threshold / 2 if a.resource.integer else a.threshold * BELOW)
    assert a.confirmed


@pytest.mark.parametrize("start", [None, 0.5, 50.0])
def test_bisection_is_tight(start: float | None) -> None:
    """gap <= 0 from 3.0 up: the answer meets, and 0.1% below it was tried and missed."""
    found = least_meeting(lambda v: math.log(3.0 / v), 0.1, 100.0, start=start)
    assert found.value is not None and 3.0 <= found.value <= 3.0 * 1.001 and found.monotone
    assert any(not met and v >= found.value / 1.001 * (1 - 1e-9) for v, met in found.tried.items())
    steps = least_meeting(lambda v: 0.0 if v >= 3.0 else 1.0, 0.1, 100.0)      # a step: plain bisection
    assert steps.value is not None and 3.0 <= steps.value <= 3.003
    assert least_meeting(lambda v: None, 0.1, 100.0).value is None
    assert least_meeting(lambda v: -1.0, 0.1, 100.0).at_low_end


def test_integer_search_reports_non_monotone_curve() -> None:
    found = least_integer(lambda n: n == 2, 1, 8)       # powers of two only: 1, 2, 4, 8
    assert found.value == 2 and not found.monotone and sorted(found.tried) == [1.0, 2.0, 4.0, 8.0]
    assert round_up(2.30001) == 2.301 and round_up(2.3) == 2.3


@pytest.mark.parametrize(("name", "target"), [("ufs", 0.8), ("npu", 1.5), ("memory", 1.0)])
def test_phone_thresholds_hold_in_the_simulation(prefill: PrefillWorkload, name: str, target: float) -> None:
    a = require(prefill, RESOURCES[name], target)
    _check(a)
    assert a.at_threshold is not None and a.at_threshold.binding


def test_ufs_binds_on_flash_and_npu_on_compute(prefill: PrefillWorkload) -> None:
    ufs = require(prefill, RESOURCES["ufs"], 0.8).at_threshold
    npu = require(prefill, RESOURCES["npu"], 1.5).at_threshold
    assert ufs is not None and ufs.binding.startswith("flash")
    assert npu is not None and npu.binding == "NPU compute"


@pytest.mark.parametrize(("name", "target"), [("hbm", 200.0), ("gpus", 200.0)])
def test_gpu_thresholds_hold(decode: GPUDecodeWorkload, name: str, target: float) -> None:
    _check(require(decode, RESOURCES[name], target))


def test_gpu_count_curve_is_non_monotone(decode: GPUDecodeWorkload) -> None:
    a = require(decode, RESOURCES["gpus"], 200.0)
    assert a.threshold == 4 and not a.monotone      # 9 GPUs cross a node: slower than 4


def test_gpu_count_starts_where_the_model_fits() -> None:
    """DeepSeek-V3.1 (671 B parameters) needs the HBM of 5 H200s: the least power of two is 8, and
    4 GPUs do not run at all."""
    work = GPUDecodeWorkload(model=load_model("deepseek-v3.1"), device=gpu_profile(GPU))
    a = require(work, RESOURCES["gpus"], 1.0)
    _check(a)
    assert a.threshold == 8 and a.below is not None and a.below.binding == "does not fit"


def test_results_are_deterministic(prefill: PrefillWorkload) -> None:
    assert require(prefill, RESOURCES["ufs"], 0.7) == require(prefill, RESOURCES["ufs"], 0.7)


def test_cli_resources_match_the_table() -> None:
    assert set(_RESOURCES) == set(RESOURCES)


def test_unreachable_target_is_one_line_exit_2(run_cli: Any) -> None:
    res = run_cli("require", "--model", "olmoe-1b-7b", "--tokens", "512", "--resource", "ufs", "--ttft-s", "0.01")
    assert res.code == 2 and res.out == ""
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and "--ttft-s is not reachable" in lines[0] and "best reachable" in lines[0]


@pytest.mark.parametrize("args", [("--resource", "bogus", "--ttft-s", "1"), ("--resource", "hbm", "--ttft-s", "1"),
                                  ("--tokens-per-s", "10"), ("--ttft-s", "-1")])
def test_bad_requests_are_refused(run_cli: Any, args: tuple[str, ...]) -> None:
    res = run_cli("require", "--model", "olmoe-1b-7b", *args)
    assert res.code == 2 and len(res.err.strip().splitlines()) == 1


def test_cli_json_is_deterministic(run_cli: Any) -> None:
    args = ("require", "--model", "gpt-oss-120b", "--device", GPU, "--tokens-per-s", "200", "--json")
    first, second = run_cli(*args), run_cli(*args)
    assert first.code == 0 and first.out == second.out
    answers = json.loads(first.out)["answers"]
    assert [a["resource"] for a in answers] == ["hbm", "gpus"] and all(a["confirmed"] for a in answers)
