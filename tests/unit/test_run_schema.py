"""One schema, every surface (issue 38, item 2): every field of every run model is a flat parameter
(:mod:`moesim.config.schema`), settable from its command's options, from a sweep grid file, and
carried through ``moesim rerun``; :func:`flatten` and :func:`unflatten` are each other's inverse.

Each parameter gets a value other than its default, suggested by its type (a Literal's next
choice, the other switch, a number inside its range) or, where a type cannot suggest one (a model,
a trace), by :data:`GIVEN`; the settings a value needs to be read (a policy option needs its
policy, a draft option needs a selector) come from the parameter's kinds and from the workload's
own rule of unread options (the registry's ``ignored_option``), so a field added to a run model is
walked here with no edit.
"""

from __future__ import annotations

import importlib
import json
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from moesim.cli import COMMANDS
from moesim.cli.run_options import option_flag
from moesim.config.loading import validate_data
from moesim.config.schema import OVERRIDES, Param, flatten, params, surface_params, unflatten
from moesim.simulate import WORKLOADS
from moesim.sweep import load_grid
from moesim.sweep.run_point import build_run
from moesim.traces import bundled_trace_path

TRACE = str(bundled_trace_path())          # olmoe-1b-7b's bundled trace: the same routing on every machine
#: the small runs each parameter is set on
BASE: dict[str, dict[str, Any]] = {
    "prefill": {"model": "olmoe-1b-7b", "tokens": 32, "trace": TRACE},
    "decode": {"model": "olmoe-1b-7b", "tokens": 4, "trace": TRACE},
    "specdecode": {"model": "olmoe-1b-7b", "passes": 1, "trace": TRACE},
}
#: values a parameter's type cannot suggest, by (workload or "*", parameter)
GIVEN: dict[tuple[str, str], Any] = {
    ("*", "model"): "deepseek-v2-lite", ("*", "trace"): TRACE, ("*", "temperature"): 1.0, ("*", "routing"): "nearby",
    ("prefill", "device"): "sd8-elite", ("decode", "device"): "sd8-elite", ("specdecode", "device"): "h100x8-hf",
    ("prefill", "tokens"): 48, ("decode", "tokens"): 6, ("prefill", "memory_budget_GiB"): 4.0,
    ("decode", "predictor"): "oracle", ("specdecode", "predictor"): "oracle",
    ("specdecode", "passes"): 2, ("specdecode", "requests"): "synthetic-1",
}
#: settings a value needs beyond its kind and the unread-option rule (None: drop the base's)
NEEDS: dict[tuple[str, str], dict[str, Any]] = {
    ("*", "model"): {"trace": None},
    ("specdecode", "drafter"): {"model": "deepseek-v3.1", "trace": None},
    ("decode", "predictor_fraction"): {"predictor": "accuracy"},      # every predictor kind has the field
}
#: settings that make a run read an option its defaults leave unread, tried in this order
READERS: list[dict[str, Any]] = [{}, {"selector": "confidence"}, {"selector": "ecospec"}, {"cache_policy": "pinned"},
                                 {"read_group_size": 2}]
#: parameters a run can be given but not simulated with, and why
UNRUNNABLE = {("decode", "routing_layer_share"): "decode refuses the alternative routing when it runs"}


def _bounds(annotation: Any) -> dict[str, float]:
    """The ge/gt/le/lt bounds in an annotation (through Annotated, unions and FieldInfo)."""
    found: dict[str, float] = {}
    stack = [annotation]
    while stack:
        item = stack.pop()
        if isinstance(item, FieldInfo):
            stack.extend(item.metadata)
        for op in ("ge", "gt", "le", "lt"):
            if isinstance(getattr(item, op, None), (int, float)):
                found[op] = getattr(item, op)
        stack.extend(typing.get_args(item))
    return found


def _leaves(annotation: Any) -> list[Any]:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _leaves(args[0])
    if origin in (typing.Union, type(int | None)):
        return [leaf for a in args for leaf in _leaves(a)]
    return [] if annotation is type(None) else [annotation]


