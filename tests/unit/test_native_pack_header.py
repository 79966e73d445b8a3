"""The executor refuses a bad packed expert file before it reads a byte of weights.

Each corrupted header (one field at a time) must be refused with exit status 2 and one line
on stderr naming the field, the rule and the value; never a crash (a signal) or a read past
a buffer. ``native_ref/cpu/sanitize.sh`` runs the same refusals under AddressSanitizer.
"""

from __future__ import annotations

import struct
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from moesim.native import cpu

#: expert_bytes 55296 (3 x 128 x 256 weights at 18 bytes per 32), expert_stride 57344
SHAPE = cpu.ExpertShape(layers=2, experts=4, hidden=128, inter=256)
EXPERT_B, STRIDE_B = 55296, 57344
FILE_B = 4096 + SHAPE.layers * SHAPE.experts * STRIDE_B


@pytest.fixture(scope="module")
def good(build_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    packed = cpu.pack_experts(tmp_path_factory.mktemp("pack") / "good.pack", SHAPE, seed=4)
    assert (SHAPE.expert_bytes, SHAPE.expert_stride_bytes, packed.file_bytes) == (EXPERT_B, STRIDE_B, FILE_B)
    return packed.path.read_bytes()


@pytest.fixture(scope="module")
def routing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ids = np.random.default_rng(0).integers(0, SHAPE.experts, size=(6, SHAPE.layers, 2)).astype(np.int16)
    return cpu.write_routing(tmp_path_factory.mktemp("routing") / "routing.bin", ids)


def patched(good: bytes, fields: list[tuple[int, str, object]], body: bytes | None = None) -> bytes:
    head = bytearray(good[:4096])
    for offset, fmt, value in fields:
        struct.pack_into(fmt, head, offset, value)
    return bytes(head) + (good[4096:] if body is None else body)


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[bytes], bytes]
    message: str          # the expected message after "pack header: "


CASES = [
    Case("magic", lambda g: patched(g, [(0, "8s", b"GGUF\x03\x00\x00\x00")]),
         "magic must be 'MOEPACK1', got 'GGUF\\x03\\x00\\x00\\x00'"),
    Case("zero_header", lambda g: bytes(4096) + g[4096:], "magic must be 'MOEPACK1', got '" + "\\x00" * 8 + "'"),
    Case("version", lambda g: patched(g, [(7, "c", b"2")]),
         "version (the last byte of the magic) must be '1', got '2'"),
    Case("format", lambda g: patched(g, [(56, "8s", b"q8_0")]), "format must be 'q4_0', got 'q8_0'"),
    Case("reserved", lambda g: patched(g, [(100, "B", 1)]),
         "reserved bytes [64, 4096) must be zero, got 0x01 at offset 100"),
    Case("layers_zero", lambda g: patched(g, [(8, "<I", 0)]), "layers must be in [1, 4096], got 0"),
    Case("layers_huge", lambda g: patched(g, [(8, "<I", 0xFFFFFFFF)]), "layers must be in [1, 4096], got 4294967295"),
    Case("experts_zero", lambda g: patched(g, [(12, "<I", 0)]), "experts must be in [1, 32767], got 0"),
    Case("experts_huge", lambda g: patched(g, [(12, "<I", 40000)]), "experts must be in [1, 32767], got 40000"),
    Case("hidden_zero", lambda g: patched(g, [(16, "<I", 0)]), "hidden must be a multiple of 32 in [32, 65536], got 0"),
    Case("hidden_huge", lambda g: patched(g, [(16, "<I", 1 << 31)]),
         "hidden must be a multiple of 32 in [32, 65536], got 2147483648"),
    Case("inter_not_q4", lambda g: patched(g, [(20, "<I", 100)]),
         "inter must be a multiple of 32 in [32, 65536], got 100"),
    Case("expert_bytes", lambda g: patched(g, [(32, "<Q", EXPERT_B + 18)]),
         f"expert_bytes must be {EXPERT_B} (Q4_0 gate, up and down of hidden 128 x inter 256), got {EXPERT_B + 18}"),
    Case("expert_bytes_other_shape", lambda g: patched(g, [(16, "<I", 64)]),
         f"expert_bytes must be 27648 (Q4_0 gate, up and down of hidden 64 x inter 256), got {EXPERT_B}"),
    # the review's case: the file size agrees with the header, but experts are 8192 B apart
    Case("expert_stride_small", lambda g: patched(g, [(40, "<Q", 8192)], g[4096:4096 + 8 * 8192]),
         f"expert_stride must be >= expert_bytes ({EXPERT_B}), got 8192"),
    Case("expert_stride_zero", lambda g: patched(g, [(40, "<Q", 0)], b""),
         f"expert_stride must be >= expert_bytes ({EXPERT_B}), got 0"),
    Case("expert_stride_unaligned", lambda g: patched(g, [(40, "<Q", STRIDE_B + 512)], bytes(8 * (STRIDE_B + 512))),
         f"expert_stride must be a multiple of 4096 (direct I/O alignment), got {STRIDE_B + 512}"),
    Case("data_offset_zero", lambda g: patched(g, [(48, "<Q", 0)]), "data_offset must be >= 4096 (the header), got 0"),
    Case("data_offset_unaligned", lambda g: patched(g, [(48, "<Q", 4097)]),
         "data_offset must be a multiple of 4096 (direct I/O alignment), got 4097"),
    Case("data_offset_beyond", lambda g: patched(g, [(48, "<Q", 8192)]),
         f"file size must be data_offset + layers x experts x expert_stride = {FILE_B + 4096} bytes, "
         f"got {FILE_B} (truncated)"),
    Case("overflow_product", lambda g: patched(g, [(40, "<Q", 1 << 62)]),
         "data_offset + layers x experts x expert_stride must fit in a 64-bit file offset, "
         f"got 4096 + 2 x 4 x {1 << 62}"),
    Case("overflow_sum", lambda g: patched(g, [(48, "<Q", (1 << 64) - 4096)]),
         "data_offset + layers x experts x expert_stride must fit in a 64-bit file offset, "
         f"got {(1 << 64) - 4096} + 2 x 4 x {STRIDE_B}"),
    Case("overflow_signed", lambda g: patched(g, [(40, "<Q", 1 << 60)]),   # 8 x 2^60 = 2^63 > the largest off_t
         "data_offset + layers x experts x expert_stride must fit in a 64-bit file offset, "
         f"got 4096 + 2 x 4 x {1 << 60}"),
    Case("truncated", lambda g: g[:-STRIDE_B],
         f"file size must be data_offset + layers x experts x expert_stride = {FILE_B} bytes, "
         f"got {FILE_B - STRIDE_B} (truncated)"),
    Case("trailing", lambda g: g + b"\0",
         f"file size must be data_offset + layers x experts x expert_stride = {FILE_B} bytes, "
         f"got {FILE_B + 1} (trailing bytes)"),
    Case("header_only_part", lambda g: g[:100], "file size must be >= 4096 bytes (the header), got 100"),
    Case("empty", lambda g: b"", "file size must be >= 4096 bytes (the header), got 0"),
]


