import json
import math

import duckdb
import pandas as pd
import pytest

import vspin
import vspin.sweeps as sweep_module
from vspin.cli import main
from vspin.sweeps import parse_grid

GRID = {"vm.*.lock": ["ticket", "tas"], "seed": [1, 2]}


def test_every_point_is_the_scenario_with_its_settings(small):
    df = vspin.sweep(small, GRID, workers=1)
    assert list(df.columns[:3]) == ["vm.*.lock", "seed", "vm"]
    assert len(df) == 4 * 2  # four points, two VMs each
    for (lock, seed), rows in df.groupby(["vm.*.lock", "seed"], sort=False):
        alone = vspin.run(small, {"vm.*.lock": lock}, seed=int(seed)).vms
        assert list(rows["lock"]) == [lock, lock]
        assert list(rows["work_units"]) == list(alone["work_units"])
    assert df.attrs == {"ran": 4, "reused": 0}


def test_results_do_not_depend_on_the_number_of_workers(small):
    assert vspin.sweep(small, GRID, workers=1).equals(vspin.sweep(small, GRID, workers=2))


def test_a_sweep_resumes_from_its_store_and_shares_runs(small, tmp_path):
    store = tmp_path / "runs.duckdb"
    first = vspin.sweep(small, {"vm.*.lock": ["ticket"], "seed": [1, 2]}, store=store, workers=1)
    assert first.attrs == {"ran": 2, "reused": 0}
    more = vspin.sweep(small, GRID, store=store, workers=1)
    assert more.attrs == {"ran": 2, "reused": 2}
    assert more.equals(vspin.sweep(small, GRID, workers=1))
    again = vspin.sweep(small, GRID, store=store, workers=1)
    assert again.attrs == {"ran": 0, "reused": 4} and again.equals(more)
    with duckdb.connect(str(store)) as db:
        assert db.sql("SELECT count(*) FROM runs").fetchone()[0] == 4
        assert db.sql("SELECT count(*) FROM vms WHERE lock = 'tas'").fetchone()[0] == 4
        # The README's query: one row per point (the scenario less its seed) and VM of this build.
        by_point = db.sql("SELECT scenario, point, vm, lock, count(*) AS runs, avg(throughput_per_s) FROM vms "
                          "WHERE engine = ? GROUP BY ALL ORDER BY lock, vm", params=[vspin.sweeps.engine()]).fetchall()
        assert [(row[0], row[2], row[3], row[4]) for row in by_point] == [
            ("small", vm, lock, 2) for lock in ("tas", "ticket") for vm in ("a", "b")]
        assert len({row[1] for row in by_point if row[3] == "tas"}) == 1
        assert len({row[1] for row in by_point}) == 2
        stored = json.loads(db.sql("SELECT result FROM runs WHERE json_extract_string(scenario, '$.seed') = '2' "
                                   "AND json_extract_string(scenario, '$.vm[0].lock') = 'tas'").fetchone()[0])
    assert stored == json.loads(vspin.run(small, {"vm.*.lock": "tas"}, seed=2).to_json())


def test_a_rebuilt_engine_runs_every_point_again(small, tmp_path, monkeypatch):
    store = tmp_path / "runs.duckdb"
    vspin.sweep(small, GRID, store=store, workers=1)
    monkeypatch.setattr(sweep_module, "engine", lambda: "another-build")
    assert vspin.sweep(small, GRID, store=store, workers=1).attrs == {"ran": 4, "reused": 0}
    with duckdb.connect(str(store)) as db:
        assert db.sql("SELECT count(DISTINCT engine), count(*) FROM runs").fetchone() == (2, 8)


def test_a_bad_point_fails_before_any_run_and_names_itself(small, tmp_path):
    store = tmp_path / "runs.duckdb"
    with pytest.raises(vspin.ScenarioError, match=r"point vm\.\*\.lock='nope', seed=1: .*lock.*ticket"):
        vspin.sweep(small, {"vm.*.lock": ["ticket", "nope"], "seed": [1]}, store=store)
    assert not store.exists()