def _number(param: Param, leaves: list[Any]) -> float:
    b, d = _bounds(param.annotation), param.default
    if int in leaves and float not in leaves:
        lower = b.get("ge", b.get("gt", 0) + 1)
        return int(min(d + 1 if isinstance(d, int) else lower + 1, b.get("le", 2**31)))
    value = d * 0.5 if d else 0.5
    return value if b.get("ge", -1e9) <= value <= b.get("le", 1e9) and value > b.get("gt", -1e9) else 0.25


def value_for(workload: str, param: Param) -> Any:
    """A value of ``param`` other than its default."""
    for key in ((workload, param.name), ("*", param.name)):
        if key in GIVEN:
            return GIVEN[key]
    leaves = _leaves(param.annotation)
    choices = [v for leaf in leaves if typing.get_origin(leaf) is typing.Literal for v in typing.get_args(leaf)]
    if choices:
        return next(c for c in choices if c != param.default)
    if bool in leaves:
        return not param.default
    if int in leaves or float in leaves:
        return _number(param, leaves)
    raise AssertionError(f"{workload}.{param.name}: add a value to GIVEN (its type suggests none)")


def settings_for(workload: str, param: Param) -> dict[str, Any]:
    """The flat settings of a small run with ``param`` set to :func:`value_for` and read."""
    schema = params(WORKLOADS[workload].run_type)
    settings = {**BASE[workload], **NEEDS.get(("*", param.name), {}), **NEEDS.get((workload, param.name), {}),
                param.name: value_for(workload, param)}
    if param.kinds is not None and schema[param.field].default not in param.kinds:
        settings.setdefault(param.field, sorted(param.kinds)[0])        # a variant's field: a variant that has it
    rule = WORKLOADS[workload].ignored_option
    if rule is not None:
        extra = next(r for r in READERS if param.name not in r and rule(param.name, {**settings, **r}) is None)
        settings = {**settings, **extra}
    return {k: v for k, v in settings.items() if v is not None}


CASES = [(w, name) for w, entry in WORKLOADS.items() for name in surface_params(entry.run_type)]
IDS = [f"{w}-{name}" for w, name in CASES]


def _param(workload: str, name: str) -> Param:
    return params(WORKLOADS[workload].run_type)[name]


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models in an annotation: a section's variants (walked here, not by the schema)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _models(a)]


def _fields(model: type[BaseModel]) -> set[tuple[str, ...]]:
    """Every leaf of a run model: its plain fields, and each section's kind and every variant's fields."""
    out: set[tuple[str, ...]] = set()
    for name, info in model.model_fields.items():
        variants = _models(info.annotation)
        out |= {(name,)} if not variants else {(name, key) for v in variants for key in v.model_fields}
    return out - {(OVERRIDES,)}


@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_every_field_of_every_run_model_is_a_parameter(workload: str) -> None:
    run_type = WORKLOADS[workload].run_type
    flat = {(p.field,) if p.key is None else (p.field, p.key) for p in params(run_type).values()}
    assert flat == _fields(run_type)
    derived = [p.name for p in params(run_type).values() if p.derived]
    assert derived == (["draft_source"] if workload == "specdecode" else [])


class _Built(Exception):
    """Raised by the stand-in simulator with the run the command built."""


def _argv(settings: dict[str, Any]) -> list[str]:
    argv: list[str] = []
    for name, value in settings.items():
        flag = option_flag(name)
        if name == "page_cache":                               # moesim prefill spells it --warm
            argv += ["--warm"] if value == "warm" else []
        elif isinstance(value, bool):
            argv.append(flag if value else f"--no-{flag[2:]}")
        else:
            argv += [flag, str(value)]
    return argv


