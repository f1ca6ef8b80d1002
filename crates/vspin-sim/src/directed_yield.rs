//! KVM's directed yield on a PLE exit: `kvm_vcpu_on_spin` of Linux 3.5, 3.18, 6.8 and 6.18
//! (`virt/kvm/kvm_main.c`; 3.18, 6.8 and 6.18 in `kernel-mechanisms.md` §5.1–§5.3, 3.5 read from
//! a v3.5.0 tree, `xuguangmin/linux-3.5-for_study`). 6.18 has 6.8's candidates and scans them in
//! one wrap-around loop ([`scan_order`]).
//!
//! The spinning vCPU scans its VM's vCPUs in two passes starting after `last_boosted_vcpu`,
//! skipping vCPUs that are not candidates and those failing
//! `kvm_vcpu_eligible_for_directed_yield` (a vCPU that is itself in a spin loop is eligible only
//! every other time it is considered: `dy_eligible` toggles on each check). The first successful
//! `yield_to` ends the scan and becomes `last_boosted_vcpu`; three `-ESRCH` results end it too.
//!
//! Who is a candidate is what changed between the versions:
//! - 3.5 (the VEE'13 seed's host): any vCPU not on its halt wait queue (`waitqueue_active`) for
//!   which `yield_to` succeeds, i.e. one that is runnable and not on a pCPU. A vCPU woken from HLT
//!   stays on the wait queue until it runs (`finish_wait` after `schedule()` returns), so it is
//!   not one. There is no eligibility filter (`in_spin_loop`/`dy_eligible`), no `-ESRCH` limit,
//!   and pass 0 starts at vCPU 0 when `last_boosted_vcpu` is 0 ([`scan_order`]).
//! - 3.18: `vcpu->preempted`, a vCPU descheduled while runnable. A vCPU woken from HLT (a kicked
//!   lock waiter) that has not run yet is not one.
//! - 6.8: `vcpu->ready`, set at a preemption **and** at a wake-up from HLT, so a kicked waiter
//!   that waits for a pCPU is one; one woken by its own timer is not until it runs (it is still
//!   "blocking" and not `kvm_arch_dy_runnable`). And a vCPU that was preempted in guest user
//!   mode is skipped (the spinner is in kernel mode, as every PLE exit is here) unless an
//!   interrupt is pending for it. The simulated guest is in user mode only in think time:
//!   computing outside any lock and outside lock, IPI, halt and guest scheduler code. Real think
//!   time is partly kernel (system calls, page faults), so this filter skips somewhat more vCPUs
//!   than a real 6.8 host would.
//!
//! APPLES' HVS (`hvs`, the TPDS'17 seed §3.2–3.3, built on Linux 3.19) replaces the scan with a
//! ranking of the VM's preempted vCPUs (3.19's `vcpu->preempted`) by the list each joined when
//! it left its pCPU ([`HvsList`], set in `stop_running`) and by when:
//!
//! | rank | `hvs` (the seed's)       | `hvs-cpth-r`         | `hvs-cpth-l`            | `hvs-cch`               |
//! |------|--------------------------|----------------------|-------------------------|-------------------------|
//! | 1st  | resource-waiters, newest | resource, **oldest** | resource, newest        | **lock-waiters**, oldest |
//! | 2nd  | lock-waiters, oldest     | lock, oldest         | lock, **newest**        | resource, newest        |
//! | 3rd  | yielded, oldest          | yielded, oldest      | yielded, oldest         | yielded, oldest         |
//!
//! A vCPU that HVS boosts is marked; preempted with the mark, it joins the yielded list (the
//! seed's fix for a freshly boosted vCPU, whose large vruntime soon preempts it, being picked
//! again and again). The seed leaves open the order within the yielded list (we take the
//! oldest first), whether the 3.18 spin-loop filter still applies (we drop it: HVS ranks the
//! lock-waiters it would skip) and what ends the search: as in 3.18, the first successful
//! `yield_to`, or three `-ESRCH`.
use crate::scenario::DirectedYieldKind;
use crate::simulation::Sim;
use crate::vcpu::{Act, HostState, HvsList};

