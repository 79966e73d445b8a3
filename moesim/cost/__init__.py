"""Pure cost functions (no SimPy): operator times, transfer times, lower bounds.

Public here (used in the docs): the HVX packet model (:mod:`moesim.cost.hvx`) and the
verification cost of a speculative-decoding step.
"""

from moesim.cost import hvx
from moesim.cost.verify import VerifyParams, ar_time, forward_bytes, forward_time, verify_params

__all__ = ["hvx", "VerifyParams", "verify_params", "forward_time", "forward_bytes", "ar_time"]
