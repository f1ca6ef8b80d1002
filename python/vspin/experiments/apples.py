"""APPLES (Shan, Ding & Gehani, IEEE TPDS 2017): two changes to KVM's Pause-Loop Exiting. APLE
gives each VM one PLE window and moves it, one step per round of three epochs, toward whichever
window made the VM least *inefficient* (windows spun plus exit handling, over the VM's CPU time);
HVS picks the vCPU to yield to by how it lost its pCPU: the one preempted by the host scheduler
most recently first, then those that yielded from a PLE exit, oldest first.

The seed's setup, as we model it:
- host: two Xeon E5-2665 (2 sockets × 8 cores, 2.4 GHz; SMT not mentioned, not modelled), KVM on
  Linux 3.19: CFS, stock PLE (4096-cycle base window, doubled at each exit, reset when the vCPU
  is scheduled in) and 3.18's ``kvm_vcpu_on_spin``; host background threads as in the
  preemptable-ticket reproduction (50 µs every 10 ms per pCPU, an estimate, docs/calibration.md);
- guests: 2 VMs of 16 vCPUs, each vCPU pinned to its own core (so every core time-shares one
  vCPU of each VM), 32 guest threads (2 per vCPU); Linux 3.19 guests take the plain ticket lock
  (the PV ticket lock needs ``kvm-pv-unhalt``, which QEMU does not expose by default);
- benchmarks: our ``ebizzy`` (the seed's headline), ``hackbench``, ``kernbench`` and ``dbench``
  presets; the seed's PARSEC and SPLASH-2x programs have no preset and are left out;
- configurations: ``PLE off``; ``stock KVM``; ``APLE`` (``ple.policy = "aple"``, T0 8192, Tl 4096,
  Tu 32768, δ 1024, epochs of 1,000 exits); ``HVS`` (``directed_yield = "hvs"``); ``APPLES``
  (both); fixed windows of 512-32768 cycles under stock KVM's directed yield; HVS's three variants
  with the stock and the APLE window, on every benchmark; stock KVM, APLE, APPLES and the fixed
  windows again with four VMs (Fig. 9, 64 vCPUs on the 16 cores);
- Figs. 11 and 12 trace one run each (ebizzy, stock KVM and APLE, the first seed) epoch by epoch
  (``[record] ple_epochs``), in bins of ``TRACE_BIN`` epochs.

Performance is the VMs' mean throughput, relative to stock KVM, as the seed normalises. Checks
encode the seed's claims (direction and rough factor), never its exact values.
"""

from __future__ import annotations

import statistics

from vspin.reproduce import Check, Experiment, Figure, Series, register

BENCHMARKS = ("ebizzy", "hackbench", "kernbench", "dbench")
# Fig. 1: the best fixed window of the two benchmarks the seed shows, relative to stock KVM.
PAPER_FIG1_BEST = {"dbench": (4096, 1.17), "ebizzy": (16384, 1.13)}
# (ple policy, directed yield) of each configuration.
CONFIGS = {
    "PLE off": ("off", "kvm"),
    "stock KVM": ("kvm", "kvm"),
    "APLE": ("aple", "kvm"),
    "HVS": ("kvm", "hvs"),
    "APPLES": ("aple", "hvs"),
}
VARIANTS = {"HVS": "hvs", "CPTH-R": "hvs-cpth-r", "CPTH-L": "hvs-cpth-l", "CCH": "hvs-cch"}
FIXED_WINDOWS = (512, 1024, 2048, 4096, 8192, 16384, 32768)
SELECTION_WINDOW, SPINLOCK_INTENSIVE = 512, 0.05
BACKGROUND = {"interval_us": 10_000, "burst_us": 50}

PAPER_FIG6 = {"stock KVM": 1.0, "APLE": 1.34, "HVS": 1.09, "APPLES": 1.49}
PAPER_FIG6_INEFFICIENCY = {"stock KVM": 1.0, "APLE": 0.68, "HVS": 0.82, "APPLES": 0.42}
# Figs. 13 and 14: the variants relative to stock KVM, averaged over the seed's benchmarks.
PAPER_VARIANTS = {"stock window": {"HVS": 1.08, "CPTH-R": 1.05, "CPTH-L": 0.97, "CCH": 1.03},
                  "APLE window": {"HVS": 1.20, "CPTH-R": 1.09, "CPTH-L": 1.01, "CCH": 0.43}}

SCALE = {"quick": {"seeds": (1, 2), "duration_ms": 300}, "full": {"seeds": (1, 2, 3, 4, 5), "duration_ms": 1000}}


# The runs whose PLE epochs are recorded one by one (Figs. 11 and 12: ebizzy, two VMs, one seed).
TRACED = {("ebizzy", "kvm", "kvm", 2), ("ebizzy", "aple", "kvm", 2)}
TRACED_SEED = 1
TRACE_BIN = 10  # epochs averaged into one point of Figs. 11 and 12
STEP = 1024  # APLE's δ


