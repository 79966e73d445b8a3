"""moesim validate: the calibrated profile reproduces the figures it was fitted to."""

import json

from tests.traces_helpers import needs_shared


@needs_shared
def test_fitted_figures_reproduced(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("validate", "--only", "estream/olmoe-", "--json")
    cases = {c["name"]: c for c in json.loads(res.out)["cases"]}
    fitted = [c for c in cases.values() if c["fitted_to"]]
    # the 4K TTFT, the CPU baseline and the mean-power plausibility range the NPU power was chosen under
    assert len(fitted) == 3 and all(c["passed"] for c in fitted)
    assert abs(cases["estream/olmoe-4k-ttft"]["predicted"] / 2.12 - 1) <= 0.10
    b = {p: cases[f"estream/olmoe-1k-bubble-{p}"]["predicted"] for p in ("on-demand", "after-routing", "non-ffn")}
    assert b["on-demand"] > b["after-routing"] > b["non-ffn"]
    # held-out cases are reported, pass or fail: the exit status says whether all passed
    assert res.code == (0 if all(c["passed"] for c in cases.values()) else 1)


def test_unknown_filter_is_an_error(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("validate", "--only", "no-such-case")
    assert res.code == 2 and "matches no validation case" in res.err


def test_what_if_override(run_cli) -> None:  # type: ignore[no-untyped-def]
    base = json.loads(run_cli("prefill", "--tokens", "512", "--json").out)
    slow = json.loads(run_cli("prefill", "--tokens", "512", "--json", "--set", "ufs.effective_read_bw_GBps=1.0").out)
    assert slow["ttft_s"] > base["ttft_s"]
    assert slow["config"]["profile_hash"] != base["config"]["profile_hash"]
    bad = run_cli("prefill", "--set", "ufs.nope=1")
    assert bad.code == 2 and "ufs.nope is not a field of the profile" in bad.err
    bad = run_cli("prefill", "--set", "ufs.effective_read_bw_GBps=-1")
    assert bad.code == 2 and "effective_read_bw_GBps must be greater than 0" in bad.err
