//! Pause-Loop Exiting window policies (`kernel-mechanisms.md` §4).
//!
//! The window is per vCPU, in the CPU's unit: TSC cycles for Intel's PLE, PAUSE instructions for
//! AMD's pause filter (`PauseCounter`; the arithmetic is the same, on `pause_filter_count` and
//! its maximum, in `svm.c` of 6.8 and 6.18). Stock KVM (`kvm`) grows it on every PLE exit
//! (`handle_pause` → `grow_ple_window`) and shrinks it whenever the vCPU thread is scheduled back
//! in (`kvm_sched_in` → `shrink_ple_window`); with the default `shrink = 0` that is a reset to
//! the base window. `fixed` keeps the base window (Xen's behaviour); `off` never exits.
//!
//! `aple` is APPLES' Adaptive PLE (the TPDS'17 seed, §3.1 and Algorithm 1): one window for all
//! vCPUs of a VM, chosen by the VM's *inefficiency*, measured over epochs of a fixed number of
//! the VM's PLE exits ([`PleEpochs`], kept under every policy so that stock KVM and fixed
//! windows can be compared by the same measure, as the seed does in Figs. 10–12). A round
//! tries the desired window `Td`, then `min(Tu, Td + δ)`, then `max(Tl, Td − δ)`, one epoch
//! each, and makes the window of the least inefficient epoch the next `Td` ([`Aple`]).
//!
//! ```text
//!             epoch ends          epoch ends               epoch ends
//!   [try Td] ───────────▶ [try Td+δ] ───────────▶ [try Td−δ] ───────────▶ Td := argmin ─┐
//!      ▲                                                                               │
//!      └───────────────────────────────────────────────────────────────────────────────┘
//! ```
//!
//! What we decided where the seed is silent:
//! - *Time handling PLE exits* is the host CPU time of each exit's handler: the VM exit, the
//!   candidate search, and then the switch away (if it yielded; also in the rare case where the
//!   pCPU has nothing else to run and `schedule()` keeps the yielder) or the VM entry. The
//!   handler's wall time would include the time a yielder waits off its pCPU, which is not "the
//!   overhead of vCPU switches" and would make the ratio exceed 1.
//! - *Wasteful spinning* of an exit is the window it reached, in ns at the TSC rate (the seed's
//!   threshold × exits, which for stock KVM's per-vCPU windows is their sum).
//! - A new window reaches a vCPU at its next PLE exit or its next switch-in (KVM writes
//!   `PLE_WINDOW` into a vCPU's VMCS before that vCPU's next entry; another vCPU's VMCS cannot
//!   be written while it runs). Ties between epochs keep the earlier one: `Td` first.
use crate::metrics::PleEpoch;
use crate::scenario::{ApleConfig, PauseCounter, PleConfig, PlePolicy};

/// The window every vCPU starts with.
pub(crate) fn initial_window(cfg: &PleConfig) -> u64 {
    match cfg.policy {
        PlePolicy::Aple => cfg.aple_settings().initial_cycles,
        PlePolicy::Kvm | PlePolicy::Fixed | PlePolicy::Off => cfg.base_window(),
    }
}

/// `__grow_ple_window`: multiply while the modifier is below the base, else add; clamp to max.
/// Since 4.18 (`x86.h`, 64-bit) the clamp comes after growing. Intel's 3.x `vmx.c` computes in
/// `int` and clamps first, to `ple_window_actual_max`: the maximum shrunk once by the modifier,
/// so that growing cannot overflow. The two differ only at the cap, by less than the modifier:
/// 3.18's defaults stop at 1,073,741,822 cycles, not `ple_window_max`'s 1,073,741,823
/// (`kernel-mechanisms.md` §4.2).
pub(crate) fn grow(cfg: &PleConfig, window: u64) -> u64 {
    match cfg.policy {
        PlePolicy::Kvm => {
            let base = cfg.base_window();
            if cfg.grow < 1 {
                return base;
            }
            let multiply = cfg.grow < base;
            if cfg.int_arithmetic && cfg.counter == PauseCounter::Intel {
                // Signed, as in the kernel: an additive modifier above the maximum makes
                // `actual_max` negative, and the grown window is then the maximum itself.
                let (max, modifier) = (cfg.max_window().max(base) as i64, cfg.grow as i64);
                let actual_max = if multiply { max / modifier } else { max - modifier };
                let w = (window as i64).min(actual_max);
                return (if multiply { w * modifier } else { w + modifier }) as u64;
            }
            let w = if multiply { window.saturating_mul(cfg.grow) } else { window.saturating_add(cfg.grow) };
            w.min(cfg.max_window())
        }
        PlePolicy::Fixed | PlePolicy::Off | PlePolicy::Aple => window,
    }
}

