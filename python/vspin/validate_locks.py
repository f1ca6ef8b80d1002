"""Validation of the simulator against the locks on real threads (host mode).

``vspin bench-locks`` runs the lock algorithms on this machine's threads, with the OS scheduler
preempting lock holders and queued waiters. Host mode describes that same run as a simulator
scenario, with no hypervisor:

* the host is this machine: its CPUs as pCPUs, its ``CONFIG_HZ``, its scheduler (``eevdf-6.18``
  from Linux 6.12 on, ``eevdf`` from 6.6, else ``cfs``), and a cost table measured here
  (``vspin_bench::host_costs``): PAUSE, L1 hit, cache-line transfer, context switch, the futex
  wake-up of a halted thread (after a short and after a long idle) and the futex wake call; and
  the gaps a running thread sees, split into other tasks running (the host's background threads)
  and interruptions that return to the thread (``host.interruptions``);
* there are no VM exits, entries or IPIs (0 ns), no Pause-Loop Exiting and no directed yield;
* one VM whose vCPUs are the benchmark's threads runs one lock with the benchmark's critical
  section and think time, of the busy loops' calibrated lengths with their measured jitter. Its vCPUs are placed as the
  benchmark placed its threads (``--pin``): unpinned by default, as a program's threads are, so
  the simulator's wake-up placement and idle pull move them as Linux's scheduler moves the
  threads; or pinned round-robin to the pCPUs.

:func:`validate_locks` runs both at the same thread counts and compares their throughput, their
fairness (the spread of the threads' acquisitions, most over fewest) and the 99th percentile of
the time ``lock()`` took (the simulator's to the power-of-two bucket of its lock-wait histogram);
the method and the parameters are in ``docs/calibration.md`` ("host mode"), the results in
``docs/validation.md``.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import statistics
import sys
from itertools import combinations

from vspin import _core
from vspin.bench_locks import (MAX_LOOP_NS, MAX_SECONDS, MIN_SECONDS, PINS, BenchConfigError, bench_locks,
                               busy_machine_warning, default_threads, lock_names, quota_line)
from vspin.experiments.pticket import BACKGROUND as PTICKET_HOST_BACKGROUND
from vspin.reproduce import Runner
from vspin.result import bucket_text, duration_text, wait_quantile

#: The most threads a point can have: the prediction simulates them as one VM's vCPUs.
MAX_PREDICTED_THREADS = 256

#: Locks of the benchmark that are not vspin algorithms, so have no simulator model.
BASELINES = ("std", "parking_lot", "spin-ticket")

#: Host background activity for a cost table measured before the machine's gaps were (reports
#: from before 2026-11-24): the estimate `docs/calibration.md` gives for a Linux host's own
#: threads (kworkers, RCU, softirq, timers; 50 µs every 10 ms per CPU), the one the
#: preemptable-ticket reproduction uses, and no interruptions. Without background threads nothing
#: ever reorders the threads of a pCPU.
HOST_BACKGROUND_ESTIMATE = PTICKET_HOST_BACKGROUND

#: Seeds the prediction of each point is the median of. A seed is one simulated run, as cheap as
#: a fraction of a second, and the model's own run-to-run spread is as wide as the measured
#: differences between the spinning FIFO locks: with 5 seeds the median ranked OTICKET
#: spin-only below the ticket lock at 16 threads (77 against 79 per second), with 20 above it
#: (80 against 74), as measured. Independent of ``repeat``, which is how often the machine is
#: measured.
DEFAULT_SEEDS = 20

#: The guest timer of the simulated VM, Hz. A futex wait is not ended by timer ticks as a halted
#: vCPU is; the simulator needs a guest tick, and 10 Hz is the slowest it accepts.
GUEST_HZ = 10


class ValidationError(ValueError):
    """A bad option or an unusable cost table; the message names the field."""


def simulated_locks() -> list[str]:
    """The benchmark's locks that the simulator also models."""
    return [name for name in lock_names() if name not in BASELINES]


def measure_host_costs() -> dict:
    """This machine's host cost table (``vspin_bench::host_costs``); about five seconds."""
    try:
        return json.loads(_core.host_costs_json())
    except ValueError as e:
        raise ValidationError(str(e)) from None


def kernel_hz() -> int:
    """``CONFIG_HZ`` of the running kernel, from ``/proc/config.gz`` or ``/boot/config-RELEASE``."""
    release = os.uname().release
    for path, opener in (("/proc/config.gz", gzip.open), (f"/boot/config-{release}", open)):
        try:
            with opener(path, "rt") as f:
                for line in f:
                    if line.startswith("CONFIG_HZ="):
                        return int(line.split("=", 1)[1])
        except OSError:
            continue
    raise ValidationError(f"--host-hz: CONFIG_HZ not found in /proc/config.gz or /boot/config-{release}; "
                          "pass the kernel's timer frequency")


#: Host schedulers of host mode, the simulator's names.
HOST_SCHEDULERS = ("cfs", "eevdf", "eevdf-6.18")


def kernel_scheduler(release: str | None = None) -> str:
    """The running kernel's fair scheduler: EEVDF replaced CFS in Linux 6.6, and Linux 6.12 added
    delayed dequeue, which decides how a futex waiter is woken (``eevdf-6.18``, the version whose
    code the simulator follows; 6.12 to 6.17 differ from it only in details that matter less:
    ``docs/validation.md``, "The host's scheduler")."""
    release = release or os.uname().release
    try:
        major, minor = (int(part) for part in release.split("-")[0].split(".")[:2])
    except ValueError:
        raise ValidationError(f"--host-scheduler: cannot tell the scheduler of kernel {release!r}; "
                              f"pass one of {', '.join(HOST_SCHEDULERS)}") from None
    if (major, minor) >= (6, 12):
        return "eevdf-6.18"
    return "eevdf" if (major, minor) >= (6, 6) else "cfs"


