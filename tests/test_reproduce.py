"""The experiment-reproduction framework, driven by toy experiments of three tiny runs each."""

import json
import math

import duckdb
import numpy as np
import pytest

from vspin.cli import main
from vspin.reproduce import (
    EXPERIMENTS, Check, Experiment, Figure, Runner, Series, UnknownExperimentError,
    load_experiments, register, reproduce,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
VCPUS = [1, 2, 3]


def scenario(vcpus: int) -> dict:
    return {
        "name": f"toy-{vcpus}", "seed": 1, "duration_ms": 5, "host": {"cores_per_socket": 2},
        "vm": [{"name": "g", "vcpus": vcpus, "pin": "none", "lock": "ticket", "workload": {"preset": "kernbench"}}],
    }


class Toy(Experiment):
    """Throughput (a line figure, paper at other x) and halt exits (bars with error bars)."""

    title = "Toy: ticket lock on two pCPUs"
    source = "toy.pdf"

    def __init__(self, name: str, failing: bool = False):
        self.name = name
        self.failing = failing

    def run(self, scale, runner):
        results = runner.run_many([scenario(v) for v in VCPUS])
        throughput = [r.vms["throughput_per_s"].iloc[0] for r in results]  # numpy scalars
        halts = [r.totals["halt_exits"] for r in results]
        figures = [
            Figure("fig1", "Throughput vs vCPUs", "units/s", "vCPUs", "units/s",
                   series=[Series("ticket", VCPUS, throughput)],
                   paper=[Series("ticket", [1, 2, 4], [2e5, 3e5, 2.5e5])],
                   note=f"{scale}: one VM, ticket lock, 5 ms"),
            Figure("fig2", "Halt exits <per run>", "halt exits", "vCPUs", "exits", kind="bar",
                   series=[Series("ticket", VCPUS, halts, yerr=[1, 1, 1])], paper=[]),
        ]
        checks = [
            Check("fig1.runs", "fig1", np.float64(min(throughput)) > 0, f"throughput {throughput}",
                  measured={"least_units_per_s": min(throughput)}, paper={"least_units_per_s": 2e5}),
            Check("fig2.impossible" if self.failing else "fig2.counted", "fig2",
                  not self.failing, f"halt exits {halts}", measured={"vcpus": VCPUS, "halt_exits": halts}),
        ]
        return figures, checks


@pytest.fixture
def toys():
    """The registry holding only the toys (the real experiments imported first, then set aside)."""
    load_experiments()
    saved = dict(EXPERIMENTS)
    EXPERIMENTS.clear()
    register(Toy("toy"))
    register(Toy("toyfail", failing=True))
    yield
    EXPERIMENTS.clear()
    EXPERIMENTS.update(saved)


def test_results_json_has_the_documented_schema(toys, tmp_path):
    docs = reproduce("toy", "quick", tmp_path, workers=1)
    doc = json.loads((tmp_path / "toy" / "results.json").read_text())
    assert doc == docs["toy"]
    assert list(doc) == ["experiment", "scale", "figures", "checks"]
    assert (doc["experiment"], doc["scale"]) == ("toy", "quick")
    fig1, fig2 = doc["figures"]
    assert list(fig1) == ["id", "title", "metric", "x_label", "y_label", "kind", "y_scale", "note", "series", "paper"]
    assert (fig1["kind"], fig2["kind"]) == ("line", "bar")
    assert list(fig1["series"][0]) == ["config", "x", "y"]  # no yerr key when there is none
    assert fig2["series"][0]["yerr"] == [1.0, 1.0, 1.0]
    assert fig1["paper"][0]["x"] == [1, 2, 4]
    assert all(isinstance(y, float) for y in fig1["series"][0]["y"])
    fig1_check, fig2_check = doc["checks"]
    assert list(fig1_check) == ["id", "figure", "passed", "detail", "measured", "paper"]
    assert (fig1_check["id"], fig1_check["figure"], fig1_check["passed"]) == ("fig1.runs", "fig1", True)
    assert isinstance(fig1_check["measured"]["least_units_per_s"], float)  # a numpy scalar, made plain
    assert fig1_check["paper"] == {"least_units_per_s": 200000.0}
    assert fig2_check["measured"]["vcpus"] == [1, 2, 3] and fig2_check["paper"] == {}
    assert all(isinstance(n, int) for n in fig2_check["measured"]["halt_exits"]), "counts stay integers"


def test_a_check_names_the_numbers_behind_its_verdict():
    def check(**fields):
        return Check("x.y", "x", True, "detail", **fields)

    assert check(measured={"ratio": float("inf"), "at": [1, np.int64(2)]}).measured == {"ratio": None, "at": [1, 2]}
    with pytest.raises(ValueError, match="measured names no quantity"):
        check(measured={})
    with pytest.raises(ValueError, match="name 'Ratio'"):
        check(measured={"Ratio": 1.0})
    with pytest.raises(ValueError, match="paper gives ratio, which measured does not have"):
        check(measured={"speedup": 2.0}, paper={"ratio": 4.8})
    with pytest.raises(TypeError, match="x.y: measured ok: a number, not true or false"):
        check(measured={"ok": True})
    with pytest.raises(ValueError, match="x.y: measured at: could not convert string to float"):
        check(measured={"at": ["40 vCPUs"]})


def test_reports_are_identical_across_runs_and_worker_counts(toys, tmp_path):
    for out, workers in (("a", 1), ("b", 1), ("c", 2)):
        reproduce("toy", "quick", tmp_path / out, workers=workers)
    for name in ("results.json", "index.html", "fig1.png", "fig2.png"):
        first = (tmp_path / "a" / "toy" / name).read_bytes()
        assert first == (tmp_path / "b" / "toy" / name).read_bytes() == (tmp_path / "c" / "toy" / name).read_bytes(), name


def test_figures_are_pngs_and_the_page_shows_checks_and_values(toys, tmp_path):
    reproduce("toyfail", "full", tmp_path, workers=1)
    for figure in ("fig1", "fig2"):
        assert (tmp_path / "toyfail" / f"{figure}.png").read_bytes().startswith(PNG_MAGIC)
    page = (tmp_path / "toyfail" / "index.html").read_text()
    assert "1 of 2 checks passed" in page and "scale: full" in page
    assert 'class="pass"><b>PASS</b> <code>fig1.runs</code>' in page
    assert 'class="fail"><b>FAIL</b> <code>fig2.impossible</code>' in page
    assert '<img src="fig1.png"' in page and "Halt exits &lt;per run&gt;" in page
    assert "<td>ticket</td><td>4</td><td>&ndash;</td><td>250,000</td>" in page  # paper-only x


def test_all_writes_an_index_of_experiments(toys, tmp_path):
    docs = reproduce("all", "quick", tmp_path, workers=2)
    assert list(docs) == ["toy", "toyfail"]
    index = (tmp_path / "index.html").read_text()
    assert 'href="toy/index.html"' in index and 'href="toyfail/index.html"' in index
    assert "3 of 4 checks passed" in index
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (summary["checks"], summary["passed"]) == (4, 3)
    assert summary["experiments"][1] == {"experiment": "toyfail", "scale": "quick", "checks": 2, "passed": 1,
                                         "failed": ["fig2.impossible"]}


def test_an_experiment_rerun_at_another_scale_keeps_the_index_true(toys, tmp_path):
    reproduce("all", "quick", tmp_path, workers=1)
    reproduce("toy", "full", tmp_path, workers=1)
    index = (tmp_path / "index.html").read_text()
    assert "Scales differ" in index and "Scale: quick" not in index
    assert "<td>full</td>" in index and "<td>quick</td>" in index
    assert 'href="toyfail/index.html"' in index  # the report not rerun stays indexed


def test_a_lone_experiment_writes_no_index_unless_one_is_there(toys, tmp_path):
    reproduce("toy", "quick", tmp_path, workers=1)
    assert not (tmp_path / "index.html").exists()


def test_the_page_names_the_document_that_explains_it(toys, tmp_path):
    EXPERIMENTS["toyfail"].explained_in = "docs/mechanisms/toy.md"
    try:
        reproduce("toyfail", "quick", tmp_path, workers=1)
    finally:
        del EXPERIMENTS["toyfail"].explained_in
    assert "<code>docs/mechanisms/toy.md</code> in the vspin source tree" in (tmp_path / "toyfail" / "index.html").read_text()
    reproduce("toy", "quick", tmp_path, workers=1)
    assert "vspin source tree" not in (tmp_path / "toy" / "index.html").read_text()


def test_compare_reports_names_what_changed_verdict(toys, tmp_path, capsys):
    reproduce("all", "quick", tmp_path / "old", workers=1)
    EXPERIMENTS["toy"].failing = True  # the toy's second check now fails under another id
    try:
        reproduce("all", "quick", tmp_path / "new", workers=1)
    finally:
        EXPERIMENTS["toy"].failing = False
    old, new = str(tmp_path / "old"), str(tmp_path / "new")
    assert main(["compare-reports", old, new]) == 0
    out = capsys.readouterr().out
    assert "REMOVED toy fig2.counted" in out and "ADDED toy fig2.impossible" in out
    assert "3 checks in both: 0 now failing, 0 now passing" in out
    assert main(["compare-reports", old, new, "--strict"]) == 1, "a check that passed is gone"
    capsys.readouterr()
    assert main(["compare-reports", old, old, "--strict"]) == 0
    assert "0 now failing, 0 now passing, 0 with other numbers" in capsys.readouterr().out


def test_compare_reports_flags_a_check_that_now_fails(toys, tmp_path, capsys):
    reproduce("toy", "quick", tmp_path / "old", workers=1)
    reproduce("toy", "full", tmp_path / "new", workers=1)
    results = tmp_path / "new" / "toy" / "results.json"
    doc = json.loads(results.read_text())
    doc["checks"][0]["passed"], doc["checks"][0]["detail"] = False, "throughput [0, 0, 0]"
    results.write_text(json.dumps(doc))
    assert main(["compare-reports", str(tmp_path / "old"), str(tmp_path / "new" / "toy"), "--strict"]) == 1
    out = capsys.readouterr().out
    assert "note: toy was run at quick scale, now at full" in out
    assert "NOW FAILING toy fig1.runs" in out and "now: throughput [0, 0, 0]" in out


def test_compare_reports_names_each_measured_number_that_moved(toys, tmp_path, capsys):
    reproduce("toy", "quick", tmp_path / "old", workers=1)
    reproduce("toy", "quick", tmp_path / "new", workers=1)
    results = tmp_path / "new" / "toy" / "results.json"
    doc = json.loads(results.read_text())
    least = doc["checks"][0]["measured"]["least_units_per_s"]
    doc["checks"][0]["measured"]["least_units_per_s"] = least * 1.5
    results.write_text(json.dumps(doc))
    assert main(["compare-reports", str(tmp_path / "old"), str(tmp_path / "new"), "--details"]) == 0
    out = capsys.readouterr().out
    assert "CHANGED toy fig1.runs" in out and f"moved: least_units_per_s {least:.4g} → {1.5 * least:.4g} (+50.0%)" in out
    assert "1 with other numbers and the same verdict" in out


def test_compare_reports_compares_only_experiments_both_hold(toys, tmp_path, capsys):
    reproduce("all", "quick", tmp_path / "old", workers=1)
    reproduce("toy", "quick", tmp_path / "new", workers=1)
    assert main(["compare-reports", str(tmp_path / "old"), str(tmp_path / "new"), "--strict"]) == 0
    out = capsys.readouterr().out
    assert "note: only the earlier report holds toyfail (not compared)" in out
    assert "2 checks in both" in out and "REMOVED" not in out


def test_compare_reports_does_not_count_a_failure_that_is_gone(toys, tmp_path, capsys):
    reproduce("toyfail", "quick", tmp_path / "old", workers=1)
    reproduce("toyfail", "quick", tmp_path / "new", workers=1)
    results = tmp_path / "new" / "toyfail" / "results.json"
    doc = json.loads(results.read_text())
    doc["checks"] = [c for c in doc["checks"] if c["passed"]]
    results.write_text(json.dumps(doc))
    assert main(["compare-reports", str(tmp_path / "old"), str(tmp_path / "new"), "--strict"]) == 0
    assert "REMOVED toyfail fig2.impossible" in capsys.readouterr().out


def test_an_experiment_rerun_into_its_own_directory_writes_no_index_there(toys, tmp_path):
    reproduce("all", "quick", tmp_path, workers=1)
    reproduce("toy", "quick", tmp_path / "toy", workers=1)
    assert 'href="toy/index.html"' in (tmp_path / "index.html").read_text()
    assert "Halt exits" in (tmp_path / "toy" / "index.html").read_text(), "the toy's own page stays"
    assert not (tmp_path / "toy" / "summary.json").exists()


def test_compare_reports_refuses_a_directory_without_a_report(tmp_path, capsys):
    assert main(["compare-reports", str(tmp_path), str(tmp_path)]) == 2
    assert "no results.json here or in its subdirectories" in capsys.readouterr().err
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "results.json").write_text("{}")
    assert main(["compare-reports", str(tmp_path), str(tmp_path)]) == 2
    assert "not a results.json of vspin reproduce (no key 'experiment')" in capsys.readouterr().err
    (tmp_path / "x" / "results.json").write_text('{"experiment": "x", "scale": "quick", "checks": [[1]]}')
    assert main(["compare-reports", str(tmp_path), str(tmp_path)]) == 2
    assert "(an entry that should be a JSON object or list is something else)" in capsys.readouterr().err
    (tmp_path / "x" / "results.json").write_text('{"experiment": "x", "scale": "quick", "checks": [1]}')
    assert main(["compare-reports", str(tmp_path), str(tmp_path)]) == 2
    assert "(an entry that should be a JSON object or list is something else)" in capsys.readouterr().err