/// `__shrink_ple_window`: divide while the modifier is below the base, else subtract; never
/// below the base; a zero modifier resets to the base.
pub(crate) fn shrink(cfg: &PleConfig, window: u64) -> u64 {
    match cfg.policy {
        PlePolicy::Kvm => {
            let base = cfg.base_window();
            if cfg.shrink < 1 {
                return base;
            }
            let w = if cfg.shrink < base { window / cfg.shrink } else { window.saturating_sub(cfg.shrink) };
            w.max(base)
        }
        PlePolicy::Fixed | PlePolicy::Off | PlePolicy::Aple => window,
    }
}

/// One VM's PLE exits, in epochs of `epoch_exits` (1,000 in the seed, for every policy), and
/// the inefficiency of each: (wasted spinning + exit handling) ÷ the VM's CPU time.
#[derive(Debug)]
pub(crate) struct PleEpochs {
    epoch_exits: u32,
    exits: u32,
    spin_ns: u64,
    handling_ns: u64,
    cpu_at_start_ns: u64,
    /// Completed epochs, and the sum of their inefficiencies.
    pub epochs: u64,
    pub inefficiency_sum: f64,
    /// Every exit's window, summed, and the exits: the mean window an exit reached.
    pub window_cycles_sum: u128,
    pub exits_total: u64,
    /// Each epoch as it ended, when the scenario asks for them (`[record] ple_epochs`).
    pub trace: Option<Vec<PleEpoch>>,
}

impl PleEpochs {
    pub(crate) fn new(cfg: &PleConfig, record: bool) -> Self {
        let epoch_exits = cfg.aple_settings().epoch_exits;
        let trace = record.then(Vec::new);
        PleEpochs { epoch_exits, exits: 0, spin_ns: 0, handling_ns: 0, cpu_at_start_ns: 0, epochs: 0, inefficiency_sum: 0.0, window_cycles_sum: 0, exits_total: 0, trace }
    }

    /// Count an exit that spun a window of `window_cycles` (`window_ns`) and whose handler ran
    /// `handling_ns`. Returns whether that ended the epoch; then call [`PleEpochs::end_epoch`].
    pub(crate) fn record_exit(&mut self, window_cycles: u64, window_ns: u64, handling_ns: u64) -> bool {
        self.exits += 1;
        self.spin_ns += window_ns;
        self.handling_ns += handling_ns;
        self.window_cycles_sum += window_cycles as u128;
        self.exits_total += 1;
        self.exits >= self.epoch_exits
    }

    /// Close the epoch at the VM's CPU time `cpu_ns` (summed over its vCPUs) and return its
    /// inefficiency.
    pub(crate) fn end_epoch(&mut self, cpu_ns: u64) -> f64 {
        let ran = cpu_ns.saturating_sub(self.cpu_at_start_ns).max(1);
        let inefficiency = (self.spin_ns + self.handling_ns) as f64 / ran as f64;
        self.epochs += 1;
        self.inefficiency_sum += inefficiency;
        (self.exits, self.spin_ns, self.handling_ns, self.cpu_at_start_ns) = (0, 0, 0, cpu_ns);
        inefficiency
    }

