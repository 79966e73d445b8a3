"""Re-run a saved result from the configuration it carries (``moesim rerun RESULT.json``).

A result's ``config.run`` is the validated run configuration, overrides included; the
profile is rebuilt from ``config.run.device`` and must hash to ``config.profile_hash``, and the
routing this machine resolves must be the one the result names (``config.trace``). Anything
else would silently produce a different run, so it is refused with a one-line error.
"""

from __future__ import annotations

from typing import Any

from moesim.config.loading import validate_data
from moesim.config.profiles import profile_hash
from moesim.errors import InputError
from moesim.results import HOST_CLOCK_FIELDS, DecodeResult, PrefillResult, SpecDecodeResult, flatten_metrics
from moesim.simulate import WORKLOADS

__all__ = ["rerun", "differences"]


def _config(saved: Any, source: str) -> dict[str, Any]:
    config = saved.get("config") if isinstance(saved, dict) else None
    if not isinstance(config, dict) or not isinstance(config.get("run"), dict):
        raise InputError("config.run", "is required: save the result with --json (moesim prefill/specdecode)",
                         show_value=False, source=source)
    if config.get("workload") not in WORKLOADS:
        names = list(WORKLOADS)
        raise InputError("config.workload", f"must be {', '.join(names[:-1])} or {names[-1]}", config.get("workload"),
                         source=source)
    if not isinstance(config.get("profile_hash"), str):
        raise InputError("config.profile_hash", "is required", show_value=False, source=source)
    return config


def rerun(saved: dict[str, Any], source: str = "result") -> PrefillResult | SpecDecodeResult | DecodeResult:
    """Simulate again the run that produced ``saved`` (the JSON of a ``--json`` result)."""
    config = _config(saved, source)
    workload = WORKLOADS[config["workload"]]
    run = validate_data(workload.run_type, config["run"], source=source)
    _check_profile(profile_hash(workload.profile(run.device, run.overrides)), config, source)
    result = workload.simulate(run)
    now = result.metrics.config.trace
    if now != config.get("trace"):
        raise InputError("config.trace", f"must be the routing this machine resolves for the run; it resolves "
                         f"{now.get('source')} (synthetic: {now.get('synthetic')})",
                         (config.get("trace") or {}).get("source"), source=source)
    return result


def _check_profile(rebuilt: str, config: dict[str, Any], source: str) -> None:
    if rebuilt != config["profile_hash"]:
        raise InputError("config.profile_hash", f"must match the profile rebuilt from device "
                         f"{config['run'].get('device')!r} and the result's overrides ({rebuilt}): the profile "
                         "has changed since the result was saved", config["profile_hash"], source=source)


def differences(saved: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Dotted keys whose values differ, the host-clock fields aside."""
    a, b = flatten_metrics(saved), flatten_metrics(new)
    return sorted(k for k in a.keys() | b.keys() if k not in HOST_CLOCK_FIELDS and a.get(k) != b.get(k))