def test_compare_reports_of_no_common_experiment_or_with_a_check_twice_is_an_error(toys, tmp_path, capsys):
    reproduce("toy", "quick", tmp_path / "a", workers=1)
    reproduce("toyfail", "quick", tmp_path / "b", workers=1)
    assert main(["compare-reports", str(tmp_path / "a"), str(tmp_path / "b"), "--strict"]) == 2
    assert "share no experiment (toy against toyfail): nothing to compare" in capsys.readouterr().err
    results = tmp_path / "a" / "toy" / "results.json"
    doc = json.loads(results.read_text())
    doc["checks"].append(doc["checks"][0])
    results.write_text(json.dumps(doc))
    assert main(["compare-reports", str(tmp_path / "a"), str(tmp_path / "a")]) == 2
    assert f"check {doc['checks'][0]['id']} appears twice" in capsys.readouterr().err


def test_reproduce_refuses_an_out_whose_files_its_report_would_overwrite(toys, tmp_path, capsys):
    (tmp_path / "index.html").write_text("<html>my own page</html>")
    assert main(["reproduce", "toy", "--quick", "--out", str(tmp_path), "--workers", "1"]) == 2
    assert "index.html is not a page vspin wrote" in capsys.readouterr().err
    assert (tmp_path / "index.html").read_text() == "<html>my own page</html>"
    (tmp_path / "index.html").unlink()
    (tmp_path / "toy").write_text("notes")
    assert main(["reproduce", "toy", "--quick", "--out", str(tmp_path), "--workers", "1"]) == 2
    assert "toy is a file, where the report of toy goes" in capsys.readouterr().err
    (tmp_path / "toy").unlink()
    assert main(["reproduce", "all", "--quick", "--out", str(tmp_path), "--workers", "1"]) == 0
    assert main(["reproduce", "all", "--quick", "--out", str(tmp_path), "--workers", "1"]) == 0, "its own index is rewritten"


