"""`vspin validate-locks`: the benchmark and its host-mode prediction side by side.

Timing is not asserted (the machine may be shared); the structure of the report is, and that
every point has a measurement and a prediction.
"""

import json
import math
import os
import sys

import pytest

from vspin import validate
from vspin.cli import main
from vspin.validate_locks import (
    ValidationError, criteria, host_config, host_cost_drift, host_scenario, kernel_scheduler, loop_jitter,
    median_spread,
)


def m(v):
    return {"median": v, "min": v, "max": v, "repeats": 1}


def costs(deep_idle_after_ns=200_000.0):
    """A cost table in the shape `vspin_bench::host_costs` reports."""
    return {
        "cpus": 2, "clock_ghz": m(2.5), "l1_hit_ns": m(1.5), "atomic_ns": m(2.25), "spin_iteration_ns": m(25.5), "transfer_ns": m(40.0),
        "context_switch_ns": m(1600.0), "futex_wake_ns": m(2000.0), "deep_idle_after_ns": deep_idle_after_ns,
        "wake_to_run_ns": [{"idle_us": 20, "ns": m(6000.0)}, {"idle_us": 2000, "ns": m(20000.0)}],
        "interruptions": {"per_s": m(500.0), "mean_ns": m(10_000.0)},
        "preemptions": {"per_s": m(20.0), "mean_ns": m(120_000.0)},
    }


def test_host_mode_maps_each_measured_cost_to_its_key():
    host = host_config(costs(), hz=250)
    c = host["costs"]
    assert c["pause_cycles"] == pytest.approx((25.5 - 1.5) * 2.5)
    assert (c["l1_hit_ns"], c["transfer_same_socket_ns"], c["context_switch_ns"]) == (1.5, 40.0, 1600.0)
    assert c["atomic_extra_ns"] == 0.75, "a locked instruction less the load it also is"
    assert (c["vm_exit_ns"], c["vm_entry_ns"], c["ipi_send_ns"]) == (0.0, 0.0, 0.0)
    assert c["hypercall_ns"] == 2000.0, "a kick costs the kicker its FUTEX_WAKE"
    assert c["wakeup_ns"] == 6000.0 - 1600.0, "the switch-in adds the context switch"
    assert host["idle_states"] == [{"exit_ns": 14000.0, "residency_ns": 200_000.0}]
    assert host["background"] == {"interval_us": 50_000.0, "burst_us": 120.0}, "other tasks: 20 a second of 120 µs"
    assert host["interruptions"] == {"interval_us": 2_000.0, "burst_us": 10.0}, "500 a second of 10 µs"
    assert host_config(costs(deep_idle_after_ns=None), hz=250)["idle_states"] == []
    scenario = host_scenario(host, "pv-qspinlock", 5, 0.5, 100, 200, scheduler="eevdf")
    validate(scenario)
    vm = scenario["vm"][0]
    assert vm["pin"] == "none", "the benchmark's threads are not pinned unless it is asked to pin them"
    assert vm["vcpus"] == 5 and scenario["duration_ms"] == 500.0
    pinned = host_scenario(host, "pv-qspinlock", 5, 0.5, 100, 200, scheduler="eevdf", pin="round-robin")
    validate(pinned)
    assert pinned["vm"][0]["pin"] == [0, 1, 0, 1, 0]
    assert vm["workload"]["durations"] == "fixed" and vm["workload"]["locks"] == 1
    assert vm["workload"]["jitter"] == 0.0, "without a measured jitter the loops are exact"
    jittery = host_scenario(host, "pv-qspinlock", 5, 0.5, 100, 200, loop_cv=0.05)
    validate(jittery)
    # Critical section and think time each vary by the same share, so that their sum varies by 5%.
    assert jittery["vm"][0]["workload"]["jitter"] == pytest.approx(0.05 * 300 / math.hypot(100, 200))
    assert loop_jitter(0.9, 100, 200) == 0.5, "capped where the simulator's uniform lengths stay positive"
    assert scenario["hypervisor"] == {"scheduler": "eevdf", "ple": {"policy": "off"}, "directed_yield": "off"}


