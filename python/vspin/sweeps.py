"""Sweeps: one scenario run at every point of a grid of settings, stored as the runs finish.

::

    import vspin
    df = vspin.sweep("examples/overcommit-2x.toml",
                     {"vm.*.lock": ["ticket", "pv-ticket", "tas"], "seed": [1, 2, 3]},
                     store="runs.duckdb")
    df.groupby(["vm.*.lock", "vm"]).throughput_per_s.mean()

The grid maps setting paths (the dotted paths of ``vspin.run``'s settings, ``*`` for every
element of a list) to the values to try; the points are its cartesian product, in the order
given, and each is the scenario with those settings applied. Every point is validated before the
first run, so a bad value fails at once and names the point.

**Where the runs go.** ``workers`` local processes (default: one per CPU), or, for sweeps that
outgrow one machine, a Dask cluster: ``executor`` is a ``distributed.Client`` or a scheduler
address such as ``"tcp://10.0.0.5:8786"`` (``pip install '.[cluster]'``; every worker needs the
same vspin installed). A run is deterministic, so the executor changes how fast a sweep goes,
never its numbers.

**The store.** With ``store`` (a DuckDB file, created if missing), each run is written the
moment it finishes, so nothing finished is lost when a sweep is interrupted; run the same call
again and it runs only the points the store lacks. Sweeps that overlap share their runs. A run is
identified by its whole scenario (canonical JSON, seed included, a whole number written ``20.0``
the same as ``20``) and by the engine that produced
it: ``engine`` is a hash of the compiled simulator, so a rebuilt vspin, whose model may have
changed, runs every point again instead of mixing old numbers with new (the old rows are kept).
One process may write a store at a time (DuckDB's file lock). Tables, for SQL::

    runs(key, engine, scenario JSON, result JSON, stored_at)   -- one row per run
    vms(key, engine, scenario, point, seed, duration_ms, vm, lock, workload, throughput_per_s,
        metrics JSON)                                          -- a view: one row per VM

``point`` is a hash of the scenario less its seed: runs with one ``point`` differ in nothing
else. A store keeps every run it was ever given: other scenarios, other versions and lengths of
the same one (under one name), and runs of earlier builds (other ``engine``), so group by
``point``, not by name alone. For example (keep the connection in a variable while you use a
result: a relation needs it)::

    db = duckdb.connect("runs.duckdb")
    db.sql("SELECT scenario, point, duration_ms, vm, lock, count(*) AS runs, avg(throughput_per_s) "
           "FROM vms WHERE engine = ? GROUP BY ALL ORDER BY ALL", params=[vspin.sweeps.engine()]).show()

``lock`` is NULL for a VM that takes no locks (a ``cpu-hog``).

The returned DataFrame has one row per point and VM: the grid's paths as columns (in grid
order; ``PATH (grid)`` where a metric has the path's name, as ``vm``), then the VM's metrics as in ``Result.vms`` (its ``name`` column called ``vm``). ``df.attrs["ran"]`` and ``df.attrs["reused"]``
count the points run now and those found in the store. With ``seed`` in the grid,
``over_seeds(df)`` gives each point's mean over the seeds, its 95% interval and its range (what
``vspin sweep`` prints after the table).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import multiprocessing
import os
import re
import statistics
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Iterator

import pandas as pd

from vspin import _core
from vspin.result import Result
from vspin.scenario import (WHOLE_NUMBER_RANGE, Scenario, ScenarioError, load_scenario, overwrite_message, overwrites,
                            plain_value, toml_value, validate)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    key VARCHAR NOT NULL,
    engine VARCHAR NOT NULL,
    scenario JSON NOT NULL,
    result JSON NOT NULL,
    stored_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
    PRIMARY KEY (key, engine)
);
CREATE OR REPLACE VIEW vms AS
SELECT r.key, r.engine, r.scenario->>'name' AS scenario,
       md5(CAST(json_merge_patch(r.scenario, '{"seed": null}') AS VARCHAR)) AS point,
       CAST(r.result->>'seed' AS BIGINT) AS seed,
       CAST(r.scenario->>'duration_ms' AS DOUBLE) AS duration_ms, vm.value->>'name' AS vm, vm.value->>'lock' AS lock, vm.value->>'workload' AS workload,
       CAST(vm.value->>'throughput_per_s' AS DOUBLE) AS throughput_per_s, vm.value AS metrics
FROM runs r, json_each(r.result->'vms') AS vm;
"""

_RUNS_COLUMNS = {"key", "engine", "scenario", "result", "stored_at"}

_engine_hash: str | None = None