def _checked_scheduler(name: str | None) -> str | None:
    """``--host-scheduler`` as given (``None``: not given), if the simulator has it."""
    if name is not None and name not in HOST_SCHEDULERS:
        raise ValidationError(f"--host-scheduler: {name!r} is not simulated; allowed: {', '.join(HOST_SCHEDULERS)}")
    return name


def _costs_of(option: str, costs: dict, hz: int) -> dict:
    """``host_config`` of a cost table read from the file ``option`` names, its errors naming it."""
    try:
        return host_config(costs, hz)
    except ValidationError as e:
        raise ValidationError(f"{option}: not a usable cost table ({e}); give a validate-locks report or the JSON of "
                              f"the host_costs example") from None


def host_config(costs: dict, hz: int) -> dict:
    """The scenario's ``[host]`` table from a measured cost table (see ``docs/calibration.md``)."""
    def median(key: str) -> float:
        try:
            return float(costs[key]["median"])
        except (KeyError, TypeError, ValueError):
            raise ValidationError(f"host costs: {key}.median is missing or not a number") from None

    clock_ghz = median("clock_ghz")
    l1_hit_ns = median("l1_hit_ns")
    pause_ns = median("spin_iteration_ns") - l1_hit_ns
    if pause_ns <= 0:
        raise ValidationError(f"host costs: spin_iteration_ns ({median('spin_iteration_ns'):.2f}) must exceed "
                              f"l1_hit_ns ({l1_hit_ns:.2f}): a spin iteration is a load and a PAUSE")
    try:
        wakes = [float(w["ns"]["median"]) for w in costs["wake_to_run_ns"]]
        short, long = wakes[0], wakes[-1]
    except (KeyError, TypeError, ValueError, IndexError):
        raise ValidationError("host costs: wake_to_run_ns must be a non-empty list of {idle_us, ns: {median}}, "
                              "shortest idle first") from None
    context_switch_ns = median("context_switch_ns")
    transfer_ns = median("transfer_ns")
    deep_after = costs.get("deep_idle_after_ns")
    if not isinstance(costs.get("cpus"), int) or costs["cpus"] < 1:
        raise ValidationError("host costs: cpus must be a positive integer")
    return {
        "sockets": 1,
        "cores_per_socket": costs["cpus"],
        "threads_per_core": 1,
        "clock_ghz": clock_ghz,
        "hz": hz,
        "costs": {
            "pause_cycles": pause_ns * clock_ghz,
            "l1_hit_ns": l1_hit_ns,
            # A locked instruction measured faster than a load is noise: charged nothing extra.
            "atomic_extra_ns": max(0.0, median("atomic_ns") - l1_hit_ns),
            "transfer_same_socket_ns": transfer_ns,
            # One socket: never used, but set to the one transfer measured.
            "transfer_cross_socket_ns": transfer_ns,
            "vm_exit_ns": 0.0,
            "vm_entry_ns": 0.0,
            "hypercall_ns": median("futex_wake_ns"),
            "ipi_send_ns": 0.0,
            # The simulator adds a context switch to every wake-up's switch-in. A wake-up measured
            # faster than a switch can only be noise: it is charged nothing, not a negative time.
            "wakeup_ns": max(0.0, short - context_switch_ns),
            "context_switch_ns": context_switch_ns,
        },
        "idle_states": [] if deep_after is None else [{"exit_ns": max(0.0, long - short), "residency_ns": float(deep_after)}],
        **host_noise(costs),
    }


def host_noise(costs: dict) -> dict:
    """The ``background`` and ``interruptions`` of the ``[host]`` table: a Poisson process of each
    kind of gap the cost table measured (``preemptions``: another task ran; ``interruptions``:
    the thread was not switched out), with the measured rate per CPU and mean length. A cost
    table without them (measured before they were) gets :data:`HOST_BACKGROUND_ESTIMATE` and no
    interruptions; a kind never seen gets no process."""
    if "interruptions" not in costs and "preemptions" not in costs:
        return {"background": dict(HOST_BACKGROUND_ESTIMATE)}

    def process(kind: str) -> dict | None:
        try:
            per_s, mean_ns = float(costs[kind]["per_s"]["median"]), float(costs[kind]["mean_ns"]["median"])
        except (KeyError, TypeError, ValueError):
            raise ValidationError(f"host costs: {kind}.per_s.median and {kind}.mean_ns.median must be numbers") from None
        if per_s < 0 or mean_ns < 0:
            raise ValidationError(f"host costs: {kind} has a negative rate or length ({per_s}, {mean_ns})")
        if per_s == 0 or mean_ns == 0:
            return None
        return {"interval_us": 1e6 / per_s, "burst_us": mean_ns / 1e3}

    noise = {"background": process("preemptions"), "interruptions": process("interruptions")}
    return {k: v for k, v in noise.items() if v is not None}


def loop_jitter(loop_cv: float, cs_ns: float, think_ns: float) -> float:
    """The workload ``jitter`` (each length's coefficient of variation) that gives one iteration
    of critical section plus think time the coefficient of variation ``loop_cv`` that
    ``bench-locks`` measured: both lengths vary in proportion to their length (the measured
    variation is a share of a loop's length at 300 ns and at 3 µs alike), independently."""
    return min(0.5, loop_cv * (cs_ns + think_ns) / math.hypot(cs_ns, think_ns))


