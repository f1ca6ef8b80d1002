"""The Locking-Aware Scheduler (LAS; Lee, Son & Park): Xen publishes the end of each vCPU's slice
to its guest, whose spinlock yields instead of taking a lock that its longest recorded critical
section would carry past the slice end, so that no lock holder is preempted when its slice ends.

The seed's setup, as we model it:
- host: two Xeon E5345 (2 sockets × 4 cores, 2.33 GHz; no SMT, no PLE on that generation), Xen
  credit1 (30 ms slice, no rate limit), the patched yield;
- guests of 8 vCPUs (4 for one sysbench case), not pinned, on Xen Linux 2.6.18, whose spinlock
  is an unfair test-and-test-and-set byte lock: our ``las-tas`` lock, which is exactly that when
  the hypervisor publishes no slice (``Linux-xen``) and LAS's guest half when it does
  (``Linux-LAS``: ``credit1.las = true``, which also gives a yielding vCPU the credits of the slice
  it gave up);
- Xen Linux is a paravirtualized kernel: it flushes other vCPUs' TLBs with the
  ``MMUEXT_TLB_FLUSH_MULTI`` hypercall and waits for no vCPU (``tlb_flush = "xen-pv"``);
- ``kernbench``: our ``kernbench`` preset in one guest, and 0, 1, 3 or 7 more guests running
  infinite loops (our ``cpu-hog``), so 1, 2, 4 or 8 guests; throughput of the kernbench guest;
- ``sysbench`` OLTP: two guests, both running it, of 8 or 4 vCPUs; our ``dvdstore`` preset (the
  OLTP web store of the VEE'13 reproduction: MySQL's locks, I/O waits, wake-ups) stands in for it.

The seed gives no numbers for kernbench (its figure 3 is not in the text) and +48% (8 vCPUs) and
+41% (4 vCPUs) for sysbench. Checks encode its claims (direction and rough factor), never its
exact values.
"""

from __future__ import annotations

import statistics

from vspin.reproduce import Check, Experiment, Figure, Series, register
from vspin.sweeps import mean_ci95

GUESTS = (1, 2, 4, 8)
# Guest tasks per vCPU of the kernbench guest: the preset's one, and a kernel build's two.
TASKS = (1, 2)
CONFIGS = {"Linux-xen": False, "Linux-LAS": True}
PAPER_SYSBENCH_GAIN = {8: 1.48, 4: 1.41}
# "the spinlock waiting time of kernbench is 2^9 ~ 2^16 cycle in most cases" (the seed, citing
# earlier work), in cycles of the host's clock.
WAIT_RANGE_CYCLES = (2**9, 2**16)
CLOCK_GHZ = 2.33

# The model's kernbench is chaotic (one preempted lock holder stalls the guest's other vCPUs for
# up to a slice, tens of times a run), so a gain counts only where its 95% interval over seeds
# (`mean_ci95`) excludes no gain; several seeds, since it hangs on those rare events.
SCALE = {"quick": {"seeds": (1, 2, 3), "duration_ms": 2000}, "full": {"seeds": (1, 2, 3, 4, 5, 6), "duration_ms": 4000}}
# sysbench, the seed's one measured claim, runs the full scale's sample at both scales: three
# 2 s runs put its 95% interval (Student's t with 2 degrees of freedom, 4.3 standard errors)
# below no gain even where the mean gain is the full scale's (quick read 1.33 ± 0.54 against
# 1.45 ± 0.20). Its sixteen vCPUs on eight cores cost about 15 s per seed for all four runs.
SYSBENCH = SCALE["full"]


def _host(las: bool, duration_ms: int, seed: int, name: str) -> dict:
    return {
        "name": name,
        "seed": seed,
        "duration_ms": duration_ms,
        "host": {"sockets": 2, "cores_per_socket": 4, "clock_ghz": CLOCK_GHZ},
        "hypervisor": {"scheduler": "credit1", "ple": {"policy": "off"},
                       "credit1": {"yield": "patched", "tslice_ms": 30, "ratelimit_us": 0, "las": las}},
    }


