"""Re-run a saved result from the configuration it carries (``moesim rerun RESULT.json``).

A result's ``config.run`` is the validated run configuration, overrides included; the
profile is rebuilt from ``config.run.device`` and must hash to ``config.profile_hash``, and the
routing this machine resolves must be the one the result names (``config.trace``). Anything
else would silently produce a different run, so it is refused with a one-line error.
"""

from __future__ import annotations

from collections.abc import Mapping

from moesim.config.loading import validate_data
from moesim.config.profiles import profile_hash
from moesim.errors import InputError, format_value
from moesim.results import HOST_CLOCK_FIELDS, DecodeResult, PrefillResult, SpecDecodeResult, flatten_metrics
from moesim.simulate import WORKLOADS

__all__ = ["rerun", "differences", "describe_differences"]


def _config(saved: object, source: str) -> tuple[dict[str, object], dict[str, object]]:
    """The saved result's ``config`` and ``config.run``, checked for what a re-run reads."""
    if not isinstance(saved, dict):
        kind = {list: "an array", str: "a string", bool: "true or false", type(None): "null"}.get(type(saved),
                                                                                                  "a number")
        raise InputError("RESULT.json", f"must be a JSON object (the --json output of moesim prefill, decode or "
                         f"specdecode), not {kind}", show_value=False, source=source)
    config = saved.get("config")
    run = config.get("run") if isinstance(config, dict) else None
    if not isinstance(config, dict) or not isinstance(run, dict):
        raise InputError("config.run", "is required: save the result with --json (moesim prefill/specdecode)",
                         show_value=False, source=source)
    if config.get("workload") not in WORKLOADS:
        names = list(WORKLOADS)
        raise InputError("config.workload", f"must be {', '.join(names[:-1])} or {names[-1]}", config.get("workload"),
                         source=source)
    if not isinstance(config.get("profile_hash"), str):
        raise InputError("config.profile_hash", "is required", show_value=False, source=source)
    return config, run


def rerun(saved: object, source: str = "result") -> PrefillResult | SpecDecodeResult | DecodeResult:
    """Simulate again the run that produced ``saved`` (the JSON of a ``--json`` result)."""
    config, data = _config(saved, source)
    workload = WORKLOADS[str(config["workload"])]
    run = validate_data(workload.run_type, data, source=source)
    _check_profile(profile_hash(workload.profile(run.device, run.overrides)), config, data.get("device"), source)
    result = workload.simulate(run)
    now = result.metrics.config.trace
    saved_trace = config.get("trace")
    resolved = now.model_dump(mode="json")
    if resolved != saved_trace:
        raise InputError(*_trace_difference(resolved, saved_trace), show_value=False, source=source)
    return result


def _trace_difference(resolved: dict[str, object], saved: object) -> tuple[str, str]:
    """(field, rule) naming the first key of the routing that differs, with both values."""
    if not isinstance(saved, dict):
        return "config.trace", f"must be the routing this machine resolves for the run ({resolved['source']}), got " \
                               f"{format_value(saved)}"
    now, then = flatten_metrics(resolved), flatten_metrics(saved)
    key = next(k for k in sorted(now.keys() | then.keys()) if now.get(k) != then.get(k))
    return ("config.trace", f"must be the routing this machine resolves for the run: its {key} is "
            f"{format_value(now.get(key), 120)} here, {format_value(then.get(key), 120)} in the result (its run or the "
            "trace changed since it was saved)")


def _check_profile(rebuilt: str, config: dict[str, object], device: object, source: str) -> None:
    if rebuilt != config["profile_hash"]:
        raise InputError("config.profile_hash", f"must match the profile rebuilt from device "
                         f"{device!r} and the result's overrides ({rebuilt}): the profile "
                         "has changed since the result was saved", config["profile_hash"], source=source)


#: dotted JSON keys renamed in this release (one word per meaning), old -> new, by prefix: a result
#: saved before them still re-runs (its run data is upgraded by the run models, with a deprecation line)
RENAMED_KEYS = {"peak_memory_gib": "peak_memory_GiB", "peak_memory_gib_interval": "peak_memory_GiB_interval",
                "memory_gib": "memory_GiB",
                "config.memory_budget_gib": "config.memory_budget_GiB", "config.cache_gib": "config.cache_GiB",
                "config.spec": "config.selector", "config.run.spec": "config.run.selector"}
#: ... and the decode workload's own
RENAMED_DECODE_KEYS = {"bubble_share": "bubble_share_total"}


def _renamed(key: str, workload: object) -> str:
    table = {**RENAMED_KEYS, **(RENAMED_DECODE_KEYS if workload == "decode" else {})}
    for old, new in table.items():
        if key == old or key.startswith(old + "."):
            return new + key[len(old):]
    return key


def differences(saved: Mapping[str, object], new: Mapping[str, object]) -> list[str]:
    """Dotted keys whose values differ, the host-clock fields aside (a key or value saved under
    its old name, :data:`RENAMED_KEYS`, compares as the new one)."""
    config = saved.get("config")
    workload = config.get("workload") if isinstance(config, dict) else None
    a = {_renamed(k, workload): v for k, v in flatten_metrics(saved).items()}
    for key in ("config.predictor.kind", "config.run.predictor.kind"):   # decode's 'trace' predictor is 'learned'
        if workload == "decode" and a.get(key) == "trace":
            a[key] = "learned"
    b = flatten_metrics(new)
    return sorted(k for k in a.keys() | b.keys() if k not in HOST_CLOCK_FIELDS and a.get(k) != b.get(k))


def describe_differences(saved: Mapping[str, object], new: Mapping[str, object], limit: int = 5) -> str:
    """What :func:`differences` found, with both values: ``ttft_s (123.0 in the result, 0.2637 on
    the re-run)``, the first ``limit`` keys and how many more ('' when nothing differs).

    >>> describe_differences({"ttft_s": 123.0, "sim": {"wall_s": 1.0}}, {"ttft_s": 0.2637, "sim": {"wall_s": 2.0}})
    'ttft_s (123.0 in the result, 0.2637 on the re-run)'
    """
    keys = differences(saved, new)
    config = saved.get("config")
    workload = config.get("workload") if isinstance(config, dict) else None
    a = {_renamed(k, workload): v for k, v in flatten_metrics(saved).items()}
    b = flatten_metrics(new)

    def shown(table: Mapping[str, object], key: str) -> str:
        return format_value(table[key], 60) if key in table else "absent"

    parts = [f"{k} ({shown(a, k)} in the result, {shown(b, k)} on the re-run)" for k in keys[:limit]]
    more = f" and {len(keys) - limit} more" if len(keys) > limit else ""
    return ", ".join(parts) + more
