"""Issue 35, part C: absurd sizes, grid values, ``--set`` on what is not a number, misleading messages.

Each class is refused at its root, before any work: a decode run's size by the run model
(``moesim.limits.decode_size_rule``), a grid value by its kind, its normalised value and the CLI's
rule of which options a run reads, a what-if key by the profile (``check_override_key``), a
non-finite number by every run model (``config.base.Finite``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from moesim.config.decode import DecodeRun, ignored_option
from moesim.config.loading import validate_data
from moesim.config.profiles import check_override_key, load_profile, override_profile, settable_fields
from moesim.errors import InputError
from moesim.limits import MAX_DECODE_SLOTS, max_decode_tokens
from moesim.sweep import load_grid
from moesim.sweep.store import parts_dir

PRE = '[fixed]\nworkload = "prefill"\ndevice = "sd8-elite-gen5"\nmodel = "flame-moe-290m"\n[axes]\n'
DEC = '[fixed]\nworkload = "decode"\ndevice = "sd8-elite-gen5"\nmodel = "mixtral-8x7b"\n[axes]\n'
SPEC = '[fixed]\nworkload = "specdecode"\ndevice = "h200x8-hf"\nmodel = "gpt-oss-120b"\npasses = 1\n[axes]\n'


def _one_line_refusal(res: Any, *names: str) -> str:
    lines = res.err.strip().splitlines()
    assert res.code == 2 and len(lines) == 1 and lines[0].startswith("moesim: error: "), res.err
    assert "Traceback" not in res.err and "internal error" not in res.err, res.err
    for name in names:
        assert name in lines[0], (name, lines[0])
    return str(lines[0])


def _sweep_refused(run_cli: Callable[..., Any], tmp_path: Path, text: str, *names: str) -> str:
    """The grid is refused before its first point, leaves nothing behind, and so does --resume."""
    grid, out = tmp_path / "grid.toml", tmp_path / "out.parquet"
    grid.write_text(text)
    first = _one_line_refusal(run_cli("sweep", str(grid), "-o", str(out), "--workers", "1", "--quiet"), *names)
    assert not out.exists() and not parts_dir(out).exists()
    again = _one_line_refusal(run_cli("sweep", str(grid), "-o", str(out), "--workers", "1", "--quiet", "--resume"))
    assert again == first and not parts_dir(out).exists()
    return first


# ---------------------------------------------------------------- absurd sizes
def test_the_decode_budget_names_each_models_maximum() -> None:
    assert max_decode_tokens(32, 2) == MAX_DECODE_SLOTS // 64 == 4096          # mixtral-8x7b
    DecodeRun(tokens=4096)                                                   # the default model at its maximum
    with pytest.raises(InputError, match=r"^tokens must be <= 4,096 for mixtral-8x7b \(32 MoE layers x top-2\)"):
        validate_data(DecodeRun, {"tokens": 4097})
    with pytest.raises(InputError, match=r"^warmup_tokens must be <= 96 for mixtral-8x7b with 4,000 tokens"):
        validate_data(DecodeRun, {"tokens": 4000, "warmup_tokens": 200})
    # a model the catalog does not know is refused when the run is resolved, not by the size rule
    assert DecodeRun(model="no-such-model", tokens=100_000).tokens == 100_000


@pytest.mark.parametrize("args", [("--tokens", "100000"), ("--model", "flame-moe-290m", "--tokens", "100000"),
                                  ("--model", "deepseek-v3.1", "--tokens", "1000")])
def test_a_decode_too_large_to_simulate_is_refused_before_the_first_event(run_cli: Callable[..., Any],
                                                                          args: tuple[str, ...]) -> None:
    line = _one_line_refusal(run_cli("decode", *args), "--tokens must be <= ", "routed expert slots")
    assert "got" in line


def test_a_decode_grid_too_large_to_simulate_is_refused(run_cli: Callable[..., Any], tmp_path: Path) -> None:
    line = _sweep_refused(run_cli, tmp_path, DEC + "tokens = [16, 100000]\n", "axes.tokens[1] = 100000")
    assert "tokens must be <= 4,096 for mixtral-8x7b" in line


# ---------------------------------------------------------------- grid values
@pytest.mark.parametrize(("axes", "names"), [
    ('tokens = [256, "256"]', ("axes.tokens[1] must be a valid integer, not a string", "got '256'")),
    ("tokens = [1979-05-27T07:32:00Z]", ("axes.tokens[0] must be a number, not a TOML date or time",)),
    ("tokens = [[256]]", ("axes.tokens[0] must be a number, not an array",)),
    ("tokens = [64]\nbanks = [2, 100000000000000000000]", ("axes.banks[1] must be a 64-bit integer",)),
    ('model = [4]\ntokens = [256]', ("axes.model[0] must be a name (a string), not a number",)),
    ('tokens = [256]\n"ufs.provenance.read_latency_us" = ["x"]',
     ("axes.ufs.provenance.read_latency_us must name SECTION.FIELD of the profile",)),
    ('tokens = [256]\n"memory.provenance" = [1, 2]', ("axes.memory.provenance cannot be set", "source notes")),
    ('tokens = [256]\n"ufs.version" = [4]', ("axes.ufs.version cannot be set", "a name (text)")),
    ('tokens = [256]\n"ufs.effective_read_bw_GBps" = [nan]',
     ("axes.ufs.effective_read_bw_GBps[0] must be a finite number",)),
    ('tokens = [256]\n"ufs.effective_read_bw_GBps" = [1979-05-27]', ("axes.ufs.effective_read_bw_GBps[0] must be",)),
])
def test_a_prefill_grid_value_of_the_wrong_kind_is_refused_before_any_point(run_cli: Callable[..., Any],
                                                                            tmp_path: Path, axes: str,
                                                                            names: tuple[str, ...]) -> None:
    _sweep_refused(run_cli, tmp_path, PRE + axes + "\n", *names)


def test_a_string_cache_size_and_a_string_that_is_no_number(run_cli: Callable[..., Any], tmp_path: Path) -> None:
    _sweep_refused(run_cli, tmp_path, DEC + 'tokens = [8]\ncache_GiB = [0.5, "1.0"]\n',
                   "axes.cache_GiB[1] must be a valid number, not a string (write 1.0 without quotes)")
    _sweep_refused(run_cli, tmp_path, DEC + 'tokens = [8]\ncache_GiB = ["lots"]\n',
                   "axes.cache_GiB[0] must be a valid number")


@pytest.mark.parametrize(("text", "names"), [
    (PRE + "tokens = [256, 256.0]\n", ("axes.tokens must not list a value twice", "[1] = 256.0 duplicates [0] = 256")),
    (PRE + "tokens = [256, 256]\n", ("axes.tokens must not list a value twice",)),
    (PRE + 'tokens = [256]\n"ufs.effective_read_bw_GBps" = [3, 3.0]\n',
     ("axes.ufs.effective_read_bw_GBps must not list a value twice",)),
    (DEC + "tokens = [8]\ncache_GiB = [1, 1.0]\n", ("axes.cache_GiB must not list a value twice",)),
    (SPEC + "gamma = [4, 4.0]\n", ("axes.gamma must not list a value twice",)),
    (SPEC.replace("passes = 1", 'passes = 1\nselector = "ecospec"') + 'predictor = ["learned", "learned:2"]\n',
     ("axes.predictor must not list a value twice", '"folds": 2')),
])
def test_values_equal_once_normalised_are_duplicates(run_cli: Callable[..., Any], tmp_path: Path, text: str,
                                                     names: tuple[str, ...]) -> None:
    _sweep_refused(run_cli, tmp_path, text, *names)


@pytest.mark.parametrize(("text", "names"), [
    (DEC + "tokens = [8]\ngamma = [2, 4]\n", ("axes.gamma applies to speculative decoding only", "no point")),
    (DEC + "tokens = [8]\ndepth = [2, 3]\n", ("axes.depth applies to speculative decoding only",)),
    (DEC + 'tokens = [8]\ncache_policy = ["lru"]\npinned_share = [0.2, 0.5]\n',
     ("axes.pinned_share applies to cache_policy pinned only (here lru)",)),
    (DEC.replace("[axes]", "gamma = 3\n[axes]") + "tokens = [8]\n", ("fixed.gamma applies to speculative",)),
    (DEC + "tokens = [8]\nread_grouping = [\"id\"]\n", ("axes.read_grouping needs read_group_size > 1",)),
    (SPEC + "epsilon = [1.0, 2.0]\n", ("axes.epsilon is read only by the cost-aware rules",)),
    (SPEC + "gamma = [1]\nt_draft_ms = [1.0, 2.0]\n", ("axes.t_draft_ms needs gamma > 1",)),
])
def test_an_option_no_point_reads_is_refused_as_the_cli_refuses_it(run_cli: Callable[..., Any], tmp_path: Path,
                                                                   text: str, names: tuple[str, ...]) -> None:
    _sweep_refused(run_cli, tmp_path, text, *names)


def test_an_option_some_points_read_runs_with_a_note(tmp_path: Path) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text(DEC.replace("mixtral-8x7b", "olmoe-1b-7b") + 'tokens = [4]\nselector = ["none", "ecospec"]\n'
                    "gamma = [2, 3]\n")
    assert load_grid(grid).ignored_options() == [
        "gamma applies to speculative decoding only (it needs selector confidence, ecospec or cache-aware); the points "
        "of selector none run without it"]


def test_the_cli_and_the_grid_share_one_rule() -> None:
    assert ignored_option("pinned_share", {"cache_policy": "lfu"}) == "applies to cache_policy pinned only (here lfu)"
    assert ignored_option("pinned_share", {"cache_policy": "pinned"}) is None
    assert ignored_option("gamma", {}) is not None and ignored_option("gamma", {"selector": "confidence"}) is None


def test_a_valid_grid_keeps_its_points_and_their_ids(tmp_path: Path) -> None:
    """Only refusals changed: a grid that ran keeps its values as written and its point ids."""
    grid = tmp_path / "grid.toml"
    grid.write_text(DEC.replace("mixtral-8x7b", "olmoe-1b-7b") + "tokens = [16]\ncache_GiB = [1, 2.5]\n")
    points = load_grid(grid).points
    assert [p.params["cache_GiB"] for p in points] == [1, 2.5] and isinstance(points[0].params["cache_GiB"], int)


# ---------------------------------------------------------------- --set
@pytest.mark.parametrize(("what", "names"), [
    ("memory.provenance=1", ("--set memory.provenance cannot be set", "source notes", "usable_GiB")),
    ("ufs.provenance=1", ("--set ufs.provenance cannot be set",)),
    ("ufs.version=5", ("--set ufs.version cannot be set: it is a name (text)",)),
    ("htp.mla_absorbed=1", ("--set htp.mla_absorbed cannot be set: it is a switch",)),
    ("power.ufs_read_range_W=2", ("--set power.ufs_read_range_W cannot be set", "range of power.ufs_read_W",
                                  "set power.ufs_read_W and the range widens")),
    ("memory=1", ("overrides (--set) must name SECTION.FIELD of the profile, got 'memory'", "sections: memory")),
    ("provenance.x=1", ("must name SECTION.FIELD", "'provenance.x'")),
    ("memory.provenance.x=1", ("must name SECTION.FIELD", "memory: capacity_GiB")),
    ("htp.arch=v99", ("--set htp.arch must be a number", "got 'v99'")),
    ("ufs.effective_read_bw_GBps=nan", ("--set ufs.effective_read_bw_GBps must be a finite number",)),
    ("ufs.effective_read_bw_GBps=-inf", ("--set ufs.effective_read_bw_GBps must be a finite number",)),
])
@pytest.mark.parametrize("command", [("prefill", "--model", "flame-moe-290m", "--tokens", "64"),
                                     ("decode", "--model", "olmoe-1b-7b", "--tokens", "4")])
def test_set_on_what_is_not_one_number_says_what_it_is(run_cli: Callable[..., Any], command: tuple[str, ...],
                                                       what: str, names: tuple[str, ...]) -> None:
    _one_line_refusal(run_cli(*command, "--set", what), *names)


def test_set_on_a_gpu_profile_and_twice(run_cli: Callable[..., Any]) -> None:
    _one_line_refusal(run_cli("specdecode", "--passes", "1", "--set", "memory.provenance=1"),
                      "--set memory.provenance cannot be set")
    _one_line_refusal(run_cli("specdecode", "--passes", "1", "--set", "runtime.per_op_us=nan"), "must be a finite")
    _one_line_refusal(run_cli("prefill", "--set", "ufs.peak_read_bw_GBps=3", "--set", "ufs.peak_read_bw_GBps=4"),
                      "--set ufs.peak_read_bw_GBps must be given once")


def test_the_settable_fields_are_a_sections_numbers() -> None:
    profile = load_profile("sd8-elite-gen5")
    power = settable_fields(profile.power)  # type: ignore[arg-type]
    assert "ufs_read_W" in power and "ufs_read_range_W" not in power and "provenance" not in power
    assert "version" not in settable_fields(profile.ufs)  # type: ignore[arg-type]
    check_override_key(profile, "power.ufs_read_W")
    with pytest.raises(InputError, match="grid.x cannot be set"):
        check_override_key(profile, "memory.provenance", where="grid.x")


def test_a_power_what_if_outside_its_range_widens_the_range() -> None:
    profile = load_profile("sd8-elite-gen5")
    assert profile.power is not None and profile.power.ufs_read_range_W == [0.5, 2.7]
    inside = override_profile(profile, {"power.ufs_read_W": 1.0})
    assert inside.power is not None and inside.power.ufs_read_range_W == [0.5, 2.7]       # as measured
    assert inside.power.provenance["ufs_read_range_W"] == profile.power.provenance["ufs_read_range_W"]
    outside = override_profile(profile, {"power.ufs_read_W": 3.0})
    assert outside.power is not None and outside.power.ufs_read_range_W == [0.5, 3.0]
    assert outside.power.provenance["ufs_read_range_W"].startswith("assumed: ")


@pytest.mark.parametrize("value", ["1.0", "3.0"])
def test_a_power_what_if_runs_inside_and_outside_the_range(run_cli: Callable[..., Any], value: str) -> None:
    res = run_cli("prefill", "--model", "flame-moe-290m", "--tokens", "64", "--set", f"power.ufs_read_W={value}",
                  "--json")
    assert res.code == 0, res.err
    assert json.loads(res.out)["config"]["overrides"] == {"power.ufs_read_W": float(value)}


def test_a_saved_result_with_a_bad_override_is_refused_in_one_line(run_cli: Callable[..., Any],
                                                                   tmp_path: Path) -> None:
    saved = json.loads(run_cli("prefill", "--model", "flame-moe-290m", "--tokens", "64", "--json").out)
    saved["config"]["run"]["overrides"] = {"memory.provenance": 1.0}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(saved))
    _one_line_refusal(run_cli("rerun", str(path)), "memory.provenance cannot be set")


# ---------------------------------------------------------------- misleading messages
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
@pytest.mark.parametrize(("args", "option"), [
    (("decode", "--tokens", "4", "--temperature"), "temperature"),
    (("decode", "--tokens", "4", "--cache-policy", "pinned", "--pinned-share"), "--pinned-share"),
    (("decode", "--tokens", "4", "--cache-gib"), "--cache-gib"),
    (("decode", "--tokens", "4", "--selector", "confidence", "--draft-mu"), "--draft-mu"),
    (("specdecode", "--passes", "1", "--draft-mu"), "--draft-mu"),
    (("specdecode", "--passes", "1", "--selector", "ecospec", "--epsilon"), "--epsilon"),
    (("prefill", "--memory-budget-gib"), "--memory-budget-gib"),
    (("decode", "--tokens", "4", "--autoconfig", "--memory-budget-gib"), "--memory-budget-gib"),
])
def test_a_non_finite_number_is_called_so(run_cli: Callable[..., Any], args: tuple[str, ...], option: str,
                                          value: str) -> None:
    line = _one_line_refusal(run_cli(*args, value), option, "must be a finite number")
    assert "less than" not in line and "greater than" not in line


def test_a_json_array_is_not_a_result(run_cli: Callable[..., Any], tmp_path: Path) -> None:
    path = tmp_path / "array.json"
    path.write_text("[1, 2, 3]\n")
    line = _one_line_refusal(run_cli("rerun", str(path)), "must be a JSON object", "not an array")
    assert "Extra data" not in line


def test_an_edited_routing_names_the_key_and_both_values(run_cli: Callable[..., Any], tmp_path: Path) -> None:
    saved = json.loads(run_cli("prefill", "--model", "flame-moe-290m", "--tokens", "64", "--json").out)
    saved["config"]["run"]["tokens"] = 80
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(saved))
    line = _one_line_refusal(run_cli("rerun", str(path)), "config.trace must be the routing")
    assert "n_tokens is 80 here, 64 in the result" in line
