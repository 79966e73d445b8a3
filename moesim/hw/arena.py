"""The arena: B fixed-address banks with the state machine free -> filling -> ready -> in use -> free.

A bank is only filled when free, only executed when ready (completely filled), and only
freed after the completion fence of the last compute that reads it. Violations are bugs
in a workload, so they are asserts; every state interval is recorded as a span on the
bank's own track (``bank0``, ``bank1``, ...), which the property tests read back.
"""

from __future__ import annotations

from enum import Enum

import simpy

from moesim.engine import Sim
from moesim.hw.checks import at_least_one

__all__ = ["BankState", "BankPool"]


class BankState(str, Enum):
    FREE = "free"
    FILLING = "filling"
    READY = "ready"
    IN_USE = "in_use"


class BankPool:
    def __init__(self, sim: Sim, banks: int, bank_bytes: int) -> None:
        self.sim = sim
        self.banks = at_least_one("banks", banks)
        self.bank_bytes = bank_bytes
        self._free: simpy.Store = simpy.Store(sim.env)
        for bank in range(banks):
            self._free.put(bank)
        self.state = [BankState.FREE] * banks
        self._since = [0] * banks
        self._holds: list[tuple[int, int]] = [(-1, -1)] * banks

    def _move(self, bank: int, new: BankState, *allowed: BankState) -> None:
        old = self.state[bank]
        assert old in allowed, f"bank {bank}: {old.value} -> {new.value} not allowed"
        if old is not BankState.FREE:
            layer, group = self._holds[bank]
            self.sim.recorder.span(self._since[bank], self.sim.now, f"bank{bank}", old.value, layer, group)
        self.state[bank] = new
        self._since[bank] = self.sim.now

    def acquire(self) -> simpy.events.Event:
        """An event that yields the id of a free bank (first freed, first reused)."""
        return self._free.get()

    def unreserve(self, bank: int) -> None:
        """Give back a bank taken with :meth:`acquire` but never filled."""
        assert self.state[bank] is BankState.FREE, f"bank {bank} is {self.state[bank].value}"
        self._free.put(bank)

    def fill(self, bank: int, layer: int, group: int) -> None:
        self._holds[bank] = (layer, group)
        self._move(bank, BankState.FILLING, BankState.FREE)

    def filled(self, bank: int) -> None:
        self._move(bank, BankState.READY, BankState.FILLING)

    def use(self, bank: int) -> None:
        self._move(bank, BankState.IN_USE, BankState.READY)

    def release(self, bank: int) -> None:
        """Completion fence passed (or the group turned out inactive): the bank is free."""
        self._move(bank, BankState.FREE, BankState.IN_USE, BankState.READY)
        self._holds[bank] = (-1, -1)
        self._free.put(bank)
