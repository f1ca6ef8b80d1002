"""The LAS reproduction runs end to end at quick scale and is deterministic.

Its verdicts are results, reported in the HTML page and the issue notes, not asserted here.
"""

import json

from vspin.reproduce import reproduce
from vspin.sweeps import T_975, mean_ci95


def test_las_quick_report_is_complete_and_deterministic(tmp_path):
    first = reproduce("las", "quick", tmp_path / "a", workers=2)["las"]
    again = reproduce("las", "quick", tmp_path / "b", workers=1)["las"]
    assert first == again
    assert [f["id"] for f in first["figures"]] == ["kernbench", "kernbench_2_tasks", "waits", "sysbench"]
    assert len(first["checks"]) == 5
    assert all(c["detail"] for c in first["checks"])
    written = json.loads((tmp_path / "a" / "las" / "results.json").read_text())
    assert written["scale"] == "quick" and written["experiment"] == "las"


def test_a_gain_interval_widens_with_the_spread_of_the_seeds():
    mean, half = mean_ci95([1.0, 1.0, 1.0])
    assert (mean, half) == (1.0, 0.0)
    mean, half = mean_ci95([0.9, 1.1, 1.3])
    assert abs(mean - 1.1) < 1e-12
    assert abs(half - T_975[1] * 0.2 / 3 ** 0.5) < 1e-9