/// The vCPU indices the scan considers, in order, each with what a successful yield to it
/// records as `last_boosted_vcpu`. Up to 6.12, two passes: pass 0 after `last_boosted_vcpu`,
/// pass 1 from 0 up to it (Linux 3.5's pass 0 skips indices below `last` and then jumps past it,
/// which skips nothing when `last` is 0: vCPU 0 then comes first, and again in pass 1); both
/// record the index. 6.18.2: one loop of `n` steps from `last + 1`, wrapping, that records the
/// step `i`, not the index (fixed in a later 6.18 stable release).
fn scan_order(n: i64, last: i64, kernel: DirectedYieldKind) -> impl Iterator<Item = (i64, i64)> {
    let one_loop = kernel == DirectedYieldKind::Kvm618;
    let from = if kernel == DirectedYieldKind::Kvm35 && last == 0 { 0 } else { last + 1 };
    let pass_0 = (n - from).max(0);
    let steps = if one_loop { n } else { pass_0 + last + 1 };
    (0..steps).map(move |k| match (one_loop, k < pass_0) {
        (true, _) => ((from + k).rem_euclid(n), k),
        (false, true) => (from + k, from + k),
        (false, false) => (k - pass_0, k - pass_0),
    })
}

/// HVS's order of a vCPU on `list`, descheduled at `since`: lower first (the table above).
fn hvs_rank(order: DirectedYieldKind, list: HvsList, since: i64) -> (u8, i64) {
    let (oldest, newest) = (since, -since);
    match (order, list) {
        (_, HvsList::Yielded) => (2, oldest),
        (DirectedYieldKind::HvsCch, HvsList::LockWaiter) => (0, oldest),
        (DirectedYieldKind::HvsCch, HvsList::ResourceWaiter) => (1, newest),
        (DirectedYieldKind::HvsCpthR, HvsList::ResourceWaiter) => (0, oldest),
        (_, HvsList::ResourceWaiter) => (0, newest),
        (DirectedYieldKind::HvsCpthL, HvsList::LockWaiter) => (1, newest),
        (_, HvsList::LockWaiter) => (1, oldest),
    }
}

impl Sim {
    /// Returns whether the vCPU yielded to another.
    pub(crate) fn kvm_vcpu_on_spin(&mut self, me: u32, kernel: DirectedYieldKind) -> bool {
        let vm = self.vcpus[me as usize].vm as usize;
        let (first, n, last) = (self.vms[vm].first_vcpu, self.vms[vm].vcpus as i64, self.vms[vm].last_boosted);
        let mut tries = 3;
        for (i, recorded) in scan_order(n, last, kernel) {
            let v = first + i as u32;
            if v == me || !self.yield_candidate(v, kernel) {
                continue;
            }
            if kernel != DirectedYieldKind::Kvm35 && !self.eligible_for_directed_yield(v) {
                continue;
            }
            let r = self.yield_to(me, v);
            if r > 0 {
                self.trace_instant(me, || format!("directed yield to vCPU {i}"));
                self.vms[vm].last_boosted = recorded;
                self.vcpus[me as usize].counters.directed_yields += 1;
                return true;
            }
            // 3.5's `yield_to` returns a bool: no `-ESRCH`, no limit on the attempts.
            if r < 0 && kernel != DirectedYieldKind::Kvm35 {
                tries -= 1;
                if tries == 0 {
                    return false;
                }
            }
        }
        false
    }