def test_cli_exit_codes(toys, tmp_path, capsys):
    out = str(tmp_path)
    assert main(["reproduce", "toy", "--quick", "--out", out, "--workers", "1"]) == 0
    assert "2 of 2 checks passed" in capsys.readouterr().out
    assert main(["reproduce", "toyfail", "--quick", "--out", out, "--workers", "1"]) == 0
    assert "FAILED toyfail fig2.impossible: halt exits" in capsys.readouterr().out
    assert main(["reproduce", "toyfail", "--quick", "--out", out, "--workers", "1", "--strict"]) == 1
    assert main(["reproduce", "nosuch", "--out", out]) == 2
    assert "known: toy, toyfail, all" in capsys.readouterr().err


def test_runner_keeps_input_order_and_reports_progress(capsys):
    scenarios = [scenario(v) for v in (3, 1, 2)]
    with Runner(workers=2, label="order", verbose=True) as runner:
        names = [r.raw["scenario"] for r in runner.run_many(scenarios)]
        single = runner.run(scenarios[0])
    assert names == ["toy-3", "toy-1", "toy-2"]
    assert single.to_json() == Runner(workers=1).run(scenarios[0]).to_json()
    assert "order: 3/3 runs" in capsys.readouterr().err


def test_a_reproduction_with_a_store_reuses_its_runs(toys, tmp_path, monkeypatch):
    store = tmp_path / "runs.duckdb"
    first = reproduce("toy", "quick", tmp_path / "a", workers=2, store=store)
    with duckdb.connect(str(store)) as db:
        assert db.sql("SELECT count(*) FROM runs").fetchone()[0] == len(VCPUS)

    def no_runs(item):
        raise AssertionError("a stored run was run again")

    monkeypatch.setattr("vspin.reproduce.runner.run_canonical", no_runs)
    assert reproduce("toy", "quick", tmp_path / "b", workers=1, store=store) == first
    assert (tmp_path / "a" / "toy" / "results.json").read_text() == (tmp_path / "b" / "toy" / "results.json").read_text()


