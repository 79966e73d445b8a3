"""SimPy layer with no domain words: the Sim object, the span recorder."""

from moesim.engine.recorder import Recorder, Span
from moesim.engine.sim import Sim

__all__ = ["Sim", "Recorder", "Span"]
