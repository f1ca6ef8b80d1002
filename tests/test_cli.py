import json
import os
import re
import subprocess
import sys

import pytest

from vspin.cli import main


def test_run_prints_a_summary(examples, capsys):
    assert main(["run", str(examples / "overcommit-2x.toml"), "--duration-ms", "20"]) == 0
    out = capsys.readouterr().out
    assert "overcommit-2x" in out and "lwp events" in out


def test_run_json_is_complete_and_deterministic(examples, capsys):
    args = ["run", str(examples / "ple-on-vs-off.toml"), "--duration-ms", "20", "--json"]
    main(args)
    first = capsys.readouterr().out
    main(args)
    assert capsys.readouterr().out == first
    doc = json.loads(first)
    assert {"scenario", "seed", "simulated_ms", "events", "totals", "vms", "vcpus"} <= doc.keys()
    assert doc["totals"]["ple_exits"] > 0


def test_bad_scenario_exits_2_naming_the_field(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('duration_ms = 5\n[host]\ncores_per_socket = 0\n[[vm]]\nname = "g"\nvcpus = 1\n'
                   'lock = "tas"\nworkload = { preset = "kernbench" }\n')
    assert main(["validate", str(bad)]) == 2
    assert "host.cores_per_socket" in capsys.readouterr().err


def test_validate_accepts_every_example(examples, capsys):
    files = sorted(str(p) for p in examples.glob("*.toml"))
    assert main(["validate", *files]) == 0
    assert capsys.readouterr().out.count(": ok") == len(files)


def test_bench_reports_rates(tmp_path, small, capsys):
    scenario = tmp_path / "small.toml"
    scenario.write_text(small)
    assert main(["bench", "--scenario", str(scenario), "--repeat", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["events_per_second"] > 0 and report["acquisitions_per_second"] > 0


def test_bench_of_a_bad_scenario_exits_2_naming_the_field(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('duration_ms = "x"\n')
    assert main(["bench", "--scenario", str(bad), "--repeat", "1"]) == 2
    assert "duration_ms" in capsys.readouterr().err


def test_bench_rejects_zero_repeats(capsys):
    try:
        main(["bench", "--repeat", "0"])
    except SystemExit as e:
        assert e.code == 2
    assert "--repeat" in capsys.readouterr().err


def test_console_script_is_installed(examples):
    done = subprocess.run(
        [sys.executable, "-m", "vspin.cli", "run", str(examples / "undercommitted.toml"), "--duration-ms", "5"],
        capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "undercommitted" in done.stdout


def test_set_overrides_from_the_command_line(examples, capsys):
    args = ["run", str(examples / "overcommit-2x.toml"), "--duration-ms", "20", "--json",
            "--set", "vm.*.lock=pv-ticket", "--set", "hypervisor.ple.policy=kvm"]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {vm["lock"] for vm in doc["vms"]} == {"pv-ticket"}
    assert doc["totals"]["ple_exits"] > 0


def test_set_without_equals_is_rejected(examples, capsys):
    assert main(["run", str(examples / "undercommitted.toml"), "--set", "vm.*.lock"]) == 2
    assert "PATH=VALUE" in capsys.readouterr().err


def test_timeline_is_chrome_trace_json_of_the_window(examples, tmp_path, capsys):
    path = tmp_path / "t.json"
    args = ["run", str(examples / "ple-on-vs-off.toml"), "--duration-ms", "10", "--timeline", str(path),
            "--timeline-ms", "2:4"]
    assert main(args) == 0
    events = json.loads(path.read_text())["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    names = {e["name"] for e in slices}
    assert {"compute", "host work"} <= names
    assert any(n.startswith("wait for lock") for n in names) and any(n.startswith("critical section") for n in names)
    assert all(2000 <= e["ts"] and e["ts"] + e["dur"] <= 4000 + 1e-6 for e in slices)
    assert any(e["ph"] == "i" and e["name"].startswith("acquire lock") for e in events)
    assert any(e["ph"] == "M" and e["args"]["name"] == "VM a" for e in events)


def test_timeline_window_must_be_ordered(examples, capsys):
    import pytest
    with pytest.raises(SystemExit):
        main(["run", str(examples / "undercommitted.toml"), "--timeline", "x.json", "--timeline-ms", "5:1"])
    assert "FROM < TO" in capsys.readouterr().err


def test_validate_checks_every_file_and_names_each_bad_one(tmp_path, examples, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('duration_ms = -1\n')
    good = str(examples / "undercommitted.toml")
    assert main(["validate", str(bad), good]) == 2
    captured = capsys.readouterr()
    assert f"{bad}: error: host" in captured.err
    assert f"{good}: ok" in captured.out


def test_a_timeline_window_without_a_timeline_is_refused(examples, capsys):
    assert main(["run", str(examples / "undercommitted.toml"), "--timeline-ms", "0:5"]) == 2
    assert "--timeline-ms" in capsys.readouterr().err


def test_version_is_printed(capsys):
    try:
        main(["--version"])
    except SystemExit as e:
        assert e.code == 0
    assert capsys.readouterr().out.startswith("vspin 0.")


def test_summary_columns_stay_apart_with_long_names(tmp_path, capsys):
    scenario = tmp_path / "long.toml"
    scenario.write_text('duration_ms = 2\n[host]\ncores_per_socket = 2\n[[vm]]\nname = "a-very-long-vm-name"\n'
                        'vcpus = 2\nlock = "pv-preemptable-ticket"\nworkload = { preset = "cpu-hog" }\n')
    assert main(["run", str(scenario)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("a-very-long-vm-name "))
    assert row.split()[:3] == ["a-very-long-vm-name", "pv-preemptable-ticket", "cpu-hog"]


def test_an_output_path_in_a_missing_directory_fails_before_the_work(examples, capsys):
    for args in (["run", str(examples / "overcommit-2x.toml"), "--out", "/no/such/dir/r.txt"],
                 ["run", str(examples / "overcommit-2x.toml"), "--timeline", "/no/such/dir/t.json"],
                 ["sweep", str(examples / "overcommit-2x.toml"), "--grid", "seed=1", "--csv", "/no/such/dir/r.csv"],
                 ["bench-locks", "--threads", "1", "--json", "/no/such/dir/r.json"]):
        with pytest.raises(SystemExit) as exit:
            main(args)
        assert exit.value.code == 2
        assert "the directory /no/such/dir does not exist" in capsys.readouterr().err


def test_an_empty_output_path_is_named_as_such(examples, capsys):
    with pytest.raises(SystemExit) as exit:
        main(["sweep", str(examples / "overcommit-2x.toml"), "--grid", "seed=1", "--csv", ""])
    assert exit.value.code == 2
    assert "argument --csv: expected a file name, got an empty one" in capsys.readouterr().err


def test_an_output_path_under_a_file_says_so(examples, tmp_path, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("kept")
    with pytest.raises(SystemExit) as exit:
        main(["run", str(examples / "overcommit-2x.toml"), "--out", str(a_file / "r.txt")])
    assert exit.value.code == 2
    assert f"{a_file} is a file, not a directory" in capsys.readouterr().err
    assert a_file.read_text() == "kept"


def test_reproduce_into_a_file_fails_before_any_run(tmp_path, capsys):
    target = tmp_path / "a-file"
    target.write_text("kept")
    assert main(["reproduce", "all", "--quick", "--out", str(target)]) == 2
    assert "--out" in capsys.readouterr().err
    assert target.read_text() == "kept"


def test_reproduce_help_names_every_registered_experiment(capsys):
    from vspin.reproduce.registry import load_experiments

    with pytest.raises(SystemExit):
        main(["reproduce", "--help"])
    listed = capsys.readouterr().out.split("experiments: ")[1].split()
    assert [name.rstrip(",") for name in listed] == sorted(load_experiments())


def test_bad_counts_are_named_without_a_traceback(capsys):
    for flag in ("--workers", "--repeat", "--seeds"):
        with pytest.raises(SystemExit):
            main(["validate-locks", flag, "x", "--json", "/tmp/never.json"])
        assert "'x' is not a whole number" in capsys.readouterr().err


def test_two_options_naming_one_file_are_refused_before_any_work(examples, tmp_path, capsys):
    scenario = tmp_path / "s.toml"
    scenario.write_text((examples / "overcommit-2x.toml").read_text())
    same = str(tmp_path / "same.out")
    cases = [
        ["run", str(scenario), "--out", str(scenario)],
        ["run", str(scenario), "--out", same, "--timeline", same],
        ["sweep", str(scenario), "--grid", "seed=1,2", "--store", same, "--csv", same],
        ["bench-locks", "--threads", "1", "--seconds", "0.01", "--json", str(tmp_path / "x.png"),
         "--plot", str(tmp_path / "x.png")],
    ]
    for args in cases:
        assert main(args) == 2, args
        assert "one file would overwrite the other" in capsys.readouterr().err
    assert scenario.read_text() == (examples / "overcommit-2x.toml").read_text()
    assert not (tmp_path / "same.out").exists()


@pytest.mark.parametrize("args, message", [
    (["--plot", "report.txt"], "the extension names the image format"),
    (["--locks", "tas,tas"], "tas given twice"),
    (["--locks", ","], "expected comma-separated lock names"),
])
def test_bench_locks_options_are_checked_when_parsed(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as e:
        main(["bench-locks", "--threads", "1", "--json", str(tmp_path / "r.json"), *args])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_an_unknown_experiment_is_refused_before_its_directory_is_made(tmp_path, capsys):
    out = tmp_path / "never"
    assert main(["reproduce", "nope", "--out", str(out)]) == 2
    assert "unknown experiment 'nope'" in capsys.readouterr().err
    assert not out.exists()


def test_a_write_that_fails_names_the_file(examples, capsys):
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    assert main(["run", str(examples / "overcommit-2x.toml"), "--duration-ms", "5", "--out", "/dev/full"]) == 2
    assert "/dev/full" in capsys.readouterr().err


def test_run_over_seeds_summarises_each_vm_and_flags_disagreeing_seeds(small, tmp_path, capsys):
    path = tmp_path / "small.toml"
    path.write_text(small)
    assert main(["run", str(path), "--seeds", "1..3", "--set", "vm.*.lock=ticket"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("scenario 'small', 3 seeds (1..3)\nover 3 seeds")
    assert re.search(r"\na +ticket +[\d,]+ +± [\d,]+", out) and re.search(r"\nb +ticket", out)
    assert "--seed 1 in place of --seeds" in out
    out_file = tmp_path / "over.txt"
    assert main(["run", str(path), "--seeds", "4,2", "--out", str(out_file)]) == 0
    assert out_file.read_text().startswith("scenario 'small', 2 seeds (4,2)\n")


@pytest.mark.parametrize("args, message", [
    (["--seeds", "1"], "at least two"),
    (["--seeds", "3..1"], "at least two"),
    (["--seeds", "1,x"], "allowed LOW..HIGH"),
    (["--seeds", "1,1"], "each once"),
    (["--seeds", "1..100000000000"], "100,000,000,000 seeds; at most 10,000"),
    (["--seeds", f"1,{2**64}"], "at most 18446744073709551615"),
    (["--seeds", "1..3", "--json"], "--json belongs to one run (every metric of every seed: vspin sweep FILE --grid seed=1..3"),
    (["--seeds", "1..3", "--seed", "2"], "--seed belongs to one run"),
    (["--seeds", "1..3", "--set", "seed=2"], "--seeds and --set seed=2: both set the seed; give one"),
    (["--seeds", "1..3", "--set", "duration_ms=5", "--duration-ms", "6"], "duration_ms: given twice"),
    (["--set", "duration_ms=5", "--duration-ms", "6"], "duration_ms: given twice"),
])
def test_bad_seed_lists_are_refused(small, tmp_path, capsys, args, message):
    path = tmp_path / "small.toml"
    path.write_text(small)
    try:
        status = main(["run", str(path), *args])
    except SystemExit as e:  # argparse refuses a bad value while parsing
        status = e.code
    assert status == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--set", "seed=1", "--set", "seed=2"], "--set seed: given twice (1, then 2); give it once"),
    (["--timeline-ms", "0:inf", "--timeline", "{dir}/t.json"], "both finite"),
    (["--timeline-ms", "0:1e-9", "--timeline", "{dir}/t.json"], "shorter than 1 ns"),
])
def test_a_setting_given_twice_or_an_empty_timeline_is_refused(small, tmp_path, capsys, args, message):
    path = tmp_path / "small.toml"
    path.write_text(small)
    try:
        status = main(["run", str(path), *(a.format(dir=tmp_path) for a in args)])
    except SystemExit as e:  # argparse refuses a bad value while parsing
        status = e.code
    assert status == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "t.json").exists()
