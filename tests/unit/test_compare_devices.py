"""``moesim compare --devices``: devices side by side for one model, the first device the reference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moesim.config.profiles import profile_dir
from moesim.errors import InputError
from moesim.policies.prefill.search import TIE_TOLERANCE
from moesim.report.compare_devices import compare_devices, parse_devices


@pytest.fixture
def slow_phone(tmp_path: Path) -> Path:
    """The bundled phone with half its flash rate, under a name of its own."""
    text = (profile_dir() / "sd8-elite-gen5.toml").read_text()
    text = text.replace('name = "sd8-elite-gen5"', 'name = "slow-ufs"')
    text = text.replace("\neffective_read_bw_GBps = 3.6973\n", "\neffective_read_bw_GBps = 1.8\n")
    path = tmp_path / "slow-ufs.toml"
    path.write_text(text)
    return path


def test_rows_per_device(slow_phone: Path) -> None:
    rows = compare_devices("olmoe-1b-7b", ["sd8-elite-gen5", str(slow_phone)], [1024])
    first, slow = rows
    assert (first["device"], slow["device"]) == ("sd8-elite-gen5", str(slow_phone))
    assert first["speedup"] == 1.0 and first["energy_ratio"] == 1.0
    assert slow["ttft_s"] > first["ttft_s"] and slow["speedup"] == pytest.approx(first["ttft_s"] / slow["ttft_s"])
    for r in rows:
        lo, hi = r["ttft_s_interval"]
        assert lo <= r["ttft_s"] <= hi and r["usable_GiB"] == 15.1 and r["energy_j"] > 0


def test_set_applies_to_every_device(slow_phone: Path) -> None:
    plain = compare_devices("olmoe-1b-7b", ["sd8-elite-gen5", str(slow_phone)], [256])
    faster = compare_devices("olmoe-1b-7b", ["sd8-elite-gen5", str(slow_phone)], [256],
                             overrides={"htp.hmx_fp16_TFLOPS": 12.0})
    # a faster HMX never costs more than the configurator's near-tie tolerance (it may then pick a larger arena)
    assert all(f["ttft_s"] <= p["ttft_s"] * (1 + TIE_TOLERANCE) for f, p in zip(faster, plain))
    assert all(f["ttft_s"] != p["ttft_s"] for f, p in zip(faster, plain))


def test_cli_table_and_json(run_cli, slow_phone: Path) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("compare", "--devices", f"sd8-elite-gen5,{slow_phone}", "--tokens", "256", "--policies",
                  "estream,cpu", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["reference"] == "sd8-elite-gen5"
    assert [(r["policy"], r["device"]) for r in doc["rows"]] == [
        ("estream", "sd8-elite-gen5"), ("estream", str(slow_phone)),
        ("cpu", "sd8-elite-gen5"), ("cpu", str(slow_phone))]
    table = run_cli("compare", "--devices", f"sd8-elite-gen5,{slow_phone}", "--tokens", "256")
    assert table.code == 0 and "fits (usable)" in table.out and "yes (15.1 GiB)" in table.out


@pytest.mark.parametrize(("args", "message"), [
    (["--devices", "sd8-elite-gen5,h200x8-hf"], "device must be a mobile-npu profile for compare --devices"),
    (["--devices", "sd8-elite-gen5,,x"], "--devices must be comma-separated devices (element 2 is empty)"),
    (["--devices", "sd8-elite-gen5", "--baseline", "cpu"], "--baseline compares policies"),
    (["--devices", "sd8-elite-gen5", "--policies", "estream,bogus"], "--policies must be among"),
])
def test_cli_errors(run_cli, args: list[str], message: str) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("compare", *args)
    assert res.code == 2 and message in res.err and res.err.count("\n") == 1


def test_parse_devices() -> None:
    assert parse_devices("a, b") == ["a", "b"]
    with pytest.raises(InputError, match="each device once"):
        parse_devices("a,a")
