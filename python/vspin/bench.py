"""The simulator benchmark: simulated events and lock acquisitions per wall-clock second.

The standard scenario is the one the foundation issue names: 64 vCPUs (two 32-vCPU VMs) on 32
pCPUs (two sockets), paravirtual ticket lock, kernbench-like workload, stock KVM PLE. Wall time
is measured inside the Rust core around the simulation alone (scenario parsing excluded).
"""

from __future__ import annotations

import json
import platform
import statistics

from vspin import _core
from vspin.scenario import Scenario, ScenarioError, core_error, load_scenario

STANDARD = """
name = "bench-64-on-32"
seed = 1
duration_ms = 1000

[host]
sockets = 2
cores_per_socket = 16

[[vm]]
name = "a"
vcpus = 32
pin = "1:1"
lock = "pv-ticket"
workload = { preset = "kernbench" }

[[vm]]
name = "b"
vcpus = 32
pin = "1:1"
lock = "pv-ticket"
workload = { preset = "kernbench" }
"""


def bench(scenario: Scenario | None = None, repeat: int = 3) -> dict:
    """Run the scenario `repeat` times; report the median rates.

    Raises ScenarioError for a scenario the simulator rejects and ValueError for `repeat` < 1.
    """
    if repeat < 1:
        raise ValueError(f"repeat: {repeat} is not allowed; must be at least 1")
    data = load_scenario(scenario if scenario is not None else STANDARD)
    text = json.dumps(data, sort_keys=True)
    runs = []
    for _ in range(repeat):
        try:
            raw, seconds = _core.bench_json(text)
        except ValueError as e:
            raise core_error(e, data) from None
        result = json.loads(raw)
        runs.append((seconds, result))
    seconds = statistics.median(s for s, _ in runs)
    result = runs[0][1]
    events = result["events"]
    acquisitions = result["totals"]["acquisitions"]
    return {
        "scenario": result["scenario"],
        "machine": platform.machine(),
        "python": platform.python_version(),
        "repeat": repeat,
        "simulated_ms": result["simulated_ms"],
        "wall_seconds_median": seconds,
        "events": events,
        "acquisitions": acquisitions,
        "events_per_second": events / seconds,
        "events_per_acquisition": events / acquisitions if acquisitions else None,
        "acquisitions_per_second": acquisitions / seconds,
        "simulated_per_wall": result["simulated_ms"] / 1000 / seconds,
    }
