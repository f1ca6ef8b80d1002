"""Opportunistic spinlocks (OTICKET, APSys'15): the sleepy spinlock anomaly of paravirtual
ticket locks in large VMs, and distance-based spinning plus early wake-ups as its fix.

The paper's setup, as we model it:
- host: the seed's "80-core machine" with hyperthreads enabled; the seed names no part, so we take
  it as 8 sockets × 10 cores × 2 hyperthreads (the Xeon E7-8870 at 2.4 GHz: our reading), SMT siblings
  sharing a core's throughput; C-states left enabled (the seed does not disable them), with
  ``intel_idle``'s Nehalem/Westmere table beyond C1 (docs/calibration.md); fig11: a 32-core,
  64-thread host (4 × 8 × 2);
- one VM, vCPUs pinned 1:1 in Linux's CPU order (a whole core per vCPU up to 80, then siblings);
  fig10: two identical VMs on the first N cores (two vCPUs per core);
- configurations: **Native** (the guest kernel's ticket lock with exits costing nothing and no
  PLE), **PVM** (Linux 3.19/4.0 PV ticket lock, KVM PLE on), **HVM** (plain ticket lock relying on
  PLE and directed yield), **OTICKET**, and the paper's alternatives; the pv qspinlock as the
  paper measured it (Linux 4.2, the series it cites as [21]) and as in Linux 6.8;
- workloads: our ``lkc``, ``exim`` and ``metis`` presets (docs/calibration.md), one work unit per
  loop iteration; the paper's builds/hour and messages/s are shown as work units/s.

Every point is the mean over seeds (1-5 at full scale, 1-3 at quick scale), since a collapse is
metastable and one seed decides little. Checks encode the paper's claims (direction and rough
factor) on those means, never its exact values.
"""

from __future__ import annotations

from vspin.reproduce import Check, Experiment, Figure, Series, register

CONFIGS = {
    "Native": {"lock": "ticket", "native": True},
    "PVM": {"lock": "pv-ticket"},
    "HVM": {"lock": "ticket"},
    "OTICKET": {"lock": "oticket"},
    "opportunistic spinning": {"lock": "oticket-spin-only"},
    "opportunistic wakeup": {"lock": "oticket-wakeup-only"},
    "longer spinning": {"lock": "longer-spinning"},
    "ITICKET": {"lock": "iticket"},
    "pv qspinlock 4.2": {"lock": "pv-qspinlock-v4.2"},
    "pv qspinlock 6.8": {"lock": "pv-qspinlock"},
}
MAIN = ("Native", "PVM", "HVM", "OTICKET")

# `intel_idle` `nehalem_cstates` beyond C1 (C1E, C3, C6): exit latency and target residency, µs.
NEHALEM_IDLE_STATES = [(10, 20), (20, 80), (200, 800)]

HOSTS = {
    "80-core": {"sockets": 8, "cores_per_socket": 10, "threads_per_core": 2},
    "32-core": {"sockets": 4, "cores_per_socket": 8, "threads_per_core": 2},
}

SCALE = {
    "quick": {"vcpus": (10, 20, 30, 40, 60, 80, 160), "small": (8, 16, 32, 64), "over": (10, 20, 40, 80),
              "seeds": (1, 2, 3), "duration_ms": 150},
    "full": {"vcpus": (10, 20, 30, 40, 60, 80, 100, 120, 140, 160), "small": (8, 16, 24, 32, 48, 64),
             "over": (10, 20, 30, 40, 60, 80), "seeds": (1, 2, 3, 4, 5), "duration_ms": 200},
}
# Every point is the mean over the seeds: a collapse is metastable (it needs a long critical
# section to trigger it, and a short run can miss it), so which seed collapses, and when, moves a
# configuration by up to 5× (PVM on LKC at 60 vCPUs: 100k-337k work units/s over seeds 1-5).


