"""The Xen credit1 yield reproduction runs end to end at quick scale and is deterministic.

Its verdicts are results, reported in the HTML page and the issue notes, not asserted here.
"""

import json

from vspin.reproduce import reproduce


def test_xen_yield_quick_report_is_complete_and_deterministic(tmp_path):
    first = reproduce("xen-yield", "quick", tmp_path / "a", workers=2)["xen-yield"]
    again = reproduce("xen-yield", "quick", tmp_path / "b", workers=1)["xen-yield"]
    assert first == again
    assert [f["id"] for f in first["figures"]] == ["table.ple-on", "spin.ple-on", "table.ple-off", "spin.ple-off"]
    assert len(first["checks"]) == 12
    assert all(c["detail"] for c in first["checks"])
    written = json.loads((tmp_path / "a" / "xen-yield" / "results.json").read_text())
    assert written["scale"] == "quick" and written["experiment"] == "xen-yield"
    for fig in first["figures"]:
        assert (tmp_path / "a" / "xen-yield" / f"{fig['id']}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
