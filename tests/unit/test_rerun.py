"""``moesim rerun RESULT.json``: a saved --json result reproduces itself from its configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import moesim
from moesim.results import HOST_CLOCK_FIELDS, flatten_metrics
from moesim.traces import bundled_trace_path

TRACE = str(bundled_trace_path())


def _stable(data: dict) -> dict:  # type: ignore[type-arg]
    return {k: v for k, v in flatten_metrics(data).items() if k not in HOST_CLOCK_FIELDS}


@pytest.mark.parametrize("argv", [
    ("prefill", "--tokens", "256", "--trace", TRACE, "--set", "ufs.effective_read_bw_GBps=3.0", "--seed", "3"),
    ("prefill", "--tokens", "256", "--trace", TRACE, "--policy", "mmap", "--memory-budget-gib", "2"),
    ("specdecode", "--model", "olmoe-1b-7b", "--trace", TRACE, "--selector", "ecospec", "--passes", "1",
     "--predictor", "accuracy:0.8", "--set", "runtime.per_op_us=20"),
], ids=["prefill-what-if", "prefill-mmap", "specdecode"])
def test_rerun_prints_the_same_result(run_cli, tmp_path: Path, argv: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    first = run_cli(*argv, "--json")
    assert first.code == 0, first.err
    saved = json.loads(first.out)
    assert saved["config"]["run"]["trace"] == TRACE and saved["config"]["workload"] == argv[0]
    if "--set" in argv:
        key, value = argv[argv.index("--set") + 1].split("=")
        assert saved["config"]["overrides"] == {key: float(value)}
    path = tmp_path / "result.json"
    path.write_text(first.out)
    again = run_cli("rerun", str(path), "--json")
    assert again.code == 0, again.err
    assert _stable(json.loads(again.out)) == _stable(saved)
    text = run_cli("rerun", str(path))
    assert text.code == 0 and "routing:" in text.out


def test_rerun_refuses_what_it_cannot_rebuild(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    saved = json.loads(run_cli("prefill", "--tokens", "128", "--trace", TRACE, "--json").out)
    cases = {
        "hash": ({**saved, "config": {**saved["config"], "profile_hash": "0" * 16}},
                 "config.profile_hash must match the profile rebuilt from device 'sd8-elite-gen5'"),
        "trace": ({**saved, "config": {**saved["config"], "trace": {"source": "elsewhere", "synthetic": False}}},
                  "config.trace must be the routing this machine resolves"),
        "no-config": ({"ttft_s": 1.0}, "config.run is required"),
        "workload": ({"config": {"run": {}, "workload": "train"}},
                     "config.workload must be prefill, specdecode or decode"),
        "override": ({**saved, "config": {**saved["config"], "run": {**saved["config"]["run"],
                                                                     "overrides": {"nope": 1.0}}}},
                     "overrides (--set) must name SECTION.FIELD of the profile, got 'nope'"),
        "bad-run": ({**saved, "config": {**saved["config"], "run": {**saved["config"]["run"], "tokens": -5}}},
                    "tokens"),
    }
    for name, (data, message) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(data))
        res = run_cli("rerun", str(path))
        assert res.code == 2 and message in res.err and len(res.err.strip().splitlines()) == 1, (name, res.err)
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00garbage")
    res = run_cli("rerun", str(tmp_path / "binary.json"))
    assert res.code == 2 and "must be the JSON of a --json result" in res.err
    res = run_cli("rerun", str(tmp_path / "missing.json"))
    assert res.code == 2 and "must be an existing file" in res.err


def test_python_rerun_and_to_pandas() -> None:
    run = moesim.PrefillRun(model="olmoe-1b-7b", device="sd8-elite-gen5", tokens=128, trace=TRACE,
                            policy=moesim.NaivePolicy())
    result = moesim.simulate_prefill(run)
    row = result.to_pandas()
    assert len(row) == 1 and row["config.policy"].iloc[0] == "naive" and row["ttft_s"].iloc[0] == result.ttft_s
    again = moesim.rerun(result.to_dict())
    assert isinstance(again, moesim.PrefillResult) and again.metrics.ttft_s == result.ttft_s
    assert result.metrics.config.run == run


def _old_spelling(data: object, decode: bool, in_run: bool = False) -> object:
    """A result as the release before the one-word renames wrote it (issue 24): the run's own
    fields were spelled ``_GiB`` already."""
    old = {} if in_run else {"peak_memory_GiB": "peak_memory_gib", "memory_GiB": "memory_gib",
                             "peak_memory_GiB_interval": "peak_memory_gib_interval",
                             "memory_budget_GiB": "memory_budget_gib", "cache_GiB": "cache_gib"}
    if decode:
        old.update(selector="spec", bubble_share_total="bubble_share")
    if isinstance(data, dict):
        return {old.get(k, k): ("trace" if decode and k == "kind" and v == "learned"
                                else _old_spelling(v, decode, in_run or k == "run")) for k, v in data.items()}
    return data


def test_a_result_saved_with_the_old_names_reruns(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    first = run_cli("decode", "--model", "olmoe-1b-7b", "--trace", TRACE, "--tokens", "4", "--selector", "ecospec",
                    "--json")
    assert first.code == 0, first.err
    saved = _old_spelling(json.loads(first.out), decode=True)
    assert saved["config"]["run"]["spec"] == "ecospec" and saved["config"]["predictor"]["kind"] == "trace"  # type: ignore[index]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(saved))
    again = run_cli("rerun", str(path), "--json")
    assert again.code == 0, again.err
    assert "decode field 'spec' is deprecated; use 'selector'" in again.err
    assert _stable(json.loads(again.out)) == _stable(json.loads(first.out))
    # a value that did change under an old name is still a difference
    saved["bubble_share"] = 0.5  # type: ignore[index]
    path.write_text(json.dumps(saved))
    assert "bubble_share_total" in run_cli("rerun", str(path)).err


def test_the_old_decode_spellings_work_with_a_deprecation_line(run_cli) -> None:  # type: ignore[no-untyped-def]
    new = run_cli("decode", "--model", "olmoe-1b-7b", "--trace", TRACE, "--tokens", "4", "--selector", "ecospec",
                  "--predictor", "learned", "--json")
    old = run_cli("decode", "--model", "olmoe-1b-7b", "--trace", TRACE, "--tokens", "4", "--spec", "ecospec",
                  "--predictor", "trace", "--json")
    assert new.code == old.code == 0, old.err
    assert _stable(json.loads(old.out)) == _stable(json.loads(new.out))
    assert "--spec is deprecated; use --selector" in old.err and "--predictor trace is deprecated" in old.err
    assert "deprecated" not in new.err