    /// HVS's choice on a PLE exit of `me`: yield to the best-ranked preempted vCPU of its VM
    /// that `yield_to` accepts. Returns whether it yielded.
    pub(crate) fn hvs_on_spin(&mut self, me: u32, order: DirectedYieldKind) -> bool {
        let vm = self.vcpus[me as usize].vm as usize;
        let (first, n) = (self.vms[vm].first_vcpu, self.vms[vm].vcpus);
        let mut ranked: Vec<(u8, i64, u32)> = (first..first + n)
            .filter(|&v| v != me && self.vcpus[v as usize].preempted && self.vcpus[v as usize].host == HostState::Runnable)
            .map(|v| {
                let vc = &self.vcpus[v as usize];
                let (rank, key) = hvs_rank(order, vc.hvs_list, vc.state_since as i64);
                (rank, key, v)
            })
            .collect();
        ranked.sort_unstable();
        let mut tries = 3;
        for (_, _, v) in ranked {
            let r = self.yield_to(me, v);
            if r > 0 {
                self.trace_instant(me, || format!("HVS: yield to vCPU {}", v - first));
                self.vcpus[v as usize].hvs_boosted = true;
                self.vcpus[me as usize].counters.directed_yields += 1;
                return true;
            }
            if r < 0 {
                tries -= 1;
                if tries == 0 {
                    return false;
                }
            }
        }
        false
    }

    /// `kvm_sched_yield(vcpu, dest)`, which the kick hypercall of KVM since Linux 5.13 calls right
    /// after waking its target ("KVM: X86: Boost queue head vCPU to mitigate lock waiter
    /// preemption", `arch/x86/kvm/x86.c`; `kernel-mechanisms.md` §3.3): unless the kicker is
    /// alone on its pCPU (`single_task_running`), yield to the target if it is `ready` (woken,
    /// or preempted, and waiting for a pCPU: `yield_to` refuses any other). Returns whether it
    /// yielded.
    pub(crate) fn kvm_sched_yield(&mut self, me: u32, target: u32) -> bool {
        let p = self.vcpus[me as usize].pcpu;
        if self.nr_queued(p) <= 1 || target == me {
            return false;
        }
        if self.yield_to(me, target) <= 0 {
            return false;
        }
        let index = target - self.vms[self.vcpus[me as usize].vm as usize].first_vcpu;
        self.trace_instant(me, || format!("kick: yield to vCPU {index}"));
        self.vcpus[me as usize].counters.directed_yields += 1;
        true
    }

    fn yield_candidate(&self, v: u32, kernel: DirectedYieldKind) -> bool {
        let vc = &self.vcpus[v as usize];
        match kernel {
            DirectedYieldKind::Kvm35 => vc.host == HostState::Runnable && !vc.woken,
            DirectedYieldKind::Kvm => vc.preempted,
            DirectedYieldKind::Kvm68 | DirectedYieldKind::Kvm618 => {
                let ready = vc.host == HostState::Runnable;
                // `kvm_vcpu_is_blocking(vcpu) && !kvm_arch_dy_runnable(vcpu)`: a vCPU woken from
                // HLT is still on its wait until it runs; only a kick (`pv_unhalted`) or an
                // interrupt (`KVM_REQ_EVENT`: a pending IPI, or the reschedule IPI that woke it)
                // makes it worth a yield, not its timer, whose expiry raises `KVM_REQ_UNBLOCK`
                // alone.
                let woken_by_its_timer = vc.woken && !vc.pv_unhalted && vc.pending_ipis.is_empty() && !vc.woken_by_ipi;
                let in_user_mode = matches!(vc.act, Act::Compute { .. })
                    && vc.held.is_none()
                    && vc.releasing.is_none()
                    && !vc.computing_in_kernel;
                ready && !woken_by_its_timer && !(vc.preempted && in_user_mode && vc.pending_ipis.is_empty())
            }
            DirectedYieldKind::Off => false,
            DirectedYieldKind::Hvs | DirectedYieldKind::HvsCpthR | DirectedYieldKind::HvsCpthL | DirectedYieldKind::HvsCch => {
                unreachable!("HVS ranks its candidates in `hvs_on_spin`")
            }
        }
    }

