"""Policies decide (pure functions, no SimPy); workloads act."""