def host_scenario(host: dict, lock: str, threads: int, seconds: float, cs_ns: float, think_ns: float,
                  seed: int = 1, scheduler: str = "cfs", pin: str = "none", loop_cv: float = 0.0,
                  cpu_max: list[int] | None = None) -> dict:
    """One benchmark point (lock, thread count) as a host-mode scenario of ``seconds``, its threads
    placed as ``pin`` (one of ``PINS``) says, its busy loops as jittery as ``loop_cv`` (see
    :func:`loop_jitter`; 0 for exact lengths), under the CPU quota ``cpu_max`` (quota µs, period
    µs) if the benchmark ran under one."""
    cpus = host["cores_per_socket"] * host["sockets"] * host["threads_per_core"]
    quota = {"cpu_max": {"quota_us": cpu_max[0], "period_us": cpu_max[1]}} if cpu_max else {}
    return {
        "name": f"host-{lock}-{threads}",
        "seed": seed,
        "duration_ms": seconds * 1000.0,
        "host": host,
        "hypervisor": {"scheduler": scheduler, "ple": {"policy": "off"}, "directed_yield": "off"},
        "vm": [{
            "name": "bench",
            "vcpus": threads,
            "pin": [i % cpus for i in range(threads)] if pin == "round-robin" else "none",
            "lock": lock,
            "guest_hz": GUEST_HZ,
            # Every parameter of the guest loop is set, so the preset contributes nothing (no
            # lock with interrupts off: a thread's futex wait is ended by signals and wakes
            # alike). The benchmark's busy loops have calibrated lengths, with the little jitter
            # measured.
            "workload": {
                "preset": "kernbench", "think_ns": think_ns, "cs_ns": cs_ns, "locks": 1, "zipf_s": 0.0,
                "cs_long_probability": 0.0, "block_probability": 0.0, "shootdown_probability": 0.0,
                "wake_probability": 0.0, "irqs_off_share": 0.0, "durations": "fixed", "jitter": loop_jitter(loop_cv, cs_ns, think_ns),
            },
            **quota,
        }],
    }


def _spread(values: list[float]) -> float | None:
    """Most over fewest, as ``bench-locks`` reports a spread; ``None`` when the fewest is zero."""
    return max(values) / min(values) if min(values) > 0 else None


def _predict(scenarios: list[dict], warmup_ms: float, workers: int | None) -> list[dict]:
    """What ``bench-locks`` reports of each scenario's window after ``warmup_ms``: ``rate``,
    acquisitions per simulated second; ``fairness``, the spread of the threads' acquisitions
    (most over fewest; ``None`` when a thread made none); ``p99``, the power-of-two bucket
    ``[from_ns, to_ns)`` that holds the 99th percentile of the window's lock waits (``None``
    without an acquisition); and where the spread comes from: ``cpu_time``, the spread of the
    threads' CPU time (a vCPU's time running: useful, spinning and in host work),
    ``per_cpu_s``, the spread of their acquisitions per second of it, and ``busy``, their CPU time
    over the window times the pCPUs. A run is deterministic, so a run cut at the warm-up is the
    first part of the full run, and the difference is the window."""
    cut = [{**sc, "duration_ms": warmup_ms} for sc in scenarios] if warmup_ms > 0 else []
    with Runner(workers, label="validate-locks") as runner:
        results = runner.run_many(scenarios + cut)
    full, before = results[:len(scenarios)], results[len(scenarios):]
    window_s = [(sc["duration_ms"] - warmup_ms) / 1000.0 for sc in scenarios]

    def per_thread(r) -> list[int]:
        return [v["counters"]["acquisitions"] for v in r.raw["vcpus"]]

    def cpu_ns(r) -> list[int]:
        return [v["time"]["useful_ns"] + v["time"]["spin_ns"] + v["time"]["exit_ns"] for v in r.raw["vcpus"]]

    def window_waits(i: int) -> list[dict]:
        prior = {b["from_ns"]: b for b in before[i].raw["vms"][0]["lock_waits"]} if before else {}
        waits = []
        for b in full[i].raw["vms"][0]["lock_waits"]:
            earlier = prior.get(b["from_ns"], {"acquisitions": 0, "wait_ns": 0})
            if b["acquisitions"] > earlier["acquisitions"]:
                waits.append({**b, "acquisitions": b["acquisitions"] - earlier["acquisitions"],
                              "wait_ns": b["wait_ns"] - earlier["wait_ns"]})
        return waits

    predicted = []
    for i, r in enumerate(full):
        counts, cpu = per_thread(r), cpu_ns(r)
        if before:
            counts = [a - b for a, b in zip(counts, per_thread(before[i]))]
            cpu = [a - b for a, b in zip(cpu, cpu_ns(before[i]))]
        waits = window_waits(i)
        p99 = wait_quantile(waits, 0.99) if waits else None
        host = scenarios[i]["host"]
        pcpus = host["cores_per_socket"] * host["sockets"] * host["threads_per_core"]
        predicted.append({
            "rate": sum(counts) / window_s[i], "fairness": _spread(counts),
            "p99": [p99["from_ns"], p99["to_ns"]] if p99 else None,
            "cpu_time": _spread(cpu),
            "per_cpu_s": _spread([n / t for n, t in zip(counts, cpu)]) if min(cpu) > 0 else None,
            "busy": sum(cpu) / 1e9 / (window_s[i] * pcpus),
        })
    return predicted


