"""The adversarial input campaign's class sections (validation/input_campaign.py), as a slow test.

Every case of every class of input the second campaign names (full, closed or early-closed
standard output; FIFOs and endless or enormous files where a file is read; deep JSON and TOML;
absurd sizes; grid values; ``--set`` on non-numeric fields; over-long paths; files that are not
a command's own output; misleading messages; impossible calibration logs) must end clean: a
one-line refusal naming the field, or a documented success. The script exits 1 otherwise and its
report names each case.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_every_class_section_of_the_campaign_ends_clean(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "validation"))
    try:
        from input_campaign import CLASS_SECTIONS
    finally:
        sys.path.pop(0)
    report = tmp_path / "campaign.md"
    env = dict(os.environ, PYTHONPATH=str(REPO), CAMPAIGN_SECTIONS=",".join(CLASS_SECTIONS),
               CAMPAIGN_REPORT=str(report), CAMPAIGN_WORKERS="2")
    proc = subprocess.run([sys.executable, str(REPO / "validation" / "input_campaign.py")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=1500)
    text = report.read_text() if report.exists() else ""
    assert proc.returncode == 0, proc.stderr[-4000:] + "\n" + text[-4000:]
    assert "| clean-refusal |" in text and all(f"| {s} |" in text for s in CLASS_SECTIONS)
