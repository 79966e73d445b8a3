"""Fit the HVX packet model (:mod:`moesim.cost.hvx`) from measured packet counts.

:func:`measure` builds and runs every kernel of the native Hexagon reference at the shapes
of :data:`PLAN` under qemu-hexagon with the packet-counting plugin, after checking each
output against numpy bit for bit (counts of a wrong kernel would mean nothing).
:func:`fit` fits, per kernel, packets as a linear function of the shape features of
:data:`moesim.cost.hvx.FEATURES` by least squares on the ``fit`` shapes (relative
residuals) and reports the error on the ``held_out`` shapes, which the fit never saw.
CSV schema (validation/hexagon_packets.csv): ``#`` provenance lines, then
``kernel,shape,split,packets,hvx_packets,macs,weight_B,scalar_packets``.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
from collections.abc import Iterable
from dataclasses import astuple, dataclass, fields
from pathlib import Path

import numpy as np

from moesim.cost.hvx import FEATURES, features
from moesim.errors import InputError, MoesimError
from moesim.files import write_text_atomic
from moesim.inputs import read_input_text
from moesim.native import hexagon

__all__ = ["PLAN", "PacketRow", "KernelFit", "measure", "provenance", "write_csv", "read_csv", "fit",
           "write_packet_model", "HELD_OUT_TOLERANCE"]

HELD_OUT_TOLERANCE = 0.05    # acceptance: the model predicts held-out shapes within +-5 %

#: kernel program -> (shapes fitted, shapes held out). nb: Q4_0 blocks (32 weights) per row;
#: R rows, T tokens; n routed tokens of N, H hidden. Held-out shapes include OLMoE-sized
#: ones (hidden 2048 = 64 blocks, expert intermediate 1024 = 32 blocks) and extrapolations.
PLAN: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "q4_dequant_i8": (("nb=8", "nb=24", "nb=40", "nb=64", "nb=200", "nb=512", "nb=2048", "nb=2104"),
                      ("nb=16", "nb=56", "nb=128", "nb=1000", "nb=4096", "nb=65536")),
    "q4_dequant_i16": (("nb=8", "nb=16", "nb=32", "nb=56", "nb=128", "nb=520", "nb=2048", "nb=2072"),
                       ("nb=24", "nb=64", "nb=1000", "nb=4096", "nb=65536")),
    "q4q8_dot": (("nb=32", "nb=64", "nb=128", "nb=224", "nb=1024", "nb=1088"),
                 ("nb=96", "nb=160", "nb=512", "nb=2048", "nb=65536")),
    "q4_gemm": (("R=8,nb=32,T=1", "R=8,nb=32,T=4", "R=16,nb=64,T=4", "R=8,nb=64,T=5", "R=32,nb=32,T=8",
                 "R=16,nb=32,T=2", "R=8,nb=96,T=7", "R=4,nb=128,T=3", "R=24,nb=64,T=12"),
                ("R=64,nb=64,T=8", "R=64,nb=32,T=16", "R=16,nb=64,T=3", "R=128,nb=64,T=4", "R=32,nb=96,T=6",
                 "R=48,nb=128,T=64")),
    "route_gather_scatter": (("n=4,H=128,N=16", "n=8,H=256,N=32", "n=16,H=128,N=32", "n=8,H=512,N=16",
                              "n=2,H=1024,N=8", "n=12,H=384,N=24", "n=6,H=896,N=12"),
                             ("n=32,H=2048,N=64", "n=64,H=2048,N=256", "n=5,H=640,N=9")),
}


@dataclass(frozen=True, kw_only=True)
class PacketRow:
    kernel: str          # the HVX function's CSV name (one program may give several rows)
    shape: str
    split: str           # "fit" or "held_out"
    packets: int         # executed packets of the HVX kernel function
    hvx_packets: int     # of which contain at least one HVX instruction
    macs: int            # integer multiply-accumulates the kernel performs
    weight_B: int        # Q4_0 bytes it reads, in GGUF's 18 bytes per block (0: no weights)
    scalar_packets: int  # executed packets of the plain-C version on the same inputs


def _dims(shape: str) -> dict[str, int]:
    return {k: int(v) for k, v in (item.split("=") for item in shape.split(","))}


def measure(plan: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] | None = None, *,
            seed: int = 0) -> list[PacketRow]:
    """Build, run, check against numpy and count packets: one row per kernel function and shape."""
    tc = hexagon.toolchain()
    build_dir = hexagon.build(tc)
    rows = []
    for program, (fit_shapes, held) in (plan or PLAN).items():
        for split, shapes in (("fit", fit_shapes), ("held_out", held)):
            for shape in shapes:
                case = hexagon.make_case(program, shape, seed)
                run = hexagon.run_case(tc, build_dir, case, count_packets=True)
                if not run.ok:
                    raise MoesimError(f"{program} {shape}: output differs from numpy (hvx ok: {run.hvx_matches_numpy}, "
                                      f"scalar ok: {run.scalar_matches_numpy}); "
                                      "packets of a wrong kernel are not counted")
                assert run.counts is not None
                for name, hvx_fn, scalar_fn in hexagon.KERNELS[program][2]:
                    c = run.counts[hvx_fn]
                    rows.append(PacketRow(kernel=name, shape=case.shape, split=split, packets=c.packets,
                                          hvx_packets=c.hvx_packets, macs=case.macs[name], weight_B=case.weight_B[name],
                                          scalar_packets=run.counts[scalar_fn].packets))
    return rows


def provenance(command: str = "python validation/fit_hvx.py") -> list[str]:
    """Provenance lines of a measurement: date, toolchain versions, how to regenerate."""
    versions = hexagon.toolchain().versions()
    return ["measured: executed packets under qemu-hexagon -cpu v67 with native_ref/hexagon's packet_count plugin",
            "inputs: moesim.native.hexagon.make_case(kernel, shape, seed=0); every output checked equal to numpy's",
            f"date: {_dt.date.today().isoformat()}", *(f"{tool}: {v}" for tool, v in versions.items()),
            "build: clang-19 --target=hexagon-unknown-linux-musl -mv68 -mhvx=v66 -mhvx-length=128b -O2",
            f"regenerate: {command}"]


def write_csv(rows: Iterable[PacketRow], path: Path, notes: list[str]) -> None:
    buf = io.StringIO()
    buf.writelines(f"# {n}\n" for n in notes)
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([f.name for f in fields(PacketRow)])
    w.writerows(astuple(r) for r in rows)
    write_text_atomic(buf.getvalue(), path)


def read_csv(path: Path) -> list[PacketRow]:
    lines = [ln for ln in read_input_text(path, "packet CSV", "log").splitlines() if ln and not ln.startswith("#")]
    reader = csv.DictReader(lines)
    expected = [f.name for f in fields(PacketRow)]
    if reader.fieldnames != expected:
        raise InputError(f"{path}: header", f"must be {','.join(expected)}", ",".join(reader.fieldnames or []))
    return [PacketRow(kernel=r["kernel"], shape=r["shape"], split=r["split"], packets=int(r["packets"]),
                      hvx_packets=int(r["hvx_packets"]), macs=int(r["macs"]), weight_B=int(r["weight_B"]),
                      scalar_packets=int(r["scalar_packets"])) for r in reader]


@dataclass(frozen=True, kw_only=True)
class KernelFit:
    kernel: str
    coefficients: tuple[float, ...]
    fit_max_rel_error: float
    heldout_max_rel_error: float
    predictions: tuple[tuple[str, str, int, float], ...]   # (shape, split, measured, predicted)


def fit(rows: Iterable[PacketRow]) -> dict[str, KernelFit]:
    """Least squares of relative residuals on the ``fit`` rows, per kernel."""
    by_kernel: dict[str, list[PacketRow]] = {}
    for r in rows:
        by_kernel.setdefault(r.kernel, []).append(r)
    fits = {}
    for kernel, krows in by_kernel.items():
        if kernel not in FEATURES:
            raise InputError("kernel", f"has no packet-model features (one of {', '.join(FEATURES)})", kernel)
        train = [r for r in krows if r.split == "fit"]
        if len(train) < len(FEATURES[kernel][0]):
            raise InputError(f"{kernel} fit rows", f"must be >= {len(FEATURES[kernel][0])} (one per feature)",
                             len(train))
        x = np.array([features(kernel, _dims(r.shape)) for r in train])
        y = np.array([r.packets for r in train], dtype=float)
        coef = np.linalg.lstsq(x / y[:, None], np.ones_like(y), rcond=None)[0]
        preds = tuple((r.shape, r.split, r.packets, float(np.dot(coef, features(kernel, _dims(r.shape)))))
                      for r in krows)
        err = {s: max((abs(p / m - 1) for _, sp, m, p in preds if sp == s), default=0.0) for s in ("fit", "held_out")}
        fits[kernel] = KernelFit(kernel=kernel, coefficients=tuple(float(c) for c in coef),
                                 fit_max_rel_error=err["fit"], heldout_max_rel_error=err["held_out"], predictions=preds)
    return fits


def write_packet_model(fits: dict[str, KernelFit], path: Path, source: str, notes: list[str]) -> None:
    """Store the coefficients as data with provenance (read by :mod:`moesim.cost.hvx`)."""
    out = ["# HVX packet model: executed packets of the native Hexagon kernels (native_ref/hexagon)",
           "# as a linear function of shape features; packets = sum(coefficients * features).",
           "# Written by validation/fit_hvx.py (moesim.calibrate.hvx.write_packet_model); do not edit.",
           f"# fitted: least squares of relative residuals on the split=fit rows of {source}",
           *(f"# {n}" for n in notes), f'source = "{source}"', ""]
    for kernel, f in fits.items():
        names = ", ".join(f'"{n}"' for n in FEATURES[kernel][0])
        out += [f"[kernels.{kernel}]", f"features = [{names}]",
                f"coefficients = [{', '.join(repr(round(c, 6)) for c in f.coefficients)}]",
                f"fit_max_rel_error = {f.fit_max_rel_error:.6f}",
                f"heldout_max_rel_error = {f.heldout_max_rel_error:.6f}", ""]
    write_text_atomic("\n".join(out), path)
