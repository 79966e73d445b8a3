"""Shared fixtures: a CLI runner that returns (exit code, stdout, stderr), profile files."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from moesim.cli import main
from moesim.config.profiles import profile_dir

REPO = Path(__file__).resolve().parent.parent


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stored autoconfig profiles go to a per-session temporary folder, not ~/.cache."""
    monkeypatch.setenv("MOESIM_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run ``moesim ARGS`` in-process through the real entry point."""

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture
def phone_profile_text() -> str:
    """The bundled phone profile's TOML text under a name of its own (a file may not take a
    bundled profile's name), for tests that break it on purpose."""
    return (profile_dir() / "sd8-elite-gen5.toml").read_text().replace('name = "sd8-elite-gen5"', 'name = "my-phone"')


@pytest.fixture
def write_profile(tmp_path: Path) -> Callable[[str], Path]:
    def write(text: str, name: str = "my-device.toml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


@pytest.fixture
def repo() -> Path:
    return REPO




@pytest.fixture(scope="session")
def tiny_profile():  # type: ignore[no-untyped-def]
    """The phone profile with every number set (the pending ones at round test values),
    so simulations run without depending on the current calibration."""
    from moesim.calibrate.estream import with_values
    from moesim.config.profiles import load_profile

    values = {"htp.hmx_fp16_TFLOPS": 2.0, "htp.q4_0_dequant_GBps": 8.0, "htp.call_overhead_us": 20.0,
              "ufs.effective_read_bw_GBps": 4.0, "cpu.q4_0_gemm_GFLOPS": 200.0,
              "htp.graph_overhead_us": 100.0}
    return with_values(load_profile("sd8-elite-gen5"), values)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def tiny_tiled_profile(tiny_profile):  # type: ignore[no-untyped-def]
    """``tiny_profile`` on the HTP tile pipeline (moesim.cost.htp), experts in one weight buffer."""
    from moesim.calibrate.estream import with_values
    from moesim.config.device import MobileNPUProfile

    data = tiny_profile.model_dump()
    data["htp"]["experts_double_buffered"] = False
    return with_values(MobileNPUProfile.model_validate(data), {"htp.hvx_efficiency_ratio": 0.3, "htp.dma_GBps": 40.0})


@pytest.fixture(scope="session")
def build_dir() -> Path:
    """The native CPU reference, built once (skips the test with the build error when gcc or make is missing)."""
    from moesim.native import cpu

    try:
        return cpu.build()
    except cpu.NativeBuildError as err:
        pytest.skip(str(err))
