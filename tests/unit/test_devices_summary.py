"""``moesim devices``: every profile's numbers counted by provenance kind."""

from __future__ import annotations

import json

from moesim.config.profiles import list_profiles, load_profile
from moesim.report.catalog import SUMMARY_KINDS, provenance_summary
from tests.unit.test_profiles import _without_value


def test_summary_counts_every_note() -> None:
    for profile in list_profiles():
        summary = provenance_summary(profile)
        assert list(summary) == list(SUMMARY_KINDS)
        assert sum(summary.values()) == sum(len(s.provenance) for s in profile.sections().values())
    phone = provenance_summary(load_profile("sd8-elite-gen5"))
    assert phone["pending"] == 0 and phone["fitted"] >= 6 and phone["spec"] > 0


def test_pending_is_its_own_kind(run_cli, write_profile, phone_profile_text) -> None:  # type: ignore[no-untyped-def]
    path = write_profile(_without_value(phone_profile_text, "hmx_fp16_TFLOPS"))
    full = provenance_summary(load_profile("sd8-elite-gen5"))
    record = json.loads(run_cli("devices", "--device", str(path), "--json").out)["devices"][0]
    assert record["provenance_summary"]["pending"] == 1
    assert record["provenance_summary"]["fitted"] == full["fitted"] - 1


def test_table_columns(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("devices")
    header = res.out.splitlines()[0].split()
    assert header == ["device", "kind", "pending_fit", *SUMMARY_KINDS, "description"]
    row = next(line for line in res.out.splitlines() if line.startswith("sd8-elite-gen5"))
    counts = [int(x) for x in row.split()[3:3 + len(SUMMARY_KINDS)]]
    assert counts == list(provenance_summary(load_profile("sd8-elite-gen5")).values())
