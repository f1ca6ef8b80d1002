"""``reproduce``: run experiments and write their reports (what ``vspin reproduce`` does)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from vspin.reproduce import report
from vspin.reproduce.model import SCALES, Check, Experiment, Figure, why_malformed
from vspin.reproduce.registry import EXPERIMENTS, load_experiments, select
from vspin.reproduce.runner import Runner


def reproduce(name: str, scale: str, out: Path, workers: int | None = None, verbose: bool = False,
              store: Path | None = None) -> dict:
    """Run experiment ``name`` (or every one, for ``"all"``) at ``scale`` ("quick" or "full").

    Writes ``out/<name>/results.json``, ``<figure>.png`` and ``index.html`` per experiment, and
    ``out/index.html`` linking every report in ``out`` (and ``out/summary.json``, their verdicts)
    for "all", or when an index is there already. Returns each experiment's results document (the
    content of its results.json) by name. The wall time of each experiment goes to standard
    error only, so the files stay identical from run to run. With ``store`` (a DuckDB file),
    runs already there are reused and new ones kept (see ``Runner``). Raises
    UnknownExperimentError for a name nobody registered.
    """
    if scale not in SCALES:
        raise ValueError(f"scale {scale!r}, expected one of {', '.join(SCALES)}")
    load_experiments()
    names = select(name)
    out = Path(out)
    docs = {}
    for experiment_name in names:
        experiment = EXPERIMENTS[experiment_name]
        started = time.perf_counter()
        with Runner(workers, label=experiment_name, verbose=verbose, store=store) as runner:
            figures, checks = experiment.run(scale, runner)
        _check_output(experiment, figures, checks)
        docs[experiment_name] = report.write(experiment, scale, figures, checks, out / experiment_name)
        print(
            f"{experiment_name}: {report.passed_text([c.passed for c in checks])} "
            f"in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
    # An index there already is the top-level one only where no experiment's results.json lies
    # beside it (an experiment's own directory holds its page, index.html, too).
    if name == "all" or ((out / "index.html").exists() and not (out / "results.json").exists()):
        _write_index(out)
    return docs


def _write_index(out: Path) -> None:
    """Index every experiment whose report ``out`` holds, as its results.json says it was run:
    an experiment run alone into a directory that "all" wrote keeps the index true."""
    present = {}
    for experiment_name, experiment in EXPERIMENTS.items():
        results = out / experiment_name / "results.json"
        if not results.is_file():
            continue
        try:
            doc = json.loads(results.read_text())
            checks = [{"id": str(c["id"]), "passed": c["passed"] is True} for c in doc["checks"]]
            present[experiment_name] = {"scale": str(doc["scale"]), "checks": checks}
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"index: {results} left out: not a results.json of vspin reproduce ({why_malformed(e)})", file=sys.stderr)
    report.write_index([EXPERIMENTS[n] for n in sorted(present)], present, out)
    report.write_summary(present, out)


def _check_output(experiment: Experiment, figures: list[Figure], checks: list[Check]) -> None:
    """Reject output the report could not show faithfully (a check on a missing figure, two
    figures writing one PNG), naming the experiment, as these are its author's mistakes."""
    where = f"experiment {experiment.name}"
    if not all(isinstance(f, Figure) for f in figures) or not all(isinstance(c, Check) for c in checks):
        raise TypeError(f"{where}: run() must return (list[Figure], list[Check])")
    figure_ids = [f.id for f in figures]
    check_ids = [c.id for c in checks]
    for kind, ids in (("figure", figure_ids), ("check", check_ids)):
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"{where}: {kind} ids repeated: {', '.join(repeated)}")
    for c in checks:
        if c.figure not in figure_ids:
            raise ValueError(f"{where}: check {c.id} names figure {c.figure!r}, not among {figure_ids}")
