"""vspin: spinlocks under vCPU preemption.

A deterministic simulator of a virtualized host (pCPUs, VMs, vCPUs, a CFS or EEVDF host
scheduler, Pause-Loop Exiting, halt/kick and directed yield) running real guest spinlock
algorithms.

Describe a host in TOML (see ``examples/``) and run it::

    import vspin
    result = vspin.run("examples/overcommit-2x.toml")
    print(result.summary())
    result.vms        # one row per VM: throughput, time breakdown, counters (pandas)
    result.vcpus      # one row per vCPU

A scenario may also be a TOML string or a dict of the same structure. Any key can be
overridden: ``vspin.run(path, {"vm.*.lock": "tas", "hypervisor.ple.policy": "off"}, seed=3)``
(the command line's ``--set vm.*.lock=tas``). The same scenario and seed give the same result,
bit for bit.

Run a scenario over a grid of settings, on local processes or a Dask cluster, with every run
kept in a DuckDB file as it finishes (run it again to resume)::

    df = vspin.sweep(path, {"vm.*.lock": ["ticket", "tas"], "seed": [1, 2, 3]}, store="runs.duckdb")
    vspin.over_seeds(df)   # per lock and VM: mean over the seeds, its 95% interval, min, max
"""

from vspin._core import InvariantError
from vspin.result import Result
from vspin.scenario import ScenarioError, load_scenario, run, validate
from vspin.sweeps import over_seeds, sweep

__all__ = ["InvariantError", "Result", "ScenarioError", "load_scenario", "over_seeds", "run", "sweep", "validate"]
