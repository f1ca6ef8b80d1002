"""The `vspin` command."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
from importlib.metadata import version

from vspin._core import InvariantError
from vspin.scenario import ScenarioError, given_twice, load_scenario, parse_setting, run, validate


def _settings(args: argparse.Namespace) -> dict:
    settings: dict = {}
    for text in args.set:
        path, value = parse_setting(text)
        if path in settings:
            raise ScenarioError(f"--set {path}: given twice ({settings[path]!r}, then {value!r}); give it once")
        settings[path] = value
    return settings


def _window(text: str) -> tuple[float, float]:
    start, sep, end = text.partition(":")
    try:
        window = (float(start), float(end))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected FROM:TO in ms, e.g. 0:50, got {text!r}") from None
    if not sep or not 0 <= window[0] < window[1] or window[1] == float("inf"):
        raise argparse.ArgumentTypeError(f"expected FROM:TO in ms with 0 <= FROM < TO, both finite, got {text!r}")
    return window


def _report_would_overwrite(out: str, names: list[str], names_all: bool) -> str | None:
    """What in ``out`` the report of ``names`` would overwrite or trip over, if it is not a
    report's: a file where an experiment's directory goes, or an index page or (for "all",
    ``names_all``) a summary.json that is not vspin's (the top-level index and summary.json are
    rewritten after every run that writes them)."""
    for name in names:
        if os.path.exists(os.path.join(out, name)) and not os.path.isdir(os.path.join(out, name)):
            return f"{os.path.join(out, name)} is a file, where the report of {name} goes"
    if os.path.isfile(os.path.join(out, "results.json")):
        return None  # an experiment's own directory: no index is written there
    index, summary = os.path.join(out, "index.html"), os.path.join(out, "summary.json")
    for path in (index, summary):
        if os.path.isdir(path):
            return f"{path} is a directory, where the report's {os.path.basename(path)} goes"
    ours = False
    if os.path.isfile(index):
        try:
            with open(index, encoding="utf-8", errors="replace") as f:
                ours = "<title>vspin: reproduced experiments</title>" in f.read(4096)
        except OSError:
            pass
        if not ours:
            return f"{index} is not a page vspin wrote, and the report's index would replace it"
    if os.path.isfile(summary) and not ours and names_all:
        # vspin writes the two together: a summary.json without vspin's index is someone else's.
        return f"{summary} is not one vspin wrote (no index.html of vspin's beside it), and the report's would replace it"
    return None


def _output_file(text: str) -> str:
    """A file to write once the work is done: its directory must exist now, so that a long run
    is not lost to a mistyped path at the end."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a file name, got an empty one")
    folder = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(folder):
        above = folder
        while not os.path.exists(above) and os.path.dirname(above) != above:
            above = os.path.dirname(above)
        if os.path.exists(above) and not os.path.isdir(above):
            raise argparse.ArgumentTypeError(f"{text}: {above} is a file, not a directory")
        raise argparse.ArgumentTypeError(f"{text}: the directory {folder} does not exist")
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a directory; give a file name")
    # Open it for appending now (removing it again if it is new), so that a file the process may
    # not write fails here and not after the work; permission bits alone do not say (root, sysfs).
    existed = os.path.exists(text)
    try:
        with open(text, "a"):
            pass
    except OSError as e:
        raise argparse.ArgumentTypeError(f"{text}: cannot be written: {e.strerror or e}") from None
    if not existed:
        os.remove(text)
    return text


#: What matplotlib can write, by file extension (``--plot``).
PLOT_FORMATS = ("eps", "jpeg", "jpg", "pdf", "pgf", "png", "ps", "raw", "rgba", "svg", "svgz", "tif", "tiff", "webp")


def _plot_file(text: str) -> str:
    """An output file for a figure, in a format its extension names."""
    extension = os.path.splitext(text)[1].lstrip(".").lower()
    if extension not in PLOT_FORMATS:
        raise argparse.ArgumentTypeError(f"{text}: the extension names the image format; allowed "
                                         f"{', '.join('.' + f for f in PLOT_FORMATS)}")
    return _output_file(text)


def _one_file_each(named: dict[str, str | None]) -> str | None:
    """An error message if two of the files named (an option's or the scenario's) are one file,
    which the later write would destroy; None if they are distinct."""
    seen: dict[str, str] = {}
    for name, path in named.items():
        if not path:
            continue
        real = os.path.realpath(path)
        if real in seen:
            return f"{seen[real]} and {name}: both name {path}; one file would overwrite the other"
        seen[real] = name
    return None


