"""Hardware components as small SimPy resources and processes, one per file."""

from moesim.hw.arena import BankPool, BankState
from moesim.hw.compute import ComputeUnit
from moesim.hw.ufs import UFS, FlashQueue, page_fault

__all__ = ["UFS", "FlashQueue", "page_fault", "BankPool", "BankState", "ComputeUnit"]
