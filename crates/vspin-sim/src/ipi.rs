//! Guest IPIs: synchronous TLB shootdowns (by IPI, the sender waiting for every target's
//! acknowledgement, or by a paravirtual flush that waits for fewer or none: `shootdown`), sent
//! with one exit per target in x2APIC physical mode or one exit for all (`send_ipis`),
//! reschedule IPIs that wake a peer sleeping in guest idle (when the sender's exit handler has
//! run, as a shootdown's IPIs are delivered), and their delivery to a target that
//! runs, waits for a pCPU or is halted. An IPI costs its target the handler, plus an exit and an
//! entry if it interrupts guest mode without posted interrupts (otherwise KVM injects it at the
//! next entry, or posts it where the guest runs), and is handled
//! only when the target runs: a target descheduled inside that work acknowledges
//! only after it has run the rest (`postpone_acks`, `resume_acks`). A target whose guest runs with
//! interrupts off, waiting for or holding a lock taken that way, takes its IPIs only when it
//! restores them after the unlock (`has_deliverable_ipis`).
use crate::engine::{Event, Time};
use crate::guest::{Req, Response};
use crate::memory::Access;
use crate::scenario::{IpiSend, TlbFlush};
use crate::simulation::Sim;
use crate::vcpu::{Act, After, HaltReason, HostState, HostWork, Vcpu};

impl Sim {
    /// A synchronous TLB flush from `v` to `count` vCPUs of its VM, from vCPU `start` on and
    /// skipping `v`, as the VM's guest kernel does it (`scenario::TlbFlush`):
    /// - `ipi` (`smp_call_function_many` from Linux 3.6, 3.5's `flush_tlb_others_ipi` with its
    ///   own vectors before: the same sends and wait): the sender sends an IPI to every target
    ///   ([`send_ipis`](Self::send_ipis)), then waits on its call-function word until every
    ///   target has acknowledged;
    /// - `kvm-pv` (Linux 6.8's `kvm_flush_tlb_multi`, then `native_flush_tlb_multi`): a target
    ///   preempted while runnable (`st->preempted`; not one woken and not yet run) is only
    ///   flagged, and flushes at its next entry; a target in guest idle is in lazy TLB mode
    ///   (`tlb_is_not_lazy` false) and flushes at its next switch to a user mm. Neither is sent
    ///   an IPI or waited for; the rest are, as with `ipi`. With no IPI to send there is no exit
    ///   at all, and the flag and the deferred flushes are not charged;
    /// - `xen-pv` (`MMUEXT_TLB_FLUSH_MULTI`): one hypercall, a trap into Xen rather than a VM
    ///   exit, in which Xen sends a host IPI to each pCPU whose `vcpu_dirty_cpumask` holds a
    ///   target (running there, or halted with the pCPU gone idle, which switches lazily and
    ///   keeps its state) and waits for its own handler there (`flush_tlb_mask`). A pCPU that
    ///   switched to another vCPU reloaded `cr3` and holds nothing of the target's. No guest
    ///   handler runs, so the sender waits for no vCPU. Xen's handler on those pCPUs (well under
    ///   a microsecond) is not charged to them.
    pub(crate) fn shootdown(&mut self, v: u32, start: u32, count: u32) -> bool {
        let vm = &self.vms[self.vcpus[v as usize].vm as usize];
        let (first, n, flush) = (vm.first_vcpu, vm.vcpus, vm.tlb_flush);
        let me = self.vcpus[v as usize].index;
        let targets = (0..n).map(|i| first + (start + i) % n).filter(|&t| t != first + me).take(count as usize);
        let vc = &mut self.vcpus[v as usize];
        vc.counters.shootdowns += 1;
        vc.response = Response::NONE;
        let ipis: Vec<u32> = match flush {
            TlbFlush::Ipi => targets.collect(),
            TlbFlush::KvmPv => targets.filter(|&t| !self.flag_preempted_or_lazy(t)).collect(),
            TlbFlush::XenPv => {
                let dirty_pcpus = targets.filter(|&t| self.state_on_a_pcpu(t)).count() as u64;
                let cost = self.costs.hypercall + self.costs.ipi_send * dirty_pcpus;
                if cost == 0 {
                    return true;
                }
                let vc = &mut self.vcpus[v as usize];
                vc.act = Act::Ready;
                vc.host_work = Some(HostWork { remaining: cost, after: After::Nothing });
                return false;
            }
        };
        let vc = &mut self.vcpus[v as usize];
        self.mem.set(vc.call_function_word, ipis.len() as u64);
        if ipis.is_empty() {
            return true;
        }
        vc.act = Act::Ready;
        self.send_ipis(v, ipis);
        false
    }

    /// `v` sends one IPI to each of `targets`, with interrupts off (`local_irq_save` in the send
    /// path), as its VM's guest does it (`scenario::IpiSend`): in x2APIC physical mode one ICR
    /// write, so one exit, per target, each delivering its IPI during its handler; multicast, one
    /// exit whose handler delivers them all. Each exit pays `ipi_send` per IPI it sends.
    fn send_ipis(&mut self, v: u32, mut targets: Vec<u32>) {
        // In CPU order, as `for_each_cpu` walks the mask; kept last first, to be popped.
        targets.sort_unstable_by(|a, b| b.cmp(a));
        let vc = &mut self.vcpus[v as usize];
        debug_assert!(!vc.irqs_off, "shootdowns are sent after the unlock");
        vc.irqs_off = true;
        vc.ipis_to_send = targets;
        let first_exit = self.send_exit(v);
        self.vcpus[v as usize].host_work = Some(HostWork { remaining: first_exit, after: After::SendIpis });
    }