@pytest.mark.parametrize("grid, message", [
    ({"seed": []}, "grid seed: expected a non-empty list"),
    ({"seed": 3}, "grid seed: expected a non-empty list"),
    ({"": [1]}, "a path must be a non-empty string"),
    (None, "grid: expected a dict of paths to lists of values"),
    ([1, 2], "grid: expected a dict of paths to lists of values"),
])
def test_a_bad_grid_names_the_path(small, grid, message):
    with pytest.raises(vspin.ScenarioError, match=message):
        vspin.sweep(small, grid)


@pytest.mark.parametrize("grid, message", [
    ({"vm.*.lock": ["tas"], "vm[*].lock": ["ticket"]}, "would overwrite what"),
    ({"vm.0.lock": ["tas"], "vm.*.lock": ["ticket"]}, "would overwrite what"),
    ({"vm.0.vcpus": [1], "vm": [[]]}, "would overwrite what"),
    # A VM named in one axis and numbered in another is one setting: the rows would be labelled
    # with the first axis's values while every run used the second's.
    ({"vm.a.lock": ["tas"], "vm[0].lock": ["ticket"]}, "would overwrite what"),
    ({"vm.0.workload.think_ns": [100, 1000], "vm[a].workload": [{"preset": "kernbench"}]}, "would overwrite what"),
    ({"seed": [1, 1]}, "grid seed: 1 given twice; give each value once"),
    ({"duration_ms": [1, 1.0]}, "grid duration_ms: 1.0 equals 1, given before; give each value once"),
    ({"vm.*.lock": ["tas", "ticket", "tas"]}, "grid vm.\\*.lock: 'tas' given twice"),
    ({"seed": list(range(1001)), "vm.*.vcpus": list(range(1000))}, "at most 1,000,000"),
    ({"seed": range(10**9)}, "at most 1,000,000"),
])
def test_a_grid_whose_paths_overwrite_each_other_or_that_is_too_big_is_refused_before_any_run(small, grid, message):
    with pytest.raises(vspin.ScenarioError, match=message):
        vspin.sweep(small, grid)


@pytest.mark.parametrize("settings, grid", [
    ({"seed": 4}, {"seed": [1, 2]}),
    ({"vm.0.lock": "tas"}, {"vm.*.lock": ["ticket"]}),
    ({"vm.0.workload.cs_ns": 100}, {"vm.0.workload": [{"preset": "kernbench"}]}),
    ({"vm.a.lock": "tas"}, {"vm.0.lock": ["ticket"]}),
])
def test_a_grid_axis_that_overwrites_a_setting_is_refused(small, settings, grid):
    with pytest.raises(vspin.ScenarioError, match="a grid axis that would overwrite the setting"):
        vspin.sweep(small, grid, settings)


def test_a_deeper_path_after_a_table_refines_one_entry_only(small):
    df = vspin.sweep(small, {"vm.*.workload": [{"preset": "kernbench"}], "vm.0.workload.cs_ns": [100, 2000]},
                     workers=1)
    assert list(df["vm.*.workload"]) == [{"preset": "kernbench"}] * 4
    alone = vspin.run(small, {"vm.0.workload.cs_ns": 2000}).vms
    assert list(df[df["vm.0.workload.cs_ns"] == 2000]["work_units"]) == list(alone["work_units"])


@pytest.mark.parametrize("workers", ["2", 1.5, True, 0])
def test_workers_must_be_a_whole_number(small, workers):
    with pytest.raises(vspin.ScenarioError, match="workers: expected a whole number"):
        vspin.sweep(small, {"seed": [1, 2]}, workers=workers)


def test_a_grid_over_the_whole_vm_list_gets_its_own_column(small):
    vm = {"name": "a", "vcpus": 2, "lock": "tas", "workload": {"preset": "kernbench"}}
    df = vspin.sweep(small, {"vm": [[vm], [{**vm, "lock": "ticket"}]]}, workers=1)
    assert list(df.columns[:2]) == ["vm (grid)", "vm"]
    assert list(df["lock"]) == ["tas", "ticket"]


def test_a_database_of_another_program_is_not_taken_for_a_store(small, tmp_path):
    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).execute("CREATE TABLE runs (x INTEGER)").close()
    with pytest.raises(vspin.ScenarioError, match="not a vspin store"):
        vspin.sweep(small, {"seed": [1]}, store=other)


