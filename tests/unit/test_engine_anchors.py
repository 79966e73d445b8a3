"""validation/engine_anchors.py: the production-engine table, without aiconfigurator (it is optional)."""

from pathlib import Path

import pytest

from tests.traces_helpers import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "validation" / "engine_anchors.py"


ea = load_script(SCRIPT, "engine_anchors")


def test_every_row_names_its_source_and_a_moesim_prediction() -> None:
    for row in ea.ROWS:
        assert row.source and row.published > 0 and row.moesim.split(":")[0] in ("mtp3", "ar", "batch4")
        assert row.aic or row.moesim_model == "deepseek-v3.1" or row.aic_note      # uncovered rows say why


def test_closed_form_rows_are_deterministic_and_positive() -> None:
    rows = [r for r in ea.ROWS if r.moesim_model != "deepseek-v3.1"]      # no simulation: fast
    first = [ea.predict(r)["tokens_per_s"] for r in rows]
    assert first == [ea.predict(r)["tokens_per_s"] for r in rows]
    assert all(x > 0 for x in first)


def test_mtp_rows_give_both_tools_the_published_acceptance(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def fake_run(cmd, **kw):  # type: ignore[no-untyped-def]
        seen.append(cmd)

        class P:
            returncode, stdout, stderr = 0, "tokens/s/user:  100.0\n", ""
        return P()
    monkeypatch.setattr(ea, "aic_command", lambda: ["aic"])
    monkeypatch.setattr(ea.subprocess, "run", fake_run)
    row = next(r for r in ea.ROWS if r.moesim == "mtp3:b200x8-fused")
    value, why = ea.run_aic(row.aic, ea.MTP3_ALPHA)
    assert value == 100.0 and why == ""
    assert seen[0][seen[0].index("--nextn-accepted") + 1] == f"{ea.MTP3_ALPHA - 1:.4f}"


def test_without_aiconfigurator_the_column_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ea, "aic_command", lambda: None)
    row = next(r for r in ea.ROWS if r.moesim == "ar:b200x8-fused")
    assert ea.run_aic(row.aic, None) == (None, "not installed")