def engine() -> str:
    """A hash of the compiled simulator this process runs (its shared library's bytes)."""
    global _engine_hash
    if _engine_hash is None:
        _engine_hash = hashlib.sha256(Path(_core.__file__).read_bytes()).hexdigest()[:16]
    return _engine_hash


def canonical(scenario: dict) -> str:
    """A scenario as the one JSON text that identifies it in a store (a whole number written
    ``5.0`` as ``5``: the simulator reads both as one value, so they are one run)."""
    return json.dumps(_same_number_same_key(scenario), sort_keys=True, separators=(",", ":"))


def _key(canonical: str) -> str:
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def run_canonical(item: tuple[int, str]) -> tuple[int, str, str]:
    """Run one scenario where the executor put it; returns the engine that ran it, too."""
    index, text = item
    return index, engine(), _core.run_json(text)


#: The most points one sweep takes: each is validated and kept in memory before any runs, and a
#: million one-second runs are weeks on one core (shard larger studies over several sweeps).
MAX_POINTS = 1_000_000


def points(grid: Mapping[str, list]) -> list[dict[str, Any]]:
    """The grid's points, in order: the cartesian product of its values."""
    if not isinstance(grid, Mapping):
        raise ScenarioError(f"grid: expected a dict of paths to lists of values, e.g. {{'seed': [1, 2, 3]}}, "
                            f"got {type(grid).__name__}")
    plain = {}
    for path, values in grid.items():
        if not isinstance(path, str) or not path:
            raise ScenarioError(f"grid: a path must be a non-empty string like 'vm.*.lock', got {path!r}")
        if hasattr(values, "__len__") and not isinstance(values, (str, bytes, dict)) and len(values) > MAX_POINTS:
            raise ScenarioError(f"grid {path}: {len(values):,} values; a sweep takes at most {MAX_POINTS:,} points")
        if hasattr(values, "__iter__") and not isinstance(values, (str, bytes, dict)):
            values = list(values)
        if not isinstance(values, list) or not values:
            raise ScenarioError(f"grid {path}: expected a non-empty list of values, got {values!r}")
        plain[path] = [plain_value(v) for v in values]
        seen: dict[str, Any] = {}
        for v in plain[path]:
            # The same point twice would be counted as two runs (two "seeds" of one seed).
            try:
                key = json.dumps(_same_number_same_key(v), sort_keys=True)
            except ValueError:  # Python prints no whole number of over 4300 digits
                raise ScenarioError(f"grid {path}: a whole number of over 4300 digits; {WHOLE_NUMBER_RANGE}") from None
            if key in seen:
                twice = "given twice" if seen[key] == v and type(seen[key]) is type(v) else f"equals {seen[key]!r}, given before"
                raise ScenarioError(f"grid {path}: {v!r} {twice}; give each value once")
            seen[key] = v
    count = math.prod(len(v) for v in plain.values())
    if count > MAX_POINTS:
        raise ScenarioError(f"grid: {count:,} points; a sweep takes at most {MAX_POINTS:,} (split it, or sweep fewer values)")
    return [dict(zip(plain, combo)) for combo in itertools.product(*plain.values())]


def _same_number_same_key(v: Any) -> Any:
    """``v`` with every whole float as an int, so that 1 and 1.0, which run the same scenario,
    are one point of a grid (``True`` stays itself, though Python compares it equal to 1)."""
    # Up to 2^53, where every whole number is a float too (the core reads a longer integer as
    # out of range, where the float it was is not).
    if isinstance(v, float) and v.is_integer() and abs(v) <= 2**53:
        return int(v)
    if isinstance(v, list):
        return [_same_number_same_key(x) for x in v]
    if isinstance(v, dict):
        return {k: _same_number_same_key(x) for k, x in v.items()}
    return v


def _check_axes(base: dict, axes: list[str], settings: dict[str, Any] | None) -> None:
    """Refuse a grid axis that would overwrite another axis or a setting, each resolved against
    the scenario (so ``vm.web.lock``, ``vm[1].lock`` and ``vm.*.lock`` are one setting when
    ``web`` is the second VM): the rows would be labelled with values the runs did not use."""
    for i, a in enumerate(axes):
        for b in axes[i + 1:]:
            if overwrites(base, a, b):
                raise ScenarioError(overwrite_message("grid", a, b))
    for axis in axes:
        for path in (p for p in settings or {} if isinstance(p, str) and overwrites(base, p, axis)):
            raise ScenarioError(f"{axis}: a grid axis that would overwrite the setting {path}="
                                f"{settings[path]!r} at every point; give it in one of them")