def test_values_are_normalised_and_mistakes_named():
    s = Series("x", np.array([1, 2]), [np.float64(1.5), math.nan], yerr=[np.int64(1), None])
    assert s.to_dict() == {"config": "x", "x": [1, 2], "y": [1.5, None], "yerr": [1.0, None]}
    assert Check("c", "f", np.bool_(True), "", measured={"n": 1}).passed is True
    with pytest.raises(ValueError, match="2 x values but 1 y values"):
        Series("x", [1, 2], [1.0])
    with pytest.raises(ValueError, match="kind 'pie'"):
        Figure("f", "t", "m", "x", "y", [], [], kind="pie")
    with pytest.raises(ValueError, match="names a file"):
        Figure("a/b", "t", "m", "x", "y", [], [])


def test_registry_rejects_ambiguous_names(toys, tmp_path):
    class Other(Toy):
        pass

    with pytest.raises(ValueError, match="registered twice"):
        register(Other("toy"))
    with pytest.raises(ValueError, match="not 'all'"):
        register(Toy("all"))
    with pytest.raises(UnknownExperimentError, match="known: toy, toyfail, all"):
        reproduce("nosuch", "quick", tmp_path)


def test_a_check_on_a_missing_figure_is_an_error(toys, tmp_path):
    class Stray(Toy):
        def run(self, scale, runner):
            figures, checks = super().run(scale, runner)
            return figures, [*checks, Check("fig9.x", "fig9", True, "", measured={"n": 1})]

    register(Stray("stray"))
    with pytest.raises(ValueError, match="check fig9.x names figure 'fig9'"):
        reproduce("stray", "quick", tmp_path, workers=1)


def test_an_asymmetric_interval_is_drawn_and_shown_as_its_bounds(tmp_path):
    from vspin.reproduce.plot import plot
    from vspin.reproduce.report import _values_table

    s = Series("ratio", ["a", "b", "c"], [1.5, 2.0, 3.0], yerr=[[0.5, 1.0], 0.25, None])
    assert s.to_dict()["yerr"] == [[0.5, 1.0], 0.25, None]
    figure = Figure("f", "ratios", "throughput ratio", "pair", "ratio", [s], [], kind="bar")
    plot(figure, tmp_path / "f.png")
    assert (tmp_path / "f.png").read_bytes().startswith(PNG_MAGIC)
    table = _values_table(figure)
    assert "1.5 (1&ndash;2.5)" in table and "2 &plusmn; 0.25" in table
    with pytest.raises(ValueError, match="a pair"):
        Series("x", [1], [1.0], yerr=[[1.0, 2.0, 3.0]])