def _median_known(values: list) -> object | None:
    """The lower median of the values that are not ``None`` (a point with no acquisition has no
    latency), itself one of them; ``None`` if there are none."""
    known = sorted(v for v in values if v is not None)
    return known[(len(known) - 1) // 2] if known else None


def median_spread(runs: list[float | None]) -> float | None:
    """The median of fairness spreads, where ``None`` (a thread made no acquisition) is the
    largest; ``None`` when the median falls on one."""
    ordered = sorted(runs, key=lambda x: math.inf if x is None else x)
    mid = ordered[(len(ordered) - 1) // 2:len(ordered) // 2 + 1]
    return None if not mid or None in mid else sum(mid) / len(mid)


def validate_locks(threads: list[int] | None = None, seconds: float = 1.0, cs_ns: int = 100, think_ns: int = 200,
                   locks: list[str] | None = None, repeat: int = 3, host_hz: int | None = None,
                   costs: dict | None = None, workers: int | None = None, warmup_s: float = 0.2,
                   host_scheduler: str | None = None, pin: str = "none", seeds: int = DEFAULT_SEEDS,
                   cpu_max: tuple[int, int] | None = None) -> dict:
    """Run ``vspin bench-locks`` and its host-mode prediction at the same points.

    Each point is measured ``repeat`` times and simulated with seeds 1..``seeds``; both report
    the median and every run. Both count acquisitions over ``seconds`` after ``warmup_s``: a FIFO
    lock under oversubscription runs at full speed until the first preemption catches a thread in
    its queue, a start that the simulator (CFS, vCPUs starting at random vruntimes) and the
    machine (EEVDF, threads leaving a barrier) do not play alike. ``costs`` is a cost table
    measured earlier (default: measure now); ``host_hz`` the kernel's ``CONFIG_HZ`` (default:
    read from the kernel's configuration); ``host_scheduler`` one of ``HOST_SCHEDULERS`` (default:
    the running kernel's); ``pin`` the threads' placement, measured and simulated (``PINS``);
    ``cpu_max`` a CPU quota (quota µs, period µs) the benchmark runs under (a cgroup) and the
    prediction simulates (the VM's ``cpu_max``).
    """
    allowed = simulated_locks()
    for lock in locks or []:
        if lock not in allowed:
            known = lock in lock_names()
            why = "has no simulator model (it is one of bench-locks' comparison locks)" if known else "is not a lock"
            raise ValidationError(f"--locks: {lock!r} {why}; allowed: {', '.join(allowed)}")
    locks = list(locks or allowed)
    if repeat < 1:
        raise ValidationError(f"--repeat: must be at least 1, got {repeat}")
    _check_seeds(seeds)
    if pin not in PINS:
        raise ValidationError(f"--pin: unknown placement {pin!r}; allowed: {', '.join(PINS)}")
    given = {"seconds": seconds, "warmup_s": warmup_s, "cs_ns": cs_ns, "think_ns": think_ns}
    if host_hz is not None:
        given["host_hz"] = host_hz
    _check_config_limits(given, report=None)
    # The benchmark's default counts go to 8x the cores (`vspin bench-locks`); the prediction
    # simulates each count as one VM's vCPUs. Say so now, not after the benchmark.
    counts = threads if threads is not None else default_threads()
    if not counts or min(counts) < 1 or max(counts) > MAX_PREDICTED_THREADS:
        given = "--threads" if threads is not None else "the default --threads (up to 8x this machine's cores)"
        hint = "" if threads is not None else "; give --threads"
        raise ValidationError(f"{given}: every count must be 1..={MAX_PREDICTED_THREADS} (one simulated VM's "
                              f"vCPUs), got {counts}{hint}")
    scheduler = _checked_scheduler(host_scheduler) or kernel_scheduler()
    hz = host_hz if host_hz is not None else kernel_hz()
    # Other work on the machine slows the benchmark, not the simulation: record how busy it was.
    load_before = os.getloadavg()
    measure_now = costs is None
    if measure_now:
        _progress("measuring this machine's costs")
        costs = measure_host_costs()
    host = host_config(costs, hz) if measure_now else _costs_of("--costs", costs, hz)
    # A cost table the simulator rejects must fail before minutes of benchmark, not after.
    for lock in locks:
        try:
            _core.validate_json(json.dumps(host_scenario(host, lock, max(counts), warmup_s + seconds, cs_ns,
                                                         think_ns, 1, scheduler, pin, 0.0, cpu_max)))
        except ValueError as e:
            raise ValidationError(f"the host-mode scenario of {lock} (from the cost table): {e}") from None

    run_s = len(locks) * len(counts) * (warmup_s + seconds)
    runs = []
    for k in range(repeat):
        _progress(f"benchmark run {k + 1}/{repeat}: {len(locks)} locks at {len(counts)} thread counts, "
                  f"about {run_s:.0f} s")
        try:
            runs.append(bench_locks(threads, seconds, cs_ns, think_ns, locks, warmup_s, pin, cpu_max))
        except BenchConfigError as e:
            raise ValidationError(str(e)) from None
    measured: dict[tuple[str, int], list[float]] = {}
    # Per point, every run's value of each other field of a row that the report keeps.
    kept: dict[tuple[str, int], dict[str, list]] = {}
    for run in runs:
        for row in run["results"]:
            point = (row["lock"], row["threads"])
            measured.setdefault(point, []).append(row["ops_per_sec"])
            for key, field in MEASURED_FIELDS.items():
                kept.setdefault(point, {}).setdefault(key, []).append(row.get(field))
    # A cost table is a snapshot: measured again after the benchmark, a cost that moved tells that
    # the machine changed under it (a virtual machine's vCPUs moved by its host, other load).
    costs_after = None
    if measure_now:
        _progress("measuring this machine's costs again")
        costs_after = measure_host_costs()

    report = {
        "machine": runs[0]["machine"],
        "config": {"threads": sorted({n for _, n in measured}), "seconds": seconds, "warmup_s": warmup_s,
                   "cs_ns": cs_ns, "think_ns": think_ns, "locks": locks, "repeat": repeat, "seeds": seeds, "host_hz": hz,
                   "host_scheduler": scheduler, "pin": pin, "cpu_max": list(cpu_max) if cpu_max else None},
        "load_average_before": load_before,
        # The busiest of the runs' samples: one busy start is enough to doubt the medians.
        "other_work_cores": max((run["other_work_cores"] for run in runs if run.get("other_work_cores") is not None),
                                default=None),
        **({"cgroup_runs": [run["cgroup"] for run in runs]} if cpu_max else {}),
        "bench_ns_per_iteration": [run["ns_per_iteration"] for run in runs],
        "bench_loop_cv": [run["loop_cv"] for run in runs],
        "host_costs": costs,
        "host": host,
        "rows": [{"lock": lock, "threads": n, "measured_runs": runs_, **kept[(lock, n)]}
                 for (lock, n), runs_ in measured.items()],
    }
    if costs_after is not None:
        report["host_costs_after"] = costs_after
        report["host_cost_drift"] = host_cost_drift(costs, costs_after)
    return _with_prediction(report, workers)


#: How far a cost may move between the measurements before and after the benchmark (either way)
#: before the report flags it: the repeats of one measurement agree within about 20% on a quiet
#: machine (`docs/calibration.md`, host mode), so 1.5× is a change of the machine, not noise.
COST_DRIFT_LIMIT = 1.5

#: The single-number costs of the table that the prediction uses.
DRIFT_KEYS = ("clock_ghz", "l1_hit_ns", "atomic_ns", "spin_iteration_ns", "transfer_ns", "context_switch_ns",
              "futex_wake_ns")


def _progress(step: str) -> None:
    """Say what a long run is doing, on a terminal (as the simulations' ``Runner`` does)."""
    if sys.stderr.isatty():
        sys.stderr.write(f"validate-locks: {step}\n")
        sys.stderr.flush()


def host_cost_drift(before: dict, after: dict) -> list[dict]:
    """The costs whose medians differ by more than :data:`COST_DRIFT_LIMIT` between two tables."""
    drift = []
    for key in DRIFT_KEYS:
        try:
            a, b = float(before[key]["median"]), float(after[key]["median"])
        except (KeyError, TypeError, ValueError):
            continue
        if a > 0 and b > 0 and max(a / b, b / a) > COST_DRIFT_LIMIT:
            drift.append({"cost": key, "before": a, "after": b})
    return drift


#: The limits of the measuring options, by the report's config key: the option, the range, and
#: why. ``validate_locks`` checks its options against them and ``repredict`` a report's config,
#: so a report that could not have been measured is not predicted either. The prediction
#: simulates the warm-up and the window together, at most one simulated hour (checked apart).
CONFIG_LIMITS = (
    ("seconds", "--seconds", MIN_SECONDS, MAX_SECONDS, "s of measuring window"),
    ("warmup_s", "--warmup", 0, MAX_SECONDS, "s of warm-up"),
    ("host_hz", "--host-hz", 10, 10000, "the kernel's CONFIG_HZ"),
    ("cs_ns", "--cs-ns", 1, MAX_LOOP_NS, "ns of busy loop; the simulator's workload resolves 1 ns"),
    ("think_ns", "--think-ns", 1, MAX_LOOP_NS, "ns of busy loop; the simulator's workload resolves 1 ns"),
)


def _check_config_limits(values: dict, report: str | None) -> None:
    """Check ``values`` (config key → value; keys left out are not checked) against
    ``CONFIG_LIMITS``. An error names the option, or with ``report`` (the option that gave the
    report) the report's config key."""
    def name(key: str, option: str) -> str:
        return option if report is None else f"{report}: config.{key}"
    for key, option, low, high, unit in CONFIG_LIMITS:
        if key not in values:
            continue
        x = values[key]
        if not isinstance(x, (int, float)) or isinstance(x, bool):
            raise ValidationError(f"{name(key, option)}: {x!r} is not a number; allowed {low:g}..={high:g} ({unit})")
        if not low <= x <= high:
            raise ValidationError(f"{name(key, option)}: {x!r} is out of range; allowed {low:g}..={high:g} ({unit})")
    if {"warmup_s", "seconds"} <= values.keys() and values["warmup_s"] + values["seconds"] > MAX_SECONDS:
        both = "--warmup and --seconds" if report is None else f"{report}: config.warmup_s and config.seconds"
        raise ValidationError(f"{both}: {values['warmup_s']:g} + {values['seconds']:g} s is out of range; allowed at "
                              f"most {MAX_SECONDS:g} s together (one simulated hour)")


def _check_seeds(seeds: int) -> None:
    if not isinstance(seeds, int) or seeds < 1:
        raise ValidationError(f"--seeds: must be an integer of at least 1, got {seeds}")


#: What a report keeps of each measured run besides its throughput: the row's key, then the
#: ``bench-locks`` field it holds (one value per run).
MEASURED_FIELDS = {
    "measured_fairness_runs": "fairness_max_min",
    "measured_p99_runs": "p99_acquire_ns",
    "measured_cpu_time_runs": "cpu_time_max_min",
    "measured_per_cpu_s_runs": "acquisitions_per_cpu_s_max_min",
    "measured_busy_runs": "cpu_busy",
}

#: The configuration a report's rows were measured with, which predicting them again needs.
REPORT_CONFIG_KEYS = ("threads", "seconds", "warmup_s", "cs_ns", "think_ns", "repeat", "host_hz")

#: What `repredict` computes afresh; every other key of the report is carried over.
PREDICTED_KEYS = ("config", "host_costs", "host", "rows", "criteria")


def repredict(measured: dict, workers: int | None = None, host_scheduler: str | None = None,
              seeds: int | None = None) -> dict:
    """Predict again the measurements of an earlier report (after a change to the simulator), with
    its cost table, configuration and measured runs; ``host_scheduler`` overrides its scheduler,
    ``seeds`` its number of prediction seeds (reports from before ``seeds`` used ``repeat``)."""
    try:
        config, costs = dict(measured["config"]), measured["host_costs"]
        rows = [{"lock": r["lock"], "threads": r["threads"], "measured_runs": list(r["measured_runs"]),
                 # Reports from before fairness (latency, CPU time) was predicted have no measured
                 # spreads (p99 latencies, CPU times).
                 **{key: list(r[key]) for key in MEASURED_FIELDS if key in r}}
                for r in measured["rows"]]
        hz = config["host_hz"]
        cores = measured["machine"]["cores"]
    except (KeyError, TypeError):
        raise ValidationError("--measured: not a validate-locks report (machine.cores, config, host_costs and "
                              "rows with measured_runs are needed)") from None
    missing = [k for k in REPORT_CONFIG_KEYS if k not in config]
    if missing:
        raise ValidationError(f"--measured: config lacks {', '.join(missing)}; a validate-locks report has "
                              f"{', '.join(REPORT_CONFIG_KEYS)}")
    _check_config_limits({key: config[key] for key, *_ in CONFIG_LIMITS}, report="--measured")
    threads = config["threads"]
    if not isinstance(threads, list) or not threads or not all(
            isinstance(t, int) and not isinstance(t, bool) and t >= 1 for t in threads):
        raise ValidationError(f"--measured: config.threads {threads!r} is not a non-empty list of positive integers")
    if not isinstance(cores, int) or cores < 1:
        raise ValidationError(f"--measured: machine.cores {cores!r} is not a positive integer")
    allowed = simulated_locks()
    if not rows:
        raise ValidationError("--measured: rows is empty; a validate-locks report has a row per lock and thread count")
    seen = set()
    for r in rows:
        if r["lock"] not in allowed:
            raise ValidationError(f"--measured: rows ({r['lock']!r}, {r['threads']} threads): no simulator model of "
                                  f"that lock; allowed: {', '.join(allowed)}")
        if (not isinstance(r["threads"], int) or isinstance(r["threads"], bool) or r["threads"] not in threads
                or not 1 <= r["threads"] <= MAX_PREDICTED_THREADS):
            raise ValidationError(f"--measured: rows ({r['lock']}, {r['threads']!r} threads): the thread count is not one of "
                                  f"config.threads {threads} within 1..={MAX_PREDICTED_THREADS}")
        if (r["lock"], r["threads"]) in seen:
            raise ValidationError(f"--measured: rows ({r['lock']}, {r['threads']} threads) appears twice")
        seen.add((r["lock"], r["threads"]))
        runs = r["measured_runs"]
        if not runs or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
                               for x in runs):
            raise ValidationError(f"--measured: rows ({r['lock']}, {r['threads']} threads): measured_runs "
                                  f"{runs!r} is not a non-empty list of finite numbers >= 0")
    config["host_scheduler"] = _checked_scheduler(host_scheduler) or config.get("host_scheduler", "cfs")
    # Before the benchmark could pin, its threads were never pinned.
    config.setdefault("pin", "none")
    if seeds is not None:
        _check_seeds(seeds)
        config["seeds"] = seeds
    config.setdefault("seeds", config.get("repeat"))
    if not isinstance(config["seeds"], int) or config["seeds"] < 1:
        raise ValidationError(f"--measured: config.seeds {config['seeds']!r} is not a positive integer")
    if config["pin"] not in PINS:
        raise ValidationError(f"--measured: config.pin {config['pin']!r} is not one of {', '.join(PINS)}")
    loop_cv = measured.get("bench_loop_cv")
    if loop_cv is not None and not (isinstance(loop_cv, list) and loop_cv and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in loop_cv)):
        raise ValidationError(f"--measured: bench_loop_cv {loop_cv!r} is not a non-empty list of numbers >= 0")
    # Everything else the report holds (the cost table measured after the benchmark and its drift,
    # notes) is kept as it was: re-predicting must not lose what was measured.
    report = {**{k: v for k, v in measured.items() if k not in PREDICTED_KEYS},
              "config": config, "host_costs": costs, "host": _costs_of("--measured", costs, hz), "rows": rows}
    return _with_prediction(report, workers)