def scenario(bench: str, ple: str | int, directed_yield: str, vms: int, duration_ms: int, seed: int) -> dict:
    """``ple``: a policy name, or a fixed window in cycles."""
    policy = {"policy": "fixed", "window_cycles": ple} if isinstance(ple, int) else {"policy": ple}
    sc = {
        "name": f"apples-{bench}-{ple}-{directed_yield}-{vms}vm",
        "seed": seed,
        "duration_ms": duration_ms,
        "host": {"sockets": 2, "cores_per_socket": 8, "clock_ghz": 2.4, "background": BACKGROUND},
        "hypervisor": {"ple": policy, "directed_yield": directed_yield},
        "vm": [{"name": f"vm{i}", "vcpus": 16, "pin": "1:1", "lock": "ticket",
                "workload": {"preset": bench, "threads_per_vcpu": 2}} for i in range(vms)],
    }
    if (bench, ple, directed_yield, vms) in TRACED and seed == TRACED_SEED:
        sc["record"] = {"ple_epochs": True}
    return sc


def binned_trace(epochs: list[dict], size: int = TRACE_BIN) -> tuple[list[int], list[float]]:
    """A VM's epochs in bins of ``size``: the last epoch of each bin, and the bin's mean window
    (a last, partial bin is left out)."""
    xs, ys = [], []
    for end in range(size, len(epochs) + 1, size):
        xs.append(end)
        ys.append(statistics.fmean(e["window_cycles"] for e in epochs[end - size:end]))
    return xs, ys