    /// How long the next exit of `v`'s send loop lasts, its handler included: one IPI per exit
    /// in x2APIC physical mode, all that are left in a multicast one.
    fn send_exit(&self, v: u32) -> u64 {
        let vc = &self.vcpus[v as usize];
        let sends = match self.vms[vc.vm as usize].ipi_send {
            IpiSend::X2apicPhysical => 1,
            IpiSend::Multicast => vc.ipis_to_send.len() as u64,
        };
        self.costs.vm_exit + self.costs.ipi_send * sends
    }

    /// The sender's last send has been handled: the VM entry, then `local_irq_restore`, which
    /// takes the IPIs that reached `v` meanwhile (a vCPU switched out takes them when it runs
    /// again, in `switch_in`).
    fn sends_done(&mut self, v: u32) {
        let vc = &mut self.vcpus[v as usize];
        vc.irqs_off = false;
        vc.host_work = Some(HostWork { remaining: self.costs.vm_entry, after: After::Nothing });
        if vc.host == HostState::Running && !self.held_at_next_entry(v) {
            self.handle_pending_ipis(v, true);
        }
    }

    /// The handler of `v`'s send exit has run: its IPIs are delivered. Then the VM entry, and
    /// either the next ICR write's exit or, after the last, `local_irq_restore`, which takes the
    /// IPIs that reached `v` meanwhile with an interrupt-window exit (none with posted
    /// interrupts, whose virtual-interrupt delivery needs no exit). Linux 6.18's throttle task
    /// work, due at the first entry after its VM runs out of quota, waits for the loop's last
    /// entry (a few microseconds late; only with `cpu_max` on `eevdf-6.18`), and a vCPU held
    /// there takes those IPIs at the entry after its hold, as any held vCPU does, without the
    /// interrupt-window exit it would owe there (about a microsecond).
    pub(crate) fn ipis_sent(&mut self, v: u32) {
        let c = &self.costs;
        let next_send = c.vm_entry + c.vm_exit + c.ipi_send;
        let vc = &mut self.vcpus[v as usize];
        let mut pending = std::mem::take(&mut vc.ipis_to_send);
        let now_sent = match self.vms[vc.vm as usize].ipi_send {
            IpiSend::X2apicPhysical => pending.split_off(pending.len() - 1),
            IpiSend::Multicast => std::mem::take(&mut pending),
        };
        // The next host work is set before the deliveries, which may preempt `v` (a woken target
        // on its pCPU): it is then resumed at `v`'s next switch-in.
        if pending.is_empty() {
            self.sends_done(v);
        } else {
            vc.host_work = Some(HostWork { remaining: next_send, after: After::SendIpis });
            vc.ipis_to_send = pending;
        }
        for &t in now_sent.iter().rev() {
            self.deliver_ipi(v, t);
        }
    }

    /// Whether `v` is inside the exit handler of an IPI send (the exit and the sends that end
    /// its host work), past the entry that may come first, or of a kick.
    pub(crate) fn in_send_handler(&self, v: u32) -> bool {
        let Some(hw) = self.vcpus[v as usize].host_work else { return false };
        match hw.after {
            After::WakeSent { .. } => hw.remaining <= self.costs.vm_exit + self.costs.ipi_send,
            After::SendIpis => hw.remaining <= self.send_exit(v),
            After::KickSent { .. } => true,
            _ => false,
        }
    }

    /// `v` was switched out inside a send's or a kick's exit handler. KVM's handler runs to its
    /// end, the preemption being taken on the way back to the guest (`vcpu_enter_guest`), so its
    /// IPIs or its kick are delivered now (the rest of the handler's time is not charged); the
    /// sends after it, and the entry, wait for `v` to run again. A kicker switched out does not
    /// `kvm_sched_yield`: it is leaving its pCPU already. Stale if `v` runs again or has moved on.
    pub(crate) fn send_handled(&mut self, v: u32) {
        if self.vcpus[v as usize].host == HostState::Running || !self.in_send_handler(v) {
            return;
        }
        let Some(hw) = self.vcpus[v as usize].host_work.take() else { return };
        match hw.after {
            After::WakeSent { sleeper } => self.wake_sent(v, sleeper),
            After::KickSent { target } => {
                self.deliver_kick(v, target);
                self.vcpus[v as usize].host_work = Some(HostWork { remaining: self.costs.vm_entry, after: After::Nothing });
            }
            _ => self.ipis_sent(v),
        }
    }

    /// `kvm-pv`: whether target `t` needs no IPI, being flagged through its steal-time page
    /// (preempted while runnable) or in lazy TLB mode (in guest idle).
    fn flag_preempted_or_lazy(&self, t: u32) -> bool {
        let vc = &self.vcpus[t as usize];
        (vc.host == HostState::Runnable && vc.preempted)
            || matches!(vc.act, Act::Halted(HaltReason::Idle { .. } | HaltReason::Finished))
    }

    /// `xen-pv`: whether target `t`'s state is loaded on a pCPU, which Xen must flush: it runs,
    /// or its pCPU went idle after it (a lazy switch).
    fn state_on_a_pcpu(&self, t: u32) -> bool {
        let vc = &self.vcpus[t as usize];
        vc.host == HostState::Running || self.pcpus[vc.pcpu as usize].curr.is_none()
    }

