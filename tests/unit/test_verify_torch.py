"""The PyTorch verification-cost harness (native_ref/gpu): runs where torch (and CUDA) exist."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (the GPU harness is optional)")
SCRIPT = Path(__file__).resolve().parents[2] / "native_ref" / "gpu" / "verify_torch.py"


def _run(tmp_path: Path, device: str) -> list[dict[str, str]]:
    out = tmp_path / f"v-{device}.csv"
    res = subprocess.run([sys.executable, str(SCRIPT), "--device", device, "--hidden", "64", "--inter", "64",
                          "--experts", "16", "--gamma", "2", "--top-k", "2", "--repeats", "2", "--out", str(out)],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "held-out MAPE" in res.stdout
    with out.open() as fh:
        return list(csv.DictReader(fh))


def test_cpu_harness_loop_and_grouped_agree_and_cover_every_union(tmp_path: Path) -> None:
    rows = _run(tmp_path, "cpu")
    assert {r["impl"] for r in rows} == {"loop", "grouped"}
    assert sorted({int(r["union"]) for r in rows}) == [2, 3, 4]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_cuda_harness(tmp_path: Path) -> None:
    rows = _run(tmp_path, "cuda")
    assert all(float(r["time_us_median"]) > 0 for r in rows)