def run(build_dir: Path, pack: Path, routing: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(build_dir / "executor"), "run", "--file", str(pack), "--routing", str(routing),
                           "--group-size", "2", "--banks", "2", "--queue-depth", "2", "--threads", "2",
                           "--prefetch", "non-ffn"], capture_output=True, text=True, timeout=60, check=False)


def test_the_good_file_runs(build_dir: Path, good: bytes, routing: Path, tmp_path: Path) -> None:
    (tmp_path / "good.pack").write_bytes(good)
    proc = run(build_dir, tmp_path / "good.pack", routing)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_header_is_refused(build_dir: Path, good: bytes, routing: Path, tmp_path: Path, case: Case) -> None:
    pack = tmp_path / f"{case.name}.pack"
    pack.write_bytes(case.make(good))
    proc = run(build_dir, pack, routing)
    assert proc.returncode == 2, f"exit {proc.returncode} (negative: killed by a signal): {proc.stderr}"
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [f"error: {pack}: pack header: {case.message}"]


def test_header_fuzz_never_crashes(build_dir: Path, good: bytes, routing: Path, tmp_path: Path) -> None:
    """Random bytes in the header fields: refused with exit 2, or (seed bytes) run normally."""
    rng = np.random.default_rng(13)
    pack = tmp_path / "fuzz.pack"
    for _ in range(40):
        head = bytearray(good[:4096])
        for at in rng.integers(0, 64, size=int(rng.integers(1, 4))):
            head[at] = int(rng.integers(0, 256))
        pack.write_bytes(bytes(head) + good[4096:])
        proc = run(build_dir, pack, routing)
        assert proc.returncode in (0, 2), f"exit {proc.returncode} for header {bytes(head[:64]).hex()}: {proc.stderr}"
        if proc.returncode == 2:
            assert len(proc.stderr.splitlines()) == 1 and "pack header: " in proc.stderr


def test_python_driver_reports_the_refusal(build_dir: Path, good: bytes, routing: Path, tmp_path: Path) -> None:
    pack = tmp_path / "stride.pack"
    pack.write_bytes(patched(good, [(40, "<Q", 8192)], good[4096:4096 + 8 * 8192]))
    cfg = cpu.ExecutorConfig(group_size=2, banks=2, queue_depth=2, prefetch="non-ffn")
    with pytest.raises(cpu.NativeRunError,
                       match=r"pack header: expert_stride must be >= expert_bytes \(55296\), got 8192$"):
        cpu.run_executor(pack, routing, cfg, timeout_s=60)


def test_pack_rewrites_a_bad_file(build_dir: Path, good: bytes, routing: Path, tmp_path: Path) -> None:
    """``pack --if-missing`` reuses only a valid file of the same shape; a corrupted one is rewritten."""
    pack = tmp_path / "rewrite.pack"
    pack.write_bytes(patched(good, [(32, "<Q", EXPERT_B + 18)]))
    cpu.pack_experts(pack, SHAPE, seed=4, reuse=True)
    assert pack.read_bytes() == good
    assert run(build_dir, pack, routing).returncode == 0


@pytest.mark.slow
def test_sanitizer_script_passes(build_dir: Path) -> None:
    """ASan+UBSan and TSan builds run the executor, the benchmarks and these refusals cleanly.
    (Slow: the lint step of .ci/run runs sanitize.sh itself.)"""
    script = cpu.native_dir() / "sanitize.sh"
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode == 3:
        pytest.skip(f"sanitizers unavailable here: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