def _cli_run(workload: str, settings: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> BaseModel:
    """The run the workload's command builds from ``settings`` (its simulator stood in for)."""
    module = importlib.import_module(f"moesim.cli.{COMMANDS[workload][0]}")
    built: list[BaseModel] = []

    def stand_in(run: BaseModel, **_: Any) -> None:
        built.append(run)
        raise _Built

    monkeypatch.setattr(module, f"simulate_{workload}", stand_in)
    with pytest.raises(_Built):
        getattr(module, COMMANDS[workload][1]).main(_argv(settings), standalone_mode=False)
    return built[0]


@pytest.mark.parametrize(("workload", "name"), CASES, ids=IDS)
def test_every_parameter_is_settable_from_the_command_line(workload: str, name: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    settings = settings_for(workload, _param(workload, name))
    run = _cli_run(workload, settings, monkeypatch)
    assert flatten(run)[name] == settings[name]


@pytest.mark.parametrize(("workload", "name"), CASES, ids=IDS)
def test_every_parameter_is_settable_from_a_grid(workload: str, name: str, tmp_path: Path) -> None:
    settings = settings_for(workload, _param(workload, name))
    lines = [f"workload = {json.dumps(workload)}", *(f"{k} = {json.dumps(v)}" for k, v in settings.items())]
    (tmp_path / "grid.toml").write_text("[fixed]\n" + "\n".join(lines) + "\n")
    grid = load_grid(tmp_path / "grid.toml")
    assert not [note for note in grid.ignored_options() if note.startswith(name + " ")]
    run = build_run(workload, grid.points[0].params, {})
    assert flatten(run)[name] == settings[name]


@pytest.mark.parametrize(("workload", "name"), CASES, ids=IDS)
def test_every_parameter_round_trips_through_rerun(workload: str, name: str, tmp_path: Path, run_cli: Any) -> None:
    if (workload, name) in UNRUNNABLE:
        pytest.skip(UNRUNNABLE[workload, name])
    settings = settings_for(workload, _param(workload, name))
    first = run_cli(workload, *_argv(settings), "--json")
    assert first.code == 0, first.err
    saved = json.loads(first.out)
    (tmp_path / "result.json").write_text(first.out)
    again = run_cli("rerun", str(tmp_path / "result.json"), "--json")
    assert again.code == 0, again.err
    assert json.loads(again.out)["config"]["run"] == saved["config"]["run"]
    run = validate_data(WORKLOADS[workload].run_type, saved["config"]["run"])
    assert flatten(run)[name] == settings[name]


@pytest.mark.parametrize(("workload", "name"), CASES, ids=IDS)
def test_flatten_and_unflatten_are_inverse(workload: str, name: str) -> None:
    """A run with any one parameter set is the run its flat parameters make again, its derived
    fields (the draft's source) included."""
    run_type = WORKLOADS[workload].run_type
    settings = settings_for(workload, _param(workload, name))
    run = validate_data(run_type, unflatten(run_type, {**settings, "ufs.peak_read_bw_GBps": 3.0}))
    assert validate_data(run_type, unflatten(run_type, flatten(run))) == run
    assert flatten(run)["ufs.peak_read_bw_GBps"] == 3.0


def test_a_variant_field_applies_to_the_kinds_that_have_it() -> None:
    from moesim.config.specdecode import SpecDecodeRun
    from moesim.errors import InputError

    with pytest.raises(InputError, match="--routing-window applies to routing mixture, nearby, not request"):
        unflatten(SpecDecodeRun, {"routing": "request", "routing_window": 4})
    with pytest.raises(InputError, match="--routing-window is given twice: routing nearby:8 sets it to 8"):
        unflatten(SpecDecodeRun, {"routing": "nearby:8", "routing_window": 4})
    with pytest.raises(InputError, match="--predictor-folds applies to predictor learned, and no predictor is given"):
        unflatten(SpecDecodeRun, {"predictor_folds": 3})
    assert unflatten(SpecDecodeRun, {"routing": "request", "routing_window": 4}, strict=False) == {
        "routing": {"kind": "request"}}
    assert unflatten(SpecDecodeRun, {"predictor": "accuracy", "predictor_fraction": 0.9}) == {
        "predictor": {"kind": "accuracy", "fraction": 0.9}}
