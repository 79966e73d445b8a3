"""Profile values set in place (calibrate --write): only the two lines change, comments stay."""

from __future__ import annotations

from pathlib import Path

import pytest

from moesim.calibrate.profile_edit import set_profile_value
from moesim.config.profiles import load_profile, profile_dir
from moesim.errors import InputError

_TEXT = """# a comment that stays
name = "x"

[ufs]
peak_read_bw_GBps = 4.3  # inline comment stays
read_latency_us = 27.9

[ufs.provenance]
peak_read_bw_GBps = "spec: peak"
read_latency_us = "derived: latency"

[gpu]
count = 8

[gpu.provenance]
count = "spec: 8"
"""


def test_replace_and_insert_keep_everything_else(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(_TEXT)
    set_profile_value(path, "ufs", "peak_read_bw_GBps", 4, 'fitted: a "quoted" \\ note')
    set_profile_value(path, "ufs", "effective_read_bw_GBps", 3.25e-05, "assumed: new")
    set_profile_value(path, "gpu", "new_TFLOPS", 1e22, "assumed: last table")
    assert path.read_text() == """# a comment that stays
name = "x"

[ufs]
peak_read_bw_GBps = 4.0  # inline comment stays
read_latency_us = 27.9
effective_read_bw_GBps = 3.25e-05

[ufs.provenance]
peak_read_bw_GBps = "fitted: a \\"quoted\\" \\\\ note"
read_latency_us = "derived: latency"
effective_read_bw_GBps = "assumed: new"

[gpu]
count = 8
new_TFLOPS = 1e+22

[gpu.provenance]
count = "spec: 8"
new_TFLOPS = "assumed: last table"
"""
    assert [p.name for p in tmp_path.iterdir()] == ["p.toml"]


def test_bundled_profile_changes_only_the_edited_lines(tmp_path: Path) -> None:
    original = (profile_dir() / "sd8-elite-gen5.toml").read_text().replace('"sd8-elite-gen5"', '"my-phone"', 1)
    path = tmp_path / "my-phone.toml"
    path.write_text(original)
    set_profile_value(path, "htp", "hmx_fp16_TFLOPS", 21.5, "fitted: test")
    before, after = original.splitlines(), path.read_text().splitlines()
    changed = [(a, b) for a, b in zip(before, after) if a != b]
    assert len(before) == len(after) and [b for _, b in changed] == [
        "hmx_fp16_TFLOPS = 21.5", 'hmx_fp16_TFLOPS = "fitted: test"']
    assert load_profile(path).htp.hmx_fp16_TFLOPS == 21.5     # type: ignore[union-attr]


def test_missing_table_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(_TEXT)
    with pytest.raises(InputError, match=r"\[memory\] is not a table of the profile"):
        set_profile_value(path, "memory", "usable_GiB", 4, "spec: four")
    assert path.read_text() == _TEXT