def kernbench(config: str, guests: int, duration_ms: int, seed: int, tasks: int = 1) -> dict:
    """``tasks`` guest tasks per vCPU: 1 is the preset as every reproduction runs it; 2 is the
    ``make -j 2×vCPUs`` a kernel build runs, shown beside it (``docs/mechanisms/las.md``)."""
    name = f"las-kernbench-{config}-{guests}" + (f"-{tasks}-tasks" if tasks != 1 else "")
    sc = _host(CONFIGS[config], duration_ms, seed, name)
    workload = {"preset": "kernbench"} | ({"threads_per_vcpu": tasks} if tasks != 1 else {})
    sc["vm"] = [{"name": "kernbench", "vcpus": 8, "lock": "las-tas", "tlb_flush": "xen-pv", "workload": workload}] + [
        {"name": f"loop{i}", "vcpus": 8, "lock": "las-tas", "tlb_flush": "xen-pv", "workload": {"preset": "cpu-hog"}}
        for i in range(1, guests)]
    return sc


def sysbench(config: str, vcpus: int, duration_ms: int, seed: int) -> dict:
    sc = _host(CONFIGS[config], duration_ms, seed, f"las-sysbench-{config}-{vcpus}")
    sc["vm"] = [{"name": f"oltp{i}", "vcpus": vcpus, "lock": "las-tas", "tlb_flush": "xen-pv", "workload": {"preset": "dvdstore"}}
                for i in range(2)]
    return sc


