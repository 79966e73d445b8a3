"""One simulation: a SimPy environment on an integer-nanosecond clock, a seeded RNG, a recorder.

Durations become clock steps with :func:`moesim.units.ns` (rounded half up).

No module-level state: two Sims run side by side in one process. Ties between events at
the same instant resolve in SimPy's order, first scheduled first; processes are always
started in the same order, so the same inputs and seed give the same timeline.
"""

from __future__ import annotations

import numpy as np
import simpy

from moesim.engine.recorder import Recorder

__all__ = ["Sim"]


class Sim:
    """Owns the environment (``env.now`` is integer ns), the RNG and the recorder."""

    def __init__(self, seed: int = 0) -> None:
        self.env = simpy.Environment(initial_time=0)
        self.rng = np.random.default_rng(seed)
        self.recorder = Recorder()
        self.seed = seed

    @property
    def now(self) -> int:
        return int(self.env.now)

    def run(self) -> int:
        """Run to completion; return the number of events processed."""
        events = 0
        env = self.env
        while True:
            try:
                env.step()
            except simpy.core.EmptySchedule:
                return events
            events += 1
