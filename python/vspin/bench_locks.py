"""The locks on real threads: throughput, fairness and tail latency against std, parking_lot and spin.

The measurement runs in the Rust crate ``vspin-bench`` (threads, a calibrated busy critical
section and think time, the OS scheduler preempting holders and waiters when there are more
threads than cores); this module validates the options, shapes the report and draws it.
"""

from __future__ import annotations

import json
import os
import textwrap
import time

from vspin import _core
from vspin.cgroup import CgroupError, cpu_quota


class BenchConfigError(ValueError):
    """A bad option; the message names it and what it allows."""


#: Thread placements: wherever the OS scheduler puts (and migrates) them, or thread ``i`` pinned to
#: the ``i``-th CPU this process may use, modulo their number.
PINS = ("none", "round-robin")


def lock_names() -> list[str]:
    """Every lock the benchmark knows: the vspin algorithms, then std, parking_lot, spin-ticket."""
    return list(_core.bench_lock_names())


def default_threads() -> list[int]:
    """The thread counts measured unless ``threads`` names them: 1, cores, 2x, 4x and 8x cores."""
    return list(_core.bench_default_threads())


#: The longest critical section or think time: a second of busy loop per acquisition is already
#: far from any spinlock's use.
MAX_LOOP_NS = 1_000_000_000

#: The core's limits (`vspin-bench`'s `MAX_THREADS`, `MAX_SECONDS`): more threads than any
#: oversubscription the benchmark is for, and an hour per window, so a mistyped 1e9 is refused.
MAX_THREADS = 4096
MAX_SECONDS = 3600.0
#: The shortest window: over less than a millisecond a lock's count is mostly the clock's grain.
MIN_SECONDS = 0.001


def build_stamp() -> dict:
    """Which vspin measured: the package's version and the hash of its compiled core (the
    ``engine`` of a sweep's store), so that reports from different builds can be told apart."""
    from importlib.metadata import PackageNotFoundError, version

    from vspin.sweeps import engine

    try:
        package = version("vspin")
    except PackageNotFoundError:  # run from a source tree, not installed
        package = "not installed"
    return {"version": package, "engine": engine()}


def bench_locks(threads: list[int] | None = None, seconds: float = 1.0, cs_ns: int = 100,
                think_ns: int = 200, locks: list[str] | None = None, warmup_s: float = 0.2,
                pin: str = "none", cpu_max: tuple[int, int] | None = None) -> dict:
    """Run the benchmark; returns ``{"machine", "config", "results", "uncontended_ns", "ns_per_iteration", "loop_cv",
    "other_work_cores", "vspin"}`` (``vspin``: :func:`build_stamp`).

    ``threads`` defaults to 1, cores, 2x, 4x and 8x cores; ``locks`` to all of ``lock_names()``.
    Each point counts acquisitions over ``seconds`` after ``warmup_s`` of running. ``pin`` is one
    of :data:`PINS`. ``cpu_max`` (quota µs, period µs) runs the whole benchmark in a cgroup with
    that CPU quota, as a container with a CPU limit (:mod:`vspin.cgroup`); the report then holds
    it under ``machine.cpu_max`` and the group's throttling under ``cgroup``.
    """
    allowed = lock_names()
    if threads is not None and (not threads or not all(1 <= t <= MAX_THREADS for t in threads)):
        raise BenchConfigError(f"--threads: every count must be 1..={MAX_THREADS}, got {threads}")
    if not MIN_SECONDS <= seconds <= MAX_SECONDS:
        raise BenchConfigError(f"--seconds: must be a number in [{MIN_SECONDS:g}, {MAX_SECONDS:g}], got {seconds}")
    if not 0 <= warmup_s <= MAX_SECONDS:
        raise BenchConfigError(f"--warmup: must be a number in [0, {MAX_SECONDS:g}], got {warmup_s}")
    for name, value in (("--cs-ns", cs_ns), ("--think-ns", think_ns)):
        if not 0 <= value <= MAX_LOOP_NS:
            raise BenchConfigError(f"{name}: {value} is out of range; allowed 0..={MAX_LOOP_NS} (ns of busy loop)")
    for lock in locks or []:
        if lock not in allowed:
            raise BenchConfigError(f"--locks: unknown lock {lock!r}; allowed: {', '.join(allowed)}")
    if pin not in PINS:
        raise BenchConfigError(f"--pin: unknown placement {pin!r}; allowed: {', '.join(PINS)}")
    config: dict = {"seconds": seconds, "warmup_s": warmup_s, "cs_ns": cs_ns, "think_ns": think_ns, "pin": pin}
    if threads is not None:
        config["threads"] = threads
    if locks:
        config["locks"] = locks
    def run() -> dict:
        # Other work on the machine slows the benchmark: record how busy it was.
        others = other_work_cores()
        try:
            report = json.loads(_core.bench_locks_json(json.dumps(config)))
            report["other_work_cores"] = others
            report["vspin"] = build_stamp()
            return report
        except ValueError as e:  # the core's own check, naming its field (`cs_ns` out of range, ...)
            raise BenchConfigError(str(e)) from None

    if cpu_max is None:
        return run()
    quota_us, period_us = cpu_max
    try:
        with cpu_quota(quota_us, period_us) as throttling:
            report = run()
    except CgroupError as e:
        raise BenchConfigError(f"--cpu-max: {e}") from None
    report["machine"]["cpu_max"] = {"quota_us": quota_us, "period_us": period_us}
    report["cgroup"] = throttling
    return report


