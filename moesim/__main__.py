"""``python -m moesim`` runs the command line."""

from moesim.cli import entry_point

entry_point()