def _scenario_file(text: str | None) -> str | None:
    """The scenario argument if it names an existing file (it may be inline TOML)."""
    return text if text and os.path.isfile(text) else None


def _write_text(path: str, text: str) -> None:
    """Write a file the user asked for; a failure names the file (a full disk fails at close)."""
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise OSError(e.errno, e.strerror, path) from None


TIMELINE_WINDOW_MS = (0.0, 100.0)


def _cmd_run(args: argparse.Namespace) -> int:
    if args.seeds is not None:
        return _run_over_seeds(args)
    if args.timeline_ms is not None and not args.timeline:
        print("error: --timeline-ms: sets the window of --timeline PATH, which is not given", file=sys.stderr)
        return 2
    clash = _one_file_each({"the scenario": _scenario_file(args.scenario), "--out": args.out,
                            "--timeline": args.timeline})
    if clash:
        print(f"error: {clash}", file=sys.stderr)
        return 2
    window = (args.timeline_ms or TIMELINE_WINDOW_MS) if args.timeline else None
    result = run(args.scenario, _settings(args), timeline=window, seed=args.seed, duration_ms=args.duration_ms)
    if args.timeline:
        _write_text(args.timeline, result.timeline)
        # A window past the run's end covers it up to its end: say what the file holds.
        end = min(window[1], result.raw["simulated_ms"])
        print(f"timeline of {window[0]:g}..{end:g} ms: {args.timeline} (open in https://ui.perfetto.dev)",
              file=sys.stderr)
    text = result.to_json() if args.json else result.summary()
    if args.out:
        _write_text(args.out, text + "\n")
    else:
        print(text)
    return 0


def _run_over_seeds(args: argparse.Namespace) -> int:
    """`vspin run FILE --seeds 1..5`: the scenario at every seed, on all cores, and each VM's
    throughput over them. One seed of an over-committed host can fall into a convoy that the next
    does not, so this is the answer to trust; one seed's whole summary is `--seed N`."""
    from vspin.sweeps import sweep

    others = [flag for flag, given in (("--seed", args.seed is not None), ("--json", args.json),
                                       ("--timeline", args.timeline), ("--timeline-ms", args.timeline_ms)) if given]
    if others:
        print(f"error: --seeds runs several seeds and prints their summary; {', '.join(others)} belongs to one run "
              f"(every metric of every seed: vspin sweep FILE --grid seed={_seed_text(args.seeds)} --csv FILE)", file=sys.stderr)
        return 2
    clash = _one_file_each({"the scenario": _scenario_file(args.scenario), "--out": args.out})
    if clash:
        print(f"error: {clash}", file=sys.stderr)
        return 2
    settings = _settings(args)
    if "seed" in settings:
        print(f"error: --seeds and --set seed={settings['seed']!r}: both set the seed; give one", file=sys.stderr)
        return 2
    if args.duration_ms is not None:
        if "duration_ms" in settings:
            raise ScenarioError(given_twice("duration_ms", settings["duration_ms"], args.duration_ms))
        settings["duration_ms"] = args.duration_ms
    df = sweep(args.scenario, {"seed": args.seeds}, settings)
    name = load_scenario(args.scenario, settings).get("name", "scenario")
    lines = [f"scenario {name!r}, {len(args.seeds)} seeds ({_seed_text(args.seeds)})", *_over_seeds_lines(df),
             f"(one seed's whole summary: the same command with --seed {args.seeds[0]} in place of --seeds)"]
    text = "\n".join(lines)
    if args.out:
        _write_text(args.out, text + "\n")
    else:
        print(text)
    return 0


#: Seeds are unsigned 64-bit integers in the core.
MAX_SEED = 2**64 - 1