def test_host_mode_takes_the_background_estimate_only_for_cost_tables_without_measured_gaps():
    old = costs()
    del old["interruptions"], old["preemptions"]
    host = host_config(old, hz=250)
    assert host["background"] == {"interval_us": 10_000, "burst_us": 50} and "interruptions" not in host
    quiet = costs()
    quiet["preemptions"] = {"per_s": m(0.0), "mean_ns": m(0.0)}
    host = host_config(quiet, hz=250)
    assert "background" not in host, "no task ever ran beside the watchers: no background threads"
    validate(host_scenario(host, "ticket", 3, 0.1, 100, 200))


def test_host_mode_rejects_unusable_cost_tables_naming_the_field():
    bad = costs()
    bad["spin_iteration_ns"]["median"] = 1.0
    with pytest.raises(ValidationError, match="spin_iteration_ns"):
        host_config(bad, hz=250)
    bad = costs()
    del bad["transfer_ns"]
    with pytest.raises(ValidationError, match="transfer_ns"):
        host_config(bad, hz=250)
    bad = costs()
    bad["wake_to_run_ns"] = []
    with pytest.raises(ValidationError, match="wake_to_run_ns"):
        host_config(bad, hz=250)
    bad = costs()
    bad["interruptions"] = {"per_s": m(500.0)}
    with pytest.raises(ValidationError, match="interruptions.mean_ns"):
        host_config(bad, hz=250)
    bad = costs()
    bad["preemptions"]["per_s"] = m(-1.0)
    with pytest.raises(ValidationError, match="preemptions"):
        host_config(bad, hz=250)


def test_a_cost_that_moved_during_the_benchmark_is_flagged():
    before, after = costs(), costs()
    after["transfer_ns"] = m(190.0)
    after["context_switch_ns"] = m(1900.0)
    assert host_cost_drift(before, after) == [{"cost": "transfer_ns", "before": 40.0, "after": 190.0}], \
        "a 4.75x move is flagged, a 1.19x one is noise"
    assert host_cost_drift(before, costs()) == []


def test_host_mode_schedules_with_eevdf_from_linux_6_6_and_delays_dequeues_from_6_12():
    releases = ("3.19.0", "6.5.13-generic", "6.6.0", "6.11.9", "6.12.0", "6.18.2-arch1")
    assert [kernel_scheduler(r) for r in releases] == ["cfs", "cfs", "eevdf", "eevdf", "eevdf-6.18", "eevdf-6.18"]
    with pytest.raises(ValidationError, match="--host-scheduler"):
        kernel_scheduler("weird")


def test_criteria_count_swapped_and_tied_pairs_and_judge_them_against_the_noise():
    def row(lock, threads, measured_runs, predicted):
        return {"lock": lock, "threads": threads, "measured_runs": measured_runs,
                "measured_ops_per_sec": sorted(measured_runs)[1], "predicted_ops_per_sec": predicted}
    report = {"machine": {"cores": 2}, "config": {"threads": [2, 8], "repeat": 3}, "rows": [
        row("tas", 2, [90, 100, 110], 100), row("ticket", 2, [95, 105, 108], 100),  # tied, inside noise
        row("tas", 8, [50, 60, 70], 10), row("ticket", 8, [1, 2, 3], 20),  # swapped, outside noise
        row("qspinlock", 8, [0, 0, 0], 5),
    ]}
    c = criteria(report)
    at2, at8 = c["ordering"]
    assert (at2["tied"], at2["swapped"], at2["same_order"], at2["holds_outside_noise"]) == (1, 0, False, True)
    assert (at8["swapped"], at8["holds_outside_noise"]) == (1, False)
    assert at8["measured_order"] == ["tas", "ticket", "qspinlock"]
    assert c["ordering_holds_outside_noise"] is False
    [k] = c["ticket_collapse"]
    assert (k["threads"], k["measured"], k["predicted"], k["within_2x"]) == (8, 52.5, 5.0, False)
    report["rows"][3]["measured_runs"], report["rows"][3]["measured_ops_per_sec"] = [0, 0, 0], 0
    assert criteria(report)["ticket_collapse"][0]["measured"] is None