def scenario(host: str, config: str, workload: str, vcpus: int, vms: int, duration_ms: int, seed: int = 1) -> dict:
    c = CONFIGS[config]
    costs = {"vm_exit_ns": 0, "vm_entry_ns": 0, "hypercall_ns": 0} if c.get("native") else {}
    policy = "off" if c.get("native") else "kvm"
    return {
        "name": f"oticket-{host}-{workload}-{config}-{vcpus}x{vms}",
        "seed": seed,
        "duration_ms": duration_ms,
        "host": {**HOSTS[host], "clock_ghz": 2.4, "costs": costs,
                 "idle_states": [{"exit_ns": e * 1000, "residency_ns": r * 1000} for e, r in NEHALEM_IDLE_STATES]},
        "hypervisor": {"ple": {"policy": policy}},
        "vm": [{"name": f"vm{i}", "vcpus": vcpus, "pin": "1:1", "lock": c["lock"], "workload": {"preset": workload}}
               for i in range(vms)],
    }


class OTicket(Experiment):
    name = "oticket"
    title = "Opportunistic spinlocks (APSys'15): the sleepy spinlock anomaly and OTICKET"
    source = ("S. Kashyap, C. Min and T. Kim, "
              "\"Opportunistic Spinlocks: Achieving Virtual Machine Scalability in the Clouds\", APSys 2015")
    explained_in = "docs/mechanisms/oticket.md"

    def run(self, scale, runner):
        sc = SCALE[scale]
        duration, xs, small, over, seeds = sc["duration_ms"], sc["vcpus"], sc["small"], sc["over"], sc["seeds"]
        keys = []
        keys += [("80-core", c, "lkc", n, 1) for c in (*MAIN, "opportunistic spinning", "opportunistic wakeup",
                                                       "longer spinning", "ITICKET", "pv qspinlock 4.2",
                                                       "pv qspinlock 6.8") for n in xs]
        keys += [("80-core", c, w, n, 1) for w in ("exim", "metis") for c in MAIN for n in xs]
        keys += [("32-core", c, w, n, 1) for w in ("lkc", "exim", "metis") for c in MAIN for n in small]
        keys += [("80-core", c, w, n, 2) for w in ("lkc", "exim", "metis")
                 for c in ("PVM", "HVM", "OTICKET", *(("longer spinning",) if w == "lkc" else ())) for n in over]
        points = [(*k, seed) for k in keys for seed in seeds]
        res = dict(zip(points, runner.run_many([scenario(*p[:5], duration, p[5]) for p in points])))
        seeds_said = f"seeds {seeds[0]}–{seeds[-1]}"
        note = (f"{duration} ms simulated per point, the mean of {seeds_said}; throughput is work units/s of the "
                "first VM; halt exits count every HLT exit of the VM (idle and lock halts alike), as `kvm_stat` does.")

        def first_vm(host, config, workload, n, vms):
            return [res[(host, config, workload, n, vms, seed)].raw["vms"][0] for seed in seeds]

        def tp(host, config, workload, n, vms=1):
            """The first VM's work units/s, the mean over the seeds."""
            return sum(v["throughput_per_s"] for v in first_vm(host, config, workload, n, vms)) / len(seeds)

        def halts(host, config, workload, n, vms=1):
            """The first VM's halt exits and work units, summed over the seeds."""
            vs = first_vm(host, config, workload, n, vms)
            return sum(v["counters"]["halt_exits"] for v in vs), sum(v["work_units"] for v in vs)

        def curve(host, configs, workload, ns, vms=1):
            return [Series(c, list(ns), [tp(host, c, workload, n, vms) for n in ns]) for c in configs]

        figures, checks = [], []
        lkc = {s.config: dict(zip(xs, s.y)) for s in curve("80-core", CONFIGS, "lkc", xs)}
        hi = xs[-1]
        mid = max(n for n in xs if n <= 80)

        figures.append(Figure(
            id="fig2", title="LKC on the 80-core host", metric="throughput", x_label="vCPUs", y_label="work units/s",
            series=curve("80-core", MAIN, "lkc", xs), paper=[], note=note +
            " Paper: PVM starts suffering after 30 vCPUs and has collapsed completely at 40; OTICKET scales to 80 "
            "and does not collapse like PVM."))
        peak_n = max(xs, key=lambda n: lkc["PVM"][n])
        drop = lkc["PVM"][hi] / lkc["PVM"][peak_n]
        checks.append(Check("fig2.pvm_collapses", "fig2", drop < 0.7 and peak_n < hi,
                            f"PVM peaks at {peak_n} vCPUs ({lkc['PVM'][peak_n]:.0f}/s) and falls to {drop:.2f}× of "
                            f"that at {hi} (claim: collapse; paper: between 30 and 40 vCPUs)",
                            measured={"pvm_peak_vcpus": peak_n, "pvm_peak_per_s": lkc["PVM"][peak_n], "vcpus": hi,
                                      "pvm_over_pvm_peak": drop}))
        # "starts suffering after 30 vCPUs and its performance completely collapses at 40 vCPUs".
        at_40 = lkc["PVM"][40] / lkc["PVM"][peak_n]
        checks.append(Check("fig2.pvm_collapse_point_30_to_40", "fig2", peak_n < 40 and at_40 < 0.7,
                            f"PVM peaks at {peak_n} vCPUs and runs at {at_40:.2f}× of that at 40 (claim: suffers "
                            "after 30, completely collapsed at 40; accepted: the peak below 40 and under 0.7× of it "
                            "at 40, the drop fig2.pvm_collapses asks for)",
                            measured={"pvm_peak_vcpus": peak_n, "pvm_at_40_over_pvm_peak": at_40}))
        past = [n for n in xs if n >= 40]
        ahead = all(lkc["OTICKET"][n] >= 0.95 * lkc["PVM"][n] for n in past)
        checks.append(Check("fig2.oticket_at_least_pvm_past_collapse", "fig2",
                            ahead and lkc["OTICKET"][hi] >= 1.2 * lkc["PVM"][hi],
                            "OTICKET / PVM: " + ", ".join(f"{n}: {lkc['OTICKET'][n] / lkc['PVM'][n]:.2f}×" for n in past),
                            measured={"vcpus": past, "oticket_per_s": [lkc["OTICKET"][n] for n in past],
                                      "pvm_per_s": [lkc["PVM"][n] for n in past],
                                      "oticket_over_pvm": [lkc["OTICKET"][n] / lkc["PVM"][n] for n in past]}))
        checks.append(Check("fig2.oticket_scales_to_80", "fig2", lkc["OTICKET"][mid] >= 1.6 * lkc["OTICKET"][40],
                            f"OTICKET {lkc['OTICKET'][40]:.0f}/s at 40 → {lkc['OTICKET'][mid]:.0f}/s at {mid}",
                            measured={"vcpus": [40, mid], "oticket_per_s": [lkc["OTICKET"][40], lkc["OTICKET"][mid]]}))

        # The seed's Fig. 4 counts the halt exits "that occur during a Linux kernel compile", a
        # fixed amount of work; our runs have a fixed length, so the count per work unit is the
        # one to compare (per second, a configuration that works faster would halt more).
        def halts_per_1000(host, config, workload, n, vms=1):
            h, units = halts(host, config, workload, n, vms)
            return 1000 * h / max(units, 1)

        figures.append(Figure(
            id="fig4", title="halt exits during LKC", metric="halt exits / 1000 units", x_label="vCPUs",
            y_label="halt exits per 1000 work units",
            series=[Series(c, list(xs), [halts_per_1000("80-core", c, "lkc", n) for n in xs]) for c in ("PVM", "OTICKET")],
            paper=[], note=note + " Paper: the halt exits of one kernel compile; PVM's soar after ~30 vCPUs, "
            "OTICKET's stay almost flat."))
        pvm_h = {n: halts_per_1000("80-core", "PVM", "lkc", n) for n in xs}
        ot_h = {n: halts_per_1000("80-core", "OTICKET", "lkc", n) for n in xs}
        low = xs[1]
        soar = pvm_h[mid] / max(pvm_h[low], 1e-9)
        checks.append(Check("fig4.pvm_halts_soar", "fig4", soar >= 2,
                            f"PVM halts per 1000 units {pvm_h[low]:.1f} at {low} → {pvm_h[mid]:.1f} at {mid}: {soar:.1f}× "
                            f"(claim: soar; accepted ≥ 2×)",
                            measured={"vcpus": [low, mid], "pvm_halts_per_1000_units": [pvm_h[low], pvm_h[mid]],
                                      "pvm_halts_last_over_first": soar}))
        # "the number of halt-exits of the PVM starts soaring after 30 vCPUs, but remains almost
        # constant for OTICKET", one figure with both: OTICKET's rise is flat beside PVM's.
        ot_rise, pvm_rise = ot_h[mid] - ot_h[low], pvm_h[mid] - pvm_h[low]
        checks.append(Check("fig4.oticket_halts_flat", "fig4",
                            ot_h[mid] <= 0.5 * pvm_h[mid] and ot_rise <= 0.1 * pvm_rise,
                            f"halt exits per 1000 units from {low} to {mid} vCPUs: OTICKET {ot_h[low]:.1f} → {ot_h[mid]:.1f}, "
                            f"PVM {pvm_h[low]:.1f} → {pvm_h[mid]:.1f} (claim: OTICKET's almost constant while PVM's soar; "
                            "accepted: OTICKET's rise under a tenth of PVM's, and at most half of PVM's at the end)",
                            measured={"vcpus": [low, mid], "oticket_halts_per_1000_units": [ot_h[low], ot_h[mid]],
                                      "pvm_halts_per_1000_units": [pvm_h[low], pvm_h[mid]],
                                      "oticket_halts_rise_per_1000_units": ot_rise,
                                      "pvm_halts_rise_per_1000_units": pvm_rise}))

        halves = ("OTICKET", "opportunistic spinning", "opportunistic wakeup")
        figures.append(Figure(
            id="fig6", title="OTICKET's two halves on LKC", metric="throughput", x_label="vCPUs",
            y_label="work units/s", series=curve("80-core", halves, "lkc", xs), paper=[], note=note +
            " Paper: OTICKET slightly better than either half, best at 80; both halves degrade after ~110."))
        best_half = max(lkc["opportunistic spinning"][mid], lkc["opportunistic wakeup"][mid])
        checks.append(Check("fig6.oticket_at_least_either_half", "fig6", lkc["OTICKET"][mid] >= 0.97 * best_half,
                            f"at {mid}: OTICKET {lkc['OTICKET'][mid]:.0f}/s, best half {best_half:.0f}/s",
                            measured={"vcpus": mid, "oticket_per_s": lkc["OTICKET"][mid], "best_half_per_s": best_half,
                                      "opportunistic_spinning_per_s": lkc["opportunistic spinning"][mid],
                                      "opportunistic_wakeup_per_s": lkc["opportunistic wakeup"][mid]}))

        for fid, workload in (("fig7a", "exim"), ("fig7b", "metis")):
            figures.append(Figure(
                id=fid, title=f"{workload.upper()} on the 80-core host", metric="throughput", x_label="vCPUs",
                y_label="work units/s", series=curve("80-core", MAIN, workload, xs), paper=[], note=note +
                (" Paper: PVM suffers from 30 cores; OTICKET outperforms it." if workload == "exim"
                 else " Paper: all configurations perform the same.")))
        exim = {c: {n: tp("80-core", c, "exim", n) for n in xs} for c in MAIN}
        checks.append(Check("fig7.exim_oticket_beats_pvm", "fig7a", exim["OTICKET"][mid] >= 1.1 * exim["PVM"][mid],
                            f"EXIM at {mid}: OTICKET {exim['OTICKET'][mid]:.0f}/s vs PVM {exim['PVM'][mid]:.0f}/s",
                            measured={"vcpus": mid, "oticket_per_s": exim["OTICKET"][mid],
                                      "pvm_per_s": exim["PVM"][mid]}))
        metis_spread = [max(tp("80-core", c, "metis", n) for c in MAIN) /
                        min(tp("80-core", c, "metis", n) for c in MAIN) for n in xs]
        spread = max(metis_spread)
        checks.append(Check("fig7.metis_all_equal", "fig7b", spread <= 1.1,
                            f"METIS: largest max/min across configurations {spread:.3f} (accepted ≤ 1.10)",
                            measured={"vcpus": list(xs), "max_over_min": metis_spread, "largest_max_over_min": spread}))

        def per_unit(config, workload, n):
            h, units = halts("80-core", config, workload, n)
            return 1000 * h / units if units else None

        figures.append(Figure(
            id="fig8", title="halt exits per 1000 work units (EXIM)", metric="halt exits / 1000 units",
            x_label="vCPUs", y_label="halt exits per 1000 units",
            series=[Series(c, list(xs), [per_unit(c, "exim", n) for n in xs]) for c in ("PVM", "OTICKET")],
            paper=[], note=note +
            " Paper, per message (a unit it does not relate to ours, so not drawn on this axis): PVM 0.5 at 20 "
            "cores → 72 at 70; OTICKET 7 at 70 (10× fewer). The checks compare the ratios."))
        pe = {n: per_unit("PVM", "exim", n) or 0 for n in xs}
        oe = {n: per_unit("OTICKET", "exim", n) or 0 for n in xs}
        checks.append(Check("fig8.exim_pvm_halts_grow", "fig8", pe[mid] >= 5 * max(pe[low], 1e-9),
                            f"PVM {pe[low]:.2f} at {low} → {pe[mid]:.2f} at {mid} per 1000 units",
                            measured={"vcpus": [low, mid], "pvm_halts_per_1000_units": [pe[low], pe[mid]]}))
        checks.append(Check("fig8.exim_oticket_fewer_halts", "fig8", pe[mid] >= 3 * oe[mid],
                            f"at {mid}: PVM {pe[mid]:.2f} vs OTICKET {oe[mid]:.2f} per 1000 units (paper 10×)",
                            measured={"vcpus": mid, "pvm_halts_per_1000_units": pe[mid],
                                      "oticket_halts_per_1000_units": oe[mid],
                                      "pvm_halts_over_oticket_halts": pe[mid] / oe[mid] if oe[mid] else None},
                            paper={"pvm_halts_over_oticket_halts": 10}))

        alternatives = ("PVM", "OTICKET", "longer spinning", "ITICKET", "pv qspinlock 4.2", "pv qspinlock 6.8")
        figures.append(Figure(
            id="fig9", title="design alternatives on LKC", metric="throughput", x_label="vCPUs",
            y_label="work units/s", series=curve("80-core", alternatives, "lkc", xs), paper=[], note=note +
            " Paper: longer spinning slightly better than OTICKET beyond ~130; ITICKET ≈ OTICKET; "
            "pv qspinlock (the Linux 4.2 version) shows the anomaly like PVM. pv qspinlock 6.8, with lock "
            "stealing and without kicks at hand-off, is shown for comparison."))
        checks.append(Check("fig9.pv_qspinlock_shows_anomaly", "fig9",
                            lkc["pv qspinlock 4.2"][hi] <= 0.8 * lkc["OTICKET"][hi],
                            f"at {hi}: pv qspinlock 4.2 {lkc['pv qspinlock 4.2'][hi]:.0f}/s vs OTICKET "
                            f"{lkc['OTICKET'][hi]:.0f}/s (6.8: {lkc['pv qspinlock 6.8'][hi]:.0f}/s)",
                            measured={"vcpus": hi, "pv_qspinlock_4_2_per_s": lkc["pv qspinlock 4.2"][hi],
                                      "oticket_per_s": lkc["OTICKET"][hi],
                                      "pv_qspinlock_6_8_per_s": lkc["pv qspinlock 6.8"][hi]}))
        checks.append(Check("fig9.longer_spinning_at_least_oticket_at_high_counts", "fig9",
                            lkc["longer spinning"][hi] >= 0.95 * lkc["OTICKET"][hi],
                            f"at {hi}: longer spinning {lkc['longer spinning'][hi]:.0f}/s vs OTICKET {lkc['OTICKET'][hi]:.0f}/s",
                            measured={"vcpus": hi, "longer_spinning_per_s": lkc["longer spinning"][hi],
                                      "oticket_per_s": lkc["OTICKET"][hi]}))
        # "ITICKET is similar to OTICKET" is said of the whole figure: every vCPU count counts.
        iratio = {n: lkc["ITICKET"][n] / lkc["OTICKET"][n] for n in xs}
        worst = max(xs, key=lambda n: abs(iratio[n] - 1))
        checks.append(Check("fig9.iticket_close_to_oticket", "fig9", abs(iratio[worst] - 1) <= 0.15,
                            f"ITICKET / OTICKET, farthest from 1 at {worst} vCPUs: {iratio[worst]:.2f} ("
                            + ", ".join(f"{n}: {iratio[n]:.2f}" for n in xs) + ") (claim: 'similar to OTICKET'; "
                            "accepted: within 0.85-1.15 at every count)",
                            measured={"vcpus": list(xs), "iticket_over_oticket": [iratio[n] for n in xs],
                                      "farthest_vcpus": worst}))

        for fid, workload in (("fig10a", "lkc"), ("fig10b", "exim"), ("fig10c", "metis")):
            configs = ("PVM", "HVM", "OTICKET", *(("longer spinning",) if workload == "lkc" else ()))
            figures.append(Figure(
                id=fid, title=f"{workload.upper()}, two VMs co-running (2 vCPUs per core)", metric="throughput",
                x_label="cores (vCPUs per VM)", y_label="work units/s (first VM)",
                series=curve("80-core", configs, workload, over, 2), paper=[],
                note=note +
                " Paper: OTICKET > PVM on LKC and EXIM, equal on METIS; longer spinning helps up to ~40 "
                "cores then degrades badly; HVM best on LKC but degrades from 60, which the paper puts down to "
                "QEMU's I/O thread (LKC) and hypervisor-level scheduling contention (EXIM): the model has "
                "neither (docs/mechanisms/oticket.md). Here no waiter reaches longer spinning's 2^34 PAUSEs, "
                "so it runs as HVM does, to the event."))
        top = over[-1]
        o = {c: {n: tp("80-core", c, "lkc", n, 2) for n in over} for c in ("PVM", "HVM", "OTICKET", "longer spinning")}
        checks.append(Check("fig10.lkc_oticket_beats_pvm", "fig10a", o["OTICKET"][top] >= o["PVM"][top],
                            f"at {top} cores: OTICKET {o['OTICKET'][top]:.0f}/s vs PVM {o['PVM'][top]:.0f}/s",
                            measured={"cores": top, "oticket_per_s": o["OTICKET"][top], "pvm_per_s": o["PVM"][top]}))
        checks.append(Check("fig10.longer_spinning_degrades", "fig10a", o["longer spinning"][top] < o["OTICKET"][top],
                            f"at {top} cores: longer spinning {o['longer spinning'][top]:.0f}/s vs OTICKET "
                            f"{o['OTICKET'][top]:.0f}/s (claim: longer spinning 'drastically degrades the "
                            "performance in the over-committed setting'; accepted: below OTICKET)",
                            measured={"cores": top, "longer_spinning_per_s": o["longer spinning"][top],
                                      "oticket_per_s": o["OTICKET"][top]}))
        ot_e, pvm_e = tp("80-core", "OTICKET", "exim", top, 2), tp("80-core", "PVM", "exim", top, 2)
        checks.append(Check("fig10.exim_oticket_beats_pvm", "fig10b", ot_e >= pvm_e,
                            f"EXIM at {top} cores: OTICKET {ot_e:.0f}/s vs PVM {pvm_e:.0f}/s",
                            measured={"cores": top, "oticket_per_s": ot_e, "pvm_per_s": pvm_e}))
        # HVM (PLE and directed yield, no PV lock): "beats both on LKC but degrades from 60 cores;
        # on EXIM falls below PVM/OTICKET after 60" (the catalogue's fig10).
        before = max(n for n in over if n < 60)
        best_pv = max(o["PVM"][before], o["OTICKET"][before])
        checks.append(Check("fig10.lkc_hvm_beats_pvm_and_oticket", "fig10a", o["HVM"][before] >= best_pv,
                            f"LKC at {before} cores: HVM {o['HVM'][before]:.0f}/s, PVM {o['PVM'][before]:.0f}/s, "
                            f"OTICKET {o['OTICKET'][before]:.0f}/s (claim: HVM best on LKC until it degrades from 60 "
                            "cores; checked at the largest count below 60)",
                            measured={"cores": before, "hvm_per_s": o["HVM"][before], "pvm_per_s": o["PVM"][before],
                                      "oticket_per_s": o["OTICKET"][before]}))
        hvm_peak = max(o["HVM"][n] for n in over if n <= 60)
        checks.append(Check("fig10.lkc_hvm_degrades_from_60", "fig10a", o["HVM"][top] < hvm_peak,
                            f"LKC, HVM: {o['HVM'][top]:.0f}/s at {top} cores, best up to 60 cores {hvm_peak:.0f}/s "
                            f"(claim: degrades from 60 cores; accepted: lower at {top} than at its best up to 60)",
                            measured={"cores": top, "hvm_per_s": o["HVM"][top], "hvm_best_to_60_per_s": hvm_peak}))
        hvm_e = tp("80-core", "HVM", "exim", top, 2)
        checks.append(Check("fig10.exim_hvm_below_pvm_and_oticket_past_60", "fig10b", hvm_e < min(ot_e, pvm_e),
                            f"EXIM at {top} cores: HVM {hvm_e:.0f}/s, PVM {pvm_e:.0f}/s, OTICKET {ot_e:.0f}/s "
                            "(claim: HVM falls below PVM and OTICKET after 60 cores)",
                            measured={"cores": top, "hvm_per_s": hvm_e, "pvm_per_s": pvm_e, "oticket_per_s": ot_e}))
        over_spread = [max(tp("80-core", c, "metis", n, 2) for c in ("PVM", "HVM", "OTICKET")) /
                       min(tp("80-core", c, "metis", n, 2) for c in ("PVM", "HVM", "OTICKET")) for n in over]
        mspread = max(over_spread)
        checks.append(Check("fig10.metis_equal", "fig10c", mspread <= 1.1,
                            f"METIS over-committed: largest max/min across configurations {mspread:.3f}",
                            measured={"cores": list(over), "max_over_min": over_spread,
                                      "largest_max_over_min": mspread}))

        for fid, workload in (("fig11a", "lkc"), ("fig11b", "exim"), ("fig11c", "metis")):
            figures.append(Figure(
                id=fid, title=f"{workload.upper()} on the 32-core (64-thread) host", metric="throughput",
                x_label="vCPUs", y_label="work units/s", series=curve("32-core", MAIN, workload, small), paper=[],
                note=note + " Paper: the same trends as on the 80-core host."))
        s_hi = small[-1]
        s = {c: tp("32-core", c, "lkc", s_hi) for c in MAIN}
        checks.append(Check("fig11.lkc_oticket_at_least_pvm", "fig11a", s["OTICKET"] >= 1.1 * s["PVM"],
                            f"LKC at {s_hi} vCPUs: OTICKET {s['OTICKET']:.0f}/s vs PVM {s['PVM']:.0f}/s",
                            measured={"vcpus": s_hi, "oticket_per_s": s["OTICKET"], "pvm_per_s": s["PVM"]}))
        e = {c: tp("32-core", c, "exim", s_hi) for c in MAIN}
        checks.append(Check("fig11.exim_oticket_at_least_pvm", "fig11b", e["OTICKET"] >= 1.1 * e["PVM"],
                            f"EXIM at {s_hi} vCPUs: OTICKET {e['OTICKET']:.0f}/s vs PVM {e['PVM']:.0f}/s",
                            measured={"vcpus": s_hi, "oticket_per_s": e["OTICKET"], "pvm_per_s": e["PVM"]}))
        m = {n: [tp("32-core", c, "metis", n) for c in MAIN] for n in small}
        small_spread = [max(v) / min(v) for v in m.values()]
        sspread = max(small_spread)
        checks.append(Check("fig11.metis_equal", "fig11c", sspread <= 1.1,
                            f"METIS on the 32-core host: largest max/min across configurations {sspread:.3f}",
                            measured={"vcpus": list(small), "max_over_min": small_spread,
                                      "largest_max_over_min": sspread}))
        return figures, checks


register(OTicket())
