"""The package version, in the lowest layer so that every layer can stamp results with it."""

__version__ = "0.1.0"