    /// Whether the scenario asked for each epoch (`[record] ple_epochs`).
    pub(crate) fn records(&self) -> bool {
        self.trace.is_some()
    }

    /// Keep an epoch that just ended, if the scenario asked for them.
    pub(crate) fn record(&mut self, epoch: PleEpoch) {
        if let Some(trace) = &mut self.trace {
            trace.push(epoch);
        }
    }
}

/// APLE's Algorithm 1 for one VM: which window this epoch tries, and the next desired window
/// after each round of three.
#[derive(Debug)]
pub(crate) struct Aple {
    cfg: ApleConfig,
    desired: u64,
    /// Which of the round's three windows this epoch tries (0: `Td`, 1: `Td + δ`, 2: `Td − δ`),
    /// and the inefficiency each trial of the round measured.
    trial: usize,
    inefficiencies: [f64; 3],
}

impl Aple {
    pub(crate) fn new(cfg: ApleConfig) -> Self {
        Aple { desired: cfg.initial_cycles, cfg, trial: 0, inefficiencies: [0.0; 3] }
    }

    /// The window of the VM in the current epoch.
    pub(crate) fn window(&self) -> u64 {
        self.trial_window(self.trial)
    }

    fn trial_window(&self, trial: usize) -> u64 {
        let c = &self.cfg;
        match trial {
            0 => self.desired,
            1 => (self.desired.saturating_add(c.step_cycles)).min(c.max_cycles),
            _ => (self.desired.saturating_sub(c.step_cycles)).max(c.min_cycles),
        }
    }

