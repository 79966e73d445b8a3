"""The base of every pydantic data model in moesim: unknown fields rejected, instances immutable.

:mod:`moesim.config` is the lowest layer that uses pydantic, so the one base lives here and
the layers above (traces, results, sweep) import it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Frozen"]


class Frozen(BaseModel):
    """A pydantic model that forbids unknown fields (a typo is an error) and cannot be changed."""

    model_config = ConfigDict(extra="forbid", frozen=True)