class Apples(Experiment):
    name = "apples"
    title = "APPLES: adaptive PLE window (APLE) and heuristic vCPU scheduling (HVS) on KVM"
    source = ("J. Shan, X. Ding and N. Gehani, "
              "\"APPLES: Efficiently Handling Spin-lock Synchronization on Virtualized Platforms\", IEEE TPDS, 2017")
    explained_in = "docs/mechanisms/apples.md"

    def run(self, scale, runner):
        sc = SCALE[scale]
        seeds, duration = sc["seeds"], sc["duration_ms"]
        points = [(b, *CONFIGS[c], 2) for b in BENCHMARKS for c in CONFIGS]
        # Every fixed window on every benchmark (Figs. 1, 8, 10); the 512-cycle runs are also the
        # seed's test of a spinlock-intensive benchmark (mean inefficiency above 5%).
        points += [(b, w, "kvm", 2) for b in BENCHMARKS for w in FIXED_WINDOWS]
        points += [(b, ple, v, 2) for b in BENCHMARKS for ple in ("kvm", "aple") for v in VARIANTS.values() if v != "hvs"]
        points += [(b, *CONFIGS[c], 1) for b in ("ebizzy", "kernbench") for c in ("PLE off", "stock KVM", "APPLES")]
        # Fig. 9: four VMs, the seed's whole host (64 vCPUs on 16 cores).
        points += [(b, *CONFIGS[c], 4) for b in BENCHMARKS for c in ("stock KVM", "APLE", "APPLES")]
        points += [(b, w, "kvm", 4) for b in BENCHMARKS for w in FIXED_WINDOWS]
        keys = [(*p, s) for p in points for s in seeds]
        runs = dict(zip(keys, runner.run_many([scenario(*k[:4], duration, k[4]) for k in keys])))

        def mean(point, value):
            return statistics.fmean(value(runs[(*point, s)].raw) for s in seeds)

        def tput(raw):
            return statistics.fmean(vm["throughput_per_s"] for vm in raw["vms"])

        def inefficiency(raw):
            values = [vm["ple_inefficiency"] for vm in raw["vms"] if vm["ple_inefficiency"] is not None]
            return statistics.fmean(values) if values else float("nan")

        def window(raw):
            values = [vm["ple_window_mean_cycles"] for vm in raw["vms"] if vm["ple_window_mean_cycles"] is not None]
            return statistics.fmean(values) if values else float("nan")

        def rel(bench, point, vms=2):
            return mean(point, tput) / mean((bench, *CONFIGS["stock KVM"], vms), tput)

        note = (f"Mean of seeds {seeds[0]}-{seeds[-1]}, {duration} ms simulated each; 16 cores at 2.4 GHz with host "
                "background threads, 2 VMs of 16 vCPUs pinned 1:1, 2 guest threads per vCPU, plain ticket lock. "
                "Performance: mean throughput of the VMs ÷ stock KVM's.")
        figures, checks = [], []

        # Fig. 6: ebizzy under each configuration, and its inefficiency.
        names = list(CONFIGS)
        perf = {c: rel("ebizzy", ("ebizzy", *CONFIGS[c], 2)) for c in names}
        ineff = {c: mean(("ebizzy", *CONFIGS[c], 2), inefficiency) for c in names if c != "PLE off"}
        windows = {c: mean(("ebizzy", *CONFIGS[c], 2), window) for c in names if c != "PLE off"}
        figures.append(Figure(
            id="fig6", title="ebizzy, two VMs: APLE, HVS and both against stock KVM", metric="speedup",
            x_label="configuration", y_label="performance ÷ stock KVM",
            series=[Series("ebizzy", names, [perf[c] for c in names])],
            paper=[Series("ebizzy", list(PAPER_FIG6), list(PAPER_FIG6.values()))], kind="bar",
            note=note + " Mean window an exit reached (cycles): " + ", ".join(f"{c} {windows[c]:,.0f}" for c in windows)
            + ". The paper's Fig. 6 has no PLE-off bar."))
        ineff_rel = {c: ineff[c] / ineff["stock KVM"] for c in ineff}
        figures.append(Figure(
            id="fig6.inefficiency", title="ebizzy, two VMs: mean inefficiency of the PLE epochs", metric="inefficiency",
            x_label="configuration", y_label="inefficiency ÷ stock KVM's",
            series=[Series("ebizzy", list(ineff_rel), list(ineff_rel.values()))],
            paper=[Series("ebizzy", list(PAPER_FIG6_INEFFICIENCY), list(PAPER_FIG6_INEFFICIENCY.values()))], kind="bar",
            note=note + " Absolute mean inefficiency: " + ", ".join(f"{c} {v:.3f}" for c, v in ineff.items())
            + ". Each epoch is 1,000 of a VM's PLE exits; the mean is over epochs, as the paper's."))
        checks += [
            Check("fig6.apples_beats_stock_kvm", "fig6", perf["APPLES"] >= 1.1,
                  f"APPLES ÷ stock KVM on ebizzy: {perf['APPLES']:.2f} (claim: +49%; at least +10%)",
                  measured={"apples_over_stock_kvm": perf["APPLES"]},
                  paper={"apples_over_stock_kvm": PAPER_FIG6["APPLES"]}),
            Check("fig6.aple_alone_beats_stock_kvm", "fig6", perf["APLE"] > 1.0,
                  f"APLE ÷ stock KVM: {perf['APLE']:.2f} (claim: +34%; ahead)",
                  measured={"aple_over_stock_kvm": perf["APLE"]}, paper={"aple_over_stock_kvm": PAPER_FIG6["APLE"]}),
            Check("fig6.hvs_alone_beats_stock_kvm", "fig6", perf["HVS"] > 1.0,
                  f"HVS ÷ stock KVM: {perf['HVS']:.2f} (claim: +9%; ahead)",
                  measured={"hvs_over_stock_kvm": perf["HVS"]}, paper={"hvs_over_stock_kvm": PAPER_FIG6["HVS"]}),
            Check("fig6.apples_gains_more_than_aple_and_hvs_together", "fig6",
                  min(perf["APLE"], perf["HVS"]) > 1 and perf["APPLES"] - 1 > (perf["APLE"] - 1) + (perf["HVS"] - 1),
                  f"gains over stock KVM: APPLES {perf['APPLES'] - 1:+.2f}, APLE {perf['APLE'] - 1:+.2f}, HVS "
                  f"{perf['HVS'] - 1:+.2f} (claim: each half gains, and the two together gain more than the sum of "
                  "their gains; paper +0.49 against +0.34 and +0.09)",
                  measured={f"{c.lower()}_over_stock_kvm": perf[c] for c in ("APPLES", "APLE", "HVS")},
                  paper={f"{c.lower()}_over_stock_kvm": PAPER_FIG6[c] for c in ("APPLES", "APLE", "HVS")}),
            Check("fig6.apples_lowers_inefficiency", "fig6.inefficiency", ineff_rel["APPLES"] < 0.9,
                  f"APPLES' inefficiency ÷ stock KVM's: {ineff_rel['APPLES']:.2f} (claim: −58%; at least −10%)",
                  measured={"apples_inefficiency_over_stock_kvm": ineff_rel["APPLES"]},
                  paper={"apples_inefficiency_over_stock_kvm": PAPER_FIG6_INEFFICIENCY["APPLES"]}),
        ]

        # Figs. 11 and 12: the window the VMs' PLE exits reach, and how many epochs they fill. The
        # seed plots both over time; the claims are about their levels.
        def epochs_per_s(raw):
            return statistics.fmean(vm["ple_epochs"] for vm in raw["vms"]) / (raw["simulated_ms"] / 1000)

        pair = ("stock KVM", "APLE")
        epochs = {c: mean(("ebizzy", *CONFIGS[c], 2), epochs_per_s) for c in pair}
        figures.append(Figure(
            id="fig11-12", title="ebizzy, two VMs: the window PLE exits reach, stock KVM and APLE", metric="window",
            x_label="configuration", y_label="mean window at a PLE exit (cycles)",
            series=[Series("ebizzy", list(pair), [windows[c] for c in pair])],
            paper=[Series("ebizzy", list(pair), [4200, 12000])], kind="bar",
            note=note + " Epochs of 1,000 exits per simulated second and VM: " + ", ".join(
                f"{c} {epochs[c]:,.0f}" for c in pair) + ". The paper: stock KVM hovers around 4,200 cycles and APLE "
            "around 12,000; over one ebizzy run APLE fills about 900 epochs where stock KVM fills 1,600."))
        checks += [
            Check("fig11-12.aple_holds_a_larger_window", "fig11-12", windows["APLE"] >= 2 * windows["stock KVM"],
                  f"mean window at a PLE exit: stock KVM {windows['stock KVM']:,.0f}, APLE {windows['APLE']:,.0f} "
                  "cycles (claim: about 4,200 against 12,000; APLE at least twice stock KVM's)",
                  measured={"stock_kvm_window_cycles": windows["stock KVM"], "aple_window_cycles": windows["APLE"]},
                  paper={"stock_kvm_window_cycles": 4200, "aple_window_cycles": 12000}),
            Check("fig11-12.aple_fills_fewer_epochs", "fig11-12", epochs["APLE"] < epochs["stock KVM"],
                  f"epochs per second and VM: stock KVM {epochs['stock KVM']:,.0f}, APLE {epochs['APLE']:,.0f} (claim: "
                  "fewer PLE exits, so fewer epochs; about 900 against 1,600 over a run)",
                  measured={"stock_kvm_epochs_per_s": epochs["stock KVM"], "aple_epochs_per_s": epochs["APLE"]}),
        ]

        # Figs. 11 and 12 as the seed draws them: the mean window of each VM's vCPUs at the end of
        # each epoch (its footnote 5), over one run.
        level = {"stock KVM": 4200, "APLE": 12000}
        traces, binned_traces = {}, {}
        for fig_id, c in (("fig11", "stock KVM"), ("fig12", "APLE")):
            raw = runs[("ebizzy", *CONFIGS[c], 2, TRACED_SEED)].raw
            traces[c] = [e["window_cycles"] for vm in raw["vms"] for e in vm["ple_epoch_trace"]]
            binned = {vm["name"]: binned_trace(vm["ple_epoch_trace"]) for vm in raw["vms"]}
            binned_traces[c] = binned
            counts = ", ".join(f"{vm['name']} {vm['ple_epochs']:,}" for vm in raw["vms"])
            last = max((xs[-1] for xs, _ in binned.values() if xs), default=TRACE_BIN)
            figures.append(Figure(
                id=fig_id, title=f"ebizzy, two VMs: the window {c} sets, epoch by epoch", metric="window",
                x_label="PLE epoch (1,000 exits of the VM)", y_label="mean window of the VM's vCPUs (cycles)",
                series=[Series(name, xs, ys) for name, (xs, ys) in binned.items()],
                paper=[Series("level the paper reports", [TRACE_BIN, last], [level[c]] * 2)],
                y_scale="log" if c == "stock KVM" else "linear",
                note=f"Seed {TRACED_SEED}, {duration} ms simulated; each point is the mean of {TRACE_BIN} epochs. The "
                "window of an epoch is the mean of the VM's vCPUs' windows when it ends, as the paper collects it "
                f"(its footnote 5). Epochs per VM: {counts}. "
                "The paper: stock KVM's window sticks around 4,200 cycles; APLE's changes steadily around 12,000; "
                "about 1,600 and 900 epochs over an ebizzy run."
                + (" Stock KVM doubles a vCPU's window at each exit until the vCPU is scheduled in again, so a vCPU "
                   "whose yields keep failing reaches millions of cycles: the axis is logarithmic." if c == "stock KVM" else "")))
        near_base = sum(w < 2 * 4096 for w in traces["stock KVM"]) / max(len(traces["stock KVM"]), 1)
        # A bin of 10 epochs spans three rounds of APLE's trials (Td, Td + δ, Td − δ), so its
        # mean follows Td: a VM's binned trace spanning four steps means Td itself moved.
        spans = {vm: max(ys) - min(ys) if ys else 0.0 for vm, (_, ys) in binned_traces["APLE"].items()}
        checks += [
            Check("fig11.stock_window_sticks_near_the_base", "fig11", near_base >= 0.9,
                  f"stock KVM, epochs whose mean vCPU window is below 8,192 cycles: {100 * near_base:.0f}% of "
                  f"{len(traces['stock KVM'])}, the start-up transient's included (claim: it sticks around 4,200; at "
                  "least 90% below twice the base)",
                  measured={"epochs_below_8192_cycles_pct": 100 * near_base, "epochs_count": len(traces["stock KVM"])}),
            Check("fig12.aple_window_moves", "fig12", bool(spans) and min(spans.values()) >= 4 * STEP,
                  "APLE, range of each VM's window over bins of 10 epochs: " + ", ".join(
                      f"{vm} {span:,.0f}" for vm, span in spans.items()) + " cycles (claim: it changes steadily; "
                  "each VM's at least four steps of 1,024, beyond the ±1 step of APLE's own trials)",
                  measured={"vm_index": [int(vm.removeprefix("vm")) for vm in spans],
                            "window_range_cycles": list(spans.values())}),
        ]

        # Every fixed window on every benchmark, relative to stock KVM, with two and four VMs
        # (Figs. 1, 8, 9 and 10).
        sweeps = {n: {b: [rel(b, (b, w, "kvm", n), vms=n) for w in FIXED_WINDOWS] for b in BENCHMARKS} for n in (2, 4)}

        def best_window(performance):
            """The fixed window that did best, given the performance at each."""
            return FIXED_WINDOWS[performance.index(max(performance))]

        def against_fixed_windows(vms):
            """Per benchmark: the worst and the best fixed window, and stock KVM (1 by definition)."""
            sweep = sweeps[vms]
            return {"worst fixed": [min(sweep[b]) for b in BENCHMARKS], "best fixed": [max(sweep[b]) for b in BENCHMARKS],
                    "stock KVM": [1.0] * len(BENCHMARKS)}

        # Fig. 1: one fixed window for every vCPU, on dbench and ebizzy: the best differs.
        fig1 = {b: sweeps[2][b] for b in PAPER_FIG1_BEST}
        best1 = {b: best_window(fig1[b]) for b in fig1}
        figures.append(Figure(
            id="fig1", title="Two VMs: one fixed window for every vCPU, dbench and ebizzy", metric="speedup",
            x_label="PLE window (cycles)", y_label="performance ÷ stock KVM",
            series=[Series(b, [str(w) for w in FIXED_WINDOWS], fig1[b]) for b in fig1],
            paper=[Series(b, [str(w)], [y]) for b, (w, y) in PAPER_FIG1_BEST.items()],
            note=note + " The paper's points are its best window per benchmark; its text gives the ranges: dbench "
            "0.98-1.17 (best 4096), ebizzy 0.88-1.13 (best 16384)."))
        checks += [
            Check("fig1.dbench_does_best_near_the_default_window", "fig1", 2048 <= best1["dbench"] <= 8192,
                  f"dbench's best fixed window {best1['dbench']}; performance at " + ", ".join(
                      f"{w}: {p:.2f}" for w, p in zip(FIXED_WINDOWS, fig1["dbench"]))
                  + " (claim: best at 4096; within one doubling)",
                  measured={"dbench_best_window_cycles": best1["dbench"], "window_cycles": list(FIXED_WINDOWS),
                            "dbench_over_stock_kvm": fig1["dbench"]},
                  paper={"dbench_best_window_cycles": PAPER_FIG1_BEST["dbench"][0]}),
            Check("fig1.the_best_window_depends_on_the_benchmark", "fig1",
                  max(best1.values()) >= 4 * min(best1.values()),
                  f"best fixed window: dbench {best1['dbench']}, ebizzy {best1['ebizzy']} (claim: different benchmarks "
                  "do best with different windows, so no one window suits every workload; dbench 4096, ebizzy 16384: "
                  "at least two doublings apart, in either order)",
                  measured={f"{b}_best_window_cycles": best1[b] for b in best1},
                  paper={f"{b}_best_window_cycles": w for b, (w, _) in PAPER_FIG1_BEST.items()}),
        ]

        # Fig. 10: a fixed window, swept on ebizzy; stock KVM and APLE beside it.
        fixed_perf = sweeps[2]["ebizzy"]
        fixed_ineff = [mean(("ebizzy", w, "kvm", 2), inefficiency) for w in FIXED_WINDOWS]
        flat = lambda v: [v] * len(FIXED_WINDOWS)  # noqa: E731
        # Windows double from one to the next: as labels they are evenly spaced, as on the seed's axis.
        labels = [str(w) for w in FIXED_WINDOWS]
        figures.append(Figure(
            id="fig10", title="ebizzy, two VMs: one fixed window for every vCPU", metric="speedup",
            x_label="PLE window (cycles)", y_label="performance ÷ stock KVM",
            series=[Series("fixed window", labels, fixed_perf), Series("APLE (adaptive)", labels, flat(perf["APLE"]))],
            paper=[Series("fixed window", ["16384"], [1.13]),
                   Series("APLE (adaptive)", labels, flat(PAPER_FIG6["APLE"]))],
            note=note + " Mean inefficiency at each window: " + ", ".join(
                f"{w} {i:.3f}" for w, i in zip(FIXED_WINDOWS, fixed_ineff))
            + f"; stock KVM {ineff['stock KVM']:.3f}, APLE {ineff['APLE']:.3f}. The paper's points: Fig. 1's best fixed "
              "window and Fig. 6's APLE. The paper: 0.88-1.13 (Fig. 1), best at 16384, "
              "inefficiency U-shaped with its minimum there (Fig. 10)."))
        best = max(range(len(FIXED_WINDOWS)), key=lambda i: fixed_perf[i])
        least = min(range(len(FIXED_WINDOWS)), key=lambda i: fixed_ineff[i])
        checks += [
            Check("fig10.a_large_fixed_window_performs_best", "fig10",
                  FIXED_WINDOWS[best] >= 8192 and best < len(FIXED_WINDOWS) - 1,
                  f"best fixed window {FIXED_WINDOWS[best]} ({fixed_perf[best]:.2f} of stock KVM); performance at "
                  + ", ".join(f"{w}: {p:.2f}" for w, p in zip(FIXED_WINDOWS, fixed_perf))
                  + " (claim: a small window preempts spinners prematurely, the largest spins too long: the best lies "
                  "above the default 4096 and below 32768; paper 16384)",
                  measured={"best_window_cycles": FIXED_WINDOWS[best], "best_fixed_over_stock_kvm": fixed_perf[best],
                            "window_cycles": list(FIXED_WINDOWS), "ebizzy_over_stock_kvm": fixed_perf},
                  paper={"best_window_cycles": PAPER_FIG1_BEST["ebizzy"][0],
                         "best_fixed_over_stock_kvm": PAPER_FIG1_BEST["ebizzy"][1]}),
            Check("fig10.least_inefficient_window_performs_best", "fig10", abs(best - least) <= 1,
                  f"least inefficient fixed window {FIXED_WINDOWS[least]}, best-performing {FIXED_WINDOWS[best]} "
                  "(claim: the minimum of inefficiency is where performance peaks; within one doubling)",
                  measured={"least_inefficient_window_cycles": FIXED_WINDOWS[least],
                            "best_window_cycles": FIXED_WINDOWS[best], "window_cycles": list(FIXED_WINDOWS),
                            "inefficiency": fixed_ineff},
                  paper={"least_inefficient_window_cycles": 16384, "best_window_cycles": 16384}),
            Check("fig10.aple_beats_the_best_fixed_window", "fig10", perf["APLE"] >= fixed_perf[best],
                  f"APLE {perf['APLE']:.2f}, best fixed window {fixed_perf[best]:.2f} (claim: APLE above the best fixed "
                  "window; on ebizzy by 19% (Fig. 8), 1.13 against 1.10 on average over the paper's benchmarks)",
                  measured={"aple_over_stock_kvm": perf["APLE"], "best_fixed_over_stock_kvm": fixed_perf[best]},
                  paper={"aple_over_stock_kvm": PAPER_FIG6["APLE"],
                         "best_fixed_over_stock_kvm": PAPER_FIG1_BEST["ebizzy"][1]}),
        ]

        # Fig. 8: on every benchmark, APLE and stock KVM against the best and the worst fixed window.
        fig8 = {**against_fixed_windows(2), "APLE": [rel(b, (b, *CONFIGS["APLE"], 2)) for b in BENCHMARKS]}
        figures.append(Figure(
            id="fig8", title="Two VMs: APLE and stock KVM against the best and worst fixed window", metric="speedup",
            x_label="benchmark", y_label="performance ÷ stock KVM",
            series=[Series(c, list(BENCHMARKS), ys) for c, ys in fig8.items()], paper=[], kind="bar",
            note=note + " Best and worst over the fixed windows " + ", ".join(map(str, FIXED_WINDOWS)) + "; best "
            "window per benchmark: " + ", ".join(f"{b} {best_window(sweeps[2][b])}" for b in BENCHMARKS)
            + ". The paper gives numbers in its text only for averages over its benchmarks (APLE 1.13, best fixed 1.10; "
            "the worst fixed window 16% below APLE on average, 46% on ebizzy, in units of stock KVM) and for ebizzy "
            "(APLE 19% above the best)."))
        means = {c: statistics.fmean(ys) for c, ys in fig8.items()}
        # The seed's "degraded by 16 percent on average and up to 46 percent (for ebizzy), relative
        # to that with spinning thresholds adequately set by APLE" is APLE minus the worst fixed
        # window, ÷ stock KVM: ebizzy's 46% is Fig. 6's APLE 1.34 less Fig. 1's worst 0.88.
        cost = statistics.fmean(a - w for a, w in zip(fig8["APLE"], fig8["worst fixed"]))
        kb = BENCHMARKS.index("kernbench")
        checks += [
            Check("fig8.aple_beats_the_best_fixed_window_on_average", "fig8", means["APLE"] >= means["best fixed"],
                  f"mean over the benchmarks: APLE {means['APLE']:.2f}, best fixed window {means['best fixed']:.2f} "
                  "(claim: APLE above it; paper 1.13 against 1.10)",
                  measured={"aple_over_stock_kvm": means["APLE"], "best_fixed_over_stock_kvm": means["best fixed"]},
                  paper={"aple_over_stock_kvm": 1.13, "best_fixed_over_stock_kvm": 1.10}),
            Check("fig8.a_wrong_window_costs_over_10pct", "fig8", cost >= 0.10,
                  f"APLE minus the worst fixed window (÷ stock KVM), mean over the benchmarks: {cost:.2f} (claim: 0.16 "
                  "on average, 0.46 on ebizzy; at least 0.10)",
                  measured={"aple_minus_worst_fixed": cost}, paper={"aple_minus_worst_fixed": 0.16}),
            Check("fig8.stock_kvm_below_the_worst_fixed_window_on_kernbench", "fig8", fig8["worst fixed"][kb] > 1.0,
                  f"kernbench, worst fixed window ÷ stock KVM: {fig8['worst fixed'][kb]:.2f} (claim: stock KVM's "
                  "growing and shrinking windows do worse than every fixed one on kernbench, raytrace and streamcluster)",
                  measured={"kernbench_worst_fixed_over_stock_kvm": fig8["worst fixed"][kb]}),
        ]

        # Fig. 9: four VMs. The seed: stock KVM, the best fixed window and APLE lie much closer
        # together than with two, but a wrong window still costs a lot (dbench: 19% -> 35%).
        fig9 = {**against_fixed_windows(4), "APLE": [rel(b, (b, *CONFIGS["APLE"], 4), vms=4) for b in BENCHMARKS],
                "APPLES": [rel(b, (b, *CONFIGS["APPLES"], 4), vms=4) for b in BENCHMARKS]}
        figures.append(Figure(
            id="fig9", title="Four VMs: stock KVM, APLE and APPLES against the best and worst fixed window",
            metric="speedup", x_label="benchmark", y_label="performance ÷ stock KVM",
            series=[Series(c, list(BENCHMARKS), ys) for c, ys in fig9.items()], paper=[], kind="bar",
            note=note.replace("2 VMs", "4 VMs") + " Best window per benchmark: " + ", ".join(
                f"{b} {best_window(sweeps[4][b])}" for b in BENCHMARKS) + ". The paper gives no "
            "numbers for Fig. 9 but one: dbench's best and worst fixed windows lie 0.35 apart (÷ stock KVM) with four "
            "VMs, 0.19 with two (Fig. 1's 1.17 and 0.98)."))

        def spread(stock, best, aple):
            """How far apart stock KVM, the best fixed window and APLE lie, per benchmark, averaged."""
            return statistics.fmean(max(t) - min(t) for t in zip(stock, best, aple))

        spread2 = spread(fig8["stock KVM"], fig8["best fixed"], fig8["APLE"])
        spread4 = spread(fig9["stock KVM"], fig9["best fixed"], fig9["APLE"])
        # "Significantly reduced" with four VMs, the seed's example being dbench's best minus
        # worst fixed window (÷ stock KVM), 0.35: the same difference, averaged.
        cost4, cost2 = (statistics.fmean(b - w for b, w in zip(f["best fixed"], f["worst fixed"])) for f in (fig9, fig8))
        dbench_at = BENCHMARKS.index("dbench")
        # The seed's "difference between best and worst" is in units of stock KVM's performance:
        # with two VMs it is Fig. 1's 1.17 − 0.98.
        gap = {n: f["best fixed"][dbench_at] - f["worst fixed"][dbench_at] for n, f in ((2, fig8), (4, fig9))}
        checks += [
            Check("fig9.dbench_window_matters_more_with_four_vms", "fig9", gap[4] >= gap[2] + 0.05,
                  f"dbench, best minus worst fixed window (÷ stock KVM): {gap[2]:.2f} with two VMs, {gap[4]:.2f} with "
                  "four (claim: 0.19 and 0.35; larger with four, by at least 0.05)",
                  measured={"vms": [2, 4], "dbench_best_minus_worst_fixed": [gap[2], gap[4]]},
                  paper={"vms": [2, 4], "dbench_best_minus_worst_fixed": [0.19, 0.35]}),
            Check("fig9.stock_best_and_aple_closer_with_four_vms", "fig9", spread4 <= 0.75 * spread2,
                  f"spread of stock KVM, the best fixed window and APLE (largest minus smallest, ÷ stock KVM), mean "
                  f"over the benchmarks: {spread2:.2f} with two VMs, {spread4:.2f} with four (claim: much smaller with "
                  "four; at most three quarters)",
                  measured={"vms": [2, 4], "spread": [spread2, spread4]}),
            Check("fig9.a_wrong_window_still_costs_over_10pct", "fig9", cost4 >= 0.10,
                  f"best minus worst fixed window (÷ stock KVM) with four VMs, mean over the benchmarks: {cost4:.2f} "
                  f"({cost2:.2f} with two) (claim: an inadequate window still costs significantly; dbench 0.35; at "
                  "least 0.10)",
                  measured={"vms": [2, 4], "best_minus_worst_fixed": [cost2, cost4]}),
        ]

        # Figs. 13 and 14: HVS against its variants, with the stock and the APLE window, on every
        # benchmark and on average (the seed's bars are averages over its benchmarks).
        var = {}
        for label, ple in (("stock window", "kvm"), ("APLE window", "aple")):
            per_bench = {b: {n: rel(b, (b, ple, dy, 2)) for n, dy in VARIANTS.items()} for b in BENCHMARKS}
            var[label] = {n: statistics.fmean(per_bench[b][n] for b in BENCHMARKS) for n in VARIANTS}
            figures.append(Figure(
                id="fig13" if ple == "kvm" else "fig14",
                title=f"Two VMs: HVS and its variants, {label}", metric="speedup",
                x_label="vCPU selection", y_label="performance ÷ stock KVM",
                series=[Series(b, list(VARIANTS), [per_bench[b][n] for n in VARIANTS]) for b in BENCHMARKS]
                + [Series("mean", list(VARIANTS), [var[label][n] for n in VARIANTS])],
                paper=[Series("mean", list(VARIANTS), [PAPER_VARIANTS[label][n] for n in VARIANTS])],
                kind="bar", note=note + " CPTH-R: resource-waiters oldest first; CPTH-L: lock-waiters newest first; "
                "CCH: lock-waiters before resource-waiters. The paper's means are over the seven benchmarks it "
                "studies APLE with (ebizzy, dbench, hackbench, kernbench, p.raytrace, p.streamcluster, p.dedup); "
                "ours over these four."))
        cch = {b: rel(b, (b, "aple", "hvs-cch", 2)) for b in ("dbench", "hackbench")}
        fmt = lambda d: ", ".join(f"{k} {v:.2f}" for k, v in d.items())  # noqa: E731
        over_stock = lambda d: {f"{n.lower().replace('-', '_')}_over_stock_kvm": v for n, v in d.items()}  # noqa: E731
        stock_v, aple_v = var["stock window"], var["APLE window"]
        checks += [
            Check("fig13.hvs_beats_its_variants", "fig13", all(stock_v["HVS"] >= stock_v[n] for n in VARIANTS),
                  f"stock window, mean of the benchmarks: {fmt(stock_v)} (claim: HVS best; paper 1.08, 1.05, 0.97, 1.03)",
                  measured=over_stock(stock_v), paper=over_stock(PAPER_VARIANTS["stock window"])),
            Check("fig14.hvs_best_and_cch_worst_with_aple", "fig14",
                  all(aple_v["HVS"] >= aple_v[n] for n in VARIANTS) and all(aple_v["CCH"] <= aple_v[n] for n in VARIANTS),
                  f"APLE window, mean of the benchmarks: {fmt(aple_v)} (claim: HVS best, CCH far worst; paper 1.20, "
                  "1.09, 1.01, 0.43)",
                  measured=over_stock(aple_v), paper=over_stock(PAPER_VARIANTS["APLE window"])),
            Check("fig14.cch_collapses_dbench", "fig14", all(v <= 0.5 for v in cch.values()),
                  f"under CCH with APLE's window ÷ stock KVM: {fmt(cch)} (claim: dbench and hackbench over 10× "
                  "slower; accepted: at most half on each)",
                  measured={f"{b}_cch_over_stock_kvm": v for b, v in cch.items()}),
        ]

        # Fig. 5: every benchmark under PLE off, stock KVM and APPLES; the seed's mean is over the
        # spinlock-intensive ones, by its own test.
        shown = ("PLE off", "stock KVM", "APPLES")
        fig5 = {c: [rel(b, (b, *CONFIGS[c], 2)) for b in BENCHMARKS] for c in shown}
        at_512 = {b: mean((b, SELECTION_WINDOW, "kvm", 2), inefficiency) for b in BENCHMARKS}
        intensive = [b for b in BENCHMARKS if at_512[b] > SPINLOCK_INTENSIVE]
        figures.append(Figure(
            id="fig5", title="Two VMs: PLE off, stock KVM and APPLES", metric="speedup", x_label="benchmark",
            y_label="performance ÷ stock KVM", series=[Series(c, list(BENCHMARKS), fig5[c]) for c in shown],
            paper=[Series("APPLES", ["ebizzy"], [PAPER_FIG6["APPLES"]])], kind="bar",
            note=note + " Mean inefficiency at a fixed 512-cycle window (the paper's test of a spinlock-intensive "
            "benchmark: above 5%): " + ", ".join(f"{b} {100 * at_512[b]:.1f}%" for b in BENCHMARKS) + ". The paper's "
            "Fig. 5 covers PARSEC, SPLASH-2x, dbench, hackbench, kernbench and ebizzy, and gives numbers in its text "
            "only for ebizzy (+49%) and the mean over the spinlock-intensive ones (+14%)."))
        intensive_gains = {b: g for b, g in zip(BENCHMARKS, fig5["APPLES"]) if b in intensive}
        gains = list(intensive_gains.values())
        mean_gain = statistics.fmean(gains) if gains else float("nan")
        checks.append(Check("fig5.apples_beats_stock_kvm_on_average", "fig5", mean_gain >= 1.05,
                            f"APPLES ÷ stock KVM: {', '.join(f'{b} {g:.2f}' for b, g in zip(BENCHMARKS, fig5['APPLES']))}"
                            f"; mean over the spinlock-intensive ones ({', '.join(intensive) or 'none'}) {mean_gain:.2f} "
                            "(claim: +14% on average; at least +5%)",
                            measured={"intensive_mean_over_stock_kvm": mean_gain,
                                      **{f"{b}_over_stock_kvm": g for b, g in zip(BENCHMARKS, fig5["APPLES"])}},
                            paper={"intensive_mean_over_stock_kvm": 1.14,
                                   "ebizzy_over_stock_kvm": PAPER_FIG6["APPLES"]}))
        # "APPLES performs consistently better than the stock KVM for these benchmarks."
        behind = [f"{b} {g:.3f}" for b, g in intensive_gains.items() if g < 1.0]
        found = (f"spinlock-intensive benchmarks where APPLES falls behind stock KVM: {', '.join(behind) or 'none'}"
                 if gains else "no spinlock-intensive benchmark")
        checks.append(Check("fig5.apples_better_on_every_intensive_benchmark", "fig5", bool(gains) and not behind,
                            f"{found} (claim: 'consistently better than the stock KVM for these benchmarks'; accepted: "
                            "at least 1.00 on each)",
                            measured={"intensive_benchmarks": len(gains),
                                      **{f"{b}_over_stock_kvm": g for b, g in intensive_gains.items()}}))

        # Overhead: one VM alone on the 16 cores (no over-commitment).
        alone = {b: {c: rel(b, (b, *CONFIGS[c], 1), vms=1) for c in shown} for b in ("ebizzy", "kernbench")}
        figures.append(Figure(
            id="overhead", title="One VM alone on the 16 cores", metric="speedup", x_label="benchmark",
            y_label="performance ÷ stock KVM",
            series=[Series(c, list(alone), [alone[b][c] for b in alone]) for c in shown], paper=[], kind="bar",
            note=note.replace("2 VMs", "1 VM") + " The paper: APPLES within 2% of stock KVM, both 1-2% (kernbench up "
            "to 8%) below PLE off."))
        # The seed states both as averages over its benchmarks ("On average ... less than 2
        # percent"; "1~2 percent on average and up to 8 percent for kernbench").
        deviation = statistics.fmean(abs(alone[b]["APPLES"] - 1) for b in alone)
        checks.append(Check("overhead.apples_costs_under_2pct_alone", "overhead", deviation < 0.02,
                            "APPLES ÷ stock KVM with one VM: " + ", ".join(f"{b} {alone[b]['APPLES']:.3f}" for b in alone)
                            + " (claim: on average under 2% apart)",
                            measured={"mean_abs_deviation": deviation,
                                      **{f"{b}_over_stock_kvm": alone[b]["APPLES"] for b in alone}}))
        ple_cost = {b: 1 - 1 / alone[b]["PLE off"] for b in alone}
        mean_ple_cost = statistics.fmean(ple_cost.values())
        checks.append(Check("overhead.ple_costs_a_lone_vm_1_to_8pct", "overhead",
                            0.005 <= mean_ple_cost and max(ple_cost.values()) <= 0.08,
                            "PLE's cost to a VM alone, 1 − stock KVM ÷ PLE off (below 0: stock KVM faster): "
                            + ", ".join(f"{b} {100 * c:.1f}%" for b, c in ple_cost.items())
                            + " (claim: PLE's premature exits cost a VM alone 1-2% on average, kernbench up to 8%; "
                            "accepted: a mean of at least 0.5% and none above 8%)",
                            measured={"mean_ple_cost_pct": 100 * mean_ple_cost,
                                      **{f"{b}_ple_cost_pct": 100 * c for b, c in ple_cost.items()}},
                            paper={"kernbench_ple_cost_pct": 8}))
        return figures, checks


register(Apples())
