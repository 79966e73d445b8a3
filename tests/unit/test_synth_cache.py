"""The on-disk cache of synthetic routing: a cached trace is identical to a generated one, a
damaged or foreign entry is regenerated, an unwritable cache folder only means no caching."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import moesim.traces.synth as synth
from moesim.config.catalog import load_model
from moesim.traces import RoutingTrace, TargetStats, synthesize
from moesim.traces.synth_cache import cache_root, fit_key

#: the cheapest fit (no coverage bisection): flame-moe-290m, 8 layers, k = 6 of 64
LIGHT = TargetStats(entropy=0.93, reuse=0.4, segment_tokens=100)


def _make(**kw: object) -> RoutingTrace:
    return synthesize("flame-moe-290m", 300, stats=LIGHT, seed=4, **kw)  # type: ignore[arg-type]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MOESIM_CACHE_DIR", str(tmp_path / "c"))
    return tmp_path / "c" / "synth"


@pytest.fixture(scope="module")
def uncached() -> RoutingTrace:
    return _make(cache=False)


@pytest.fixture(scope="module")
def primed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache folder holding the fit and the 300-token trace (made once for the module)."""
    root = tmp_path_factory.mktemp("primed")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MOESIM_CACHE_DIR", str(root))
        _make()
    yield root / "synth"


@pytest.fixture
def warm(cache: Path, primed: Path) -> Path:
    shutil.copytree(primed, cache)
    return cache


def _same(a: RoutingTrace, b: RoutingTrace) -> bool:
    return a.experts.dtype == b.experts.dtype and a.experts.tobytes() == b.experts.tobytes() and a.meta == b.meta


def _no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("the cache should have answered")

    monkeypatch.setattr(synth, "fit_params", fail)
    monkeypatch.setattr(synth, "generate", fail)


def test_cached_trace_is_identical_and_skips_the_work(warm: Path, primed: Path, uncached: RoutingTrace,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert sorted(p.name.split("-")[0] for p in primed.iterdir()) == ["fit", "trace"]
    _no_work(monkeypatch)
    assert _same(_make(), uncached)                      # the cold run that filled it: the primed fixture


def test_cached_fit_serves_a_new_token_count(warm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(synth, "fit_params", lambda *a, **k: pytest.fail("refitted"))
    longer = synthesize("flame-moe-290m", 450, stats=LIGHT, seed=4)
    monkeypatch.undo()
    assert _same(longer, synthesize("flame-moe-290m", 450, stats=LIGHT, seed=4, cache=False))


def _rewrite(path: Path, name: str, value: object) -> None:
    with np.load(path) as z:
        arrays = {n: z[n] for n in z.files}
    arrays[name] = value(arrays[name]) if callable(value) else np.asarray(value)
    with path.open("wb") as fh:
        np.savez(fh, **arrays)


#: (damage to the fit entry, damage to the trace entry)
DAMAGE = {
    "garbage": ("garbage", "empty"),
    "nan weights, truncated trace": ("nan", "truncated"),
    "foreign key, ids out of range": ("foreign", "range"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_damaged_entries_are_regenerated(warm: Path, uncached: RoutingTrace, damage: str) -> None:
    for path in warm.iterdir():
        how = DAMAGE[damage][path.name.startswith("trace")]
        data = path.read_bytes()
        if how == "garbage":
            path.write_bytes(b"not a zip file at all")
        elif how == "empty":
            path.write_bytes(b"")
        elif how == "truncated":
            path.write_bytes(data[: len(data) // 2])
        elif how == "nan":
            _rewrite(path, "logw", lambda a: np.full_like(a, np.nan))
        elif how == "foreign":
            _rewrite(path, "key", "someone else's entry")
        else:
            _rewrite(path, "experts", lambda a: a + np.int16(100))
    assert _same(_make(), uncached)
    assert _same(_make(), uncached)                      # and the regenerated entries are good


def test_unwritable_cache_folder_is_not_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 uncached: RoutingTrace) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("MOESIM_CACHE_DIR", str(blocker / "cache"))
    assert _same(_make(), uncached)
    assert blocker.read_text().startswith("a file")


def test_key_hashes_the_model_parameters_not_its_name() -> None:
    spec = load_model("flame-moe-290m")
    base = spec.model_dump(mode="json")
    other = {**base, "moe": {**base["moe"], "top_k": base["moe"]["top_k"] + 1}}
    stats = LIGHT.model_dump(mode="json")
    key = fit_key(synth.GENERATOR, base, stats, 4)
    assert key == fit_key(synth.GENERATOR, base, stats, 4)
    assert len({key, fit_key(synth.GENERATOR, other, stats, 4), fit_key(synth.GENERATOR, base, stats, 5),
                fit_key(synth.GENERATOR, base, None, 4), fit_key("moesim.traces.synth_gen v0", base, stats, 4)}) == 5


def test_cache_folder_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MOESIM_CACHE_DIR", str(tmp_path / "own"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "own"
    monkeypatch.delenv("MOESIM_CACHE_DIR")
    assert cache_root() == tmp_path / "xdg" / "moesim"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "moesim"
