//! KVM's directed yield on a PLE exit: `kvm_vcpu_on_spin` of Linux 3.18
//! (`virt/kvm/kvm_main.c`, `kernel-mechanisms.md` §5.1).
//!
//! The spinning vCPU scans its VM's vCPUs in two passes starting after `last_boosted_vcpu`,
//! skipping vCPUs that are not preempted (running or halted) and those failing
//! `kvm_vcpu_eligible_for_directed_yield` (a vCPU that is itself in a spin loop is eligible only
//! every other time it is considered: `dy_eligible` toggles on each check). The first successful
//! `yield_to` ends the scan and becomes `last_boosted_vcpu`; three `-ESRCH` results end it too.
use crate::simulation::Sim;

impl Sim {
    /// Returns whether the vCPU yielded to another.
    pub(crate) fn kvm_vcpu_on_spin(&mut self, me: u32) -> bool {
        let vm = self.vcpus[me as usize].vm as usize;
        let (first, n, last) = (self.vms[vm].first_vcpu, self.vms[vm].vcpus as i64, self.vms[vm].last_boosted);
        let mut tries = 3;
        for pass in 0..2 {
            for i in 0..n {
                if (pass == 0 && i <= last) || (pass == 1 && i > last) {
                    continue;
                }
                let v = first + i as u32;
                if v == me || !self.vcpus[v as usize].preempted {
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

    fn eligible_for_directed_yield(&mut self, v: u32) -> bool {
        let vc = &mut self.vcpus[v as usize];
        let eligible = !vc.in_spin_loop || vc.dy_eligible;
        if vc.in_spin_loop {
            vc.dy_eligible = !vc.dy_eligible;
        }
        eligible
    }
}
