"""Results of both workloads: typed, frozen metrics that carry their whole configuration.

A result says how it was produced: ``metrics.config`` holds the model, the device name, every
profile override, the profile hash, the seed, the provenance of the routing, every resolved
option and the run configuration itself (``config.run``), built by :func:`run_config` for both
workloads; ``moesim rerun RESULT.json`` re-runs a saved result from that alone. The JSON of
``--json`` is ``metrics.model_dump(mode="json")``; ``to_pandas()`` is one flat row.
"""

from __future__ import annotations

from moesim.results.config import (
    DecodeConfig,
    PredictorChoice,
    PredictorUse,
    PrefillConfig,
    RunConfig,
    SpecDecodeConfig,
    run_config,
    saved_run,
)
from moesim.results.frames import (
    HOST_CLOCK_FIELDS,
    DecodeResult,
    JSONValue,
    PrefillResult,
    SpecDecodeResult,
    chrome_trace,
    flatten_metrics,
)
from moesim.results.metrics import DecodeMetrics, PrefillMetrics, SpecDecodeMetrics

__all__ = ["RunConfig", "PrefillConfig", "SpecDecodeConfig", "DecodeConfig", "PrefillMetrics",
           "SpecDecodeMetrics", "DecodeMetrics", "PrefillResult", "SpecDecodeResult", "DecodeResult",
           "HOST_CLOCK_FIELDS", "run_config", "saved_run", "flatten_metrics", "chrome_trace", "PredictorChoice",
           "PredictorUse", "JSONValue"]

