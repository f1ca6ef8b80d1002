"""The result of one simulation run, as plain data and as pandas DataFrames."""

from __future__ import annotations

import json
from collections.abc import Iterable

import pandas as pd

TIME_KINDS = ("useful", "spin", "exit", "halted", "waiting", "finished")


#: Metrics that are a number or null (no target met, no PLE epoch ended, PLE off). A column that
#: holds a null is made float with NaN for it: otherwise a column of nulls alone stays Python
#: ``None`` objects and, concatenated with another run's numbers (``vspin.sweep``), mixes ``None``
#: and NaN.
NULLABLE_NUMBERS = ("completion_ms", "ple_inefficiency", "ple_window_mean_cycles", "ple_window_cycles")


def _frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    for column in NULLABLE_NUMBERS:
        if column in df and df[column].isna().any():
            df[column] = df[column].astype("float64")
    return df


def _flatten(row: dict) -> dict:
    flat = {k: v for k, v in row.items() if k not in ("time", "counters", "lock_waits", "lock_holds", "locks", "ple_epoch_trace")}
    flat.update({f"time_{k}": v for k, v in row["time"].items()})
    flat.update(row["counters"])
    return flat


class Result:
    """Metrics of a run: ``raw`` is the JSON document of ``vspin run --json``."""

    def __init__(self, raw: dict, scenario: dict, timeline: str | None = None):
        self.raw = raw
        self.scenario = scenario
        self.timeline = timeline
        """Chrome trace JSON of the recorded window, if one was asked for."""

    @property
    def vms(self) -> pd.DataFrame:
        """One row per VM: throughput, completion, time breakdown (ns) and counters."""
        return _frame([_flatten(vm) for vm in self.raw["vms"]])

    @property
    def vcpus(self) -> pd.DataFrame:
        """One row per vCPU: work done, final PLE window, time breakdown (ns) and counters."""
        return _frame([_flatten(v) for v in self.raw["vcpus"]])

    @property
    def lock_waits(self) -> pd.DataFrame:
        """One row per VM and wait bucket: acquisitions whose wait from ``lock()`` to acquisition
        fell in ``from_ns <= wait < to_ns`` (power-of-two buckets; 0 ns is an uncontended
        acquisition), and the waiting time they add up to. Empty buckets are left out."""
        rows = [{"vm": vm["name"], **b} for vm in self.raw["vms"] for b in vm["lock_waits"]]
        return pd.DataFrame(rows, columns=["vm", "from_ns", "to_ns", "acquisitions", "wait_ns"])

    @property
    def lock_holds(self) -> pd.DataFrame:
        """One row per VM and hold bucket: holds that lasted ``from_ns <= hold < to_ns`` from the
        end of their wait to ``unlock()`` on the guest's clock (a critical section, plus any time
        its vCPU was descheduled in it), and the time they add up to. Empty buckets are left out."""
        rows = [{"vm": vm["name"], **b} for vm in self.raw["vms"] for b in vm["lock_holds"]]
        return pd.DataFrame(rows, columns=["vm", "from_ns", "to_ns", "holds", "hold_ns"])

    @property
    def locks(self) -> pd.DataFrame:
        """One row per VM and lock (its index in the VM's lock set): acquisitions, and the
        waiting and holding time they add up to. Recorded only when the scenario asks
        (``[record] locks = true``); each lock's histograms are in ``lock_histograms``."""
        rows = [{"vm": vm["name"], **{k: v for k, v in lock.items() if k not in ("waits", "holds")}}
                for vm in self._recorded_locks() for lock in vm["locks"]]
        return pd.DataFrame(rows, columns=["vm", "lock", "acquisitions", "wait_ns", "hold_ns"])

    @property
    def lock_histograms(self) -> pd.DataFrame:
        """One row per VM, lock, measure (``"wait"`` or ``"hold"``) and non-empty power-of-two
        bucket: how many waits or holds of that lock fell in ``from_ns <= d < to_ns``
        (``count``) and their sum (``total_ns``). Recorded only with ``[record] locks = true``."""
        rows = [{"vm": vm["name"], "lock": lock["lock"], "measure": measure, "from_ns": b["from_ns"], "to_ns": b["to_ns"],
                 "count": b[count], "total_ns": b[total]}
                for vm in self._recorded_locks() for lock in vm["locks"]
                for measure, key, count, total in (("wait", "waits", "acquisitions", "wait_ns"), ("hold", "holds", "holds", "hold_ns"))
                for b in lock[key]]
        return pd.DataFrame(rows, columns=["vm", "lock", "measure", "from_ns", "to_ns", "count", "total_ns"])

    def _recorded_locks(self) -> list[dict]:
        if any(vm.get("locks") is None for vm in self.raw["vms"]):
            raise ValueError("this run did not record each lock: set record.locks = true in the scenario "
                             "(--set record.locks=true)")
        return self.raw["vms"]

    @property
    def ple_epoch_trace(self) -> pd.DataFrame:
        """One row per VM and PLE epoch, in order: when it ended (``end_ms``), the mean window of
        the VM's vCPUs then (``window_cycles``) and its ``inefficiency``. Recorded only when the
        scenario asks (``[record] ple_epochs = true``): the trace grows with the run."""
        if any(vm.get("ple_epoch_trace") is None for vm in self.raw["vms"]):
            raise ValueError("this run did not record its PLE epochs: set record.ple_epochs = true in the scenario "
                             "(--set record.ple_epochs=true)")
        rows = [{"vm": vm["name"], "epoch": i + 1, **e}
                for vm in self.raw["vms"] for i, e in enumerate(vm["ple_epoch_trace"])]
        return pd.DataFrame(rows, columns=["vm", "epoch", "end_ms", "window_cycles", "inefficiency"])

    @property
    def totals(self) -> dict:
        return dict(self.raw["totals"])

    def to_json(self) -> str:
        """The result as JSON; byte-identical for the same scenario and seed."""
        return json.dumps(self.raw, indent=2, sort_keys=True)

    def summary(self) -> str:
        """A readable report of the run."""
        r = self.raw
        names = [vm["name"] for vm in r["vms"]]
        lines = [
            f"scenario {r['scenario']!r}, seed {r['seed']}: "
            f"{r['simulated_ms']:.1f} ms simulated, {r['events']:,} events",
        ]
        duration = self.scenario.get("duration_ms")
        targets_met = any(vm["completion_ms"] is not None for vm in r["vms"])
        if isinstance(duration, (int, float)) and r["simulated_ms"] < duration and targets_met:
            lines.append(f"(ended before duration_ms = {duration:g}: every VM with a work_units target finished)")
        lines.append("")
        lines += _table(
            ["VM", "lock", "workload", "vCPUs", "units", "units/s", "done at"],
            [[vm["name"], vm["lock"] or "-", vm["workload"], f"{vm['vcpus']}", f"{vm['work_units']:,}",
              f"{vm['throughput_per_s']:,.0f}",
              f"{vm['completion_ms']:.1f} ms" if vm["completion_ms"] is not None else "-"] for vm in r["vms"]],
            left=3, rule=True,
        )
        lines += ["", "time per VM (% of its vCPUs' time):"]
        shares = []
        for vm in r["vms"]:
            total = sum(vm["time"].values()) or 1
            shares.append([f"{100 * vm['time'][k + '_ns'] / total:.1f}%" for k in TIME_KINDS])
        lines += _table(["VM", *TIME_KINDS], [[n, *row] for n, row in zip(names, shares)])
        counters = list(r["totals"].keys())
        lines += ["", "counters:"]
        for group in (counters[:6], counters[6:]):
            lines += _table(["VM", *(c.replace("_", " ") for c in group)],
                            [[vm["name"], *(f"{vm['counters'][c]:,}" for c in group)] for vm in r["vms"]])
        exited = [vm for vm in r["vms"] if vm["ple_window_mean_cycles"] is not None]
        if exited:
            lines += ["", "PLE exits (epochs of the VM's exits; inefficiency = windows spun + exit handling, ÷ CPU time):"]
            lines += _table(["VM", "epochs", "mean inefficiency", "mean window at exit"],
                            [[vm["name"], f"{vm['ple_epochs']:,}",
                              f"{vm['ple_inefficiency']:.3f}" if vm["ple_inefficiency"] is not None else "-",
                              f"{vm['ple_window_mean_cycles']:,.0f} cycles"] for vm in exited])
        waited = [vm for vm in r["vms"] if vm["lock_waits"]]
        if waited:
            lines += ["", "lock waits, from lock() to acquisition (power-of-two buckets):"]
            lines += _table(["VM", "waited", "median", "99th percentile", "half the waiting in waits of"],
                            [[vm["name"], *_wait_summary(vm["lock_waits"])] for vm in waited])
        held = [vm for vm in r["vms"] if vm["lock_holds"]]
        if held:
            lines += ["", "lock holds, from acquisition to unlock() (a holder descheduled in its critical section holds the lock meanwhile):"]
            lines += _table(["VM", "holds", "median", "99th percentile", "longest", f"holds of {duration_text(1 << 20)} or more"],
                            [[vm["name"], *_hold_summary(vm["lock_holds"])] for vm in held])
        recorded = [vm for vm in r["vms"] if vm.get("locks")]
        if recorded:
            lines += ["", "the locks each VM waited for longest (record.locks):"]
            rows = []
            for vm in recorded:
                busiest = sorted(vm["locks"], key=lambda lock: (-lock["wait_ns"], lock["lock"]))[:3]
                total = sum(lock["acquisitions"] for lock in vm["locks"]) or 1
                rows += [[vm["name"], f"{lock['lock']}", f"{lock['acquisitions']:,}", f"{100 * lock['acquisitions'] / total:.1f}%",
                          duration_text(lock["wait_ns"]), _median_text(lock["holds"], "holds")]
                         for lock in busiest if lock["acquisitions"]]
            lines += _table(["VM", "lock", "acquisitions", "share", "waiting time", "median hold"], rows)
        return "\n".join(lines)


