"""Drivers of the native reference implementations in ``native_ref/`` (measurement side).

:mod:`moesim.native.cpu` builds and runs the CPU reference: Q4_0 expert-FFN kernels, the
pipelined streaming executor and the micro-benchmarks (docs/native-cpu.md). Nothing in
the simulator imports this package; calibration uses it to produce measurements.
"""

from __future__ import annotations