def test_a_median_latency_leaves_out_points_without_acquisitions():
    from vspin.validate_locks import _median_known

    assert _median_known([300, None, 100, 200]) == 200
    assert _median_known([[512, 1024], [0, 1], [512, 1024], None]) == [512, 1024]
    assert _median_known([None, None]) is None


def test_the_median_fairness_spread_counts_a_thread_without_acquisitions_as_the_widest():
    assert median_spread([1.2, 1.5, 1.1]) == 1.2
    assert median_spread([1.2, None, 1.1, 1.4]) == pytest.approx(1.3)
    assert median_spread([1.2, None, None]) is None
    assert median_spread([]) is None


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the host costs need two CPUs")
def test_validate_locks_reports_measured_and_predicted_side_by_side(tmp_path, capsys, monkeypatch):
    out = tmp_path / "validation.json"
    args = ["validate-locks", "--locks", "ticket,tas", "--threads", "1,2,4", "--seconds", "0.02", "--warmup", "0.01",
            "--repeat", "2", "--seeds", "3", "--workers", "1", "--json", str(out)]
    with monkeypatch.context() as terminal:
        terminal.setattr(sys.stderr, "isatty", lambda: True)
        assert main(args) == 0
    captured = capsys.readouterr()
    steps = [line for line in captured.err.splitlines() if line.startswith("validate-locks: ")]
    assert steps[:4] == ["validate-locks: measuring this machine's costs",
                         "validate-locks: benchmark run 1/2: 2 locks at 3 thread counts, about 0 s",
                         "validate-locks: benchmark run 2/2: 2 locks at 3 thread counts, about 0 s",
                         "validate-locks: measuring this machine's costs again"], "a long run says what it is doing"
    report = json.loads(out.read_text())
    assert [(r["lock"], r["threads"]) for r in report["rows"]] == [
        ("ticket", 1), ("ticket", 2), ("ticket", 4), ("tas", 1), ("tas", 2), ("tas", 4)]
    for r in report["rows"]:
        assert len(r["measured_runs"]) == 2 and len(r["predicted_runs"]) == 3, "seeds are not measurement repeats"
        assert r["measured_ops_per_sec"] > 0 and r["predicted_ops_per_sec"] > 0
        assert len(r["measured_fairness_runs"]) == 2 and len(r["predicted_fairness_runs"]) == 3
        assert len(r["measured_p99_runs"]) == 2 and len(r["predicted_p99_runs"]) == 3
        assert len(r["measured_cpu_time_runs"]) == len(r["measured_busy_runs"]) == 2
        assert len(r["predicted_cpu_time_runs"]) == len(r["predicted_per_cpu_s_runs"]) == 3
        assert 0 < r["predicted_busy"] <= 1, "threads cannot use more than the pCPUs"
        if r["threads"] == 1:
            assert r["measured_fairness"] == r["predicted_fairness"] == 1.0, "one thread is its own spread"
            assert r["predicted_p99_bucket_ns"] == [0, 1], "a lone thread never waits for its lock"
            assert r["predicted_cpu_time_spread"] == r["predicted_per_cpu_s_spread"] == 1.0
            if sys.platform == "linux":
                assert r["measured_cpu_time_spread"] == r["measured_per_cpu_s_spread"] == 1.0
    assert report["host"]["costs"]["vm_exit_ns"] == 0.0
    assert report["config"]["warmup_s"] == 0.01 and len(report["bench_ns_per_iteration"]) == 2
    assert len(report["bench_loop_cv"]) == 2
    assert report["config"]["host_scheduler"] == kernel_scheduler() and report["config"]["pin"] == "none"
    assert report["host_costs"]["cpus"] == report["machine"]["cores"]
    criteria = report["criteria"]
    assert [o["threads"] for o in criteria["ordering"]] == [1, 2, 4]
    assert all(o["pairs"] == 1 for o in criteria["ordering"])
    if report["machine"]["cores"] == 2:
        assert [c["threads"] for c in criteria["ticket_collapse"]] == [4]
    printed = captured.out
    assert "predicted ops/s" in printed and "order at 4 threads" in printed and "p99 pred" in printed and "jitter (CV)" in printed
    assert "where the fairness spread comes from" in printed

    # The cost table of that report predicts again without measuring the host.
    again = tmp_path / "again.json"
    assert main(args[:-1] + [str(again), "--costs", str(out)]) == 0
    assert json.loads(again.read_text())["host_costs"] == report["host_costs"]

    # Its measurements are predicted again, as they were, without running the benchmark.
    same = tmp_path / "same.json"
    assert main(["validate-locks", "--measured", str(out), "--workers", "1", "--json", str(same)]) == 0
    repeated = json.loads(same.read_text())
    assert repeated["rows"] == report["rows"] and repeated["criteria"] == report["criteria"]

    # A report from before `seeds` was predicted with one seed per measured run, and is again.
    old = {**report, "config": {k: v for k, v in report["config"].items() if k not in ("seeds", "pin")}}
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert main(["validate-locks", "--measured", str(tmp_path / "old.json"), "--workers", "1", "--json", str(same)]) == 0
    again = json.loads(same.read_text())
    assert again["config"]["seeds"] == 2 and again["config"]["pin"] == "none"
    assert [r["predicted_runs"] for r in again["rows"]] == [r["predicted_runs"][:2] for r in report["rows"]]


