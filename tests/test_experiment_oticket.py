"""The OTICKET reproduction runs end to end at quick scale and is deterministic, and its fig2
and fig4 checks (the issue's quick-scale criterion: PVM collapses, OTICKET stays ahead and scales,
PVM's halt exits soar while OTICKET's stay flat) hold at that scale.

`fig2.pvm_collapse_point_30_to_40` is left out: since 2026-11-27 it tests the paper's words
("completely collapses at 40 vCPUs"), and the model's PVM collapses one count later, between 40
and 60 (`docs/mechanisms/oticket.md`). The other checks' verdicts are results, reported in the HTML
page and the issue notes.
"""

import json

from vspin.reproduce import reproduce

MUST_HOLD_AT_QUICK = {"fig2.pvm_collapses", "fig2.oticket_at_least_pvm_past_collapse",
                      "fig2.oticket_scales_to_80", "fig4.pvm_halts_soar", "fig4.oticket_halts_flat"}


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