def _with_prediction(report: dict, workers: int | None) -> dict:
    """Simulate every measured point of ``report`` with seeds 1..``seeds`` and add the comparison."""
    c, host = report["config"], report["host"]
    seeds, warmup_s = c["seeds"], c["warmup_s"]
    # Reports from before the loops' jitter was measured are predicted with exact lengths, as then.
    loop_cv = statistics.median(report.get("bench_loop_cv") or [0.0])
    scenarios = [host_scenario(host, r["lock"], r["threads"], warmup_s + c["seconds"], c["cs_ns"], c["think_ns"],
                               seed, c["host_scheduler"], c["pin"], loop_cv, c.get("cpu_max"))
                 for r in report["rows"] for seed in range(1, seeds + 1)]
    simulated = _predict(scenarios, warmup_s * 1000.0, workers)
    for k, row in enumerate(report["rows"]):
        points = simulated[k * seeds:(k + 1) * seeds]
        predicted = [point["rate"] for point in points]
        spreads = [point["fairness"] for point in points]
        p99s = [point["p99"] for point in points]
        cpu_times = [point["cpu_time"] for point in points]
        per_cpu_s = [point["per_cpu_s"] for point in points]
        busy = [point["busy"] for point in points]
        m, p = statistics.median(row["measured_runs"]), statistics.median(predicted)

        def measured_spread(key: str) -> float | None:
            return median_spread(row[key]) if row.get(key) else None

        row.update({"measured_ops_per_sec": m, "predicted_ops_per_sec": p, "predicted_runs": predicted,
                    "predicted_over_measured": p / m if m > 0 else None,
                    "measured_fairness": measured_spread("measured_fairness_runs"),
                    "predicted_fairness": median_spread(spreads), "predicted_fairness_runs": spreads,
                    "measured_p99_acquire_ns": _median_known(row.get("measured_p99_runs", [])),
                    "predicted_p99_bucket_ns": _median_known(p99s), "predicted_p99_runs": p99s,
                    # Where the spread comes from: how unequally the threads ran (their CPU times)
                    # and acquired while running (per CPU second), and how busy the cores were.
                    "measured_cpu_time_spread": measured_spread("measured_cpu_time_runs"),
                    "predicted_cpu_time_spread": median_spread(cpu_times), "predicted_cpu_time_runs": cpu_times,
                    "measured_per_cpu_s_spread": measured_spread("measured_per_cpu_s_runs"),
                    "predicted_per_cpu_s_spread": median_spread(per_cpu_s), "predicted_per_cpu_s_runs": per_cpu_s,
                    "measured_busy": _median_known(row.get("measured_busy_runs", [])),
                    "predicted_busy": statistics.median(busy), "predicted_busy_runs": busy})
    report["criteria"] = criteria(report)
    return report