def test_numpy_values_are_accepted(small):
    np = pytest.importorskip("numpy")
    df = vspin.sweep(small, {"seed": np.arange(1, 3)}, workers=1)
    assert list(df["seed"]) == [1, 1, 2, 2]


def test_a_grid_may_be_any_mapping_and_a_value_too_long_to_print_is_named(small):
    import types
    assert len(vspin.sweep(small, types.MappingProxyType({"seed": [1]}))) == 2
    with pytest.raises(vspin.ScenarioError, match="grid seed: a whole number of over 4300 digits"):
        vspin.sweep(small, {"seed": [1, 10**5000]})


def test_a_store_or_a_summary_of_the_wrong_type_is_named(small):
    with pytest.raises(vspin.ScenarioError, match="store: expected a file path, got 5"):
        vspin.sweep(small, {"seed": [1]}, store=5)
    with pytest.raises(vspin.ScenarioError, match="over_seeds: expected the DataFrame"):
        vspin.over_seeds(None)


def test_grid_values_parse_as_lists_ranges_and_arrays():
    assert parse_grid("vm.*.lock=ticket, tas") == ("vm.*.lock", ["ticket", "tas"])
    assert parse_grid("seed=1..3") == ("seed", [1, 2, 3])
    assert parse_grid("duration_ms=50,100.5") == ("duration_ms", [50, 100.5])
    assert parse_grid("vm.0.pin=[[0, 1], [2, 3]]") == ("vm.0.pin", [[0, 1], [2, 3]])
    huge = "9" * 5000
    for bad, message in [("seed", "expected PATH=V1,V2"), ("seed=3..1", "is empty"), ("x=[1,", "not a TOML array"),
                         (f"seed=1,{huge}", "more than 4300 digits"), (f"seed=1..{huge}", "thousands of digits"),
                         ("seed=1-3", r"written LOW\.\.HIGH"), ("seed=1:3", r"written LOW\.\.HIGH"),
                         # Split at the comma inside: each half is broken TOML, not a string.
                         ('name="x,y",z', "value '\"x' is not valid TOML"),
                         ('hypervisor.ple={policy="off", grow=4},{policy="kvm"}', "split at commas")]:
        with pytest.raises(vspin.ScenarioError, match=message):
            parse_grid(bad)


