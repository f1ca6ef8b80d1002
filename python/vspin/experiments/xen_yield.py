"""Xen credit1's "concurrency hazard" (George Dunlap, xen-devel, 2010): a spinning vCPU that
yields to the credit1 scheduler is nearly always picked again, so a preempted lock holder waits
out a whole 30 ms slice; the yield patch puts the yielder behind one lower-priority vCPU, and
the aggregate throughput of 1-4 co-running VMs stays about flat instead of halving.

The seed's setup, as we model it:
- host: one socket of 4 cores (SMT not mentioned, not modelled), Xen credit1 as of the patch's
  time: 30 ms slice, three 10 ms ticks per slice, no rate limit (Xen 4.2 added it), work
  stealing by idle pCPUs and by pCPUs whose best vCPU is OVER (``credit1.rs``);
- guests: 4 vCPUs each, not pinned; the Windows spinlock (``tas-yield``: test-and-set that makes
  ``SCHEDOP_yield`` after every 2047 PAUSEs, as Xen's Viridian interface asks of Windows);
- workload: our ``kernbench`` preset ("this ddk-build test is similar to the Linux
  kernbench", the seed), with every lock taken with interrupts on: a Windows spinlock raises the
  IRQL to DISPATCH_LEVEL, below the IPI level, so its waiters and holders still take IPIs, where
  the Linux locks the preset stands for are half taken with interrupts off; its HAL sends one
  IPI to several CPUs with one logical-mode ICR write (``ipi_send = "multicast"``), where a
  Linux 3.x guest writes once per CPU; 1-4 VMs build at once. The seed's other, idle VMs are left out: an idle
  guest wakes for its timer a few hundred times a second and is otherwise halted;
- throughput: the sum over VMs of work units per second, as the seed sums builds per 100,000 s,
  shown relative to one VM on the stock scheduler (the seed's 1402);
- configurations: ``base`` (stock credit1), ``yield`` (the patch), and the seed's two shelved
  patches, ``pick`` (``csched_cpu_pick`` avoids pCPUs that hold another vCPU of the VM) and
  ``push`` (every accounting period, vCPUs queued beside a sibling move apart), each alone and
  all three together (``pick+push+yield``). Those two patches were attached to the e-mail and are
  not public: the model is our reading of their one sentence each (``credit1.rs``, "Keeping a
  VM's vCPUs apart");
- Pause-Loop Exiting: the seed does not say whether its CPUs had it. Both hosts are run: **PLE
  on** (Xen's fixed 4096-cycle window; a PLE exit is the same yield) and **PLE off** (only the
  guest's lock yields). They differ in the spin loops that are not spinlocks: a TLB-flush IPI
  waits for every target vCPU to run, and only PLE turns that wait into yields.

Checks encode the seed's claims (direction and rough factor), never its exact values.
"""

from __future__ import annotations

import statistics

from vspin.reproduce import Check, Experiment, Figure, Series, register

VM_COUNTS = (1, 2, 3, 4)
# Each configuration's credit1 settings: the yield, the pick, and the push.
CONFIGS = {
    "base": ("stock", "stock", False),
    "pick": ("stock", "patched", False),
    "push": ("stock", "stock", True),
    "yield": ("patched", "stock", False),
    "pick+push+yield": ("patched", "patched", True),
}
HOSTS = {"ple-on": "fixed", "ple-off": "off"}
HOST_TITLES = {"ple-on": "PLE on (Xen's fixed window)", "ple-off": "PLE off (only the guest's lock yields)"}

# The seed's tables: aggregate throughput (builds per 100,000 s) at 1-4 VMs. Its pick+push+yield
# table repeats the base's 1402 for one VM, but gives that run as 74 s, and the text says the
# single VM's throughput "is lower -- almost 4%": 100000/74 = 1351, which we show.
PAPER_TPUT = {"base": [1402, 1049, 805, 665], "yield": [1389, 1514, 1508, 1470],
              "pick+push+yield": [1351, 1540, 1527, 1492]}

# A build is minutes long; a second or two of simulated time holds hundreds of 30 ms slices, and
# the seeds average out which vCPUs the stealing co-locates.
SCALE = {"quick": {"seeds": (1, 2), "duration_ms": 2000}, "full": {"seeds": (1, 2, 3, 4, 5), "duration_ms": 4000}}