def criteria(report: dict) -> dict:
    """The issue's two criteria, computed from the rows.

    * **Ordering** at each thread count: every pair of locks, the faster measured against the
      faster predicted. A pair is *swapped* when the prediction orders it the other way and *tied*
      when it predicts the same throughput for both (at 1 thread the simulator charges every lock
      the same few L1 hits, see ``docs/validation.md``). ``same_order`` is the strict test: no
      pair swapped or tied. A pair is *outside the noise* when the measured runs do not overlap
      (the slower lock's best run is below the faster one's worst); with one run per point the
      noise is unknown and ``outside_noise`` is ``None``. ``holds_outside_noise``: no pair outside
      the noise is swapped or tied.
    * **Ticket collapse factor**: ticket throughput at ``cores`` threads over that at each larger
      count, measured against predicted; it holds when the ratio is within 2x either way.
    """
    rows = report["rows"]
    noise_known = report["config"]["repeat"] >= 2
    ordering = []
    for n in report["config"]["threads"]:
        at = [r for r in rows if r["threads"] == n]
        by_measured = [r["lock"] for r in sorted(at, key=lambda r: -r["measured_ops_per_sec"])]
        by_predicted = [r["lock"] for r in sorted(at, key=lambda r: -r["predicted_ops_per_sec"])]
        wrong = []
        for a, b in combinations(at, 2):
            hi, lo = (a, b) if a["measured_ops_per_sec"] >= b["measured_ops_per_sec"] else (b, a)
            outside = min(hi["measured_runs"]) > max(lo["measured_runs"]) if noise_known else None
            if hi["predicted_ops_per_sec"] < lo["predicted_ops_per_sec"]:
                wrong.append({"faster": hi["lock"], "slower": lo["lock"], "predicted": "swapped", "outside_noise": outside})
            elif hi["predicted_ops_per_sec"] == lo["predicted_ops_per_sec"]:
                wrong.append({"faster": hi["lock"], "slower": lo["lock"], "predicted": "tied", "outside_noise": outside})
        ordering.append({
            "threads": n, "measured_order": by_measured, "predicted_order": by_predicted,
            "pairs": len(at) * (len(at) - 1) // 2,
            "swapped": sum(w["predicted"] == "swapped" for w in wrong),
            "tied": sum(w["predicted"] == "tied" for w in wrong),
            "same_order": not wrong,
            "holds_outside_noise": None if not noise_known else not any(w["outside_noise"] for w in wrong),
            "wrong_pairs": wrong,
        })
    cores = report["machine"]["cores"]
    ticket = {r["threads"]: r for r in rows if r["lock"] == "ticket"}
    collapse = []
    if cores in ticket:
        base = ticket[cores]
        for n in sorted(t for t in ticket if t > cores):
            # No acquisition in the window: the factor is unbounded, reported as None.
            m = base["measured_ops_per_sec"] / ticket[n]["measured_ops_per_sec"] if ticket[n]["measured_ops_per_sec"] else None
            p = base["predicted_ops_per_sec"] / ticket[n]["predicted_ops_per_sec"] if ticket[n]["predicted_ops_per_sec"] else None
            ratio = p / m if m and p else None
            collapse.append({"threads": n, "measured": m, "predicted": p, "predicted_over_measured": ratio,
                             "within_2x": ratio is not None and 0.5 <= ratio <= 2.0})
    return {
        "ordering": ordering,
        "ordering_holds": all(o["same_order"] for o in ordering),
        "ordering_holds_outside_noise": None if not noise_known else all(o["holds_outside_noise"] for o in ordering),
        "ticket_collapse": collapse,
        "ticket_collapse_holds": bool(collapse) and all(c["within_2x"] for c in collapse),
    }


