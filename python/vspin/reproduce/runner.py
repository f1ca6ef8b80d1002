"""Running many scenarios at once.

The engine is single-threaded per run (that is what makes a run deterministic), so an
experiment's parallelism comes from running its scenarios in separate processes. Results come
back in input order, so what an experiment computes from them does not depend on the number of
workers.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys

from vspin.result import Result
from vspin.scenario import validate
from vspin.sweeps import Store, canonical, run_canonical


class Runner:
    """Runs scenario dicts (as accepted by ``vspin.run``) on ``workers`` processes.

    ``workers`` defaults to the number of CPUs; 1 runs in this process (no pool, easiest to
    debug). The pool is started on first use and kept until ``close`` (or the end of a ``with``
    block), as an experiment usually calls ``run_many`` several times. A progress line
    ("label: 12/40 runs") goes to standard error when it is a terminal or when ``verbose``.
    With ``store`` (a DuckDB file, as ``vspin.sweep`` keeps), runs found there are not run
    again and every new run is written to it as it finishes, so an interrupted reproduction
    resumes where it stopped and its runs can be queried.
    """

    def __init__(self, workers: int | None = None, label: str = "vspin", verbose: bool = False,
                 store: str | os.PathLike | None = None):
        self.workers = workers if workers is not None else (os.cpu_count() or 1)
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers}")
        self.label = label
        self.verbose = verbose
        self._pool = None
        self._pool_size = 0
        self._store = Store(store) if store is not None else None

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._pool is not None and exc_type is not None:
            self._pool.terminate()
        self.close()

    def close(self) -> None:
        """Stop the worker processes (a later run_many starts new ones) and close the store."""
        if self._pool is not None:
            self._pool.close()
            self._pool.join()
            self._pool = None
        if self._store is not None:
            self._store.close()
            self._store = None

    def run(self, scenario: dict) -> Result:
        """Run one scenario."""
        return self.run_many([scenario])[0]

    def run_many(self, scenarios: list[dict]) -> list[Result]:
        """Run every scenario; results in input order whatever the number of workers.

        All scenarios are validated first, so a bad one fails at once rather than after the
        runs before it.
        """
        data = [validate(scenario) for scenario in scenarios]
        texts = [canonical(d) for d in data]
        raw = self._store.found(texts) if self._store is not None else {}
        todo = [(i, text) for i, text in enumerate(texts) if i not in raw]
        if self.workers == 1 or not todo:
            finished = map(run_canonical, todo)
        else:
            # No more processes than runs: a pool grows (up to `workers`) when a batch needs it.
            wanted = min(self.workers, len(todo))
            if self._pool is not None and self._pool_size < wanted:
                self._pool.close()
                self._pool.join()
                self._pool = None
            if self._pool is None:
                self._pool, self._pool_size = multiprocessing.Pool(wanted), wanted
            finished = self._pool.imap_unordered(run_canonical, todo)
        for done, (index, engine, result) in enumerate(finished, 1):
            raw[index] = result
            if self._store is not None:
                self._store.put(texts[index], engine, result)
            self._progress(done, len(todo))
        return [Result(json.loads(raw[i]), data[i]) for i in range(len(scenarios))]

    def _progress(self, done: int, total: int) -> None:
        tty = sys.stderr.isatty()
        if not (tty or self.verbose):
            return
        line = f"{self.label}: {done}/{total} runs"
        if tty:
            sys.stderr.write("\r" + line + ("\n" if done == total else ""))
        elif done == total or done * 10 // total != (done - 1) * 10 // total:
            # A log file gets a line per tenth of the runs, not one per run.
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