def test_the_sweep_command_prints_stores_and_resumes(small, tmp_path, capsys):
    scenario = tmp_path / "small.toml"
    scenario.write_text(small)
    args = ["sweep", str(scenario), "--grid", "vm.*.lock=ticket,tas", "--grid", "seed=1..2",
            "--store", str(tmp_path / "runs.duckdb"), "--csv", str(tmp_path / "runs.csv"), "--workers", "1"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "units/s" in out and "8 rows: 4 runs now, 0 from the store" in out
    assert "over 2 seeds (95% interval of the mean, Student's t)" in out
    assert main(args) == 0
    assert "8 rows: 0 runs now, 4 from the store" in capsys.readouterr().out
    assert (tmp_path / "runs.csv").read_text().startswith("vm.*.lock,seed,vm,lock,")
    assert main(["sweep", str(scenario)]) == 2
    assert "needs at least one" in capsys.readouterr().err
    assert main(["sweep", str(scenario), "--grid", "seed=1", "--grid", "seed=2"]) == 2
    assert "given twice" in capsys.readouterr().err
    assert main(["sweep", str(scenario), "--grid", "vm.*.lock=ticket", "--workers", "1"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("2 rows from 1 run"), "no store, so none is named"


def test_over_seeds_gives_each_points_mean_interval_and_range():
    df = pd.DataFrame({
        "vm.0.pin": [[0, 1]] * 3 + [[1, 0]],
        "seed": [1, 2, 3, 1],
        "vm": ["a"] * 4, "lock": ["ticket"] * 4,
        "throughput_per_s": [1.0, 2.0, 3.0, 5.0],
    })
    summary = vspin.over_seeds(df)
    assert list(summary.columns) == ["vm.0.pin", "vm", "lock", "seeds", "mean", "ci95", "min", "max"]
    three, one = summary.iloc[0], summary.iloc[1]
    assert three["vm.0.pin"] == [0, 1] and three.seeds == 3 and three["mean"] == 2.0
    # Sample standard deviation 1, Student's t for 2 degrees of freedom.
    assert three.ci95 == pytest.approx(4.303 / math.sqrt(3)) and (three["min"], three["max"]) == (1.0, 3.0)
    assert one.seeds == 1 and math.isnan(one.ci95), "one seed has no interval"
    with pytest.raises(vspin.ScenarioError, match="no seed column"):
        vspin.over_seeds(df.drop(columns="seed"))


def test_a_dask_cluster_gives_the_same_rows(small):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        on_dask = vspin.sweep(small, GRID, executor=client)
    assert on_dask.equals(vspin.sweep(small, GRID, workers=1))
    with pytest.raises(vspin.ScenarioError, match="workers and executor"):
        vspin.sweep(small, GRID, workers=2, executor="tcp://127.0.0.1:1")


def test_a_vm_that_takes_no_locks_needs_no_lock_and_keeps_its_rows(tmp_path, capsys):
    scenario = tmp_path / "hog.toml"
    scenario.write_text('duration_ms = 5\n[host]\ncores_per_socket = 2\n'
                        '[[vm]]\nname = "db"\nvcpus = 2\nlock = "ticket"\nworkload = { preset = "kernbench" }\n'
                        '[[vm]]\nname = "batch"\nvcpus = 2\nworkload = { preset = "cpu-hog" }\n')
    result = vspin.run(str(scenario))
    assert result.vms["lock"].tolist() == ["ticket", None]
    assert "\nbatch  -  " in result.summary()
    df = vspin.sweep(str(scenario), {"vm.db.lock": ["ticket", "tas"], "seed": [1, 2]})
    summary = vspin.over_seeds(df)
    assert summary[summary.vm == "batch"]["seeds"].tolist() == [2, 2]
    assert main(["sweep", str(scenario), "--grid", "vm.db.lock=ticket,tas", "--grid", "seed=1,2"]) == 0
    assert "batch  -  " in capsys.readouterr().out


def test_a_store_that_is_no_file_or_not_a_vspin_store_is_refused(small, tmp_path):
    for path in ("", ":memory:", ":default:"):
        with pytest.raises(vspin.ScenarioError, match="a store is a file that keeps the runs"):
            vspin.sweep(small, {"seed": [1]}, store=path)
    keyless = tmp_path / "keyless.duckdb"
    with duckdb.connect(str(keyless)) as db:
        db.execute("CREATE TABLE runs (key VARCHAR, engine VARCHAR, scenario JSON, result JSON, stored_at TIMESTAMP)")
    with pytest.raises(vspin.ScenarioError, match=r"lacks the primary key \(key, engine\)"):
        vspin.sweep(small, {"seed": [1]}, store=keyless)


def test_a_damaged_store_is_named_not_a_traceback(small, tmp_path):
    store = tmp_path / "runs.duckdb"
    vspin.sweep(small, {"seed": [1, 2]}, store=store, workers=1)
    with open(store, "r+b") as f:
        f.truncate(store.stat().st_size // 2)
    with pytest.raises(vspin.ScenarioError, match=f"store {store}"):
        vspin.sweep(small, {"seed": [1, 2]}, store=store, workers=1)


def test_a_whole_number_written_as_a_float_is_the_same_stored_run(small, tmp_path, monkeypatch):
    store = tmp_path / "runs.duckdb"
    vspin.sweep(small, {"seed": [1]}, {"duration_ms": 20}, store=store, workers=1)
    again = vspin.sweep(small, {"seed": [1]}, {"duration_ms": 20.0}, store=store, workers=1)
    assert (again.attrs["ran"], again.attrs["reused"]) == (0, 1)


def test_api_arguments_of_the_wrong_kind_are_named(small):
    with pytest.raises(vspin.ScenarioError, match="executor: expected a distributed.Client or a scheduler address"):
        vspin.sweep(small, {"seed": [1]}, executor=5)
    with pytest.raises(vspin.ScenarioError, match="over_seeds: the frame lacks the column"):
        vspin.over_seeds(pd.DataFrame({"seed": [1]}))
    with pytest.raises(vspin.ScenarioError, match="not a usable path"):
        vspin.load_scenario("x" * 5000)
    for path in ("vm.00.lock", "vm.\u0660.lock"):
        with pytest.raises(vspin.ScenarioError, match="does not exist"):
            vspin.run(small, {path: "tas"})
