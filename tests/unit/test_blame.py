"""A refusal of a value the user typed names the option they typed (issue 23, item 3)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(("args", "start"), [
    (["prefill", "--memory-budget-gib", "0.1"], "moesim: error: --memory-budget-gib must be >= 0.656 GiB"),
    (["autoconfig", "--memory-budget-gib", "0.1"], "moesim: error: --memory-budget-gib must be >= 0.656 GiB"),
    (["prefill", "--banks", "100000"], "moesim: error: --banks needs 329.590 GiB of arena"),
    (["prefill", "--group-size=1000"], "moesim: error: --group-size needs 6.592 GiB of arena"),
    (["decode", "--model", "olmoe-1b-7b", "--tokens", "4", "--cache-gib", "100"],
     "moesim: error: --cache-gib must be <= 3.375 GiB"),
])
def test_refusal_names_the_option_typed(run_cli, args: list[str], start: str) -> None:  # type: ignore[no-untyped-def]
    res = run_cli(*args)
    assert res.code == 2 and res.err.startswith(start) and len(res.err.splitlines()) == 1, res.err


def test_a_field_the_user_did_not_type_keeps_its_name(run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The profile's arena limit is named as the profile's field, not as an option."""
    res = run_cli("prefill", "--set", "arena.max_mapped_GiB=0.001")
    assert res.code == 2 and "--memory-budget-gib" not in res.err and "arena.max_mapped_GiB" in res.err, res.err