    /// An epoch with the current window ended with `inefficiency`: move to the next trial, and
    /// after the third choose the least inefficient window as the desired one.
    pub(crate) fn epoch_ended(&mut self, inefficiency: f64) {
        self.inefficiencies[self.trial] = inefficiency;
        self.trial += 1;
        if self.trial == 3 {
            let best = (1..3).fold(0, |b, i| if self.inefficiencies[i] < self.inefficiencies[b] { i } else { b });
            self.desired = self.trial_window(best);
            self.trial = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stock_kvm_doubles_then_resets() {
        let cfg = PleConfig::default();
        let w = grow(&cfg, grow(&cfg, 4096));
        assert_eq!(w, 16384);
        assert_eq!(shrink(&cfg, w), 4096);
    }

    #[test]
    fn amds_pause_filter_count_doubles_to_its_16_bit_maximum_then_resets() {
        let cfg = PleConfig { counter: PauseCounter::Amd, ..PleConfig::default() };
        assert_eq!(initial_window(&cfg), 3000);
        let mut w = 3000;
        let mut seen = Vec::new();
        for _ in 0..6 {
            w = grow(&cfg, w);
            seen.push(w);
        }
        assert_eq!(seen, [6000, 12000, 24000, 48000, 65535, 65535]);
        assert_eq!(shrink(&cfg, w), 3000);
    }

    #[test]
    fn stock_kvm_3_18s_window_stops_one_cycle_below_int_max_over_2() {
        // vmx.c 3.18: ple_window_max = INT_MAX / ple_window_grow; its grow clamps to
        // ple_window_actual_max = INT_MAX / 4 before doubling, so it settles at 1073741822
        // (kernel-mechanisms.md §4.2); 6.x grows in 64 bits, then clamps to its maximum.
        let grown = |cfg: &PleConfig| (0..20).fold(4096, |w, _| grow(cfg, w));
        assert_eq!(grown(&PleConfig::default()), 1_073_741_822);
        let six = PleConfig { int_arithmetic: false, max_cycles: u32::MAX as u64, ..PleConfig::default() };
        assert_eq!(grown(&six), u32::MAX as u64);
        let six_at_3x_cap = PleConfig { int_arithmetic: false, ..PleConfig::default() };
        assert_eq!(grown(&six_at_3x_cap), 1_073_741_823);
    }

    #[test]
    fn an_additive_modifier_above_the_maximum_grows_3_x_windows_to_the_maximum() {
        // actual_max = 4500 - 5000 < 0 in vmx.c's int: min(4096, -500) + 5000 = 4500.
        let cfg = PleConfig { grow: 5000, max_cycles: 4500, ..PleConfig::default() };
        assert_eq!(grow(&cfg, 4096), 4500);
        assert_eq!(grow(&cfg, 4500), 4500);
    }

    #[test]
    fn grow_is_additive_for_large_modifiers_and_clamped() {
        let cfg = PleConfig { grow: 5000, max_cycles: 12000, ..PleConfig::default() };
        assert_eq!(grow(&cfg, 4096), 9096);
        assert_eq!(grow(&cfg, 9096), 12000);
        let cfg = PleConfig { shrink: 2, ..PleConfig::default() };
        assert_eq!(shrink(&cfg, 16384), 8192);
        assert_eq!(shrink(&cfg, 6000), 4096);
    }

    #[test]
    fn aple_tries_the_desired_window_then_one_step_up_and_down_and_keeps_the_least_inefficient() {
        let mut a = Aple::new(ApleConfig::default());
        let mut windows = Vec::new();
        for inefficiency in [0.10, 0.05, 0.20, /* round 2 from 9216 */ 0.10, 0.12, 0.09] {
            windows.push(a.window());
            a.epoch_ended(inefficiency);
        }
        assert_eq!(windows, [8192, 9216, 7168, 9216, 10240, 8192]);
        assert_eq!(a.window(), 8192, "the third window of round 2 was the least inefficient");
    }

    #[test]
    fn aple_stays_within_its_bounds_and_ties_keep_the_desired_window() {
        let cfg = ApleConfig { initial_cycles: 4096, min_cycles: 4096, max_cycles: 4600, ..ApleConfig::default() };
        let mut a = Aple::new(cfg);
        let mut windows = Vec::new();
        for _ in 0..3 {
            windows.push(a.window());
            a.epoch_ended(0.5);
        }
        assert_eq!(windows, [4096, 4600, 4096]);
        assert_eq!(a.window(), 4096);
    }

    #[test]
    fn a_round_whose_epochs_tie_moves_the_desired_window_only_to_a_strictly_better_one() {
        // Ties keep the earlier epoch, Td first (this module's reading of Algorithm 1): a tie is
        // no evidence that another window is less inefficient.
        let mut a = Aple::new(ApleConfig::default());
        for inefficiency in [0.10, 0.10, 0.10] {
            a.epoch_ended(inefficiency);
        }
        assert_eq!(a.window(), 8192, "three equal epochs keep Td");
        for inefficiency in [0.20, 0.10, 0.10] {
            a.epoch_ended(inefficiency);
        }
        assert_eq!(a.window(), 9216, "Td + δ and Td − δ tie: the earlier, Td + δ");
    }

    #[test]
    fn an_epoch_charges_each_exit_its_window_and_its_handling_against_the_vms_cpu_time() {
        let cfg = PleConfig { aple: Some(ApleConfig { epoch_exits: 2, ..ApleConfig::default() }), ..PleConfig::default() };
        let mut e = PleEpochs::new(&cfg, false);
        assert!(!e.record_exit(4096, 1707, 1000));
        assert!(e.record_exit(8192, 3414, 1000));
        let inefficiency = e.end_epoch(71_210);
        assert!((inefficiency - 0.1).abs() < 1e-12, "{inefficiency}");
        assert!(!e.record_exit(4096, 1000, 0));
        assert!(e.record_exit(4096, 1000, 0));
        assert!((e.end_epoch(71_210 + 20_000) - 0.1).abs() < 1e-12, "the second epoch counts only its own CPU time");
        assert_eq!((e.epochs, e.exits_total, e.window_cycles_sum), (2, 4, 20480));
    }

    /// vCPU 0 of a 2-vCPU VM spins alone on pCPU 0, at the end of its PLE window; vCPU 1 waits
    /// for pCPU 1, its window at `window`.
    fn spinner_at_its_window_and_a_waiter(hypervisor: &str, window: u64) -> crate::simulation::Sim {
        use crate::simulation::test_host::{host, running};
        use crate::vcpu::{Act, HostState};
        let vm = "[[vm]]\nname = \"g\"\nvcpus = 2\nlock = \"ticket\"\nworkload = { preset = \"kernbench\" }\n";
        let mut s = host(hypervisor, false, vm);
        let spin = Act::Spin { word: crate::memory::SimWord(0), until: vspin_locks::Until::eq(0), pauses_left: 1 << 20, stale: false };
        running(&mut s, 0, 0, spin);
        let vc = &mut s.vcpus[0];
        (vc.active, vc.seg_start, vc.ple_spun_ns) = (true, s.now, vc.ple_window_ns);
        let unit = s.costs.ple_unit;
        let vc = &mut s.vcpus[1];
        (vc.pcpu, vc.host, vc.act, vc.preempted) = (1, HostState::Runnable, Act::Ready, true);
        vc.set_ple_window(window, unit);
        s.pcpus[1].curr = None;
        s.pcpus[1].queued.push(1);
        s
    }

    #[test]
    fn stock_kvm_grows_the_window_at_a_ple_exit_and_resets_it_when_the_vcpu_is_scheduled_in() {
        // handle_pause → grow_ple_window; kvm_sched_in → vmx_sched_in → shrink_ple_window, which
        // with ple_window_shrink = 0 is the base window (kernel-mechanisms.md §4.3).
        let mut s = spinner_at_its_window_and_a_waiter("", 16384);
        s.spin_check(0);
        assert_eq!(s.vcpus[0].counters.ple_exits, 1);
        assert_eq!(s.vcpus[0].ple_window, 8192, "grown at the exit");
        s.schedule(1);
        assert_eq!(s.pcpus[1].curr, Some(1));
        assert_eq!(s.vcpus[1].ple_window, 4096, "reset as it is scheduled in");
    }

    #[test]
    fn aples_window_reaches_a_vcpu_at_its_next_switch_in_and_at_its_ple_exit() {
        // One window for the whole VM (the seed, §3.1): a vCPU that did not exit takes the
        // VM's current one at its next VM entry after a switch-in, as KVM writes `PLE_WINDOW`.
        let mut s = spinner_at_its_window_and_a_waiter("ple = { policy = \"aple\" }", 8192);
        s.vms[0].aple.as_mut().expect("APLE").epoch_ended(0.1);
        assert_eq!(s.vms[0].aple.as_ref().map(|a| a.window()), Some(9216), "the round's second epoch tries Td + δ");
        s.schedule(1);
        assert_eq!(s.vcpus[1].ple_window, 9216, "switched in");
        s.spin_check(0);
        assert_eq!(s.vcpus[0].ple_window, 9216, "after its PLE exit: the VM's window, not grown");
    }

    #[test]
    fn an_epochs_cpu_time_counts_the_running_vcpus_time_so_far() {
        // The seed's inefficiency divides by "the total CPU time allocated to the VM" in the
        // epoch (§3.1.3), which includes the slices still running.
        let aple = "ple = { policy = \"aple\", aple = { epoch_exits = 1 } }";
        let mut s = spinner_at_its_window_and_a_waiter(aple, 8192);
        s.now = 1_000_000;
        (s.vcpus[0].se.exec_start, s.vcpus[0].seg_start) = (0, s.now);
        s.spin_check(0);
        let e = &s.vms[0].ple_epochs;
        assert_eq!(e.epochs, 1);
        assert!(e.inefficiency_sum > 0.0 && e.inefficiency_sum < 0.01, "a 3.4 µs window and its exit in 1 ms: {}", e.inefficiency_sum);
    }

    #[test]
    fn fixed_never_changes() {
        let cfg = PleConfig { policy: PlePolicy::Fixed, ..PleConfig::default() };
        assert_eq!(grow(&cfg, 4096), 4096);
        assert_eq!(shrink(&cfg, 4096), 4096);
    }
}
