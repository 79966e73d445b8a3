"""moesim validate: recorded statuses, the exit status, progress lines and the summary, the
report written only when asked; the calibrated profile reproduces the figures it was fitted to."""

import json
from pathlib import Path

import pytest

import moesim.validate.cases as cases_module
from moesim.errors import MoesimError, ToolMissingError
from moesim.validate.registry import Case, run_cases
from moesim.validate.report import exit_status, render_markdown, summary_line
from tests.traces_helpers import needs_shared


def _case(name: str, value: float, expect: str = "pass", why: str = "", raises: Exception | None = None) -> Case:
    """A real case whose prediction is ``value`` against a reference of 1 +-10% (or raises)."""
    def predict() -> float:
        if raises is not None:
            raise raises
        return value
    return Case(name=name, reference=1.0, source="a test figure", tolerance=0.10, tolerance_kind="relative",
                predict=predict, fitted_to=False, unit="x", expect=expect, why=why)  # type: ignore[arg-type]


WHY = "explained in docs/validation.md"
PASS, MISS, KNOWN = _case("a/pass", 1.05), _case("a/miss", 1.5, "miss", WHY), _case("b/ok", 1.0)
NOW = _case("b/now-passes", 1.0, "miss", WHY)
REGRESSION = _case("b/regression", 2.0)
ERROR = _case("b/error", 1.0, raises=MoesimError("validation/x.csv not found"))
SKIP = _case("c/skip", 1.0, raises=ToolMissingError("needs qemu-hexagon on PATH"))


def test_status_compares_the_outcome_with_the_recorded_status() -> None:
    varies = [_case("v/in", 1.0, "varies", "timed here"), _case("v/out", 3.0, "varies", "timed here")]
    results = run_cases([PASS, MISS, NOW, REGRESSION, ERROR, SKIP, *varies])
    assert [r.status for r in results] == ["pass", "known miss", "now passes", "regression", "error", "skipped",
                                           "pass", "known miss"]
    assert results[4].failure == "validation/x.csv not found" and results[5].skipped.startswith("needs qemu")
    assert summary_line(results) == "3 passed, 3 failed (2 known, 1 regressions), 1 skipped, 1 errors"
    assert run_cases([PASS, MISS, NOW], only="miss") == run_cases([MISS])


def test_a_bug_in_one_case_is_its_error_and_the_others_still_run() -> None:
    results = run_cases([_case("a/bug", 1.0, raises=ZeroDivisionError("float division by zero")), PASS])
    assert results[0].status == "error"
    assert results[0].failure.startswith("internal error: ZeroDivisionError: float division by zero "
                                         "(at test_validate.py:")
    assert results[1].status == "pass"


@pytest.mark.parametrize(("cases", "strict", "code"), [
    ([PASS, MISS, NOW], False, 0),     # a known miss that still misses, and one that now passes: as recorded
    ([PASS, SKIP], False, 0),          # what this machine cannot run never fails a plain run
    ([PASS, MISS], True, 1),           # --strict: any failure
    ([PASS, SKIP], True, 1),           # --strict: any skip
    ([PASS, NOW], True, 0),
    ([PASS, REGRESSION], False, 1),
    ([PASS, ERROR], False, 1),
])
def test_exit_status(cases: list[Case], strict: bool, code: int) -> None:
    assert exit_status(run_cases(cases), strict) == code


def test_a_known_miss_needs_its_reason() -> None:
    with pytest.raises(ValueError, match="a/x: a case expected to miss needs its reason"):
        _case("a/x", 1.0, "miss", " ")
    with pytest.raises(ValueError, match="expect must be pass, miss or varies"):
        _case("a/x", 1.0, "fail", WHY)


def test_every_registered_case_records_a_status_with_its_reason() -> None:
    cases = cases_module.registry()
    assert len({c.name for c in cases}) == len(cases)
    marked = [c for c in cases if c.expect != "pass"]
    assert marked and all(c.why.strip() for c in marked)
    # a known miss names where the docs explain it
    assert all("docs/" in c.why for c in marked if c.expect == "miss"), [c.name for c in marked]


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def use(*cases: Case) -> None:
        monkeypatch.setattr(cases_module, "registry", lambda: list(cases))
    return use


