//! KVM's directed yield on a PLE exit: `kvm_vcpu_on_spin` of Linux 3.18 and of Linux 6.8
//! (`virt/kvm/kvm_main.c`, `kernel-mechanisms.md` §5.1 and §5.2).
//!
//! The spinning vCPU scans its VM's vCPUs in two passes starting after `last_boosted_vcpu`,
//! skipping vCPUs that are not candidates and those failing
//! `kvm_vcpu_eligible_for_directed_yield` (a vCPU that is itself in a spin loop is eligible only
//! every other time it is considered: `dy_eligible` toggles on each check). The first successful
//! `yield_to` ends the scan and becomes `last_boosted_vcpu`; three `-ESRCH` results end it too.
//!
//! Who is a candidate is what changed between the versions:
//! - 3.18: `vcpu->preempted`, a vCPU descheduled while runnable. A vCPU woken from HLT (a kicked
//!   lock waiter) that has not run yet is not one.
//! - 6.8: `vcpu->ready`, set at a preemption **and** at a wake-up from HLT, so a kicked waiter
//!   that waits for a pCPU is one. But a vCPU that was preempted in guest user mode is skipped
//!   (the spinner is in kernel mode, as every PLE exit is here) unless an interrupt is pending
//!   for it. The simulated guest is in user mode only in think time: computing outside any lock
//!   and outside lock, IPI, halt and guest scheduler code. Real think time is partly kernel
//!   (system calls, page faults), so this filter skips somewhat more vCPUs than a real 6.8 host
//!   would.
use crate::scenario::DirectedYieldKind;
use crate::simulation::Sim;
use crate::vcpu::{Act, HostState};

impl Sim {
    /// Returns whether the vCPU yielded to another.
    pub(crate) fn kvm_vcpu_on_spin(&mut self, me: u32, kernel: DirectedYieldKind) -> bool {
        let vm = self.vcpus[me as usize].vm as usize;
        let (first, n, last) = (self.vms[vm].first_vcpu, self.vms[vm].vcpus as i64, self.vms[vm].last_boosted);
        let mut tries = 3;
        for pass in 0..2 {
            for i in 0..n {
                if (pass == 0 && i <= last) || (pass == 1 && i > last) {
                    continue;
                }
                let v = first + i as u32;
                if v == me || !self.yield_candidate(v, kernel) {
                    continue;
                }
                if !self.eligible_for_directed_yield(v) {
                    continue;
                }
                let r = self.yield_to(me, v);
                if r > 0 {
                    self.trace_instant(me, || format!("directed yield to vCPU {i}"));
                    self.vms[vm].last_boosted = i;
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
        }
        false
    }

    fn yield_candidate(&self, v: u32, kernel: DirectedYieldKind) -> bool {
        let vc = &self.vcpus[v as usize];
        match kernel {
            DirectedYieldKind::Kvm => vc.preempted,
            DirectedYieldKind::Kvm68 => {
                let ready = vc.host == HostState::Runnable;
                let in_user_mode = matches!(vc.act, Act::Compute { .. })
                    && vc.held.is_none()
                    && vc.releasing.is_none()
                    && !vc.computing_in_kernel;
                ready && !(vc.preempted && in_user_mode && vc.pending_ipis.is_empty())
            }
            DirectedYieldKind::Off => false,
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
    use crate::simulation::Sim;
    use crate::vcpu::{Act, HostState};

    /// A VM of two vCPUs whose vCPU 1 waits for a pCPU, doing `act`, preempted or just woken.
    fn waiting_vcpu(act: Act, held: Option<u32>, preempted: bool) -> Sim {
        let text = "duration_ms = 1\n[host]\ncores_per_socket = 2\n[[vm]]\nname = \"g\"\nvcpus = 2\nlock = \"pv-ticket\"\n\
                    workload = { preset = \"kernbench\" }\n";
        let mut s = Sim::new(&Scenario::from_toml(text).unwrap());
        let v = &mut s.vcpus[1];
        (v.host, v.act, v.held, v.preempted) = (HostState::Runnable, act, held, preempted);
        s
    }

    fn candidate_for(s: &Sim) -> (bool, bool) {
        (s.yield_candidate(1, DirectedYieldKind::Kvm), s.yield_candidate(1, DirectedYieldKind::Kvm68))
    }

    #[test]
    fn a_kicked_waiter_not_yet_running_is_a_candidate_only_since_6_8() {
        let s = waiting_vcpu(Act::Ready, None, false);
        assert_eq!(candidate_for(&s), (false, true));
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