    /// Wake a peer sleeping in guest idle, unless another wake is on its way to it: the sender
    /// pays the IPI, and the sleeper's wait ends when it arrives.
    pub(crate) fn wake_peer(&mut self, v: u32, start: u32) -> bool {
        let vm = &self.vms[self.vcpus[v as usize].vm as usize];
        let (first, n) = (vm.first_vcpu, vm.vcpus);
        // A thread asleep at a barrier (no timer) is no peer's wakee: only the barrier wakes it.
        let sleeper = (0..n).map(|i| first + (start + i) % n).find(|&t| {
            let vc = &self.vcpus[t as usize];
            t != v && self.in_halt(t) && !vc.wake_in_flight && matches!(vc.act, Act::Halted(HaltReason::Idle { wake_at }) if wake_at != Time::MAX)
        });
        self.vcpus[v as usize].response = Response::NONE;
        let Some(t) = sleeper else { return true };
        self.wake_sleeper(v, t);
        false
    }

    /// The last thread at a barrier wakes a thread of vCPU `cpu`, which it takes off the
    /// barrier's queue first (`__unqueue_futex` before `wake_up_state`). A vCPU in guest idle
    /// gets a reschedule IPI: blocked or polling in its halt, still in the HLT exit (whose end
    /// then finds the sleep over and re-enters), or preempted in either; its guest then runs the
    /// woken thread. One whose idle is already ending needs none (`resched_curr` sends no second
    /// IPI while the first reschedule is pending), nor one about to sleep, with a timer (another
    /// of its threads waits for I/O) or without: its sleep ends as it begins. One running another
    /// of its threads (the waker's own vCPU among them) gets none either: the woken thread waits
    /// for the running one to block or reach the barrier, as the guest's threads do not preempt
    /// each other in this model.
    pub(crate) fn wake_vcpu(&mut self, v: u32, cpu: u32) -> bool {
        let vm = self.vcpus[v as usize].vm as usize;
        let t = self.vms[vm].first_vcpu + cpu;
        if let Some(barrier) = &self.vms[vm].barrier {
            barrier.unqueue(cpu);
        }
        self.vcpus[v as usize].response = Response::NONE;
        let now = self.now;
        let target = &mut self.vcpus[t as usize];
        match &mut target.act {
            // Another wake's IPI is on its way (`resched_curr` sends no second).
            Act::Halted(HaltReason::Idle { .. }) if target.wake_in_flight => true,
            Act::Halted(HaltReason::Idle { wake_at }) if *wake_at > now => {
                self.wake_sleeper(v, t);
                false
            }
            // Its sleep is issued but waits for a memory access to complete: the thread is
            // still on its vCPU (`p->on_cpu`), so the wake needs no IPI, and the sleep ends
            // as soon as it begins.
            Act::Delayed { req: Req::Sleep(ns), .. } => {
                *ns = 0;
                true
            }
            _ => true,
        }
    }

    /// `v` sends sleeper `t` a reschedule IPI: one ICR write, with interrupts off, whose exit
    /// handler wakes `t` ([`wake_sent`](Self::wake_sent)).
    fn wake_sleeper(&mut self, v: u32, t: u32) {
        let c = &self.costs;
        let vc = &mut self.vcpus[v as usize];
        vc.counters.wake_ipis += 1;
        vc.act = Act::Ready;
        debug_assert!(!vc.irqs_off, "wakes are sent outside the guest's locks");
        vc.irqs_off = true;
        vc.host_work = Some(HostWork { remaining: c.vm_exit + c.ipi_send, after: After::WakeSent { sleeper: t } });
        self.vcpus[t as usize].wake_in_flight = true;
    }

    /// The handler of `v`'s reschedule IPI exit has run (`kvm_vcpu_kick` of the sleeper): the
    /// sleep of `t` ends now if it is still the sleep the IPI was sent to end (at once if `t` is in
    /// its halt, else when its HLT exit ends, as a due sleep). Then `v`'s entry and `local_irq_restore`, as after a
    /// shootdown's sends ([`ipis_sent`](Self::ipis_sent)).
    pub(crate) fn wake_sent(&mut self, v: u32, t: u32) {
        self.sends_done(v);
        let now = self.now;
        let target = &mut self.vcpus[t as usize];
        // A sleep that ended meanwhile (its timer) cleared the flag: `schedule()` cleared the
        // reschedule request, and the IPI finds nothing to end (its interrupt is not charged).
        if !std::mem::take(&mut target.wake_in_flight) {
            return;
        }
        if let Act::Halted(HaltReason::Idle { wake_at }) = &mut target.act {
            if *wake_at > now {
                *wake_at = now;
                // Set before the wake, which may switch it in at once.
                target.woken_by_ipi = target.host == HostState::Blocked;
                self.end_halt(t);
            }
        }
    }

    /// An IPI is handled once its target runs: at once if running (an exit, a VM entry and the
    /// handler in guest mode, the handler alone with posted interrupts or in host work), after
    /// its next switch-in's entry
    /// if preempted, after a wake-up if halted, after `local_irq_restore` if its interrupts are
    /// off; one arriving during an HLT exit keeps the halt from blocking.
    pub(crate) fn deliver_ipi(&mut self, from: u32, to: u32) {
        let halting = self.in_hlt_exit(to);
        let t = &mut self.vcpus[to as usize];
        t.pending_ipis.push(from);
        let (host, irqs_off) = (t.host, t.irqs_off);
        let polling = self.polling(to);
        match host {
            // Held in the local APIC until `local_irq_restore`. A halted target's thread is
            // woken by KVM and blocks again, finding nothing it may inject (not charged).
            _ if irqs_off => {}
            HostState::Running if polling => self.poll_succeeds(to),
            HostState::Running if !halting && !self.held_at_next_entry(to) && !self.injects_after_handler(to) => self.handle_ipis_now(to),
            HostState::Running | HostState::Runnable => {}
            HostState::Blocked => self.wake(to),
        }
    }