    fn eligible_for_directed_yield(&mut self, v: u32) -> bool {
        let vc = &mut self.vcpus[v as usize];
        let eligible = !vc.in_spin_loop || vc.dy_eligible;
        if vc.in_spin_loop {
            vc.dy_eligible = !vc.dy_eligible;
        }
        eligible
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::{DirectedYieldKind, Scenario};
    use crate::simulation::test_host::{host, running};
    use crate::simulation::Sim;
    use crate::vcpu::{Act, HostState, HvsList};

    /// Two pCPUs (`test_host`) and one VM of two kernbench vCPUs taking a ticket lock.
    fn two_vcpus() -> Sim {
        host("", false, "[[vm]]\nname = \"g\"\nvcpus = 2\nlock = \"ticket\"\nworkload = { preset = \"kernbench\" }\n")
    }

    /// A VM of two vCPUs whose vCPU 1 waits for a pCPU, doing `act`, preempted or just woken.
    fn waiting_vcpu(act: Act, held: Option<u32>, preempted: bool) -> Sim {
        let text = "duration_ms = 1\n[host]\ncores_per_socket = 2\n[[vm]]\nname = \"g\"\nvcpus = 2\nlock = \"pv-ticket\"\n\
                    workload = { preset = \"kernbench\" }\n";
        let mut s = Sim::new(&Scenario::from_toml(text).unwrap());
        let v = &mut s.vcpus[1];
        (v.host, v.act, v.held, v.preempted) = (HostState::Runnable, act, held, preempted);
        s
    }

    /// vCPU 0 of a 4-vCPU VM spins on pCPU 0, where vCPUs 1-3 wait, each preempted at `since`
    /// ns onto `list`. Whom does `order` boost?
    fn hvs_pick(order: DirectedYieldKind, waiting: [(HvsList, u64); 3]) -> Option<u32> {
        let vm = "[[vm]]\nname = \"g\"\nvcpus = 4\npin = \"none\"\nlock = \"ticket\"\nworkload = { preset = \"kernbench\" }\n";
        let mut s = host("", false, vm);
        s.now = 1_000;
        running(&mut s, 0, 0, Act::Ready);
        for (v, (list, since)) in (1..).zip(waiting) {
            let vc = &mut s.vcpus[v as usize];
            (vc.pcpu, vc.host, vc.preempted, vc.hvs_list, vc.state_since) = (0, HostState::Runnable, true, list, since);
            s.pcpus[0].queued.push(v);
        }
        assert!(s.hvs_on_spin(0, order));
        let boosted: Vec<u32> = (1..4).filter(|&v| s.vcpus[v as usize].hvs_boosted).collect();
        assert_eq!(boosted.len(), 1);
        boosted.first().copied()
    }

    #[test]
    fn hvs_boosts_the_newest_resource_waiter_then_the_oldest_lock_waiter_then_a_yielded_vcpu() {
        use HvsList::{LockWaiter as L, ResourceWaiter as R, Yielded as Y};
        let hvs = DirectedYieldKind::Hvs;
        assert_eq!(hvs_pick(hvs, [(R, 10), (R, 20), (L, 5)]), Some(2));
        assert_eq!(hvs_pick(hvs, [(Y, 10), (L, 20), (L, 5)]), Some(3));
        assert_eq!(hvs_pick(hvs, [(Y, 30), (Y, 20), (Y, 40)]), Some(2));
    }

    #[test]
    fn each_hvs_variant_reverses_one_of_its_orders() {
        use HvsList::{LockWaiter as L, ResourceWaiter as R};
        let waiting = [(R, 10), (R, 20), (L, 5)];
        assert_eq!(hvs_pick(DirectedYieldKind::HvsCpthR, waiting), Some(1), "oldest resource-waiter");
        assert_eq!(hvs_pick(DirectedYieldKind::HvsCch, waiting), Some(3), "lock-waiters first");
        assert_eq!(hvs_pick(DirectedYieldKind::HvsCpthL, [(L, 10), (L, 20), (L, 5)]), Some(2), "newest lock-waiter");
        assert_eq!(hvs_pick(DirectedYieldKind::Hvs, [(L, 10), (L, 20), (L, 5)]), Some(3), "the seed's: oldest");
    }

    #[test]
    fn hvs_ranks_only_preempted_vcpus_not_one_woken_from_a_halt() {
        // HVS ranks the vCPUs 3.19 marks `vcpu->preempted` (descheduled while runnable); one
        // woken from HLT that has not run yet was never preempted (the seed, §3.2: resource- and
        // lock-waiters are both preempted vCPUs).
        use HvsList::ResourceWaiter as R;
        let vm = "[[vm]]\nname = \"g\"\nvcpus = 3\npin = \"none\"\nlock = \"ticket\"\nworkload = { preset = \"kernbench\" }\n";
        let mut s = host("", false, vm);
        s.now = 1_000;
        running(&mut s, 0, 0, Act::Ready);
        for (v, preempted, since) in [(1, false, 20), (2, true, 10)] {
            let vc = &mut s.vcpus[v as usize];
            (vc.pcpu, vc.host, vc.preempted, vc.woken, vc.hvs_list, vc.state_since) = (0, HostState::Runnable, preempted, !preempted, R, since);
            s.pcpus[0].queued.push(v);
        }
        assert!(s.hvs_on_spin(0, DirectedYieldKind::Hvs));
        assert_eq!((s.vcpus[1].hvs_boosted, s.vcpus[2].hvs_boosted), (false, true), "the preempted one, though the woken one is newer");
    }

    #[test]
    fn hvs_gives_up_after_three_esrch_as_kvm_3_18_does() {
        // What ends HVS's search is 3.18's (`try = 3`, `kvm_vcpu_on_spin`): the seed leaves it
        // open, and HVS replaces only the order of the candidates.
        let mut s = three_esrch_then_a_target();
        assert!(!s.hvs_on_spin(0, DirectedYieldKind::Hvs));
        assert!(!s.vcpus[4].hvs_boosted, "the fourth candidate is never tried");
    }

    #[test]
    fn a_spinner_preempted_inside_its_ple_exit_handler_is_a_resource_waiter() {
        // The seed's lock-waiters were descheduled by their own PLE exit (§3.2); one the host
        // preempts before its handler yields was preempted at its slice's end.
        let mut s = two_vcpus();
        running(&mut s, 1, 1, Act::Ready);
        s.vcpus[1].in_spin_loop = true;
        s.vcpus[1].host_work = Some(crate::vcpu::HostWork { remaining: 100, after: crate::vcpu::After::PleDone { yielded: false } });
        s.stop_running(1);
        assert_eq!(s.vcpus[1].hvs_list, HvsList::ResourceWaiter);
    }

    #[test]
    fn a_vcpu_hvs_boosted_joins_the_yielded_list_when_preempted_and_a_spinner_the_lock_waiters() {
        let mut s = two_vcpus();
        running(&mut s, 0, 0, Act::Ready);
        running(&mut s, 1, 1, Act::Ready);
        s.vcpus[0].hvs_boosted = true;
        s.vcpus[1].in_spin_loop = true;
        s.stop_running(0);
        s.stop_running(1);
        assert_eq!((s.vcpus[0].hvs_list, s.vcpus[0].hvs_boosted), (HvsList::Yielded, false), "the mark is taken");
        assert_eq!(s.vcpus[1].hvs_list, HvsList::LockWaiter);
        running(&mut s, 0, 0, Act::Ready);
        s.stop_running(0);
        assert_eq!(s.vcpus[0].hvs_list, HvsList::ResourceWaiter, "not boosted since it last ran");
    }

    #[test]
    fn a_boosted_vcpu_that_blocks_loses_its_mark() {
        // The seed's yielded list (§3.3) is for a boosted vCPU preempted soon after the boost,
        // for its large vruntime; one that left its pCPU by blocking has ended that run.
        let mut s = two_vcpus();
        running(&mut s, 0, 0, Act::Ready);
        s.vcpus[0].hvs_boosted = true;
        s.put_to_sleep(0);
        s.vcpus[0].host = HostState::Runnable;
        running(&mut s, 0, 0, Act::Ready);
        s.stop_running(0);
        assert_eq!(s.vcpus[0].hvs_list, HvsList::ResourceWaiter, "woken, run and preempted at its slice's end");
    }

    #[test]
    fn a_boosted_vcpu_that_yields_from_its_own_ple_exit_is_a_lock_waiter() {
        // Lock-waiters are the vCPUs descheduled for excessive spinning (the seed, §3.2); the
        // yielded list is for a boosted vCPU the host preempts soon after the boost (§3.3).
        let mut s = two_vcpus();
        running(&mut s, 0, 0, Act::Ready);
        (s.vcpus[0].hvs_boosted, s.vcpus[0].in_spin_loop) = (true, true);
        s.stop_running(0);
        assert_eq!(s.vcpus[0].hvs_list, HvsList::LockWaiter);
    }

    /// vCPU 0 of a 6-vCPU VM runs alone on pCPU 0; vCPUs 1-3, preempted, wait each alone on a
    /// pCPU of its own (so `yield_to` them is `-ESRCH`: both run queues hold one task); vCPU 4,
    /// preempted, waits on pCPU 4 behind vCPU 5. The scan starts after vCPU 0.
    fn three_esrch_then_a_target() -> Sim {
        let text = "duration_ms = 1\n[host]\ncores_per_socket = 5\n[[vm]]\nname = \"g\"\nvcpus = 6\npin = \"none\"\n\
                    lock = \"ticket\"\nworkload = { preset = \"kernbench\" }\n";
        let mut s = Sim::new(&Scenario::from_toml(text).unwrap());
        for rq in &mut s.pcpus {
            (rq.curr, rq.queued) = (None, Vec::new());
        }
        running(&mut s, 0, 0, Act::Ready);
        running(&mut s, 5, 4, Act::Ready);
        for (v, p) in [(1, 1), (2, 2), (3, 3), (4, 4)] {
            let vc = &mut s.vcpus[v as usize];
            (vc.pcpu, vc.host, vc.preempted, vc.in_spin_loop) = (p, HostState::Runnable, true, false);
            s.pcpus[p as usize].queued.push(v);
        }
        s.vms[0].last_boosted = 0;
        s
    }

    #[test]
    fn kvm_gives_up_the_scan_after_three_esrch_and_3_5_tries_on() {
        // 3.18+: `if (yielded < 0) { try--; if (!try) break; }` with `try = 3`; 3.5's
        // `yield_to` returns a bool, so it has no such limit.
        let mut s = three_esrch_then_a_target();
        assert!(!s.kvm_vcpu_on_spin(0, DirectedYieldKind::Kvm));
        assert_eq!((s.vcpus[0].counters.directed_yields, s.vms[0].last_boosted), (0, 0));
        let mut s = three_esrch_then_a_target();
        assert!(s.kvm_vcpu_on_spin(0, DirectedYieldKind::Kvm35));
        assert_eq!(s.vcpus[0].counters.directed_yields, 1);
        assert_eq!(s.vms[0].last_boosted, 4, "the next scan starts after the vCPU boosted");
    }

    fn candidate_for(s: &Sim) -> (bool, bool) {
        (s.yield_candidate(1, DirectedYieldKind::Kvm), s.yield_candidate(1, DirectedYieldKind::Kvm68))
    }

    #[test]
    fn a_kicked_waiter_not_yet_running_is_a_candidate_only_since_6_8() {
        let mut s = waiting_vcpu(Act::Ready, None, false);
        s.vcpus[1].woken = true;
        s.vcpus[1].pv_unhalted = true;
        assert_eq!(candidate_for(&s), (false, true));
        assert!(!s.yield_candidate(1, DirectedYieldKind::Kvm35), "3.5: still on the halt wait queue");
    }

    #[test]
    fn a_vcpu_woken_by_its_own_timer_is_no_candidate_until_it_runs() {
        let mut s = waiting_vcpu(Act::Halted(crate::vcpu::HaltReason::LockWait), None, false);
        s.vcpus[1].woken = true;
        assert_eq!(candidate_for(&s), (false, false), "blocking, and not runnable for dy (KVM_REQ_UNBLOCK only)");
        s.vcpus[1].pending_ipis.push(0);
        assert_eq!(candidate_for(&s), (false, true), "an interrupt waits for it (KVM_REQ_EVENT)");
        s.vcpus[1].pending_ipis.clear();
        s.vcpus[1].woken_by_ipi = true;
        assert_eq!(candidate_for(&s), (false, true), "so does the reschedule IPI that woke it");
    }

    #[test]
    fn linux_3_5_considers_any_descheduled_vcpu_and_3_18_filters_spinners_every_other_time() {
        let mut s = waiting_vcpu(Act::Compute { remaining: 1000 }, None, true);
        s.vcpus[1].in_spin_loop = true;
        assert!(s.yield_candidate(1, DirectedYieldKind::Kvm35));
        let checks: Vec<bool> = (0..4).map(|_| s.eligible_for_directed_yield(1)).collect();
        assert_eq!(checks, [false, true, false, true]);
    }

    #[test]
    fn the_scan_starts_after_the_last_boosted_vcpu_except_in_3_5_when_that_is_vcpu_0() {
        let order = |last, kernel| super::scan_order(4, last, kernel).map(|(i, _)| i).collect::<Vec<_>>();
        assert_eq!(order(2, DirectedYieldKind::Kvm), [3, 0, 1, 2]);
        assert_eq!(order(2, DirectedYieldKind::Kvm35), [3, 0, 1, 2]);
        assert_eq!(order(0, DirectedYieldKind::Kvm), [1, 2, 3, 0]);
        assert_eq!(order(0, DirectedYieldKind::Kvm35), [0, 1, 2, 3, 0]);
        assert_eq!(order(3, DirectedYieldKind::Kvm68), [0, 1, 2, 3]);
    }

    #[test]
    fn linux_6_18_scans_once_around_and_records_the_step_not_the_vcpu() {
        let scan = |last| super::scan_order(4, last, DirectedYieldKind::Kvm618).collect::<Vec<_>>();
        assert_eq!(scan(1), [(2, 0), (3, 1), (0, 2), (1, 3)]);
        assert_eq!(scan(3), [(0, 0), (1, 1), (2, 2), (3, 3)], "the wrap from the last vCPU");
    }

    #[test]
    fn a_vcpu_preempted_in_guest_user_mode_is_skipped_by_6_8_unless_an_interrupt_waits() {
        let mut s = waiting_vcpu(Act::Compute { remaining: 1000 }, None, true);
        assert_eq!(candidate_for(&s), (true, false));
        s.vcpus[1].pending_ipis.push(0);
        assert_eq!(candidate_for(&s), (true, true));
    }

    #[test]
    fn a_vcpu_preempted_in_a_guest_context_switch_is_in_kernel_mode() {
        let mut s = waiting_vcpu(Act::Compute { remaining: 1000 }, None, true);
        s.vcpus[1].computing_in_kernel = true;
        assert_eq!(candidate_for(&s), (true, true));
    }

    #[test]
    fn a_lock_holder_preempted_in_its_critical_section_is_a_candidate_for_both() {
        let s = waiting_vcpu(Act::Compute { remaining: 1000 }, Some(0), true);
        assert_eq!(candidate_for(&s), (true, true));
    }
}