def _seed_list(text: str) -> list[int]:
    """`--seeds`: `LOW..HIGH` (inclusive) or a comma-separated list of seeds."""
    allowed = "allowed LOW..HIGH (e.g. 1..5) or a list (e.g. 1,4,9) of whole numbers 0 or more, at least two"
    low, sep, high = text.partition("..")
    try:
        # A range is counted before it is built: `1..100000000000` must not fill the memory.
        seeds = range(int(low), int(high) + 1) if sep else [int(s) for s in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: {allowed}") from None
    if len(seeds) > 10_000:
        raise argparse.ArgumentTypeError(f"{text!r}: {len(seeds):,} seeds; at most 10,000")
    if len(seeds) < 2 or min(seeds) < 0 or max(seeds) > MAX_SEED or len(set(seeds)) < len(seeds):
        raise argparse.ArgumentTypeError(f"{text!r}: {allowed} and at most {MAX_SEED}, each once")
    return list(seeds)


def _seed_text(seeds: list[int]) -> str:
    return f"{seeds[0]}..{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) else ",".join(map(str, seeds))


def _cmd_validate(args: argparse.Namespace) -> int:
    settings = _settings(args)
    bad = 0
    for path in args.scenarios:
        try:
            validate(path, settings)
            print(f"{path}: ok")
        except ScenarioError as e:
            print(f"{path}: error: {e}", file=sys.stderr)
            bad += 1
        except OSError as e:  # unreadable (permissions, a FIFO gone): the other files are still checked
            print(f"{path}: error: cannot read it: {e.strerror or e}", file=sys.stderr)
            bad += 1
    return 2 if bad else 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from vspin.bench import bench

    report = bench(args.scenario, repeat=args.repeat)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    per = report["events_per_acquisition"]
    print(
        f"{report['scenario']}: {report['simulated_ms']:.0f} ms simulated in "
        f"{report['wall_seconds_median']:.3f} s (median of {report['repeat']})\n"
        f"  {report['events_per_second']:,.0f} events/s\n"
        f"  {report['acquisitions_per_second']:,.0f} lock acquisitions/s"
        + (f" ({per:.1f} events each)" if per else "") + "\n"
        f"  {report['simulated_per_wall']:.2f} simulated s per wall s"
    )
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not allowed; must be at least 1")
    return value


def _int_list(text: str) -> list[int]:
    """`--threads 1,2,4` as a list of distinct counts."""
    try:
        counts = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, e.g. 1,2,4, got {text!r}") from None
    repeated = sorted({n for n in counts if counts.count(n) > 1})
    if repeated:
        raise argparse.ArgumentTypeError(f"{', '.join(map(str, repeated))} given twice; give each count once")
    return counts


def _cpu_max(text: str) -> tuple[int, int]:
    from vspin.cgroup import parse_cpu_max

    try:
        return parse_cpu_max(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--cpu-max: ")) from None


def _lock_names(text: str) -> list[str]:
    """`--locks a,b` as a list of distinct names (which names exist is the benchmark's to say)."""
    names = [x.strip() for x in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected comma-separated lock names, e.g. ticket,tas; got {text!r}")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise argparse.ArgumentTypeError(f"{', '.join(repeated)} given twice")
    return names


def _write_json(path: str, report: dict) -> None:
    _write_text(path, json.dumps(report, indent=2) + "\n")


def _cmd_bench_locks(args: argparse.Namespace) -> int:
    from vspin.bench_locks import BenchConfigError, bench_locks, plot, table

    clash = _one_file_each({"--json": args.json, "--plot": args.plot})
    if clash:
        print(f"error: {clash}", file=sys.stderr)
        return 2
    locks = args.locks
    try:
        report = bench_locks(args.threads, args.seconds, args.cs_ns, args.think_ns, locks, args.warmup, args.pin,
                             args.cpu_max)
    except BenchConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(table(report))
    written = []
    if args.json:
        _write_json(args.json, report)
        written.append(f"report: {args.json}")
    if args.plot:
        plot(report, args.plot)
        written.append(f"plot: {args.plot}")
    if written:
        print(", ".join(written), file=sys.stderr)
    return 0


def _cmd_validate_locks(args: argparse.Namespace) -> int:
    # Both inputs are only read: each must differ from the report written, not from each other.
    clash = (_one_file_each({"--measured": args.measured, "--json": args.json})
             or _one_file_each({"--costs": args.costs, "--json": args.json}))
    if clash:
        print(f"error: {clash}", file=sys.stderr)
        return 2
    from vspin.validate_locks import DEFAULT_SEEDS, ValidationError, repredict, table, validate_locks

    locks = args.locks
    try:
        if args.measured:
            # The stored report fixes what was measured; options that would change it conflict.
            given = [f"--{k.replace('_', '-')}" for k, default in args.measurement_defaults.items()
                     if getattr(args, k) != default]
            if given:
                raise ValidationError(f"{given[0]}: fixed by the report given with --measured; drop it")
            try:
                with open(args.measured) as f:
                    measured = json.load(f)
            except (OSError, json.JSONDecodeError) as e:
                raise ValidationError(f"--measured: cannot read a report from {args.measured}: {e}") from None
            if not isinstance(measured, dict):
                raise ValidationError(f"--measured: {args.measured} holds no report object")
            report = repredict(measured, args.workers, args.host_scheduler, args.seeds)
            return _write_validation(report, args.json, table)
        costs = None
        if args.costs:
            try:
                with open(args.costs) as f:
                    costs = json.load(f)
            except (OSError, json.JSONDecodeError) as e:
                raise ValidationError(f"--costs: cannot read a cost table from {args.costs}: {e}") from None
            # A whole earlier report carries its cost table under `host_costs`.
            costs = costs.get("host_costs", costs) if isinstance(costs, dict) else costs
            if not isinstance(costs, dict):
                raise ValidationError(f"--costs: {args.costs} holds no cost table object")
        report = validate_locks(args.threads, args.seconds, args.cs_ns, args.think_ns, locks, args.repeat,
                                args.host_hz, costs, args.workers, args.warmup, args.host_scheduler, args.pin,
                                DEFAULT_SEEDS if args.seeds is None else args.seeds, args.cpu_max)
    except ValidationError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return _write_validation(report, args.json, table)


def _write_validation(report: dict, path: str, table) -> int:
    print(table(report))
    _write_json(path, report)
    print(f"report: {path}", file=sys.stderr)
    return 0


def _list_experiments_in_help(parser: argparse.ArgumentParser) -> None:
    """Name the experiments under ``reproduce --help``. Loading them takes a fifth of a second,
    so it is done when the help is shown, not whenever the command line is parsed."""
    plain = parser.format_help

    def format_help() -> str:
        from vspin.reproduce.registry import load_experiments

        parser.epilog = "experiments: " + ", ".join(sorted(load_experiments()))
        return plain()

    parser.format_help = format_help  # type: ignore[method-assign]


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from vspin.reproduce import UnknownExperimentError, reproduce
    from vspin.reproduce.registry import load_experiments, select

    load_experiments()
    try:
        names = select(args.name)
    except UnknownExperimentError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    # The report is written after the runs: a directory that cannot hold it must fail now, not
    # after minutes of simulation (which, without --store, would be lost).
    try:
        os.makedirs(args.out, exist_ok=True)
        with tempfile.TemporaryFile(dir=args.out):
            pass
    except OSError as e:
        print(f"error: --out {args.out}: cannot write the report there: {e.strerror or e}", file=sys.stderr)
        return 2
    if (problem := _report_would_overwrite(args.out, names, args.name == "all")) is not None:
        print(f"error: --out {args.out}: {problem}; choose a new directory, or one vspin reproduce wrote", file=sys.stderr)
        return 2
    try:
        docs = reproduce(args.name, "quick" if args.quick else "full", args.out, args.workers, store=args.store)
    except UnknownExperimentError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    failed = [(name, c) for name, doc in docs.items() for c in doc["checks"] if not c["passed"]]
    total = sum(len(doc["checks"]) for doc in docs.values())
    page = os.path.join(args.out, *([] if args.name == "all" else [args.name]), "index.html")
    print(f"{total - len(failed)} of {total} checks passed; report: {page}")
    for name, c in failed:
        print(f"FAILED {name} {c['id']}: {c['detail']}")
    # A report whose checks fail is still a finished job: failing is for --strict (CI gates).
    return 1 if failed and args.strict else 0


def _cmd_compare_reports(args: argparse.Namespace) -> int:
    from vspin.reproduce.compare import ReportError, compare, text

    try:
        c = compare(args.old, args.new)
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(text(c, details=args.details))
    return 1 if c.regressed and args.strict else 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from vspin.result import _table
    from vspin.sweeps import parse_grid, sweep

    if not args.grid:
        print("error: --grid: a sweep needs at least one, e.g. --grid vm.*.lock=ticket,tas --grid seed=1..3",
              file=sys.stderr)
        return 2
    clash = _one_file_each({"the scenario": _scenario_file(args.scenario), "--store": args.store, "--csv": args.csv})
    if clash:
        print(f"error: {clash}", file=sys.stderr)
        return 2
    grid: dict = {}
    for text in args.grid:
        path, values = parse_grid(text)
        if path in grid:
            print(f"error: --grid {path}: given twice; list all its values in one --grid", file=sys.stderr)
            return 2
        grid[path] = values
    df = sweep(args.scenario, grid, _settings(args), store=args.store, workers=args.workers, executor=args.dask)
    if args.csv:
        _write_text(args.csv, df.to_csv(index=False))
    columns = [*df.columns[:list(df.columns).index("vm")], "vm", "lock"]
    rows = [[_cell(v) for v in row] + [f"{units:,.0f}"]
            for row, units in zip(df[columns].itertuples(index=False), df["throughput_per_s"])]
    print("\n".join(_table([*columns, "units/s"], rows, left=len(columns))))
    if len(grid.get("seed", [])) > 1:
        _print_over_seeds(df)
    ran = df.attrs["ran"]
    runs = f"{ran} run{'' if ran == 1 else 's'}"
    if args.store:
        print(f"{len(df)} rows: {runs} now, {df.attrs['reused']} from the store; store: {args.store}")
    else:
        print(f"{len(df)} rows from {runs}")
    return 0


def _cell(value) -> str:
    """A table cell: a VM that takes no locks has none, shown as `-`."""
    return "-" if value is None else str(value)


#: Seeds whose extremes differ by more than this share of the mean disagree: the run is
#: chaotic there (a convoy that forms on some seeds only), and its mean needs many seeds.
SEEDS_DISAGREE = 0.5


def _print_over_seeds(df) -> None:
    print("\n" + "\n".join(_over_seeds_lines(df)))


def _over_seeds_lines(df) -> list[str]:
    """The sweep's throughput over its seeds: mean, 95% interval, range; and a warning where the
    seeds disagree."""
    from vspin.result import _table
    from vspin.sweeps import over_seeds

    summary = over_seeds(df)
    keys = list(summary.columns[:list(summary.columns).index("seeds")])
    rows = [[_cell(v) for v in row[:len(keys)]] + [f"{row.mean:,.0f}", f"± {row.ci95:,.0f}", f"{row.min:,.0f}", f"{row.max:,.0f}"]
            for row in summary.itertuples(index=False)]
    lines = [f"over {summary.seeds.max()} seeds (95% interval of the mean, Student's t):",
             *_table([*keys, "mean units/s", "95%", "min", "max"], rows, left=len(keys))]
    chaotic = summary[(summary["max"] - summary["min"]) > SEEDS_DISAGREE * summary["mean"]]
    if len(chaotic):
        lines.append(f"{len(chaotic)} of {len(summary)} rows: the seeds disagree by more than {SEEDS_DISAGREE:.0%} of the mean "
                     "(a chaotic run, such as a convoy that forms on some seeds only: docs/mechanisms/pticket.md); "
                     "more seeds or longer runs narrow the interval")
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vspin", description="Spinlocks under vCPU preemption: simulate a virtualized host."
    )
    parser.add_argument("--version", action="version", version=f"vspin {version('vspin')}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="simulate a TOML scenario and print a summary")
    p.add_argument("scenario", help="path to a scenario TOML file")
    p.add_argument("--json", action="store_true", help="print the full result as JSON")
    p.add_argument("--seed", type=int, help="override the scenario's seed")
    p.add_argument("--seeds", type=_seed_list, metavar="LIST",
                   help="run every seed of LIST (1..5 or 1,4,9) on all cores and print each VM's throughput over "
                        "them: mean, 95%% interval, range, and a warning where the seeds disagree")
    p.add_argument("--duration-ms", type=float, help="override the scenario's duration")
    p.add_argument("--out", type=_output_file, help="write to this file instead of standard output")
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                   help="override any key, e.g. --set vm.*.lock=tas --set hypervisor.ple.policy=off")
    p.add_argument("--timeline", type=_output_file, metavar="PATH", help="write what every vCPU did as Chrome trace JSON (Perfetto)")
    p.add_argument("--timeline-ms", type=_window, metavar="FROM:TO",
                   help="the window --timeline covers, in simulated ms (default 0:100)")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("sweep", help="run a scenario at every point of a grid of settings (stored, resumable)")
    p.add_argument("scenario", help="path to a scenario TOML file")
    p.add_argument("--grid", action="append", default=[], metavar="PATH=V1,V2",
                   help="a setting and its values; repeat for more dimensions: --grid vm.*.lock=ticket,tas "
                        "--grid seed=1..5 (inclusive) --grid 'vm.0.pin=[[0, 1], [2, 3]]'")
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                   help="override a key at every point, as for run")
    p.add_argument("--store", metavar="FILE.duckdb",
                   help="DuckDB file the runs are written to as they finish; run again to do only the missing points")
    p.add_argument("--workers", type=_positive_int, help="parallel simulation processes (default: CPU count)")
    p.add_argument("--dask", metavar="ADDRESS",
                   help="run on a Dask cluster instead, e.g. tcp://10.0.0.5:8786 (pip install '.[cluster]')")
    p.add_argument("--csv", type=_output_file, metavar="FILE", help="also write the table, one row per point and VM, every metric")
    p.set_defaults(func=_cmd_sweep)

    p = sub.add_parser("validate", help="check scenario files without running them")
    p.add_argument("scenarios", nargs="+", metavar="SCENARIO", help="scenario TOML files; each is checked")
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                   help="override any key before checking, as for run")
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser("bench", help="measure simulator speed (events and acquisitions per second)")
    p.add_argument("--scenario", help="scenario to time (default: 64 vCPUs on 32 pCPUs, PV ticket)")
    p.add_argument("--repeat", type=_positive_int, default=3, help="runs to take the median of (default 3)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_cmd_bench)

    p = sub.add_parser("bench-locks", help="benchmark the locks on real threads against std, parking_lot, spin")
    p.add_argument("--threads", type=_int_list, metavar="LIST",
                   help="thread counts, e.g. 1,2,4,8 (default: 1, cores, 2x, 4x, 8x cores)")
    p.add_argument("--seconds", type=float, default=1.0, help="seconds per lock and thread count (default 1)")
    p.add_argument("--warmup", type=float, default=0.2,
                   help="seconds the threads run before the measured seconds start (default 0.2: with more "
                        "threads than cores a FIFO lock runs at full speed until the first preemption)")
    p.add_argument("--cs-ns", type=int, default=100, help="critical section length in ns (default 100)")
    p.add_argument("--think-ns", type=int, default=200, help="time between unlock and next lock in ns (default 200)")
    p.add_argument("--locks", type=_lock_names, metavar="LIST", help="comma-separated lock names (default: all)")
    p.add_argument("--pin", default="none", metavar="PLACEMENT",
                   help="none (default: the OS scheduler places and migrates the threads) or round-robin "
                        "(thread i pinned to the i-th CPU)")
    p.add_argument("--cpu-max", type=_cpu_max, metavar="QUOTA_US[/PERIOD_US]",
                   help="run the threads in a cgroup with this CPU quota, as a container with a CPU limit "
                        "(100000 is one CPU; the period defaults to 100000; needs root or a delegated cgroup)")
    p.add_argument("--json", type=_output_file, metavar="FILE",
                   help="also write the report as JSON here (the table alone is printed without it)")
    p.add_argument("--plot", type=_plot_file, metavar="FILE.png", help="draw throughput against threads (log y)")
    p.set_defaults(func=_cmd_bench_locks)

    p = sub.add_parser("validate-locks",
                       help="run bench-locks and the simulator's host-mode prediction side by side")
    p.add_argument("--threads", type=_int_list, metavar="LIST",
                   help="thread counts, e.g. 1,2,4,8 (default: 1, cores, 2x, 4x, 8x cores)")
    p.add_argument("--seconds", type=float, default=1.0,
                   help="seconds per lock and thread count, measured and simulated (default 1)")
    p.add_argument("--warmup", type=float, default=0.2,
                   help="seconds run before the measured and simulated seconds start (default 0.2)")
    p.add_argument("--cs-ns", type=int, default=100, help="critical section length in ns (default 100)")
    p.add_argument("--think-ns", type=int, default=200, help="time between unlock and next lock in ns (default 200)")
    p.add_argument("--locks", type=_lock_names, metavar="LIST", help="comma-separated lock names (default: every simulated lock)")
    p.add_argument("--repeat", type=_positive_int, default=3,
                   help="benchmark runs per point (the simulation's seeds are --seeds); medians are compared (default 3)")
    p.add_argument("--host-hz", type=int, help="the kernel's CONFIG_HZ (default: read from its configuration)")
    p.add_argument("--host-scheduler", metavar="NAME",
                   help="the kernel's scheduler: cfs, eevdf (Linux 6.8) or eevdf-6.18 (default: eevdf-6.18 from Linux 6.12, eevdf from 6.6, else cfs)")
    p.add_argument("--costs", metavar="FILE",
                   help="host cost table: an earlier validate-locks report, or the JSON that "
                        "`cargo run --release -p vspin-bench --example host_costs` prints (default: measure now)")
    p.add_argument("--pin", default="none", metavar="PLACEMENT",
                   help="none (default: the OS scheduler places and migrates the threads) or round-robin "
                        "(thread i pinned to the i-th CPU), measured and simulated")
    p.add_argument("--cpu-max", type=_cpu_max, metavar="QUOTA_US[/PERIOD_US]",
                   help="measure under this CPU quota (a cgroup, as bench-locks --cpu-max) and simulate the same "
                        "quota (the VM's cpu_max)")
    # The options that say what to measure, which a report given with --measured fixes.
    measurement = ("threads", "seconds", "warmup", "cs_ns", "think_ns", "locks", "repeat", "host_hz", "costs", "pin",
                   "cpu_max")
    p.set_defaults(measurement_defaults={k: p.get_default(k) for k in measurement})
    p.add_argument("--measured", metavar="FILE",
                   help="predict again the measurements of an earlier report instead of measuring (after a "
                        "simulator change); its configuration and cost table are used (a report from before a "
                        "setting existed gets the value it was measured with: seeds = repeat, host scheduler "
                        "cfs, pin none)")
    p.add_argument("--seeds", type=_positive_int,
                   help="simulation seeds per point; the prediction is their median (default 20; with "
                        "--measured: the report's)")
    p.add_argument("--workers", type=_positive_int, help="parallel simulations (default: CPU count)")
    p.add_argument("--json", required=True, type=_output_file, metavar="FILE", help="write the report as JSON here (required)")
    p.set_defaults(func=_cmd_validate_locks)

    p = sub.add_parser("reproduce", help="reproduce a seed paper's experiments into a report")
    p.add_argument("name", help="experiment name (listed below), or all")
    _list_experiments_in_help(p)
    p.add_argument("--quick", action="store_true", help="small scale that keeps the trends (CI)")
    p.add_argument("--out", default="out", help="report directory (default: out)")
    p.add_argument("--workers", type=_positive_int, help="parallel simulation processes (default: CPU count)")
    p.add_argument("--strict", action="store_true", help="exit with status 1 if any check fails")
    p.add_argument("--store", metavar="FILE.duckdb",
                   help="keep every run in this DuckDB file as it finishes and reuse the runs already there "
                        "(an interrupted reproduction resumes; the runs can be queried, see vspin sweep)")
    p.set_defaults(func=_cmd_reproduce)

    p = sub.add_parser("compare-reports",
                       help="what changed between two reports of vspin reproduce: verdicts, and with --details numbers")
    p.add_argument("old", help="the earlier report directory (the --out of vspin reproduce, or one experiment's)")
    p.add_argument("new", help="the later report directory")
    p.add_argument("--details", action="store_true", help="also list checks whose numbers moved but not their verdict")
    p.add_argument("--strict", action="store_true",
                   help="exit with status 1 if a check that passed in OLD fails in NEW or is gone (a regression gate "
                        "that tolerates the failures OLD already had)")
    p.set_defaults(func=_cmd_compare_reports)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ScenarioError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except InvariantError as e:
        print(f"error: the simulation broke an invariant: {e}", file=sys.stderr)
        return 3
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away: stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:
        # An output path that cannot be written (a missing directory, a file where a directory
        # should be): name it instead of printing a traceback.
        print(f"error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return 2


def console() -> int:
    """The `vspin` executable: `main` with Ctrl-C ending the command at once.

    A simulation runs inside the Rust core, where Python never gets to raise KeyboardInterrupt,
    so the interrupt would wait for the run to finish; the default action ends the command and
    its worker processes at once. (Only here, not in `main`, which tests call in-process.)
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    return main()


if __name__ == "__main__":
    sys.exit(console())
