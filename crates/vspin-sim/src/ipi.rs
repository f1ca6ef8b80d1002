//! Guest IPIs: synchronous TLB shootdowns (by IPI, the sender waiting for every target's
//! acknowledgement, or by a paravirtual flush that waits for fewer or none: `shootdown`),
//! reschedule IPIs that wake a peer sleeping in guest idle, and their delivery to a target that
//! runs, waits for a pCPU or is halted. An IPI costs its target an exit, the handler and an entry,
//! and is handled only when the target runs.
use crate::engine::Event;
use crate::guest::Response;
use crate::memory::Access;
use crate::scenario::TlbFlush;
use crate::simulation::Sim;
use crate::vcpu::{Act, After, HaltReason, HostState, HostWork};

impl Sim {
    /// A synchronous TLB flush from `v` to `count` vCPUs of its VM, from vCPU `start` on and
    /// skipping `v`, as the VM's guest kernel does it (`scenario::TlbFlush`):
    /// - `ipi` (`smp_call_function_many`): the sender pays the exit, one send per target and the
    ///   entry, then waits on its call-function word until every target has acknowledged;
    /// - `kvm-pv` (`kvm_flush_tlb_multi`): the same, but a target preempted while runnable
    ///   (`st->preempted`) is only flagged, and flushes at its next entry at no cost we charge
    ///   (the entry reloads its page tables anyway); it is neither sent an IPI nor waited for;
    /// - `xen-pv` (`MMUEXT_TLB_FLUSH_MULTI`): one hypercall, in which Xen sends a host IPI to
    ///   each running target's pCPU and waits for its own handler there (`flush_tlb_mask`); a
    ///   descheduled target's TLB holds nothing of the guest's, since Xen reloaded `cr3` when
    ///   it switched that pCPU away. No guest handler runs, so the sender waits for no vCPU.
    ///   The interruption on the targets' pCPUs (Xen's flush handler, well under a microsecond)
    ///   is not charged to them.
    pub(crate) fn shootdown(&mut self, v: u32, start: u32, count: u32) -> bool {
        let vm = &self.vms[self.vcpus[v as usize].vm as usize];
        let (first, n, flush) = (vm.first_vcpu, vm.vcpus, vm.tlb_flush);
        let me = self.vcpus[v as usize].index;
        let running = |sim: &Sim, t: u32| sim.vcpus[(first + t) as usize].host == HostState::Running;
        let preempted = |sim: &Sim, t: u32| sim.vcpus[(first + t) as usize].host == HostState::Runnable;
        let targets: Vec<u32> = (0..n).map(|i| (start + i) % n).filter(|&i| i != me).take(count as usize).collect();
        let c = &self.costs;
        let (cost, ipis): (u64, Vec<u32>) = match flush {
            TlbFlush::Ipi => (c.vm_exit + c.ipi_send * targets.len() as u64 + c.vm_entry, targets),
            TlbFlush::KvmPv => {
                let ipis: Vec<u32> = targets.into_iter().filter(|&t| !preempted(self, t)).collect();
                (c.vm_exit + c.ipi_send * ipis.len() as u64 + c.vm_entry, ipis)
            }
            TlbFlush::XenPv => {
                let on_pcpus = targets.iter().filter(|&&t| running(self, t)).count() as u64;
                (c.hypercall + c.ipi_send * on_pcpus, Vec::new())
            }
        };
        let vc = &mut self.vcpus[v as usize];
        vc.counters.shootdowns += 1;
        self.mem.set(vc.call_function_word, ipis.len() as u64);
        vc.act = Act::Ready;
        vc.response = Response::NONE;
        vc.host_work = Some(HostWork { remaining: cost, after: After::Nothing });
        for t in ipis {
            self.deliver_ipi(v, first + t);
        }
        false
    }

    /// Wake a peer sleeping in guest idle: the sender pays the IPI; the sleeper's wait ends now.
    pub(crate) fn wake_peer(&mut self, v: u32, start: u32) -> bool {
        let vm = &self.vms[self.vcpus[v as usize].vm as usize];
        let (first, n) = (vm.first_vcpu, vm.vcpus);
        let sleeper = (0..n).map(|i| first + (start + i) % n).find(|&t| {
            t != v && self.in_halt(t)
                && matches!(self.vcpus[t as usize].act, Act::Halted(HaltReason::Idle { .. }))
        });
        let vc = &mut self.vcpus[v as usize];
        vc.response = Response::NONE;
        let Some(t) = sleeper else { return true };
        let c = &self.costs;
        vc.counters.wake_ipis += 1;
        vc.act = Act::Ready;
        vc.host_work = Some(HostWork { remaining: c.vm_exit + c.ipi_send + c.vm_entry, after: After::Nothing });
        self.vcpus[t as usize].act = Act::Halted(HaltReason::Idle { wake_at: self.now });
        self.end_halt(t);
        false
    }

    /// An IPI is handled once its target runs: at once if running (an exit, the handler and a VM
    /// entry on the target), at its next switch-in if preempted, after a wake-up if halted; one
    /// arriving during an HLT exit keeps the halt from blocking.
    pub(crate) fn deliver_ipi(&mut self, from: u32, to: u32) {
        let halting = self.in_hlt_exit(to);
        let t = &mut self.vcpus[to as usize];
        t.pending_ipis.push(from);
        let (host, polling) = (t.host, self.polling(to));
        match host {
            HostState::Running if polling => self.poll_succeeds(to),
            HostState::Running if !halting => {
                self.stop_segment(to);
                let t = &mut self.vcpus[to as usize];
                if t.host_work.is_none() {
                    t.host_work = Some(HostWork { remaining: 0, after: After::Nothing });
                }
                self.handle_pending_ipis(to);
                self.continue_if_running(to);
            }
            HostState::Running | HostState::Runnable => {}
            HostState::Blocked => self.wake(to),
        }
    }

    /// Add the handling of every pending IPI to the vCPU's host work; each is acknowledged when
    /// its handler has run.
    pub(crate) fn handle_pending_ipis(&mut self, v: u32) {
        let c = &self.costs;
        let handle = c.vm_exit + c.ipi_send + c.vm_entry;
        let now = self.now;
        let vc = &mut self.vcpus[v as usize];
        let hw = vc.host_work.as_mut().expect("IPIs are handled as host work");
        for from in std::mem::take(&mut vc.pending_ipis) {
            hw.remaining += handle;
            self.q.push(now + hw.remaining, Event::IpiAck { from, to: v });
        }
    }

    /// The target's handler has run: it counts down the sender's call-function word, which
    /// the waiting sender sees.
    pub(crate) fn ipi_ack(&mut self, from: u32, to: u32) {
        let w = self.vcpus[from as usize].call_function_word;
        let pcpu = self.vcpus[to as usize].pcpu;
        self.mem.access(w, pcpu, Access::Write, self.now);
        let left = self.mem.value(w).saturating_sub(1);
        self.mem.set(w, left);
        self.notify_watchers(w);
    }
}