def scenario(host: str, config: str, vms: int, duration_ms: int, seed: int) -> dict:
    yield_, pick, push = CONFIGS[config]
    return {
        "name": f"xen-yield-{host}-{config}-{vms}vm",
        "seed": seed,
        "duration_ms": duration_ms,
        "host": {"sockets": 1, "cores_per_socket": 4},
        "hypervisor": {"scheduler": "credit1", "ple": {"policy": HOSTS[host]},
                       "credit1": {"yield": yield_, "pick": pick, "push": push, "tslice_ms": 30, "ratelimit_us": 0}},
        "vm": [{"name": f"vm{i}", "vcpus": 4, "lock": "tas-yield", "ipi_send": "multicast",
                "workload": {"preset": "kernbench", "irqs_off_share": 0.0}}
               for i in range(vms)],
    }


class XenYield(Experiment):
    name = "xen-yield"
    title = "Xen credit1's concurrency hazard and the yield patch (xen-devel, 2010)"
    source = "G. Dunlap, the xen-devel e-mail on credit1's \"concurrency hazard\" and its yield patch, 2010"
    explained_in = "docs/mechanisms/xen-yield.md"

    def run(self, scale, runner):
        sc = SCALE[scale]
        seeds, duration = sc["seeds"], sc["duration_ms"]
        keys = [(h, c, n, s) for h in HOSTS for c in CONFIGS for n in VM_COUNTS for s in seeds]
        runs = dict(zip(keys, runner.run_many([scenario(h, c, n, duration, s) for h, c, n, s in keys])))

        def mean(host, config, n, value):
            return statistics.fmean(value(runs[(host, config, n, s)].raw) for s in seeds)

        def tput(raw):
            return sum(vm["throughput_per_s"] for vm in raw["vms"])

        def per_second(counter):
            return lambda raw: sum(vm["counters"][counter] for vm in raw["vms"]) / (raw["simulated_ms"] / 1000)

        def share(part):
            def of(raw):
                times = [vm["time"] for vm in raw["vms"]]
                return sum(t[part] for t in times) / sum(sum(t.values()) for t in times)
            return of

        paper = [Series(c, list(VM_COUNTS), [t / PAPER_TPUT["base"][0] for t in ts]) for c, ts in PAPER_TPUT.items()]
        setup = (f"Mean of seeds {seeds[0]}-{seeds[-1]}, {duration} ms simulated each; 4 cores, VMs of 4 unpinned "
                 "vCPUs running kernbench with the Windows spinlock (tas-yield).")
        pick_push = " pick and push are our reading of the e-mail's one sentence each; the e-mail gives no numbers for them alone."
        note = (setup + " Aggregate throughput over VMs, relative to one VM under the stock scheduler (ours and the "
                "e-mail's 1402 builds per 100,000 s)." + pick_push + " The e-mail does not say whether its host used "
                "PLE, so its numbers are shown beside both hosts.")
        figures, checks = [], []
        for host in HOSTS:
            tp = {c: [mean(host, c, n, tput) for n in VM_COUNTS] for c in CONFIGS}
            one = tp["base"][0]
            figures.append(Figure(
                id=f"table.{host}", title=f"Aggregate throughput, 1-4 VMs on 4 cores: {HOST_TITLES[host]}",
                metric="throughput ÷ one VM", x_label="VMs building", y_label="aggregate throughput ÷ one VM (stock)",
                series=[Series(c, list(VM_COUNTS), [t / one for t in tp[c]]) for c in CONFIGS], paper=paper,
                kind="bar", note=note))
            spin = {c: [mean(host, c, n, share("spin_ns")) for n in VM_COUNTS] for c in CONFIGS}
            yields = {c: [mean(host, c, n, per_second("yields")) for n in VM_COUNTS] for c in CONFIGS}
            figures.append(Figure(
                id=f"spin.{host}", title=f"Where the time goes: {HOST_TITLES[host]}", metric="% of vCPU time spinning",
                x_label="VMs building", y_label="share of vCPU time spinning (%)",
                series=[Series(c, list(VM_COUNTS), [100 * x for x in spin[c]]) for c in CONFIGS], paper=[],
                note=setup + " Share of all the VMs' vCPU time spent spinning (lock waits and IPI waits), in "
                "percent." + pick_push + " Yields per second (all vCPUs): " + "; ".join(
                    f"{c} " + ", ".join(f"{y:,.0f}" for y in yields[c]) for c in CONFIGS) +
                ". The e-mail reports no breakdown; it says the VMs spent 'an increasingly significant chunk of "
                "their time in spinlock routines' as VMs were added. Ours, stock scheduler, at 2-4 VMs: " +
                ", ".join(f"{100 * x:.1f}%" for x in spin["base"][1:]) +
                (" (rising, as the e-mail says)." if spin["base"][1] < spin["base"][-1] else
                 " (not rising: the e-mail's trend does not hold here).")))
            checks += self._checks(host, tp)
        return figures, checks

    @staticmethod
    def _checks(host, tp):
        base, patched, all_three = tp["base"], tp["yield"], tp["pick+push+yield"]
        fig = f"table.{host}"
        base_ratios = [b / base[0] for b in base]
        yield_ratios = [y / patched[0] for y in patched]
        gains = [y / b for y, b in zip(patched, base)]
        fmt = lambda xs, digits=2: ", ".join(f"{x:.{digits}f}" for x in xs)  # noqa: E731
        alone = {c: [x / b for x, b in zip(tp[c][1:], base[1:])] for c in ("pick", "push")}
        helps = all(min(r) > 1 and statistics.fmean(r) >= 1.05 for r in alone.values())
        together = [a / y for a, y in zip(all_three[1:], patched[1:])]
        # The same quantities from the e-mail's tables.
        e_base, e_yield, e_all = (PAPER_TPUT[c] for c in ("base", "yield", "pick+push+yield"))
        e_gains = [y / b for y, b in zip(e_yield, e_base)]
        vms, vms_2_to_4 = list(VM_COUNTS), list(VM_COUNTS[1:])
        return [
            Check(f"{host}.base_falls_steeply", fig,
                  base_ratios[-1] <= 0.75 and all(b < a for a, b in zip(base_ratios, base_ratios[1:])),
                  f"stock scheduler, aggregate throughput at 1-4 VMs ÷ 1 VM: {fmt(base_ratios)} "
                  "(claim: falls, and 'things continue to get worse as we go up'; accepted: lower at every count "
                  "than at the one before, and at most 0.75 at 4 VMs; e-mail 1.00, 0.75, 0.57, 0.47)",
                  measured={"vms": vms, "base_over_one_vm": base_ratios},
                  paper={"vms": vms, "base_over_one_vm": [b / e_base[0] for b in e_base]}),
            Check(f"{host}.yield_keeps_it_flat", fig, min(yield_ratios[1:]) >= 0.9,
                  f"yield patch, aggregate throughput at 1-4 VMs ÷ 1 VM: {fmt(yield_ratios)} "
                  "(claim: about flat; at least 0.9 at every count; e-mail 1.00, 1.09, 1.09, 1.06)",
                  measured={"vms": vms, "yield_over_one_vm": yield_ratios},
                  paper={"vms": vms, "yield_over_one_vm": [y / e_yield[0] for y in e_yield]}),
            Check(f"{host}.yield_beats_base_by_1.5x_at_4_vms", fig, all(g > 1 for g in gains[1:]) and gains[-1] >= 1.5,
                  f"yield ÷ stock at 1-4 VMs: {fmt(gains)} (claim: yield ahead at 2-4 VMs, by at least 1.5× "
                  "at 4; e-mail 0.99, 1.44, 1.87, 2.21)",
                  measured={"vms": vms, "yield_over_base": gains}, paper={"vms": vms, "yield_over_base": e_gains}),
            Check(f"{host}.yield_costs_under_1pct_with_one_vm", fig, abs(gains[0] - 1) < 0.01,
                  f"yield ÷ stock with one VM: {gains[0]:.4f} (claim: costs less than 1%; e-mail 0.99). In the "
                  "model a VM alone on its cores rarely has a vCPU queued behind a yielder, so the two yields "
                  "nearly always do the same: this holds by construction more than by measurement",
                  measured={"yield_over_base_one_vm": gains[0]}, paper={"yield_over_base_one_vm": e_gains[0]}),
            Check(f"{host}.pick_and_push_each_help", fig, helps,
                  f"÷ stock at 2-4 VMs: pick {fmt(alone['pick'])}, push {fmt(alone['push'])} (claim: each "
                  "'made significant contributions when made alone'; above 1 at every count and by at least 5% "
                  "on average; the e-mail gives no numbers)",
                  measured={"vms": vms_2_to_4, "pick_over_base": alone["pick"], "push_over_base": alone["push"]}),
            Check(f"{host}.all_three_ahead_of_yield_by_under_2pct", fig, all(1 <= r <= 1.02 for r in together),
                  f"pick+push+yield ÷ yield at 2-4 VMs: {fmt(together, 3)} (claim: yield alone is lower 'only by "
                  "a marginal amount -- less than 2% in all cases'; e-mail 1.017, 1.013, 1.015)",
                  measured={"vms": vms_2_to_4, "pick_push_yield_over_yield": together},
                  paper={"vms": vms_2_to_4, "pick_push_yield_over_yield": [a / y for a, y in zip(e_all[1:], e_yield[1:])]}),
        ]


register(XenYield())