def _describe(point: dict[str, Any]) -> str:
    return ", ".join(f"{p}={v!r}" for p, v in point.items()) or "the scenario as given"


def sweep(scenario: Scenario, grid: Mapping[str, list], settings: dict[str, Any] | None = None, *,
          store: str | os.PathLike | None = None, workers: int | None = None, executor: Any = None,
          verbose: bool = False) -> pd.DataFrame:
    """Run ``scenario`` at every point of ``grid`` (see the module docs); ``settings`` apply to
    every point first. Raises ScenarioError for a bad grid or point, InvariantError if a run broke
    an invariant (the runs stored before it are kept)."""
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ScenarioError(f"workers: expected a whole number, at least 1, got {workers!r}")
    if workers is not None and executor is not None:
        raise ScenarioError("workers and executor (--workers and --dask): give one of them "
                            "(a Dask cluster has its own workers)")
    grid_points = points(grid)
    base = load_scenario(scenario, settings)
    _check_axes(base, list(grid_points[0]), settings if isinstance(settings, dict) else None)
    texts = []
    for point in grid_points:
        try:
            data = validate(base, point)
        except ScenarioError as e:
            raise ScenarioError(f"point {_describe(point)}: {e}") from None
        texts.append(canonical(data))

    db = Store(store) if store is not None else None
    try:
        raw = db.found(texts) if db is not None else {}
        todo = [(i, text) for i, text in enumerate(texts) if i not in raw]
        reused = len(raw)
        for done, (i, ran_on, result) in enumerate(_execute(todo, workers, executor), 1):
            raw[i] = result
            if db is not None:
                db.put(texts[i], ran_on, result)
            if verbose or sys.stderr.isatty():
                end = "\n" if done == len(todo) else ""
                from_store = f" ({reused} from the store)" if db is not None else ""
                print(f"\rsweep: {done}/{len(todo)} runs{from_store}", end=end, file=sys.stderr, flush=True)
    finally:
        if db is not None:
            db.close()

    # One frame built from every row, rather than one frame per point concatenated: a column
    # that is empty at some points (no completion, no PLE epoch in a short run) keeps its type.
    rows, columns = [], None
    for i, point in enumerate(grid_points):
        vms = Result(json.loads(raw[i]), json.loads(texts[i])).vms.rename(columns={"name": "vm"})
        grid = {grid_column(path, vms.columns): value for path, value in point.items()}
        columns = columns or [*grid, *vms.columns]
        rows += [{**grid, **row} for row in vms.to_dict("records")]
    df = pd.DataFrame(rows, columns=columns)
    df.attrs.update(ran=len(todo), reused=reused)
    return df


def grid_column(path: str, metrics) -> str:
    """The column of a grid path: the path itself, or ``PATH (grid)`` where a metric has that name
    (a grid over the whole ``vm`` list beside the ``vm`` column)."""
    return f"{path} (grid)" if path in metrics else path


#: Student's t at 97.5% for 1..30 degrees of freedom (any table of it): the half-width of a 95%
#: interval of a mean over n seeds is t[n - 2] × s / √n; past 30, the normal 1.96.
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045,
         2.042)


def mean_ci95(values: list[float]) -> tuple[float, float]:
    """The mean of per-seed values and the half-width of its 95% Student-t interval (NaN for one
    value)."""
    n, mean = len(values), statistics.fmean(values)
    if n < 2:
        return mean, float("nan")
    return mean, (T_975[n - 2] if n <= 31 else 1.96) * statistics.stdev(values) / n ** 0.5


def over_seeds(df: pd.DataFrame) -> pd.DataFrame:
    """A sweep's throughput summarised over its seeds: one row per point of the grid's other paths
    and VM, with ``seeds`` (how many), ``mean``, ``ci95`` (half-width of the 95% interval of the
    mean, Student's t; NaN for one seed), ``min`` and ``max`` work units per second.

    A single seed is one draw of a process that can be chaotic: an over-committed FIFO lock may
    fall into a convoy or stay out of one for a whole run (``docs/mechanisms/pticket.md``), so the
    spread over seeds is part of the answer."""
    if not isinstance(df, pd.DataFrame):
        raise ScenarioError(f"over_seeds: expected the DataFrame vspin.sweep returns, got {type(df).__name__}")
    if "seed" not in df.columns:
        raise ScenarioError("over_seeds: the sweep has no seed column; add seed to its grid, e.g. {'seed': [1, 2, 3]}")
    missing = [c for c in ("vm", "lock", "throughput_per_s") if c not in df.columns]
    if missing:
        raise ScenarioError(f"over_seeds: the frame lacks the column(s) {', '.join(missing)}; give it the DataFrame "
                            "vspin.sweep returns")
    axes = [c for c in df.columns[:list(df.columns).index("vm")] if c != "seed"]
    keys = [*axes, "vm", "lock"]
    # Grid values may be lists (pin lists), which pandas cannot group by: group by their text.
    groups: dict[tuple, tuple[list, list[float]]] = {}
    for row in df[keys + ["throughput_per_s"]].itertuples(index=False):
        values = list(row[:-1])
        groups.setdefault(tuple(map(repr, values)), (values, []))[1].append(row[-1])
    rows = []
    for values, units in groups.values():
        mean, half = mean_ci95(units)
        rows.append([*values, len(units), mean, half, min(units), max(units)])
    return pd.DataFrame(rows, columns=[*keys, "seeds", "mean", "ci95", "min", "max"])