def sum_histograms(histograms: Iterable[list[dict]]) -> list[dict]:
    """Histograms of the results (``lock_waits``, ``lock_holds``, a lock's ``waits``) added up
    bucket by bucket, e.g. one VM's over several seeds: each bucket once, in order of its
    ``from_ns``, with every other count summed. Concatenating the lists instead would break
    the order that :func:`wait_quantile` walks."""
    merged: dict[int, dict] = {}
    for histogram in histograms:
        for b in histogram:
            m = merged.setdefault(b["from_ns"], {"from_ns": b["from_ns"], "to_ns": b["to_ns"]})
            for key, value in b.items():
                if key not in ("from_ns", "to_ns"):
                    m[key] = m.get(key, 0) + value
    return [merged[start] for start in sorted(merged)]


def wait_quantile(buckets: list[dict], q: float, weight: str = "acquisitions") -> dict:
    """The bucket of a VM's ``lock_waits`` (a non-empty list) at quantile ``q`` of the
    acquisitions (or, with ``weight="wait_ns"``, of the waiting time: the wait lengths that waiting
    time is spent in). Any histogram of the results works with its own weight (``lock_holds``
    with ``"holds"`` or ``"hold_ns"``)."""
    total = sum(b[weight] for b in buckets)
    seen = 0
    for b in buckets:
        seen += b[weight]
        if seen >= q * total:
            return b
    return buckets[-1]