    /// The running vCPU `v` handles its pending IPIs now. In guest mode they force an exit
    /// (the host's IPI to its pCPU), and KVM injects them at the entry that follows, unless they
    /// are posted; in host work they are injected at that work's own entry, so only the guest's
    /// handlers are added.
    pub(crate) fn handle_ipis_now(&mut self, v: u32) {
        self.stop_segment(v);
        let in_guest = self.vcpus[v as usize].host_work.is_none();
        self.handle_pending_ipis(v, in_guest);
        self.continue_if_running(v);
    }

    /// Whether `v`'s host work ends in a handler step before its next VM entry, where KVM
    /// injects: `schedule()` (a yield), or a kick (and, on 6.8 and 6.18 hosts, the yield that
    /// may follow it). Its IPIs wait for that entry, here or after its next switch-in.
    fn injects_after_handler(&self, v: u32) -> bool {
        self.vcpus[v as usize]
            .host_work
            .is_some_and(|hw| matches!(hw.after, After::Yield | After::KickSent { .. } | After::PleDone { yielded: true }))
    }

    /// Whether `vc` has IPIs pending that it can take now. With interrupts off (`Vcpu::irqs_off`)
    /// it has none, whether it spins, holds the lock or halts: `kvm_arch_vcpu_runnable` ignores
    /// an interrupt the guest cannot take, so a halt with IF = 0 ends only by a kick.
    pub(crate) fn has_deliverable_ipis(vc: &Vcpu) -> bool {
        !vc.irqs_off && !vc.pending_ipis.is_empty()
    }

    /// Add the handling of every pending IPI to the vCPU's host work: an exit and an entry first
    /// if it takes them `in_guest` mode (KVM without posted interrupts injects only at a VM
    /// entry, so a vCPU in host work, or one about to enter, needs none; with them, a vCPU in
    /// guest mode takes them where it is, `vmx_deliver_posted_interrupt`), then each guest
    /// handler (`ipi_send_ns` stands for `flush_tlb_func` and `csd_unlock`), acknowledged as it
    /// ends, in host work of its own if it had none. With interrupts off they stay pending.
    pub(crate) fn handle_pending_ipis(&mut self, v: u32, in_guest: bool) {
        let c = &self.costs;
        let exit = in_guest && !c.posted_interrupts;
        let (handler, exit_and_entry) = (c.ipi_send, c.vm_exit + c.vm_entry);
        let now = self.now;
        let vc = &mut self.vcpus[v as usize];
        if vc.irqs_off || vc.pending_ipis.is_empty() {
            return;
        }
        let hw = vc.host_work.get_or_insert(HostWork { remaining: 0, after: After::Nothing });
        if exit {
            hw.remaining += exit_and_entry;
        }
        for from in std::mem::take(&mut vc.pending_ipis) {
            hw.remaining += handler;
            self.q.push(now + hw.remaining, Event::IpiAck { from, to: v });
            self.ipi_acks[v as usize].push((from, now + hw.remaining));
        }
    }

    /// `v` leaves its pCPU with IPI handlers still in its host work: they run when it runs
    /// again (host work resumes where it stopped), so their acknowledgements wait with it.
    /// Rare, so kept off the scheduler's hot path (the callers test for queued acknowledgements).
    #[cold]
    #[inline(never)]
    pub(crate) fn postpone_acks(&mut self, v: u32) {
        let now = self.now;
        for (_, at) in &mut self.ipi_acks[v as usize] {
            *at -= now;
        }
    }

    /// `v` runs again: queue the acknowledgements [`postpone_acks`](Self::postpone_acks) kept,
    /// after the `switch` work (context switch, wake-up) that now comes before the rest.
    #[cold]
    #[inline(never)]
    pub(crate) fn resume_acks(&mut self, v: u32, switch: u64) {
        let now = self.now;
        for (from, at) in &mut self.ipi_acks[v as usize] {
            *at += now + switch;
            self.q.push(*at, Event::IpiAck { from: *from, to: v });
        }
    }