def table(report: dict) -> str:
    """Lock x threads: ops/s, fairness and where it comes from, p99 lock() latency.

    ``fairness`` is the most acquisitions of one thread over the fewest. Beside it, from each
    thread's CPU clock (Linux; ``-`` elsewhere): ``cpu time``, the most CPU time of one thread over
    the least (how unequally they ran: sleeping in the lock's slow path, and the scheduler's split of
    the cores); ``acq/cpu-s``, the same spread of acquisitions per second of a thread's own CPU time
    (how unequally they acquired while running); and ``busy``, the
    share of the cores the threads used together.
    """
    def spread(value: float | None, missing: str) -> str:
        return missing if value is None else f"{value:.2f}"

    lines = [f"{'lock':<22} {'threads':>7} {'ops/s':>14} {'fairness':>9} {'cpu time':>9} {'acq/cpu-s':>10} "
             f"{'busy':>5} {'p99 ns':>10}"]
    for r in report["results"]:
        clocks = r.get("cpu_busy") is not None
        fair = spread(r["fairness_max_min"], "starved")
        cpu = spread(r.get("cpu_time_max_min"), "starved" if clocks else "-")
        rate = spread(r.get("acquisitions_per_cpu_s_max_min"), "starved" if clocks else "-")
        busy = "-" if not clocks else f"{r['cpu_busy']:.0%}"
        p99 = "-" if r["p99_acquire_ns"] is None else f"{r['p99_acquire_ns']:,}"
        lines.append(f"{r['lock']:<22} {r['threads']:>7} {r['ops_per_sec']:>14,.0f} {fair:>9} {cpu:>9} {rate:>10} "
                     f"{busy:>5} {p99:>10}")
    lines += ["", *textwrap.wrap(
        "fairness: most acquisitions of one thread ÷ fewest (starved: a thread had none); cpu time: most CPU time "
        "of one thread ÷ least; acq/cpu-s: the same spread of acquisitions per second of a thread's own CPU time; "
        "busy: the threads' CPU time ÷ (window × CPUs); p99 ns: lock() latency, 99th percentile", width=100)]
    if report.get("uncontended_ns"):
        lines.append("")
        lines.append("uncontended lock+unlock (ns): " + ", ".join(
            f"{lock} {ns:.1f}" for lock, ns in report["uncontended_ns"].items()))
    if report.get("cgroup"):
        cpu_max = report["machine"]["cpu_max"]
        lines.append(quota_line(cpu_max["quota_us"], cpu_max["period_us"], [report["cgroup"]]))
    if (warning := busy_machine_warning(report)) is not None:
        lines.append(warning)
    return "\n".join(lines)


