"""The APPLES reproduction runs end to end at quick scale and is deterministic.

Its verdicts are results, reported in the HTML page and the issue notes, not asserted here.
"""

import json

from vspin.experiments.apples import CONFIGS, TRACED_SEED, binned_trace, scenario
from vspin.reproduce import reproduce
from vspin import validate


def test_apples_quick_report_is_complete_and_deterministic(tmp_path):
    first = reproduce("apples", "quick", tmp_path / "a", workers=2)["apples"]
    again = reproduce("apples", "quick", tmp_path / "b", workers=1)["apples"]
    assert first == again
    assert [f["id"] for f in first["figures"]] == ["fig6", "fig6.inefficiency", "fig11-12", "fig11", "fig12", "fig1", "fig10", "fig8",
                                                  "fig9", "fig13", "fig14", "fig5", "overhead"]
    assert len(first["checks"]) == 27
    assert all(c["detail"] for c in first["checks"])
    written = json.loads((tmp_path / "a" / "apples" / "results.json").read_text())
    assert written["scale"] == "quick" and written["experiment"] == "apples"


def test_every_configuration_is_a_valid_scenario_with_the_seeds_host():
    for ple, directed_yield in [*CONFIGS.values(), (16384, "kvm"), ("aple", "hvs-cch")]:
        sc = scenario("ebizzy", ple, directed_yield, 2, 10, 1)
        validate(sc)
        assert sc["hypervisor"]["directed_yield"] == directed_yield
        assert [vm["vcpus"] for vm in sc["vm"]] == [16, 16] and sc["host"]["cores_per_socket"] * sc["host"]["sockets"] == 16


def test_only_the_two_traced_runs_record_their_ple_epochs():
    assert scenario("ebizzy", "kvm", "kvm", 2, 10, TRACED_SEED)["record"] == {"ple_epochs": True}
    assert scenario("ebizzy", "aple", "kvm", 2, 10, TRACED_SEED)["record"] == {"ple_epochs": True}
    assert "record" not in scenario("ebizzy", "kvm", "kvm", 2, 10, TRACED_SEED + 1)
    assert "record" not in scenario("ebizzy", 4096, "kvm", 2, 10, TRACED_SEED)
    assert "record" not in scenario("dbench", "kvm", "kvm", 2, 10, TRACED_SEED)


def test_a_trace_is_binned_into_whole_bins_at_each_bins_last_epoch():
    epochs = [{"window_cycles": w} for w in (4096, 8192, 6144, 6144, 9999)]
    assert binned_trace(epochs, 2) == ([2, 4], [6144.0, 6144.0])
    assert binned_trace(epochs[:1], 2) == ([], [])
