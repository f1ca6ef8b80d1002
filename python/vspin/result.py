"""The result of one simulation run, as plain data and as pandas DataFrames."""

from __future__ import annotations

import json

import pandas as pd

TIME_KINDS = ("useful", "spin", "exit", "halted", "waiting", "finished")


def _flatten(row: dict) -> dict:
    flat = {k: v for k, v in row.items() if k not in ("time", "counters")}
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
        return pd.DataFrame([_flatten(vm) for vm in self.raw["vms"]])

    @property
    def vcpus(self) -> pd.DataFrame:
        """One row per vCPU: work done, final PLE window, time breakdown (ns) and counters."""
        return pd.DataFrame([_flatten(v) for v in self.raw["vcpus"]])

    @property
    def totals(self) -> dict:
        return dict(self.raw["totals"])

    def to_json(self) -> str:
        """The result as JSON; byte-identical for the same scenario and seed."""
        return json.dumps(self.raw, indent=2, sort_keys=True)

    def summary(self) -> str:
        """A readable report of the run."""
        r = self.raw
        lines = [
            f"scenario {r['scenario']!r}, seed {r['seed']}: "
            f"{r['simulated_ms']:.1f} ms simulated, {r['events']:,} events",
            "",
        ]
        header = f"{'VM':<12}{'lock':<11}{'workload':<11}{'vCPUs':>6}{'units':>11}{'units/s':>12}{'done at':>11}"
        lines += [header, "-" * len(header)]
        for vm in r["vms"]:
            done = f"{vm['completion_ms']:.1f} ms" if vm["completion_ms"] is not None else "-"
            lines.append(
                f"{vm['name']:<12}{vm['lock']:<11}{vm['workload']:<11}{vm['vcpus']:>6}"
                f"{vm['work_units']:>11,}{vm['throughput_per_s']:>12,.0f}{done:>11}"
            )
        lines += ["", "time per VM (% of its vCPUs' time):"]
        lines.append(f"{'VM':<12}" + "".join(f"{k:>10}" for k in TIME_KINDS))
        for vm in r["vms"]:
            total = sum(vm["time"].values()) or 1
            lines.append(
                f"{vm['name']:<12}"
                + "".join(f"{100 * vm['time'][k + '_ns'] / total:>9.1f}%" for k in TIME_KINDS)
            )
        names = list(r["totals"].keys())
        lines += ["", "counters:"]
        for group in (names[:5], names[5:]):
            lines.append(f"{'VM':<12}" + "".join(f"{n.replace('_', ' '):>18}" for n in group))
            for vm in r["vms"]:
                lines.append(f"{vm['name']:<12}" + "".join(f"{vm['counters'][n]:>18,}" for n in group))
        return "\n".join(lines)
