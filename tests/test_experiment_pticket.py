"""The preemptable-ticket reproduction runs end to end at quick scale and is deterministic.

Its verdicts are results, reported in the HTML page and the issue notes, not asserted here.
"""

import json

from vspin.reproduce import reproduce


def test_pticket_quick_report_is_complete_and_deterministic(tmp_path):
    first = reproduce("pticket", "quick", tmp_path / "a", workers=2)["pticket"]
    again = reproduce("pticket", "quick", tmp_path / "b", workers=1)["pticket"]
    assert first == again
    assert [f["id"] for f in first["figures"]] == ["table2", "hackbench", "dvdstore", "waits", "ebizzy", "t_sensitivity", "summary"]
    assert len(first["checks"]) == 18
    assert all(c["detail"] for c in first["checks"])
    written = json.loads((tmp_path / "a" / "pticket" / "results.json").read_text())
    assert written["scale"] == "quick" and written["experiment"] == "pticket"
    for fig in first["figures"]:
        assert (tmp_path / "a" / "pticket" / f"{fig['id']}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_wilson_interval_is_wide_for_few_events_and_narrow_for_many():
    from vspin.experiments.pticket import wilson_interval

    lo, hi = wilson_interval(3, 4)
    assert lo < 0.5 < hi, "3 of 4 cannot show a majority"
    lo, hi = wilson_interval(372, 638)
    assert 0.54 < lo < 0.55 and 0.62 < hi < 0.63
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(0, 12)
    assert lo == 0.0 and 0.24 < hi < 0.25


def test_variance_ratio_interval_separates_only_clearly_different_spreads():
    from vspin.experiments.pticket import cv_ratio_interval

    steady = [100.0 + (i % 5) for i in range(50)]
    erratic = [100.0 + 40 * (i % 5) for i in range(50)]
    ratio, lo, hi = cv_ratio_interval(steady, erratic)
    assert hi < 1 and lo <= ratio <= hi
    ratio, lo, hi = cv_ratio_interval(erratic, list(reversed(erratic)))
    assert ratio == 1 and lo < 1 < hi, "equal spreads are undecided"
    assert cv_ratio_interval(steady, erratic) == cv_ratio_interval(steady, erratic), "a fixed bootstrap stream"


def test_the_bootstrap_interval_of_a_ratio_brackets_it_and_widens_with_spread():
    from vspin.experiments.pticket import bootstrap_interval

    def ratio(s):
        return sum(s["a"]) / len(s["a"]) / (sum(s["b"]) / len(s["b"]))

    steady = bootstrap_interval({"a": [200.0, 202.0, 198.0], "b": [100.0, 101.0, 99.0]}, ratio)
    erratic = bootstrap_interval({"a": [20.0, 400.0, 180.0], "b": [100.0, 101.0, 99.0]}, ratio)
    assert steady[1] <= steady[0] <= steady[2] and steady[2] - steady[1] < 0.1
    assert erratic[0] == 2.0 and erratic[1] < 1.0 and erratic[2] > 3.0
    assert bootstrap_interval({"a": [1.0, 2.0], "b": [3.0, 4.0]}, ratio) == \
        bootstrap_interval({"a": [1.0, 2.0], "b": [3.0, 4.0]}, ratio), "a fixed bootstrap stream"