def table(report: dict) -> str:
    """Measured against predicted throughput, then the criteria."""
    lines = [f"{'lock':<22} {'threads':>7} {'measured ops/s':>15} {'predicted ops/s':>16} {'pred/meas':>9} "
             f"{'fairness meas':>13} {'fairness pred':>13} {'p99 meas':>10} {'p99 pred':>17}"]

    def spread(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    def p99_measured(r: dict) -> str:
        ns = r.get("measured_p99_acquire_ns")
        return "-" if ns is None else duration_text(ns)

    def p99_predicted(r: dict) -> str:
        bucket = r["predicted_p99_bucket_ns"]
        return "-" if bucket is None else bucket_text(*bucket)

    for r in report["rows"]:
        ratio = "-" if r["predicted_over_measured"] is None else f"{r['predicted_over_measured']:.2f}"
        lines.append(f"{r['lock']:<22} {r['threads']:>7} {r['measured_ops_per_sec']:>15,.0f} "
                     f"{r['predicted_ops_per_sec']:>16,.0f} {ratio:>9} "
                     f"{spread(r['measured_fairness']):>13} {spread(r['predicted_fairness']):>13} "
                     f"{p99_measured(r):>10} {p99_predicted(r):>17}")
    oversubscribed = [r for r in report["rows"] if r["threads"] > report["machine"]["cores"]]
    if oversubscribed:
        lines.append("")
        lines.append("where the fairness spread comes from, with more threads than cores (measured / predicted): the "
                     "threads' CPU times (how unequally they ran), their acquisitions per CPU second (how unequally they "
                     "acquired while running), "
                     "the cores' busy share")
        lines.append(f"{'lock':<22} {'threads':>7} {'cpu time':>13} {'acq/cpu-s':>13} {'busy':>11}")

        def share(x: float | None) -> str:
            return "-" if x is None else f"{x:.0%}"

        for r in oversubscribed:
            lines.append(f"{r['lock']:<22} {r['threads']:>7} "
                         f"{spread(r.get('measured_cpu_time_spread')):>6} {spread(r.get('predicted_cpu_time_spread')):>6} "
                         f"{spread(r.get('measured_per_cpu_s_spread')):>6} {spread(r.get('predicted_per_cpu_s_spread')):>6} "
                         f"{share(r.get('measured_busy')):>5} {share(r.get('predicted_busy')):>5}")
    c = report["criteria"]
    lines.append("")
    for o in c["ordering"]:
        verdict = "same order" if o["same_order"] else f"{o['swapped']} swapped, {o['tied']} tied of {o['pairs']} pairs"
        if o["holds_outside_noise"] is not None and not o["same_order"]:
            outside = sum(bool(w["outside_noise"]) for w in o["wrong_pairs"])
            verdict += f"; {outside} of them outside the measured noise"
        lines.append(f"order at {o['threads']} thread{'' if o['threads'] == 1 else 's'}: {verdict}")
    def factor(x: float | None) -> str:
        return "unbounded (no acquisition)" if x is None else f"{x:,.1f}x"

    for k in c["ticket_collapse"]:
        lines.append(f"ticket collapse {report['machine']['cores']} -> {k['threads']} threads: measured "
                     f"{factor(k['measured'])}, predicted {factor(k['predicted'])} "
                     f"({'within' if k['within_2x'] else 'NOT within'} 2x)")
    if not c["ticket_collapse"]:
        quota = " under the CPU quota" if report["config"].get("cpu_max") else ""
        lines.append(f"ticket collapse: not measured (needs the ticket lock at the core count, "
                     f"{report['machine']['cores']}{quota}, and above)")
    if (warning := busy_machine_warning(report)) is not None:
        lines.append(warning)
    for d in report.get("host_cost_drift", []):
        lines.append(f"WARNING: {d['cost']} moved from {d['before']:.4g} before the benchmark to {d['after']:.4g} after it: "
                     "the machine changed during the run, and the prediction uses the first")
    if report.get("cgroup_runs"):
        lines.append(quota_line(*report["config"]["cpu_max"], report["cgroup_runs"]) + "; simulated as the VM's cpu_max")
    calibration = report.get("bench_ns_per_iteration")
    jitter = report.get("bench_loop_cv")
    load = report.get("load_average_before")
    if load and calibration:
        lines.append(f"load average before: {', '.join(f'{x:.2f}' for x in load)}; busy-loop "
                     f"calibration {min(calibration):.3f}-{max(calibration):.3f} ns per iteration"
                     + (f", jitter (CV) {min(jitter):.3f}-{max(jitter):.3f}" if jitter else ""))
    return "\n".join(lines)