def test_validate_locks_rejects_bad_options_naming_them(tmp_path, capsys, docs):
    out = str(tmp_path / "x.json")
    assert main(["validate-locks", "--locks", "std", "--json", out]) == 2
    err = capsys.readouterr().err
    assert "--locks" in err and "no simulator model" in err and "pv-qspinlock" in err and "Traceback" not in err
    assert main(["validate-locks", "--cs-ns", "0", "--json", out]) == 2
    assert "--cs-ns" in capsys.readouterr().err
    assert main(["validate-locks", "--host-hz", "5", "--json", out]) == 2
    assert "--host-hz" in capsys.readouterr().err
    assert main(["validate-locks", "--host-scheduler", "bfs", "--json", out]) == 2
    err = capsys.readouterr().err
    assert "--host-scheduler" in err and "cfs, eevdf" in err
    assert main(["validate-locks", "--warmup", "-1", "--json", out]) == 2
    assert "--warmup" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["validate-locks", "--seeds", "0", "--json", out])
    assert exit_.value.code == 2 and "--seeds" in capsys.readouterr().err
    assert main(["validate-locks", "--pin", "1:1", "--json", out]) == 2
    err = capsys.readouterr().err
    assert "--pin" in err and "none, round-robin" in err
    assert main(["validate-locks", "--costs", str(tmp_path / "missing.json"), "--json", out]) == 2
    assert "--costs" in capsys.readouterr().err
    assert main(["validate-locks", "--measured", str(tmp_path / "missing.json"), "--json", out]) == 2
    assert "--measured" in capsys.readouterr().err
    (tmp_path / "report.json").write_text('{"config": {}}')
    assert main(["validate-locks", "--measured", str(tmp_path / "report.json"), "--json", out]) == 2
    assert "not a validate-locks report" in capsys.readouterr().err
    assert main(["validate-locks", "--measured", str(tmp_path / "report.json"), "--threads", "1,2", "--json", out]) == 2
    assert "--threads: fixed by the report" in capsys.readouterr().err
    stored = json.loads((docs / "validation-report-latency.json").read_text())
    (tmp_path / "jitter.json").write_text(json.dumps({**stored, "bench_loop_cv": ["5%"]}))
    assert main(["validate-locks", "--measured", str(tmp_path / "jitter.json"), "--json", out]) == 2
    assert "bench_loop_cv" in capsys.readouterr().err
    (tmp_path / "list.json").write_text("[1, 2]")
    assert main(["validate-locks", "--costs", str(tmp_path / "list.json"), "--json", out]) == 2
    assert "--costs" in capsys.readouterr().err
    # Options the prediction cannot take fail before the host is measured, not after the benchmark.
    assert main(["validate-locks", "--threads", "1,512", "--json", out]) == 2
    err = capsys.readouterr().err
    assert "--threads" in err and "1..=256" in err
    assert main(["validate-locks", "--seconds", "inf", "--json", out]) == 2
    assert "--seconds: inf is out of range; allowed 0.001..=3600" in capsys.readouterr().err
    assert main(["validate-locks", "--warmup", "3000", "--seconds", "601", "--json", out]) == 2
    assert "--warmup and --seconds: 3000 + 601 s is out of range" in capsys.readouterr().err
    # A report missing what re-predicting needs is named, not a traceback.
    (tmp_path / "partial.json").write_text(json.dumps({**stored, "config": {k: v for k, v in stored["config"].items()
                                                                              if k != "cs_ns"}}))
    assert main(["validate-locks", "--measured", str(tmp_path / "partial.json"), "--json", out]) == 2
    err = capsys.readouterr().err
    assert "config lacks cs_ns" in err and "Traceback" not in err
    for key, value, message in (("cs_ns", "a", "config.cs_ns: 'a' is not a number; allowed 1..=1e+09"),
                                ("seconds", 0, "config.seconds: 0 is out of range; allowed 0.001..=3600"),
                                ("host_hz", 1e9, "config.host_hz: 1000000000.0 is out of range; allowed 10..=10000"),
                                ("threads", [2, 0], "config.threads [2, 0] is not a non-empty list of positive integers")):
        (tmp_path / "typed.json").write_text(json.dumps({**stored, "config": {**stored["config"], key: value}}))
        assert main(["validate-locks", "--measured", str(tmp_path / "typed.json"), "--json", out]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
    (tmp_path / "empty.json").write_text(json.dumps({**stored, "rows": [{**stored["rows"][0], "measured_runs": []}]}))
    assert main(["validate-locks", "--measured", str(tmp_path / "empty.json"), "--json", out]) == 2
    assert "measured_runs" in capsys.readouterr().err
    for rows, message in (([], "rows is empty"),
                          ([{**stored["rows"][0], "measured_runs": [float("inf")]}], "not a non-empty list of finite numbers >= 0"),
                          ([stored["rows"][0], stored["rows"][0]], "appears twice"),
                          ([{**stored["rows"][0], "threads": 3}], "the thread count is not one of config.threads")):
        (tmp_path / "rows.json").write_text(json.dumps({**stored, "rows": rows}))
        assert main(["validate-locks", "--measured", str(tmp_path / "rows.json"), "--json", out]) == 2
        assert message in capsys.readouterr().err
    (tmp_path / "other.json").write_text(json.dumps({**stored, "rows": [{**stored["rows"][0], "lock": "nope"}]}))
    assert main(["validate-locks", "--measured", str(tmp_path / "other.json"), "--json", out]) == 2
    assert "--measured: rows ('nope'" in capsys.readouterr().err
    # A benchmark report is not a cost table; the error names the option.
    (tmp_path / "bench.json").write_text(json.dumps({"machine": {"cores": 2}, "results": []}))
    assert main(["validate-locks", "--costs", str(tmp_path / "bench.json"), "--locks", "tas", "--threads", "2",
                 "--json", out]) == 2
    assert "--costs: not a usable cost table" in capsys.readouterr().err
    # Re-predicting a report into itself would replace what it measured.
    assert main(["validate-locks", "--measured", str(tmp_path / "jitter.json"), "--json",
                 str(tmp_path / "jitter.json")]) == 2
    assert "--measured and --json: both name" in capsys.readouterr().err
    assert not os.path.exists(out)


def test_predicting_a_report_again_keeps_everything_it_measured(tmp_path, docs):
    stored = json.loads((docs / "validation-report-padded.json").read_text())
    one = [r for r in stored["rows"] if r["threads"] == 1][:1]
    report = {**stored, "rows": one, "config": {**stored["config"], "threads": [1], "seeds": 1}}
    (tmp_path / "one.json").write_text(json.dumps(report))
    out = tmp_path / "again.json"
    assert main(["validate-locks", "--measured", str(tmp_path / "one.json"), "--workers", "1", "--json", str(out)]) == 0
    again = json.loads(out.read_text())
    for key in ("host_costs_replaced", "host_costs_replaced_note", "machine", "bench_loop_cv", "load_average_before"):
        assert again[key] == stored[key], key
