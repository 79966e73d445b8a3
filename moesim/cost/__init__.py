"""Pure cost functions (no SimPy): operator times, transfer times, lower bounds."""
