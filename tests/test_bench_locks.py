import json
import os
import sys

import pytest

import vspin.sweeps
from vspin.cli import main


def test_bench_locks_writes_a_plausible_report(tmp_path, capsys):
    out = tmp_path / "locks.json"
    args = ["bench-locks", "--locks", "oticket,parking_lot", "--threads", "1,2", "--seconds", "0.05", "--warmup", "0.01",
            "--json", str(out), "--plot", str(tmp_path / "locks.png")]
    assert main(args) == 0
    report = json.loads(out.read_text())
    assert report["machine"]["cores"] >= 1
    assert report["config"]["warmup_s"] == 0.01 and report["config"]["pin"] == "none" and report["ns_per_iteration"] > 0
    assert 0 <= report["loop_cv"] < 1, "the busy loops vary by a share of their length"
    assert report["other_work_cores"] is None or report["other_work_cores"] >= 0
    assert report["vspin"]["engine"] == vspin.sweeps.engine(), "which build measured"
    rows = report["results"]
    assert [(r["lock"], r["threads"]) for r in rows] == [
        ("oticket", 1), ("oticket", 2), ("parking_lot", 1), ("parking_lot", 2)]
    for r in rows:
        assert set(r) == {"lock", "threads", "ops_per_sec", "fairness_max_min", "p99_acquire_ns", "cpu_time_max_min",
                          "acquisitions_per_cpu_s_max_min", "cpu_busy", "thread_acquisitions", "thread_cpu_ns"}
        assert len(r["thread_acquisitions"]) == r["threads"]
        assert r["ops_per_sec"] > 0
        assert r["fairness_max_min"] is None or r["fairness_max_min"] >= 1
        if sys.platform == "linux":  # each thread's CPU clock is read there
            assert 0 < r["cpu_busy"] <= 1.01 and len(r["thread_cpu_ns"]) == r["threads"]
            if r["threads"] == 1:
                assert r["cpu_time_max_min"] == r["acquisitions_per_cpu_s_max_min"] == 1.0
    assert set(report["uncontended_ns"]) == {"oticket", "parking_lot"}
    assert all(0 < ns < 10_000 for ns in report["uncontended_ns"].values())
    assert (tmp_path / "locks.png").stat().st_size > 0
    assert "oticket" in capsys.readouterr().out


def test_a_busy_machine_is_warned_of_and_an_idle_one_is_not():
    from vspin.bench_locks import busy_machine_warning

    report = {"machine": {"cores": 2}, "other_work_cores": 1.4}
    assert "other work kept 1.4 of its 2 CPUs busy" in busy_machine_warning(report)
    assert busy_machine_warning({**report, "other_work_cores": 0.1}) is None
    assert busy_machine_warning({"machine": {"cores": 2}}) is None, "a report from before it was recorded"


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="reads Linux's /proc/stat")
def test_other_work_is_seen_while_it_runs():
    import multiprocessing

    from vspin.bench_locks import other_work_cores

    stop = multiprocessing.Event()
    spinner = multiprocessing.Process(target=_spin_until, args=(stop,))
    spinner.start()
    try:
        busy = other_work_cores(0.3)
    finally:
        stop.set()
        spinner.join()
    assert busy is not None and busy >= 0.5, f"a process spinning on one core: {busy}"


def _spin_until(stop) -> None:
    while not stop.is_set():
        pass


def test_bench_locks_without_json_prints_the_table_alone(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["bench-locks", "--locks", "tas", "--threads", "1", "--seconds", "0.02", "--warmup", "0"]) == 0
    captured = capsys.readouterr()
    assert "tas" in captured.out and "report:" not in captured.err
    assert list(tmp_path.iterdir()) == []


def test_bench_locks_rejects_bad_options_naming_them(tmp_path, capsys):
    out = str(tmp_path / "x.json")
    assert main(["bench-locks", "--locks", "nope", "--json", out]) == 2
    err = capsys.readouterr().err
    assert "--locks" in err and "nope" in err and "parking_lot" in err and "Traceback" not in err
    assert main(["bench-locks", "--threads", "0,2", "--json", out]) == 2
    assert "--threads" in capsys.readouterr().err
    assert main(["bench-locks", "--seconds", "-1", "--json", out]) == 2
    assert "--seconds" in capsys.readouterr().err
    assert main(["bench-locks", "--seconds", "inf", "--json", out]) == 2
    assert "--seconds" in capsys.readouterr().err
    assert main(["bench-locks", "--seconds", "1e9", "--json", out]) == 2
    assert "--seconds: must be a number in [0.001, 3600]" in capsys.readouterr().err
    assert main(["bench-locks", "--seconds", "1e-300", "--json", out]) == 2
    assert "--seconds: must be a number in [0.001, 3600]" in capsys.readouterr().err
    assert main(["bench-locks", "--threads", "2,100000", "--json", out]) == 2
    assert "--threads: every count must be 1..=4096" in capsys.readouterr().err
    assert main(["bench-locks", "--cs-ns", str(2**64), "--json", out]) == 2
    err = capsys.readouterr().err
    assert "--cs-ns" in err and "Traceback" not in err
    assert main(["bench-locks", "--warmup", "-1", "--json", out]) == 2
    assert "--warmup" in capsys.readouterr().err
    assert main(["bench-locks", "--pin", "1:1", "--json", out]) == 2
    err = capsys.readouterr().err
    assert "--pin" in err and "none, round-robin" in err
    # Checked while parsing, before any thread runs.
    for args, message in ((["--threads", "2,2"], "2 given twice"), (["--threads", "1,,2"], "comma-separated integers"),
                          (["--json", "/proc/vspin-bench-locks.json"], "cannot be written")):
        with pytest.raises(SystemExit) as exit_:
            main(["bench-locks", "--json", out, *args])
        assert exit_.value.code == 2 and message in capsys.readouterr().err
    assert not os.path.exists(out)


def test_bench_locks_runs_under_a_cpu_quota_where_the_machine_allows_one(tmp_path, capsys):
    import pytest

    from vspin.bench_locks import BenchConfigError, bench_locks

    try:
        report = bench_locks([2], seconds=0.3, locks=["tas"], cpu_max=(50_000, 100_000))
    except BenchConfigError as e:
        pytest.skip(f"no CPU-quota cgroup here: {e}")
    assert report["machine"]["cpu_max"] == {"quota_us": 50_000, "period_us": 100_000}
    # Half a CPU for two busy threads: the group is throttled in most periods.
    stats = report["cgroup"]
    assert stats["cgroup_version"] in (1, 2) and 0 < stats["nr_throttled"] <= stats["nr_periods"]


def test_bench_locks_rejects_a_bad_cpu_quota(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit) as exit_:
        main(["bench-locks", "--cpu-max", "500", "--json", str(tmp_path / "x.json")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--cpu-max" in err and "below the kernel's least" in err