class Store:
    """A DuckDB file of runs (the module docs give its tables): look a scenario up by its
    canonical JSON, keep a run the moment it finishes. Also what ``vspin reproduce --store``
    writes to."""

    def __init__(self, path: str | os.PathLike):
        import duckdb

        if not isinstance(path, (str, os.PathLike)):
            raise ScenarioError(f"store: expected a file path, got {path!r} (type {type(path).__name__})")
        if str(path) == "" or str(path).startswith((":", "md:", "motherduck:")):
            # DuckDB takes these for a database in memory (`:memory:`, `:default:`) or a remote
            # one, which would keep nothing here.
            raise ScenarioError(f"store {str(path)!r}: a store is a file that keeps the runs; give its path, e.g. runs.duckdb")
        # What every DuckDB failure raises (the package is imported here, when a store is used).
        self._path, self._error = path, duckdb.Error
        try:
            self._db = duckdb.connect(str(path))
        except duckdb.Error as e:
            raise ScenarioError(f"store {path}: cannot open it as a DuckDB database: {e}") from None
        try:
            self._db.execute(_SCHEMA)
            # A `runs` table of another program passes CREATE IF NOT EXISTS: check its columns.
            columns = {row[0] for row in self._db.execute("DESCRIBE runs").fetchall()}
        except duckdb.Error as e:
            self._db.close()
            raise ScenarioError(f"store {path}: not a vspin store (its tables runs and vms are another "
                                f"program's: {str(e).splitlines()[0]}); give a new file or one vspin wrote") from None
        if columns != _RUNS_COLUMNS:
            self._db.close()
            raise ScenarioError(f"store {path}: not a vspin store: its table runs has columns "
                                f"{sorted(columns)}, a store's has {sorted(_RUNS_COLUMNS)}")
        try:
            keys = self._db.execute("SELECT constraint_column_names FROM duckdb_constraints() "
                                    "WHERE table_name = 'runs' AND constraint_type = 'PRIMARY KEY'").fetchall()
        except duckdb.Error as e:
            self._db.close()
            raise ScenarioError(f"store {path}: cannot read its tables: {str(e).splitlines()[0]}") from None
        if [sorted(k[0]) for k in keys] != [["engine", "key"]]:
            self._db.close()
            raise ScenarioError(f"store {path}: not a vspin store: its table runs lacks the primary key (key, engine) "
                                "that a store's has; give a new file or one vspin wrote")

    def _failed(self, doing: str, e: Exception) -> ScenarioError:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        return ScenarioError(f"store {self._path}: cannot {doing}: {first}")

    def found(self, canonicals: list[str]) -> dict[int, str]:
        """The stored result JSON, by index, of those scenarios run by this process's engine."""
        found = {}
        try:
            for i, text in enumerate(canonicals):
                row = self._db.execute("SELECT result FROM runs WHERE key = ? AND engine = ?", [_key(text), engine()]).fetchone()
                if row is not None:
                    found[i] = row[0]
        except self._error as e:
            raise self._failed("read it (is the file damaged?)", e) from None
        return found

    def put(self, canonical: str, ran_on: str, result: str) -> None:
        try:
            self._db.execute("INSERT OR REPLACE INTO runs (key, engine, scenario, result) VALUES (?, ?, ?, ?)",
                             [_key(canonical), ran_on, canonical, result])
        except self._error as e:
            # Each run is committed alone: those stored before this one stay.
            raise ScenarioError(f"{self._failed('keep a run', e)}; the runs stored before it are kept") from None

    def close(self) -> None:
        try:
            self._db.close()
        except self._error as e:
            raise self._failed("close it", e) from None