class Las(Experiment):
    name = "las"
    title = "Locking-aware scheduler (LAS) on Xen credit1"
    source = ("Y. Lee, W. Son and S. Park, "
              "\"Design and Implementation of a Locking-Aware Scheduler for Multiprocessor Environments\" (Sogang University)")
    explained_in = "docs/mechanisms/las.md"

    def run(self, scale, runner):
        sc = SCALE[scale]
        seeds, duration = sc["seeds"], sc["duration_ms"]
        kb_keys = [(c, g, s, t) for t in TASKS for c in CONFIGS for g in GUESTS for s in seeds]
        sb_seeds, sb_duration = SYSBENCH["seeds"], SYSBENCH["duration_ms"]
        sb_keys = [(c, v, s) for c in CONFIGS for v in (8, 4) for s in sb_seeds]
        runs = runner.run_many([kernbench(c, g, duration, s, t) for c, g, s, t in kb_keys] +
                               [sysbench(c, v, sb_duration, s) for c, v, s in sb_keys])
        kb = {key: run.raw["vms"][0] for key, run in zip(kb_keys, runs[:len(kb_keys)])}
        sb = dict(zip(sb_keys, runs[len(kb_keys):]))

        def kb_mean(config, guests, value, tasks=1):
            return statistics.fmean(value(kb[(config, guests, s, tasks)]) for s in seeds)

        def sb_tput(config, vcpus, seed):
            return sum(vm["throughput_per_s"] for vm in sb[(config, vcpus, seed)].raw["vms"])

        def per_seed_gain(tp, *key):
            return [tp("Linux-LAS", *key, s) / tp("Linux-xen", *key, s) for s in sb_seeds]

        def kb_gains(tasks):
            per_seed = {g: [kb[("Linux-LAS", g, s, tasks)]["throughput_per_s"] / kb[("Linux-xen", g, s, tasks)]["throughput_per_s"]
                            for s in seeds] for g in GUESTS}
            return per_seed, [mean_ci95(per_seed[g]) for g in GUESTS]

        def kb_profile(tasks):
            """Per run of the kernbench guest: preempted holders, LAS yields, share spinning."""
            lhp = {c: [kb_mean(c, g, lambda vm: vm["counters"]["lhp_events"], tasks) for g in GUESTS] for c in CONFIGS}
            yields = [kb_mean("Linux-LAS", g, lambda vm: vm["counters"]["yields"], tasks) for g in GUESTS]
            spin = {c: [kb_mean(c, g, lambda vm: vm["time"]["spin_ns"] / sum(vm["time"].values()), tasks) for g in GUESTS]
                    for c in CONFIGS}
            return ("lock-holder preemptions " + "; ".join(f"{c} " + ", ".join(f"{x:.1f}" for x in lhp[c]) for c in CONFIGS) +
                    "; LAS yields " + ", ".join(f"{x:.1f}" for x in yields) +
                    "; share of time spinning " + "; ".join(
                        f"{c} " + ", ".join(f"{100 * x:.1f}%" for x in spin[c]) for c in CONFIGS))

        tput = {c: [mean_ci95([kb[(c, g, s, 1)]["throughput_per_s"] for s in seeds]) for g in GUESTS] for c in CONFIGS}
        per_seed, gains = kb_gains(1)
        _, gains_2_tasks = kb_gains(2)
        note = (f"Mean of seeds {seeds[0]}-{seeds[-1]}, {duration} ms simulated each; 8 cores, Xen credit1, guests of 8 "
                "vCPUs with the 2.6.18 test-and-set lock, LAS's slice page and compensation on or off. Per run, "
                "kernbench guest: " + kb_profile(1) + ". The paper's figure 3 has no numbers in its text.")
        figures = [
            Figure(id="kernbench", title="kernbench in one guest, the others running infinite loops",
                   metric="work units/s", x_label="guests", y_label="kernbench work units/s",
                   series=[Series(c, list(GUESTS), [m for m, _ in tput[c]], yerr=[h for _, h in tput[c]]) for c in CONFIGS],
                   paper=[], kind="bar", note=note + " Bars: mean ± 95% interval over the seeds."),
        ]
        figures.append(Figure(
            id="kernbench_2_tasks", title="kernbench with two guest tasks per vCPU (make -j 2×vCPUs), beside the preset's one",
            metric="speedup", x_label="guests", y_label="Linux-LAS ÷ Linux-xen throughput",
            series=[Series(f"{t} task{'s' if t > 1 else ''} per vCPU", list(GUESTS), [m for m, _ in g], yerr=[h for _, h in g])
                    for t, g in ((1, gains), (2, gains_2_tasks))],
            paper=[], kind="bar",
            note=f"Mean ± 95% interval of seeds {seeds[0]}-{seeds[-1]}, {duration} ms each. Not checked: the checks use the "
                 "preset as every reproduction runs it. With one task a vCPU halts whenever it blocks (every 4.2 ms on "
                 "average) and wakes BOOSTed, preempting whatever runs, lock holders included, at no slice end LAS "
                 "could see; with two it seldom halts and runs to its slice end, where LAS acts. Per run, two tasks: "
                 + kb_profile(2) + "."))
        lo_ns, hi_ns = (c / CLOCK_GHZ for c in WAIT_RANGE_CYCLES)

        def waits_in_range(guests):
            """Of the kernbench guest's acquisitions that waited at all (over the seeds), the share
            whose wait lies in a histogram bucket wholly inside 2^9-2^16 cycles (the buckets that
            straddle either end are left out, so the share is a lower bound)."""
            buckets = [b for s in seeds for b in kb[("Linux-xen", guests, s, 1)]["lock_waits"] if b["from_ns"] > 0]
            waited = sum(b["acquisitions"] for b in buckets)
            inside = sum(b["acquisitions"] for b in buckets if b["from_ns"] >= lo_ns and b["to_ns"] <= hi_ns)
            return inside / waited if waited else 0.0, waited

        # Linux-xen alone: under LAS every lock() first reads the slice page (65.1 cycles, the seed's
        # `h`), so every acquisition waits a few tens of ns and the share would count those reads.
        shares = [waits_in_range(g) for g in GUESTS]
        figures.append(Figure(
            id="waits", title="kernbench's lock waits: the share inside 2^9-2^16 cycles", metric="share",
            x_label="guests", y_label="share of the waits (acquisitions that waited)",
            series=[Series("Linux-xen", list(GUESTS), [share for share, _ in shares])], paper=[], kind="bar",
            note=f"Seeds {seeds[0]}-{seeds[-1]}, {duration} ms each, the kernbench guest; a wait is from lock() to "
                 f"acquisition; 2^9-2^16 cycles at {CLOCK_GHZ} GHz are {lo_ns:.0f} ns-{hi_ns / 1000:.1f} µs, and only "
                 "power-of-two buckets wholly inside count. Linux-xen only: under LAS every lock() first reads the "
                 "slice page (the seed's h, 65 cycles), so every acquisition waits a little. Seed: kernbench's "
                 "spinlock waits are 2^9-2^16 cycles 'in most cases'."))
        sb_gain = {v: mean_ci95(per_seed_gain(sb_tput, v)) for v in (8, 4)}
        figures.append(Figure(
            id="sysbench", title="sysbench OLTP (our dvdstore preset), two guests", metric="speedup",
            x_label="vCPUs per guest", y_label="Linux-LAS ÷ Linux-xen throughput",
            series=[Series("Linux-LAS", [8, 4], [sb_gain[8][0], sb_gain[4][0]], yerr=[sb_gain[8][1], sb_gain[4][1]])],
            paper=[Series("Linux-LAS", [8, 4], [PAPER_SYSBENCH_GAIN[8], PAPER_SYSBENCH_GAIN[4]])], kind="bar",
            note=f"Mean ± 95% interval of seeds {sb_seeds[0]}-{sb_seeds[-1]}, {sb_duration} ms each, at every scale. "
                 "Two guests of 4 vCPUs fit the 8 cores: "
                 "no vCPU waits for a pCPU, so nothing preempts a lock holder."))
        shown = lambda g: f"{g[0]:.2f} ± {g[1]:.2f}"  # noqa: E731
        over = gains[1:]
        # The gains at 2 and 8 guests come from the same seeds: the interval of their per-seed
        # differences.
        growth, growth_half = mean_ci95([hi - lo for hi, lo in zip(per_seed[GUESTS[-1]], per_seed[GUESTS[1]])])
        gains_measured = {"guests": list(GUESTS), "las_over_xen": [m for m, _ in gains],
                          "las_over_xen_low": [m - h for m, h in gains], "las_over_xen_high": [m + h for m, h in gains]}

        def sysbench_measured(vcpus):
            m, h = sb_gain[vcpus]
            return {"las_over_xen": m, "las_over_xen_low": m - h, "las_over_xen_high": m + h}

        alone, alone_waited = shares[0]
        checks = [
            Check("waits.kernbench_waits_mostly_2_9_to_2_16_cycles", "waits", alone > 0.5,
                  f"Linux-xen, kernbench alone (1 guest): of the {alone_waited:,} acquisitions that waited, "
                  f"{100 * alone:.1f}% waited {lo_ns:.0f} ns-{hi_ns / 1000:.1f} µs; at 2, 4, 8 guests "
                  + ", ".join(f"{100 * share:.1f}%" for share, _ in shares[1:])
                  + " (claim: 2^9-2^16 cycles 'in most cases'; accepted: over half, counting only the buckets "
                  "wholly inside)",
                  measured={"guests": list(GUESTS), "share_in_range": [share for share, _ in shares],
                            "acquisitions_that_waited": [n for _, n in shares]}),
            Check("kernbench.las_faster_when_overcommitted", "kernbench", all(m - h > 1.0 for m, h in over),
                  "Linux-LAS ÷ Linux-xen per seed, mean ± 95% interval, at 1, 2, 4, 8 guests: "
                  + ", ".join(shown(g) for g in gains) + " (claim: LAS shortens kernbench; accepted: the ratio's "
                  "95% interval lies above 1 at 2, 4 and 8 guests)", measured=gains_measured),
            # A gain that grows from a loss at 2 guests to none at 8 is not the seed's claim.
            Check("kernbench.gain_grows_with_guests", "kernbench",
                  growth - growth_half > 0 and all(m >= 1.0 for m, _ in over),
                  f"gain at 8 guests minus gain at 2: {growth:+.2f} ± {growth_half:.2f}; mean gains at 2, 4, 8 guests "
                  + ", ".join(f"{m:.2f}" for m, _ in over) + " (claim: LAS improves kernbench at every count of "
                  "guests, and the gain grows with the number of guests)",
                  measured={"gain_8_minus_2_guests": growth, "gain_8_minus_2_guests_low": growth - growth_half,
                            "gain_8_minus_2_guests_high": growth + growth_half, **gains_measured}),
            # A gain by a factor passes when the whole interval clears the factor (as pticket's
            # speed-ups); before 2026-11-28: the mean at least +20% and the interval above 1.
            Check("sysbench.8_vcpus_gain", "sysbench", sb_gain[8][0] - sb_gain[8][1] >= 1.2,
                  f"Linux-LAS ÷ Linux-xen, 2 guests of 8 vCPUs: {shown(sb_gain[8])} (claim: +48%; accepted: the "
                  "95% interval at least +20%)",
                  measured=sysbench_measured(8), paper={"las_over_xen": PAPER_SYSBENCH_GAIN[8]}),
            Check("sysbench.4_vcpus_gain", "sysbench", sb_gain[4][0] - sb_gain[4][1] >= 1.2,
                  f"Linux-LAS ÷ Linux-xen, 2 guests of 4 vCPUs: {shown(sb_gain[4])} (claim: +41%; accepted: the "
                  "95% interval at least +20%)",
                  measured=sysbench_measured(4), paper={"las_over_xen": PAPER_SYSBENCH_GAIN[4]}),
        ]
        return figures, checks


register(Las())