def test_cli_prints_a_line_per_group_as_it_finishes_and_a_summary(run_cli, registry, capsys) -> None:  # type: ignore[no-untyped-def]
    seen_before_b: list[str] = []

    def first_of_b() -> float:
        seen_before_b.append(capsys.readouterr().err)    # what stderr had when group b/ started
        return 1.0
    b_first = Case(name="b/first", reference=1.0, source="a test figure", tolerance=0.1, tolerance_kind="relative",
                   predict=first_of_b, fitted_to=False)
    registry(PASS, MISS, b_first, NOW, SKIP)
    res = run_cli("validate")
    assert res.code == 0, res.err
    assert seen_before_b[0].startswith("a/: 2 cases, 1 pass, 1 known miss (") and "b/:" not in seen_before_b[0]
    lines = res.err.splitlines()
    assert lines[0].startswith("b/: 2 cases, 2 pass, 1 now passing (update its status) (")
    assert lines[1].startswith("c/: 1 cases, 0 pass, 1 skipped (")
    assert f"a/miss: known miss: {WHY}" in lines
    assert "b/now-passes: now passes: update its status (recorded as a known miss: explained in docs/validation.md)" \
        in lines
    assert "skipped 1 case(s) (c/): needs qemu-hexagon on PATH" in lines
    assert lines[-1] == "3 passed, 1 failed (1 known, 0 regressions), 1 skipped"
    table = {line.split()[0]: line for line in res.out.splitlines()[2:]}
    assert table["a/miss"].endswith("known miss") and table["b/now-passes"].endswith("pass (now passes)")
    quiet = run_cli("validate", "--quiet")
    assert quiet.code == 0 and not any(line.startswith(("a/:", "b/:", "c/:")) for line in quiet.err.splitlines())


def test_cli_exit_status_and_json(run_cli, registry) -> None:  # type: ignore[no-untyped-def]
    registry(PASS, MISS, REGRESSION, ERROR)
    res = run_cli("validate", "--json")
    assert res.code == 1
    doc = json.loads(res.out)
    assert {c["name"]: c["status"] for c in doc["cases"]} == {
        "a/pass": "pass", "a/miss": "known miss", "b/regression": "regression", "b/error": "error"}
    assert doc["summary"]["regressions"] == 1 and doc["summary"]["errors"] == 1 and doc["summary"]["known_misses"] == 1
    assert "b/regression: REGRESSION: recorded to pass" in res.err
    assert "b/error: ERROR: validation/x.csv not found" in res.err
    registry(PASS, MISS)
    assert run_cli("validate").code == 0
    assert run_cli("validate", "--strict").code == 1


def test_nothing_is_written_without_write_docs(run_cli, registry, tmp_path: Path,  # type: ignore[no-untyped-def]
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "docs").mkdir()         # the folder the old default report path wrote into
    monkeypatch.chdir(tmp_path)
    registry(PASS, MISS, SKIP)
    assert run_cli("validate").code == 0
    assert list(tmp_path.rglob("*")) == [tmp_path / "docs"]
    res = run_cli("validate", "--write-docs", "out/validation.md")
    assert res.code == 2 and "--write-docs" in res.err and "out" in res.err     # checked before any case runs
    assert run_cli("validate", "--write-docs", "docs/validation.md").code == 0
    text = (tmp_path / "docs" / "validation.md").read_text()
    assert f"**known miss: {WHY}**" in text and "skipped: needs qemu-hexagon on PATH" in text
    summary = "\n1 passed, 1 failed (1 known, 0 regressions), 1 skipped.\n"
    # the summary ends the cases; the input campaign's totals follow it in a source checkout
    assert text.endswith(summary) or summary + "\n## Bad inputs: the adversarial input campaign\n" in text
    assert text == render_markdown(run_cases([PASS, MISS, SKIP]))
    assert list(tmp_path.rglob("*")) == [tmp_path / "docs", tmp_path / "docs" / "validation.md"]


@needs_shared
def test_fitted_figures_reproduced(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("validate", "--only", "estream/olmoe-", "--json")
    cases = {c["name"]: c for c in json.loads(res.out)["cases"]}
    fitted = [c for c in cases.values() if c["fitted_to"]]
    # the 4K TTFT, the CPU baseline, the mean-power plausibility range the NPU power was chosen under
    # and the two bubbles in the NPU fit (soft anchors)
    assert len(fitted) == 5 and all(c["passed"] for c in fitted)
    assert abs(cases["estream/olmoe-4k-ttft"]["predicted"] / 2.12 - 1) <= 0.15
    b = {p: cases[f"estream/olmoe-1k-bubble-{p}"]["predicted"] for p in ("on-demand", "after-routing", "non-ffn")}
    assert b["on-demand"] > b["after-routing"] > b["non-ffn"]
    # held-out cases are reported, pass or miss; each is what its case records, so the exit status is 0
    assert {c["status"] for c in cases.values()} <= {"pass", "known miss"} and res.code == 0, res.err


@pytest.mark.slow
@needs_shared
def test_full_registry_matches_its_recorded_statuses(run_cli, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = run_cli("validate", "--json")
    assert res.code == 0, res.err
    statuses = {c["name"]: c["status"] for c in json.loads(res.out)["cases"]}
    assert not {n: s for n, s in statuses.items() if s in ("regression", "error", "now passes")}
    assert list(tmp_path.iterdir()) == []


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