def _execute(todo: list[tuple[int, str]], workers: int | None, executor: Any) -> Iterator[tuple[int, str, str]]:
    """Yield (index, engine, result JSON) for every item, as each finishes."""
    if not todo:
        return
    if executor is not None:
        yield from _execute_dask(todo, executor)
        return
    workers = min(workers or os.cpu_count() or 1, len(todo))
    if workers == 1:
        yield from map(run_canonical, todo)
        return
    with multiprocessing.Pool(workers) as pool:
        yield from pool.imap_unordered(run_canonical, todo)


def _not_an_executor(executor: Any) -> ScenarioError:
    return ScenarioError(f"executor: expected a distributed.Client or a scheduler address like 'tcp://host:8786', "
                         f"got {executor!r}")


def _execute_dask(todo: list[tuple[int, str]], executor: Any) -> Iterator[tuple[int, str, str]]:
    # Named before the import, so that a wrong value is not reported as a missing package.
    if not isinstance(executor, str) and type(executor).__name__ != "Client":
        raise _not_an_executor(executor)
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise ScenarioError("executor: a Dask executor needs dask.distributed (pip install '.[cluster]')") from None
    if isinstance(executor, str):
        try:
            client = Client(executor, timeout=10)
        except (OSError, ValueError) as e:
            raise ScenarioError(f"executor {executor}: cannot reach a Dask scheduler there: {e}") from None
    else:
        client = executor
    if not isinstance(client, Client):
        raise _not_an_executor(executor)
    try:
        futures = client.map(run_canonical, todo, pure=False)
        for future in as_completed(futures):
            yield future.result()
    finally:
        if client is not executor:
            client.close()


_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)$")
# `seed=1-5` or `seed=1:5`: a seed is a whole number, so this can only be a range written another way.
_DASHED_RANGE = re.compile(r"^\d+\s*[-:]\s*\d+$")


def parse_grid(text: str) -> tuple[str, list]:
    """Parse ``PATH=VALUES`` from the command line: ``vm.*.lock=ticket,tas``, ``seed=1..5``
    (inclusive), or a TOML array for values that contain commas (``vm.0.pin=[[0, 1], [2, 3]]``).
    Each comma-separated value is read as TOML (``16``, ``2.5``, ``true``) or else as a string."""
    path, sep, raw = text.partition("=")
    path, raw = path.strip(), raw.strip()
    if not sep or not path or not raw:
        raise ScenarioError(f"--grid {text!r}: expected PATH=V1,V2,... (e.g. vm.*.lock=ticket,tas or seed=1..5)")
    if (m := _RANGE.match(raw)) is not None:
        try:
            lo, hi = int(m[1]), int(m[2])
        except ValueError:  # int() refuses strings of more than 4300 digits
            raise ScenarioError(f"--grid {text!r}: a bound of thousands of digits; {WHOLE_NUMBER_RANGE}") from None
        if hi < lo:
            raise ScenarioError(f"--grid {text!r}: the range {lo}..{hi} is empty (write LOW..HIGH)")
        if hi - lo + 1 > MAX_POINTS:
            raise ScenarioError(f"--grid {text!r}: {hi - lo + 1:,} values; a sweep takes at most {MAX_POINTS:,} points")
        return path, list(range(lo, hi + 1))
    if path == "seed" and _DASHED_RANGE.match(raw):
        raise ScenarioError(f"--grid {text!r}: a range of seeds is written LOW..HIGH (e.g. seed=1..5), or list them: seed=1,2,3")
    try:
        if raw.startswith("["):
            return path, toml_value(raw)
        return path, [_scalar(v.strip()) for v in raw.split(",")]
    except tomllib.TOMLDecodeError as e:  # the array's only: `_scalar` takes a bare word as text
        raise ScenarioError(f"--grid {text!r}: not a TOML array: {e}") from None
    except ScenarioError as e:
        raise ScenarioError(f"--grid {text!r}: {e}") from None


def _scalar(raw: str) -> Any:
    """One value of ``--grid``: TOML, or else a bare word taken as text. A value that starts as
    a TOML string, table or array and does not parse is refused: the values were split at
    commas, which may have cut it."""
    try:
        return toml_value(raw)
    except tomllib.TOMLDecodeError as e:
        if raw[:1] in ('"', "'", "{", "["):
            raise ScenarioError(
                f"value {raw!r} is not valid TOML ({e}); the values are split at commas, so write "
                "values that contain commas as one TOML array, e.g. hypervisor.ple=[{policy=\"off\"}, {policy=\"kvm\", grow=4}]"
            ) from None
        return raw