def _wait_summary(buckets: list[dict]) -> list[str]:
    def bound(b: dict) -> str:
        return "0 ns" if b["to_ns"] == 1 else f"< {duration_text(b['to_ns'])}"
    n = sum(b["acquisitions"] for b in buckets)
    contended = n - sum(b["acquisitions"] for b in buckets if b["to_ns"] == 1)
    cells = [f"{100 * contended / n:.1f}%", bound(wait_quantile(buckets, 0.5)), bound(wait_quantile(buckets, 0.99))]
    if any(b["wait_ns"] for b in buckets):
        half = wait_quantile(buckets, 0.5, "wait_ns")
        cells.append(bucket_text(half["from_ns"], half["to_ns"]))
    else:
        cells.append("-")
    return cells


def _hold_summary(buckets: list[dict]) -> list[str]:
    n = sum(b["holds"] for b in buckets)
    long = sum(b["holds"] for b in buckets if b["from_ns"] >= 1 << 20)
    return [f"{n:,}", _median_text(buckets, "holds"), f"< {duration_text(wait_quantile(buckets, 0.99, 'holds')['to_ns'])}",
            f"< {duration_text(buckets[-1]['to_ns'])}", f"{long:,}"]


def _median_text(buckets: list[dict], weight: str) -> str:
    return f"< {duration_text(wait_quantile(buckets, 0.5, weight)['to_ns'])}" if buckets else "-"


def bucket_text(from_ns: int, to_ns: int) -> str:
    """A wait bucket ``from_ns <= wait < to_ns`` as text: "262 µs-524 µs", or "0 ns" for the
    bucket of uncontended acquisitions."""
    return "0 ns" if to_ns == 1 else f"{duration_text(from_ns)}-{duration_text(to_ns)}"


def duration_text(ns: int) -> str:
    """A duration in ns as a short text in its largest unit: 262144 reads "262 µs"."""
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns} ns"


def _table(header: list[str], rows: list[list[str]], left: int = 1, rule: bool = False) -> list[str]:
    """Lines of a text table: the first `left` columns left-aligned, the rest right-aligned, every
    column as wide as its widest cell and two spaces apart, so that no name runs into the next."""
    widths = [max(len(c) for c in column) for column in zip(header, *rows)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    out = [line(header)]
    if rule:
        out.append("-" * len(out[0]))
    return out + [line(row) for row in rows]