#: How long `other_work_cores` watches the machine, seconds.
OTHER_WORK_SAMPLE_S = 0.2


def other_work_cores(sample_s: float = OTHER_WORK_SAMPLE_S) -> float | None:
    """How many of the CPUs this process may run on (its affinity) other work kept busy over
    ``sample_s`` while this process slept, from their lines of ``/proc/stat`` (``None`` off
    Linux). Steal time counts: a hypervisor that ran something else on these vCPUs took it from
    the benchmark too. The load average would not do: it decays over a minute, so it still
    counts a benchmark that has ended."""
    cpus = {f"cpu{c}" for c in os.sched_getaffinity(0)} if hasattr(os, "sched_getaffinity") else set()

    def busy_and_total() -> tuple[int, int] | None:
        busy = total = 0
        try:
            with open("/proc/stat") as stat:
                for line in stat:
                    name, *fields = line.split()
                    if name in cpus:
                        # user nice system idle iowait irq softirq steal (guest time is in user)
                        ticks = [int(x) for x in fields[:8]]
                        busy += sum(ticks) - ticks[3] - ticks[4]
                        total += sum(ticks)
        except (OSError, ValueError, IndexError):
            return None
        return busy, total

    before = busy_and_total()
    time.sleep(sample_s)
    after = busy_and_total()
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1]) * len(cpus)


def busy_machine_warning(report: dict) -> str | None:
    """A warning when other work kept half a CPU or more busy just before the benchmark: it
    then shares the CPUs with the threads, which moves throughput, fairness and every cost
    measured."""
    others = report.get("other_work_cores")
    if others is None or others < 0.5:
        return None
    return (f"WARNING: other work kept {others:.1f} of its {report['machine']['cores']} CPUs busy just before the run: "
            "it may have shared the CPUs with the benchmark; rerun on an idle machine before trusting these numbers")


def quota_line(quota_us: int, period_us: int, throttling: list[dict]) -> str:
    """The CPU quota a benchmark ran under, and how often its cgroup was throttled."""
    periods = sum(t["nr_periods"] for t in throttling)
    throttled = sum(t["nr_throttled"] for t in throttling)
    return (f"CPU quota {quota_us:,} µs per {period_us:,} µs ({quota_us / period_us:.2f} CPUs, cgroup v"
            f"{throttling[0]['cgroup_version']}): throttled in {throttled:,} of {periods:,} periods, "
            f"{sum(t['throttled_usec'] for t in throttling) / 1e6:.2f} s in all")


def plot(report: dict, path: str) -> None:
    """Throughput against thread count, one line per lock, log y."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5))
    for i, lock in enumerate(dict.fromkeys(r["lock"] for r in report["results"])):
        rows = [r for r in report["results"] if r["lock"] == lock]
        # The colour cycle has ten colours: the next ten locks are dashed, and the markers cycle
        # over nine shapes, so no two lines look alike even where collapsed locks overlap.
        ax.plot([r["threads"] for r in rows], [max(r["ops_per_sec"], 1e-3) for r in rows], marker="osv^DpX*P"[i % 9],
                label=lock, linestyle="-" if i % 20 < 10 else "--", markerfacecolor="none")
    ax.set_yscale("log")
    # Thread counts double from one point to the next: a log axis spaces them evenly, ticked at
    # the counts measured.
    counts = sorted({r["threads"] for r in report["results"]})
    ax.set_xscale("log", base=2)
    ax.set_xticks(counts, [str(n) for n in counts])
    ax.minorticks_off()
    ax.set_xlabel("threads")
    ax.set_ylabel("acquisitions per second")
    ax.set_title(f"locks on {report['machine']['cores']} cores")
    ax.axvline(report["machine"]["cores"], color="grey", linestyle=":", linewidth=1, label="cores")
    # Beside the axes: inside, it would hide the lines of a whole band of locks.
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