    /// The target's handler has run: it counts down the sender's call-function word, which
    /// the waiting sender sees. Stale if the target was descheduled before then (`Sim::ipi_acks`).
    pub(crate) fn ipi_ack(&mut self, from: u32, to: u32) {
        let now = self.now;
        if self.vcpus[to as usize].host != HostState::Running {
            return;
        }
        let due = &mut self.ipi_acks[to as usize];
        let Some(i) = due.iter().position(|&(f, at)| f == from && at == now) else { return };
        due.remove(i);
        let w = self.vcpus[from as usize].call_function_word;
        let pcpu = self.vcpus[to as usize].pcpu;
        self.mem.access(w, pcpu, Access::Write, self.now);
        let left = self.mem.value(w).saturating_sub(1);
        self.mem.set(w, left);
        self.notify_watchers(w);
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::Event;
    use crate::simulation::test_host::{host, running};
    use crate::simulation::Sim;
    use crate::vcpu::{Act, After, HaltReason, HostState};

    /// Two pCPUs; a VM of four vCPUs with `tlb_flush = flush`, vCPU 0 running on pCPU 0.
    fn guest(hypervisor: &str, flush: &str) -> Sim {
        guest_sending(hypervisor, flush, "x2apic-physical")
    }

    fn guest_sending(hypervisor: &str, flush: &str, ipi_send: &str) -> Sim {
        let vm = format!("[[vm]]\nname = \"g\"\nvcpus = 4\nlock = \"tas\"\ntlb_flush = \"{flush}\"\nipi_send = \"{ipi_send}\"\nworkload = {{ preset = \"kernbench\" }}\n");
        let mut s = host(hypervisor, false, &vm);
        running(&mut s, 0, 0, Act::Ready);
        s
    }

    /// Run `v`'s send exits to their end, as if nothing preempted it; returns when each
    /// delivered (the end of each exit's handler).
    fn send_all(s: &mut Sim, v: usize) -> Vec<u64> {
        let mut delivered = Vec::new();
        while let Some(hw) = s.vcpus[v].host_work.take() {
            s.now += hw.remaining;
            if hw.after != After::SendIpis {
                break;
            }
            delivered.push(s.now);
            s.ipis_sent(v as u32);
        }
        delivered
    }

    /// At 5 µs, vCPU 0 begins a flush of vCPUs 1 and 2, both running in guest mode on pCPU 1.
    fn flushing_two_running_vcpus() -> Sim {
        let mut s = guest("ple = { policy = \"off\" }", "ipi");
        s.now = 5_000;
        running(&mut s, 1, 1, Act::Compute { remaining: 1_000_000 });
        running(&mut s, 2, 1, Act::Compute { remaining: 1_000_000 });
        assert!(!s.shootdown(0, 1, 2));
        s
    }

    /// At 5 µs, vCPU 1 sleeps in guest idle on pCPU 1, its thread blocked, until `wake_at`.
    fn asleep_in_guest_idle_until(wake_at: u64) -> Sim {
        let mut s = guest("ple = { policy = \"off\" }", "ipi");
        s.now = 5_000;
        let vc = &mut s.vcpus[1];
        (vc.host, vc.act, vc.pcpu) = (HostState::Blocked, Act::Halted(HaltReason::Idle { wake_at }), 1);
        s
    }

    fn acks(s: &mut Sim) -> Vec<(u64, u32, u32)> {
        std::iter::from_fn(|| s.q.pop())
            .filter_map(|(at, e)| match e {
                Event::IpiAck { from, to } => Some((at, from, to)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn in_x2apic_physical_mode_the_sender_exits_once_per_target_and_each_gets_its_ipi_in_turn() {
        // `__x2apic_send_IPI_mask` writes the ICR once per target, in CPU order; KVM delivers
        // each IPI in that write's exit handler.
        let mut s = guest("ple = { policy = \"off\" }", "ipi");
        s.now = 5_000;
        for v in 1..4 {
            running(&mut s, v, 1, Act::Compute { remaining: 1_000_000 });
        }
        assert!(!s.shootdown(0, 2, 3), "to vCPUs 2, 3 and 1");
        assert!(s.vcpus[0].irqs_off, "the sends run with interrupts off");
        let (exit, send, entry) = (s.costs.vm_exit, s.costs.ipi_send, s.costs.vm_entry);
        let delivered = send_all(&mut s, 0);
        let first = 5_000 + exit + send;
        let step = entry + exit + send;
        assert_eq!(delivered, vec![first, first + step, first + 2 * step]);
        assert_eq!(s.now, 5_000 + 3 * (exit + send + entry), "three exits, three entries");
        assert!(!s.vcpus[0].irqs_off);
        let handled = exit + send + entry;
        let got = acks(&mut s);
        assert_eq!(got, vec![(delivered[0] + handled, 0, 1), (delivered[1] + handled, 0, 2), (delivered[2] + handled, 0, 3)]);
    }

    #[test]
    fn a_guest_with_kvms_pv_flush_sends_its_ipis_multicast_unless_told_otherwise() {
        use crate::scenario::IpiSend;
        let ipi_send = |keys: &str| {
            let vm = format!("[[vm]]\nname = \"g\"\nvcpus = 4\nlock = \"tas\"\n{keys}\nworkload = {{ preset = \"kernbench\" }}\n");
            host("ple = { policy = \"off\" }", false, &vm).vms[0].ipi_send
        };
        assert_eq!(ipi_send(""), IpiSend::X2apicPhysical, "a Linux 3.x guest");
        assert_eq!(ipi_send("tlb_flush = \"kvm-pv\""), IpiSend::Multicast, "a 6.8 guest");
        assert_eq!(ipi_send("tlb_flush = \"kvm-pv\"\nipi_send = \"x2apic-physical\""), IpiSend::X2apicPhysical);
    }

    #[test]
    fn a_sender_switched_out_inside_a_sends_exit_handler_delivers_that_ipi_first() {
        // The handler runs to its end; the preemption is taken on the way back to the guest,
        // before the next ICR write, which waits for the sender to run again.
        let mut s = flushing_two_running_vcpus();
        (s.vcpus[0].active, s.vcpus[0].seg_start) = (true, 5_000);
        s.now += s.costs.vm_exit;
        s.pcpus[0].curr = None;
        s.stop_running(0);
        let handled: Vec<u64> = std::iter::from_fn(|| s.q.pop()).filter_map(|(at, e)| matches!(e, Event::SendHandled { vcpu: 0 }).then_some(at)).collect();
        assert_eq!(handled, vec![s.now], "due as the switch is done");
        s.send_handled(0);
        assert!(acks(&mut s).iter().any(|&(_, from, to)| (from, to) == (0, 1)), "vCPU 1 has its IPI");
        assert!(s.vcpus[2].pending_ipis.is_empty() && s.vcpus[0].ipis_to_send == vec![2], "the second write waits");
        let c = &s.costs;
        assert_eq!(s.vcpus[0].host_work.map(|w| w.remaining), Some(c.vm_entry + c.vm_exit + c.ipi_send));
        // Switched out again in that entry, before the next write: nothing is delivered.
        (s.vcpus[0].host, s.vcpus[0].active, s.vcpus[0].seg_start) = (HostState::Running, true, s.now);
        s.now += 100;
        s.stop_running(0);
        assert!(std::iter::from_fn(|| s.q.pop()).all(|(_, e)| !matches!(e, Event::SendHandled { .. })));
    }

    #[test]
    fn a_multicast_send_exits_once_and_delivers_every_ipi_in_that_exit() {
        // KVM's PV send-IPI hypercall (or one xAPIC logical-mode ICR write) names every target.
        let mut s = guest_sending("ple = { policy = \"off\" }", "ipi", "multicast");
        s.now = 5_000;
        for v in 1..4 {
            running(&mut s, v, 1, Act::Compute { remaining: 1_000_000 });
        }
        assert!(!s.shootdown(0, 1, 3));
        let (exit, send, entry) = (s.costs.vm_exit, s.costs.ipi_send, s.costs.vm_entry);
        let delivered = send_all(&mut s, 0);
        assert_eq!(delivered, vec![5_000 + exit + 3 * send]);
        assert_eq!(s.now, delivered[0] + entry);
        let at = delivered[0] + exit + send + entry;
        assert_eq!(acks(&mut s), vec![(at, 0, 1), (at, 0, 2), (at, 0, 3)]);
    }

    #[test]
    fn an_ipi_reaching_a_sender_during_its_sends_waits_for_its_interrupts_back_on() {
        // The send loop runs with interrupts off; `local_irq_restore` after it takes what came
        // meanwhile, with an interrupt-window exit.
        let mut s = flushing_two_running_vcpus();
        s.deliver_ipi(3, 0);
        assert_eq!(s.vcpus[0].pending_ipis, vec![3], "held while the sends run");
        let (exit, send, entry) = (s.costs.vm_exit, s.costs.ipi_send, s.costs.vm_entry);
        let hw = s.vcpus[0].host_work.expect("the first send's exit");
        s.now += hw.remaining;
        s.vcpus[0].host_work = None;
        s.ipis_sent(0);
        assert_eq!(s.vcpus[0].pending_ipis, vec![3], "still held between the two sends");
        let hw = s.vcpus[0].host_work.expect("the second send's entry and exit");
        s.now += hw.remaining;
        s.vcpus[0].host_work = None;
        s.ipis_sent(0);
        assert!(s.vcpus[0].pending_ipis.is_empty(), "taken after the last send");
        let last_entry = s.now;
        let rest = s.vcpus[0].host_work.map(|w| w.remaining);
        assert_eq!(rest, Some(entry + exit + entry + send), "entry, interrupt-window exit and entry, handler");
        assert!(acks(&mut s).contains(&(last_entry + rest.unwrap(), 3, 0)));
    }

    /// The IPIs a flush from vCPU 0 to vCPUs 1-3 waits for: 1 preempted, 2 woken from a halt
    /// and not yet run, 3 woken from guest idle and not yet run.
    fn waited_for(flush: &str) -> u64 {
        let mut s = guest("ple = { policy = \"off\" }", flush);
        for (v, preempted, act) in [
            (1, true, Act::Compute { remaining: 1 }),
            (2, false, Act::Compute { remaining: 1 }),
            (3, false, Act::Halted(HaltReason::Idle { wake_at: 0 })),
        ] {
            let vc = &mut s.vcpus[v];
            (vc.host, vc.preempted, vc.act, vc.pcpu) = (HostState::Runnable, preempted, act, 1);
        }
        s.shootdown(0, 1, 3);
        s.mem.value(s.vcpus[0].call_function_word)
    }

    #[test]
    fn kvms_pv_flush_skips_preempted_and_idle_targets_but_waits_for_a_woken_one() {
        assert_eq!(waited_for("ipi"), 3);
        assert_eq!(waited_for("kvm-pv"), 1);
    }

    #[test]
    fn kvms_pv_flush_sends_no_ipi_to_a_vcpu_idle_since_its_vm_finished() {
        // native_flush_tlb_multi skips CPUs in lazy TLB mode (`tlb_is_not_lazy`), as a CPU in
        // the idle loop is, whether or not its work will ever resume.
        let mut s = guest("ple = { policy = \"off\" }", "kvm-pv");
        let vc = &mut s.vcpus[1];
        (vc.host, vc.act, vc.pcpu) = (HostState::Blocked, Act::Halted(HaltReason::Finished), 1);
        assert!(s.shootdown(0, 1, 1), "no IPI, no exit: the flush is done");
        assert_eq!(s.vcpus[1].host, HostState::Blocked, "not woken");
    }

    #[test]
    fn a_xen_pv_flush_waits_for_no_vcpu_and_pays_a_host_ipi_per_pcpu_holding_a_target() {
        let mut s = guest("scheduler = \"credit1\"\nple = { policy = \"off\" }", "xen-pv");
        // 1 halted on pCPU 1, which went idle after it (lazy: its state stays loaded there); 2
        // queued and 3 halted on pCPU 0, which runs vCPU 0 (its state is vCPU 0's).
        s.pcpus[1].curr = None;
        for (v, state, p) in [(1, HostState::Blocked, 1), (2, HostState::Runnable, 0), (3, HostState::Blocked, 0)] {
            (s.vcpus[v].host, s.vcpus[v].pcpu) = (state, p);
        }
        assert!(!s.shootdown(0, 1, 3), "the hypercall is host work");
        assert_eq!(s.mem.value(s.vcpus[0].call_function_word), 0);
        let c = &s.costs;
        assert_eq!(s.vcpus[0].host_work.map(|w| w.remaining), Some(c.hypercall + c.ipi_send));
    }

    #[test]
    fn a_target_descheduled_inside_its_handler_acknowledges_only_once_it_has_run_the_rest() {
        // `csd_unlock` runs at the end of the guest's handler, whatever the host did meanwhile:
        // a target preempted half-way through runs the other half when it runs again.
        let mut s = guest("ple = { policy = \"off\" }", "ipi");
        s.now = 5_000;
        running(&mut s, 1, 1, Act::Compute { remaining: 1_000_000 });
        assert!(!s.shootdown(0, 1, 1), "the sender waits for vCPU 1");
        let delivered = send_all(&mut s, 0)[0];
        s.now = delivered;
        let c = &s.costs;
        let handle = c.vm_exit + c.ipi_send + c.vm_entry;
        s.now += handle / 2;
        s.pcpus[1].curr = None;
        s.stop_running(1);
        s.now = 1_000_000;
        s.pcpus[1].curr = Some(1);
        s.switch_in(1, 1);
        // The switch-in's own work (context switch, a C-state exit) comes before the rest.
        let work = s.vcpus[1].host_work.map(|w| w.remaining).expect("host work after the switch-in");
        let rest = s.now + work;
        assert!(work > handle - handle / 2, "the switch costs something");
        let acks: Vec<u64> = std::iter::from_fn(|| s.q.pop())
            .filter_map(|(at, e)| match e {
                Event::IpiAck { to: 1, .. } => Some(at),
                _ => None,
            })
            .collect();
        assert_eq!(acks, vec![delivered + handle, rest], "the first was queued before the preemption; the second after the switch and the rest of the handler");
        assert_eq!(s.ipi_acks[1], vec![(0, rest)], "only the second is due");
    }

    #[test]
    fn a_target_not_in_guest_mode_takes_its_ipi_at_its_next_entry_with_no_exit_of_its_own() {
        // KVM without posted interrupts injects a pending interrupt at `vcpu_enter_guest`: a
        // preempted target pays its handler after the switch-in's entry, and no exit.
        let switch_in_work = |ipi: bool| {
            let mut s = guest("ple = { policy = \"off\" }", "ipi");
            s.now = 5_000;
            let vc = &mut s.vcpus[2];
            (vc.host, vc.preempted, vc.act, vc.pcpu) = (HostState::Runnable, true, Act::Compute { remaining: 1_000 }, 1);
            if ipi {
                assert!(!s.shootdown(0, 2, 1), "the sender waits for vCPU 2");
                send_all(&mut s, 0);
                assert_eq!(s.vcpus[2].pending_ipis, vec![0]);
            }
            s.pcpus[1].curr = Some(2);
            s.switch_in(2, 1);
            s.vcpus[2].host_work.map(|w| w.remaining).unwrap_or(0)
        };
        let ipi_send = guest("ple = { policy = \"off\" }", "ipi").costs.ipi_send;
        assert_eq!(switch_in_work(true), switch_in_work(false) + ipi_send);
    }

    #[test]
    fn a_target_whose_exit_ends_in_a_yield_takes_its_ipi_only_at_its_next_entry() {
        // A yield's `schedule()` comes before the VM entry where KVM injects: the target may be
        // switched out first, so the IPI waits for whichever entry comes next.
        let mut s = guest("ple = { policy = \"off\" }", "ipi");
        s.now = 5_000;
        running(&mut s, 1, 1, Act::Ready);
        s.vcpus[1].host_work = Some(crate::vcpu::HostWork { remaining: 500, after: After::Yield });
        assert!(!s.shootdown(0, 1, 1), "the sender waits for vCPU 1");
        send_all(&mut s, 0);
        assert_eq!(s.vcpus[1].pending_ipis, vec![0], "left for the entry");
        assert!(std::iter::from_fn(|| s.q.pop()).all(|(_, e)| !matches!(e, Event::IpiAck { .. })), "none handled yet");
    }

    #[test]
    fn a_target_with_interrupts_off_acknowledges_only_after_restoring_them() {
        // A vCPU waiting for or holding a lock taken with `spin_lock_irqsave` takes the flush's
        // IPI at `local_irq_restore`, after its unlock, and the sender waits until then.
        let mut s = guest("ple = { policy = \"off\" }", "ipi");
        s.now = 5_000;
        running(&mut s, 1, 1, Act::Ready);
        s.vcpus[1].irqs_off = true;
        assert!(!s.shootdown(0, 1, 1), "the sender waits for vCPU 1");
        send_all(&mut s, 0);
        assert!(std::iter::from_fn(|| s.q.pop()).all(|(_, e)| !matches!(e, Event::IpiAck { .. })), "none handled yet");
        assert_eq!(s.vcpus[1].pending_ipis, vec![0]);
        s.now = 20_000;
        assert!(!s.interrupts_on(1), "the interrupt-window exit is host work");
        let acks: Vec<u64> = std::iter::from_fn(|| s.q.pop())
            .filter_map(|(at, e)| matches!(e, Event::IpiAck { from: 0, to: 1 }).then_some(at))
            .collect();
        let c = &s.costs;
        assert_eq!(acks, vec![20_000 + c.vm_exit + c.ipi_send + c.vm_entry]);
    }

    #[test]
    fn with_posted_interrupts_a_target_in_guest_mode_takes_its_ipi_without_an_exit() {
        // APICv posts the interrupt to a vCPU in guest mode (`vmx_deliver_posted_interrupt`);
        // one with interrupts off gets it when it turns them on, again without an exit.
        for posted in [false, true] {
            let mut s = guest(&format!("ple = {{ policy = \"off\" }}\nposted_interrupts = {posted}"), "ipi");
            s.now = 5_000;
            running(&mut s, 1, 1, Act::Compute { remaining: 1_000_000 });
            running(&mut s, 2, 1, Act::Ready);
            s.vcpus[2].irqs_off = true;
            assert!(!s.shootdown(0, 1, 2));
            let delivered = send_all(&mut s, 0);
            s.now = 20_000;
            assert!(!s.interrupts_on(2));
            let c = &s.costs;
            let exit = if posted { 0 } else { c.vm_exit + c.vm_entry };
            let (to_1, to_2) = (delivered[0] + exit + c.ipi_send, 20_000 + exit + c.ipi_send);
            assert_eq!(acks(&mut s), vec![(to_1, 0, 1), (to_2, 0, 2)], "posted interrupts: {posted}");
        }
    }

    #[test]
    fn a_reschedule_ipi_wakes_its_sleeper_in_the_senders_exit_handler_and_no_second_is_sent() {
        // `try_to_wake_up` sends one ICR write; KVM kicks the sleeper in that exit's handler,
        // and a second waker finds its idle already ending (`resched_curr` sends no second IPI).
        let mut s = asleep_in_guest_idle_until(1_000_000);
        running(&mut s, 2, 1, Act::Ready);
        assert!(!s.wake_peer(0, 1), "vCPU 0 sends the IPI");
        assert!(s.vcpus[0].irqs_off && s.vcpus[1].wake_in_flight);
        assert_eq!(s.vcpus[1].host, HostState::Blocked, "asleep until the handler has run");
        assert!(s.wake_peer(2, 1), "vCPU 2 finds no sleeper to send one to");
        assert_eq!(s.vcpus[2].counters.wake_ipis, 0);
        let hw = s.vcpus[0].host_work.take().expect("the ICR-write exit");
        assert_eq!(hw.remaining, s.costs.vm_exit + s.costs.ipi_send);
        s.now += hw.remaining;
        s.vcpus[1].se.vruntime = 1 << 40; // far ahead: no wake-up preemption of vCPU 2
        s.wake_sent(0, 1);
        assert!(!s.vcpus[0].irqs_off && !s.vcpus[1].wake_in_flight);
        assert_eq!(s.vcpus[1].host, HostState::Runnable, "woken, behind vCPU 2");
        assert!(s.vcpus[1].woken_by_ipi, "with the IPI's interrupt waiting for it");
        assert_eq!(s.vcpus[0].host_work.map(|w| w.remaining), Some(s.costs.vm_entry));
    }

    #[test]
    fn a_reschedule_ipi_that_arrives_after_its_sleep_has_ended_ends_no_later_sleep() {
        // The sleeper's timer ended its sleep first: its `schedule()` cleared the reschedule
        // request, and the late IPI does not end the next sleep.
        let mut s = asleep_in_guest_idle_until(5_100);
        assert!(!s.wake_peer(0, 1));
        s.now = 5_100;
        running(&mut s, 1, 1, Act::Halted(HaltReason::Idle { wake_at: 5_100 }));
        s.halt_returns(1, HaltReason::Idle { wake_at: 5_100 });
        assert!(!s.vcpus[1].wake_in_flight, "the sleep the IPI was for is over");
        let vc = &mut s.vcpus[1];
        (vc.host, vc.act) = (HostState::Blocked, Act::Halted(HaltReason::Idle { wake_at: 1_000_000 }));
        s.now = 5_000 + s.costs.vm_exit + s.costs.ipi_send;
        s.wake_sent(0, 1);
        assert_eq!(s.vcpus[1].host, HostState::Blocked, "the next sleep goes on");
    }

    #[test]
    fn a_synchronous_ipi_is_acknowledged_only_once_the_target_has_run_its_handler() {
        // Linux's `smp_call_function_many` waits in `csd_lock_wait` until the target's
        // `flush_smp_call_function_queue` has run the function and then `csd_unlock`s it.
        let mut s = guest("ple = { policy = \"off\" }", "ipi");
        s.now = 5_000;
        // vCPU 1 runs on pCPU 1 in guest mode; vCPU 2 is preempted there.
        running(&mut s, 1, 1, Act::Compute { remaining: 1_000_000 });
        let vc = &mut s.vcpus[2];
        (vc.host, vc.preempted, vc.act, vc.pcpu) = (HostState::Runnable, true, Act::Compute { remaining: 1 }, 1);
        assert!(!s.shootdown(0, 1, 2), "the sender waits");
        assert_eq!(s.mem.value(s.vcpus[0].call_function_word), 2);
        let delivered = send_all(&mut s, 0);
        let c = &s.costs;
        let handled = delivered[0] + c.vm_exit + c.ipi_send + c.vm_entry;
        assert_eq!(acks(&mut s), vec![(handled, 0, 1)], "the running target acknowledges after its exit, handler and entry; the preempted one not until it runs");
        assert_eq!(s.vcpus[2].pending_ipis, vec![0]);
    }
}
