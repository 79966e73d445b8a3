"""The 90% intervals (issue 25, hypothesis 7): split-conformal bands per regime, sized on anchors
scored by predictions that did not see them (moesim.cost.uncertainty, moesim.validate.intervals)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from moesim.config.profiles import phone_profile
from moesim.cost.uncertainty import band_interval_s, conformal_band, log_error, regime_of
from moesim.validate.intervals import (
    IntervalAnchor,
    Scored,
    Timed,
    bands,
    group_scores,
    interval_anchors,
    leave_one_group_out,
)


def test_conformal_rank_is_ceil_n_plus_one_times_coverage() -> None:
    # n = 9: k = ceil(10 x 0.9) = 9, the largest; n = 19: k = 18; n = 29: k = 27
    for n, k in ((9, 9), (19, 18), (29, 27), (99, 90)):
        scores = [i / 1000 for i in range(1, n + 1)]
        band = conformal_band(scores)
        assert (band.rank, band.scores) == (k, n)
        assert band.ratio == pytest.approx(math.exp(k / 1000))
        assert band.guaranteed >= 0.9


def test_too_few_scores_take_the_largest_and_say_what_it_guarantees() -> None:
    band = conformal_band([0.3, 0.1, 0.2])
    assert band.ratio == pytest.approx(math.exp(0.3)) and band.rank == 3
    assert band.guaranteed == pytest.approx(3 / 4)


def test_band_covers_ninety_percent_of_new_exchangeable_scores() -> None:
    """The guarantee, checked: over many draws of 19 calibration scores and one new score from
    the same distribution, the new one lies under the band at least 90% of the time (an off-by-one
    rank, the 17th of 19, gives 85%)."""
    rng = np.random.default_rng(7)
    draws = np.abs(rng.normal(size=(20000, 20)))
    inside = [d[19] <= math.log(conformal_band(list(d[:19])).ratio) for d in draws]
    assert 0.89 <= float(np.mean(inside)) <= 0.92


def test_conformal_band_refuses_what_it_cannot_size() -> None:
    with pytest.raises(ValueError, match="at least one score"):
        conformal_band([])
    with pytest.raises(ValueError, match="scores must be >= 0"):
        conformal_band([0.1, -0.2])
    with pytest.raises(ValueError, match="coverage must be in"):
        conformal_band([0.1], coverage=1.0)


def test_log_error_is_symmetric_and_refuses_non_positive_times() -> None:
    assert log_error(3.0, 1.5) == pytest.approx(log_error(1.5, 3.0)) == pytest.approx(math.log(2))
    with pytest.raises(ValueError, match="must be > 0"):
        log_error(0.0, 1.0)


def test_interval_takes_the_band_of_the_busier_resource() -> None:
    assert regime_of(1.0, 0.99) == "compute" and regime_of(0.99, 1.0) == "ufs"
    assert band_interval_s(2.0, 1.0, 0.99, 1.25, 2.0) == pytest.approx((1.6, 2.5))
    assert band_interval_s(2.0, 0.99, 1.0, 1.25, 2.0) == pytest.approx((1.0, 4.0))
    with pytest.raises(ValueError, match="band ratios must be >= 1"):
        band_interval_s(1.0, 1.0, 0.0, 0.9, 1.0)


def _scored(name: str, group: str, score: float, io: float = 0.0, why_not: str = "") -> Scored:
    """An anchor measured at 1 s, predicted exp(score) s, with ``io`` of UFS busy time per second."""
    t = math.exp(score)
    timed = Timed(t, t * (1 - io), t * io)
    anchor = IntervalAnchor(name, group, 1.0, "test", lambda p: timed, why_not=why_not)
    return Scored(anchor, timed, timed, "not in any fit", score)


def test_a_group_scores_as_its_worst_member_and_reported_anchors_do_not_count() -> None:
    scored = (_scored("a1", "a", 0.05), _scored("a2", "a", 0.2), _scored("b", "b", 0.1, io=0.9),
              _scored("c", "c", 3.0, why_not="another runtime"))
    scores = group_scores(scored)
    assert {g: regime for g, (regime, _) in scores.items()} == {"a": "compute", "b": "ufs"}
    assert {g: score for g, (_, score) in scores.items()} == pytest.approx({"a": 0.2, "b": 0.1})
    assert set(group_scores(scored, leave_out="a")) == {"b"}
    b = bands(scored)
    assert b["compute"].ratio == pytest.approx(math.exp(0.2)) and b["ufs"].ratio == pytest.approx(math.exp(0.1))


def test_leave_one_group_out_misses_the_group_worse_than_all_others() -> None:
    scored = tuple(_scored(f"g{i}", f"g{i}", s) for i, s in enumerate((0.1, 0.15, 0.12, 0.5)))
    assert leave_one_group_out(scored) == {"g0": True, "g1": True, "g2": True, "g3": False}
    # a group alone in its regime has no band once left out: counted as outside
    alone = (*scored, _scored("u", "u", 0.01, io=0.9))
    assert leave_one_group_out(alone)["u"] is False


def test_anchor_registry_groups_the_llamacpp_curve_and_reports_what_it_leaves_out() -> None:
    anchors = {a.name: a for a in interval_anchors()}
    curve = [a for a in anchors.values() if a.group.startswith("llama.cpp PR #23368")]
    assert len({a.group for a in curve}) == 1 and len(curve) == 11       # pp25 ... pp2048, one group
    assert [a.name for a in curve if a.why_not] == ["estream/anchor-llamacpp-qwen3-4b-pp25"]
    decode = [a for a in anchors.values() if a.name.startswith("decode/")]
    assert len(decode) == 6 and all(not a.why_not for a in decode)
    assert all(a.why_not for n, a in anchors.items() if n.startswith("interval/"))   # other builds: reported
    assert all(a.measured_s > 0 for a in anchors.values())
    profile = phone_profile("sd8-elite-gen5")
    pp200 = anchors["estream/anchor-llamacpp-qwen3-4b-pp200"]
    assert pp200.predict(profile).io_s == 0 and pp200.measured_s == pytest.approx(200 / 548.86)


@pytest.mark.slow
def test_profile_bands_are_the_ones_the_anchors_give_now() -> None:
    """The bands in the profile are what validation/interval_coverage.py computes from the
    current model (refits the NPU fit once per hard anchor). The decode anchors replay the real
    traces, so without them (a clone away from ../shared) the scores are not the profile's."""
    from moesim.traces import shared_traces_dir
    from moesim.validate.intervals import score_anchors

    if not shared_traces_dir().is_dir():
        pytest.skip(f"the bands were sized on the real traces; {shared_traces_dir()} not found")

    u = phone_profile("sd8-elite-gen5").uncertainty
    assert u is not None
    b = bands(score_anchors())
    assert u.compute_band_ratio == pytest.approx(b["compute"].ratio, abs=1e-4)
    assert u.ufs_band_ratio == pytest.approx(b["ufs"].ratio, abs=1e-4)
