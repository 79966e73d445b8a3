"""Progress on stderr: nothing when stderr is not a terminal (or with --quiet), phases shown only
inside an open spinner or bar, and the decode progress callback counts every token."""

from __future__ import annotations

import io

import pytest

from moesim import progress
from moesim.config.decode import DecodeRun
from moesim.progress import activity, phase, track
from moesim.simulate.decode import simulate_decode


def test_phase_outside_any_progress_does_nothing() -> None:
    phase("nobody is listening")                    # no error, no output, nothing kept
    assert progress._PHASE.get() is None


def test_activity_hidden_yields_a_no_op_update() -> None:
    with activity("work", show=False) as update:
        assert progress._PHASE.get() is None
        update(3, 10)


def test_drawn_activity_takes_phases_and_counts_then_cleans_up(monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    with activity("work", show=True) as update:
        assert progress._PHASE.get() is not None
        phase("step one")
        update(1, 4)
        update(4, 4)
    assert progress._PHASE.get() is None


def test_track_passes_items_through_and_restores_the_phase() -> None:
    assert list(track([1, 2, 3], "items", show=False)) == [1, 2, 3]
    assert list(track(iter([1, 2]), "items", show=True)) == [1, 2]
    assert progress._PHASE.get() is None


def test_decode_progress_reaches_every_token() -> None:
    seen: list[tuple[int, int]] = []
    run = DecodeRun(tokens=40, warmup_tokens=8)
    result = simulate_decode(run, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (48, 48) and all(total == 48 for _, total in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    plain = simulate_decode(run)                     # watching does not change the simulation
    assert result.metrics.tokens_per_s == plain.metrics.tokens_per_s and result.spans.equals(plain.spans)


@pytest.mark.parametrize("args", [
    ["prefill", "--tokens", "64", "--quiet"],
    ["decode", "--tokens", "16", "--quiet"],
])
def test_commands_print_no_progress_when_not_a_terminal(run_cli, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    res = run_cli(*args)
    assert res.code == 0 and res.err == ""
    plain = run_cli(*args[:-1])                      # stderr is not a terminal here: no bar either
    assert plain.code == 0 and plain.err == "" and plain.out == res.out
