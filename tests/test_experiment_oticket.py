"""The OTICKET reproduction runs end to end at quick scale and is deterministic; the sleepy
spinlock anomaly's core trends (PVM collapses at high vCPU counts, its halt exits soar while
OTICKET's do not) hold at that scale.

Checks the model does not meet yet (the collapse point, EXIM, over-commit) are reported in the
HTML page and the issue notes, not asserted here.
"""

import json

from vspin.reproduce import reproduce

MUST_HOLD_AT_QUICK = {"fig2.pvm_collapses", "fig2.oticket_at_least_pvm_past_collapse", "fig2.oticket_scales_to_80",
                      "fig4.pvm_halts_soar", "fig4.oticket_halts_flat", "fig7.metis_all_equal"}


def test_oticket_quick_report_is_complete_and_deterministic(tmp_path):
    first = reproduce("oticket", "quick", tmp_path / "a", workers=2)["oticket"]
    again = reproduce("oticket", "quick", tmp_path / "b", workers=1)["oticket"]
    assert first == again
    ids = [f["id"] for f in first["figures"]]
    for fig in ("fig2", "fig4", "fig6", "fig7a", "fig7b", "fig8", "fig9", "fig10a", "fig11a"):
        assert fig in ids
    verdicts = {c["id"]: c for c in first["checks"]}
    for check in MUST_HOLD_AT_QUICK:
        assert verdicts[check]["passed"], verdicts[check]["detail"]
    written = json.loads((tmp_path / "a" / "oticket" / "results.json").read_text())
    assert written["scale"] == "quick" and written["experiment"] == "oticket"
    for fig in first["figures"]:
        assert (tmp_path / "a" / "oticket" / f"{fig['id']}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
