//! HLT in KVM: the exit, halt polling and blocking (`kvm_vcpu_halt`), the guest timer that ends
//! a halt, the wake-up of a blocked vCPU thread, and the PV kick (`kvm_pv_kick_cpu_op`,
//! `kernel-mechanisms.md` §1.4 and §5.5).
//!
//! A vCPU halts in the PV lock slow path (until a kick or its next guest tick; for a lock taken
//! with interrupts off, until a kick alone: `kvm_lock_spinning`'s `halt()`), in guest idle
//! (until its sleep ends or an IPI arrives) and when its VM has finished. The HLT exit ends in
//! `vcpu_block`: re-enter at once if a wake-up is already pending, else poll for one (halt
//! polling, while the pCPU has nothing else to run), else block and give the pCPU away.
//!
//! ```text
//!   guest HLT ──exit──▶ vcpu_block ──kick/IPI/timer pending──▶ VM entry
//!                          │ poll on (alone on the pCPU)   │ else
//!                          ▼                               ▼
//!                       POLLING ──wake-up──▶ VM entry    BLOCKED ──wake-up──▶ runnable (scheduler)
//!                          │ poll ends or a thread is queued on the pCPU ─▶ BLOCKED
//! ```
use crate::engine::{Event, Rng, Time};
use crate::guest::Response;
use crate::simulation::Sim;
use crate::vcpu::{Act, After, HaltReason, HostState, HostWork};

/// The RNG streams of the guests' tick grids, one per VM (`2^34 + vm`; the other streams are
/// listed at `bandwidth::PERIOD_PHASE_STREAM`).
const GUEST_TICK_STREAM_BASE: u64 = 4 << 32;

/// Where VM `vm`'s tick grid sits on the host's clock: drawn in `[0, period)` from the run's
/// seed. A Linux guest puts every CPU's tick on one grid, set when its tick device starts at
/// boot (`tick_init_jiffy_update` gives the first expiry, `tick_setup_sched_timer` offsets it per
/// CPU only with `skew_tick=1`, off by default), so a VM's waiters halted in the PV lock slow
/// path all wake at the same tick; the grid's offset from the host's clock, and from another
/// VM's, is that guest's boot time, which nothing fixes.
pub(crate) fn guest_tick_phase(seed: u64, vm: u32, period: u64) -> u64 {
    Rng::stream(seed, GUEST_TICK_STREAM_BASE + vm as u64).below(period)
}

/// The first tick of the grid `phase + k × period` strictly after `now`.
pub(crate) fn next_guest_tick(now: Time, period: u64, phase: u64) -> Time {
    ((now + period - phase) / period) * period + phase
}

impl Sim {
    /// The guest executes HLT: count the exit and pay it; `vcpu_block` decides what follows.
    pub(crate) fn start_halt(&mut self, v: u32, reason: HaltReason) {
        let exit = self.costs.vm_exit;
        let vc = &mut self.vcpus[v as usize];
        vc.counters.halt_exits += 1;
        vc.hlt_at = self.now;
        vc.act = Act::Halted(reason);
        vc.host_work = Some(HostWork { remaining: exit, after: After::VcpuBlock });
    }

    /// After the HLT exit (x86 `vcpu_block`, polling in `kvm_vcpu_halt`): re-enter if the vCPU is
    /// runnable anyway (`kvm_arch_vcpu_runnable`: a pending kick or interrupt, a tick since the
    /// HLT, or an idle timer already due); else poll for a wake-up if halt polling is on and
    /// nothing else wants the pCPU (`single_task_running`); else block.
    pub(crate) fn vcpu_block(&mut self, v: u32) {
        let now = self.now;
        let max_poll = self.halt_poll.max_ns;
        let p = self.vcpus[v as usize].pcpu;
        let alone = self.nr_queued(p) == 1;
        let tick_came = self.tick_since_hlt(v, now);
        let vc = &mut self.vcpus[v as usize];
        let Act::Halted(reason) = vc.act else { unreachable!() };
        if tick_came || Self::wake_pending(vc, now) {
            // Runnable anyway: `vcpu_block` skips `kvm_vcpu_halt` (nothing to adapt).
            vc.halt_started = None;
            vc.host_work = Some(HostWork { remaining: self.costs.vm_entry, after: After::Nothing });
            self.leave_halt(v, now);
            self.handle_pending_ipis(v, false);
            return;
        }
        vc.halt_started = Some(now);
        vc.halt_poll_ns = vc.halt_poll_ns.min(max_poll);
        // Only KVM's vCPU threads poll; a host thread that sleeps just blocks.
        let vcpu_thread = !self.vms[vc.vm as usize].host_threads;
        let poll = vc.halt_poll_ns > 0 && alone && vcpu_thread;
        if poll {
            vc.host_work = Some(HostWork { remaining: vc.halt_poll_ns, after: After::PollEnd });
        }
        // One guest timer per halt: it ends the poll, or the block that follows a poll.
        self.arm_halt_timer(v, reason);
        if !poll {
            self.block(v);
        }
    }

    /// `kvm_vcpu_check_block`: a kick, an interrupt or a due idle timer is pending, so the halt
    /// must not block.
    pub(crate) fn wake_pending(vc: &crate::vcpu::Vcpu, now: Time) -> bool {
        vc.pv_unhalted || Self::has_deliverable_ipis(vc) || matches!(vc.act, Act::Halted(HaltReason::Idle { wake_at }) if wake_at <= now)
    }

    /// The guest tick that ends a halt in a PV lock's slow path with interrupts on (`safe_halt`):
    /// the first of the VM's grid after the HLT. One that comes during the HLT exit is pending at
    /// `vcpu_block` (`apic_timer_expired` raised it, and `kvm_vcpu_check_block` finds it). With
    /// interrupts off the tick wakes the vCPU thread, which finds nothing it may inject and
    /// blocks again (not charged): no tick ends the halt. Other halts end at no tick.
    fn halt_ending_tick(&self, v: u32) -> Option<Time> {
        let vc = &self.vcpus[v as usize];
        let vm = &self.vms[vc.vm as usize];
        (matches!(vc.act, Act::Halted(HaltReason::LockWait)) && !vc.irqs_off)
            .then(|| next_guest_tick(vc.hlt_at, vm.guest_tick_ns, vm.guest_tick_phase_ns))
    }

    /// Whether the tick that ends the vCPU's halt (`halt_ending_tick`) has come, up to `now`.
    pub(crate) fn tick_since_hlt(&self, v: u32, now: Time) -> bool {
        self.halt_ending_tick(v).is_some_and(|tick| tick <= now)
    }

    /// A poll ends without a wake-up having reached it while it ran (its pCPU wants another
    /// thread, or the poll ran out): block, unless a wake-up came while the poller was
    /// descheduled (a kick, an interrupt, a due timer, or the tick that ends a lock-wait halt,
    /// as at `vcpu_block`), which `kvm_vcpu_check_block` finds before `schedule()`. (Such a
    /// poller finishes the rest of its poll when it runs again before it finds the wake-up, where
    /// KVM's poll loop would stop at once: at most `halt_poll.max_ns` late.)
    pub(crate) fn block_after_poll(&mut self, v: u32) {
        if self.tick_since_hlt(v, self.now) || Self::wake_pending(&self.vcpus[v as usize], self.now) {
            self.poll_succeeds(v);
        } else {
            self.block(v);
        }
    }

    /// The halted vCPU's thread sleeps until a kick, an interrupt or its guest timer (armed).
    pub(crate) fn block(&mut self, v: u32) {
        let p = self.vcpus[v as usize].pcpu;
        self.put_to_sleep(v);
        self.return_spare_runtime(v, p);
        self.throttle_if_spent(p, v);
        self.schedule(p);
    }

    /// The running vCPU `v` leaves its pCPU, blocked; the caller schedules.
    pub(crate) fn put_to_sleep(&mut self, v: u32) {
        let now = self.now;
        let p = self.vcpus[v as usize].pcpu;
        self.dequeue_sleeper(p, v);
        let vc = &mut self.vcpus[v as usize];
        vc.host = HostState::Blocked;
        vc.state_since = now;
        vc.hvs_boosted = false;
        self.pcpus[p as usize].curr = None;
    }

    /// The guest timer that ends a halt: the next guest tick in the PV lock slow path (the
    /// halt is a `safe_halt`; with interrupts off, a `halt` that no tick ends), the idle sleep's
    /// end in guest idle.
    fn arm_halt_timer(&mut self, v: u32, reason: HaltReason) {
        let timer = match reason {
            HaltReason::LockWait => self.halt_ending_tick(v),
            // A sleep with no end waits for a wake-up IPI alone.
            HaltReason::Idle { wake_at } => (wake_at != Time::MAX).then_some(wake_at),
            HaltReason::Finished => None,
        };
        let vc = &mut self.vcpus[v as usize];
        vc.timer_gen = vc.timer_gen.wrapping_add(1);
        if let Some(at) = timer {
            self.q.push(at, Event::GuestTimer { vcpu: v, gen: vc.timer_gen });
        }
    }

    /// The guest timer of halt `gen` fires: it ends the halt, blocked or polling.
    pub(crate) fn guest_timer(&mut self, v: u32, gen: u32) {
        if self.vcpus[v as usize].timer_gen == gen {
            self.end_halt(v);
        }
    }

    /// Whether the vCPU's thread waits in `kvm_vcpu_halt`, blocked or polling.
    pub(crate) fn in_halt(&self, v: u32) -> bool {
        self.vcpus[v as usize].host == HostState::Blocked || self.polling(v)
    }

    /// A wake-up for a vCPU in `kvm_vcpu_halt`: a blocked thread is made runnable, a polling
    /// one re-enters. Returns whether the vCPU was in a halt.
    pub(crate) fn end_halt(&mut self, v: u32) -> bool {
        if self.vcpus[v as usize].host == HostState::Blocked {
            self.wake(v);
        } else if self.polling(v) {
            self.poll_succeeds(v);
        } else {
            return false;
        }
        true
    }

    /// Whether the vCPU is in its HLT exit, before `vcpu_block` decides.
    pub(crate) fn in_hlt_exit(&self, v: u32) -> bool {
        self.vcpus[v as usize].host_work.is_some_and(|hw| hw.after == After::VcpuBlock)
    }

    /// Whether the vCPU's thread is polling in `kvm_vcpu_halt` (on its pCPU, the guest halted).
    pub(crate) fn polling(&self, v: u32) -> bool {
        let vc = &self.vcpus[v as usize];
        vc.host == HostState::Running && vc.host_work.is_some_and(|hw| hw.after == After::PollEnd)
    }

    /// A wake-up reached a polling vCPU: the poll ends and the vCPU re-enters, with no block,
    /// wake-up or context switch to pay.
    pub(crate) fn poll_succeeds(&mut self, v: u32) {
        self.stop_segment(v);
        self.leave_halt(v, self.now);
        let vc = &mut self.vcpus[v as usize];
        vc.timer_gen = vc.timer_gen.wrapping_add(1);
        vc.host_work = Some(HostWork { remaining: self.costs.vm_entry, after: After::Nothing });
        self.handle_pending_ipis(v, false);
        self.continue_if_running(v);
    }

    /// Another thread became runnable on the poller's pCPU (`!single_task_running()`): the poll
    /// ends and the vCPU blocks.
    pub(crate) fn poll_gives_way(&mut self, v: u32) {
        self.stop_segment(v);
        let vc = &mut self.vcpus[v as usize];
        vc.host_work = None;
        self.block_after_poll(v);
    }

    /// The vCPU thread leaves `kvm_vcpu_halt` at `at` (now, or at the end of its switch-in and
    /// wake-up), its poll successful or its block over, or skipped it as runnable anyway, and
    /// goes on to the VM entry: `kvm_vcpu_halt` adapts the next poll from how long this halt
    /// lasted, and x86 `vcpu_block` consumes a pending kick (`pv_unhalted`); `kick` lets one
    /// that lands before `at` go with it, and one during the entry stays for the next halt. (A
    /// thread preempted during its switch-in leaves later than `at`; a kick in that gap is kept.)
    pub(crate) fn leave_halt(&mut self, v: u32, at: Time) {
        let vc = &mut self.vcpus[v as usize];
        vc.pv_unhalted = false;
        vc.halt_left_at = at;
        self.adapt_halt_poll(v, at);
    }

    /// `kvm_vcpu_halt`'s adaptation of the next poll from how long this halt lasted, up to `at`
    /// (`halt_ns`: from the end of the HLT exit to the thread's return, without the entry).
    fn adapt_halt_poll(&mut self, v: u32, at: Time) {
        let c = &self.halt_poll;
        if c.max_ns == 0 {
            return;
        }
        let vc = &mut self.vcpus[v as usize];
        let Some(started) = vc.halt_started.take() else { return };
        let (halted, poll) = (at - started, vc.halt_poll_ns);
        vc.halt_poll_ns = if halted <= poll {
            poll
        } else if poll > 0 && halted > c.max_ns {
            // `shrink_halt_poll_ns`
            let shrunk = poll.checked_div(c.shrink).unwrap_or(0);
            if shrunk < c.grow_start_ns { 0 } else { shrunk }
        } else if poll < c.max_ns && halted < c.max_ns && c.grow > 0 {
            // `grow_halt_poll_ns` (a zero `halt_poll_ns_grow` disables growing)
            poll.saturating_mul(c.grow).max(c.grow_start_ns)
        } else {
            poll
        };
    }

    /// The vCPU runs again after a halt.
    pub(crate) fn halt_returns(&mut self, v: u32, reason: HaltReason) {
        let now = self.now;
        let vc = &mut self.vcpus[v as usize];
        let kicked = std::mem::take(&mut vc.kicked);
        match reason {
            HaltReason::LockWait => {
                if !kicked {
                    vc.counters.spurious_wakeups += 1;
                }
                vc.response = Response::NONE;
                vc.act = Act::Ready;
                self.poll_guest(v);
            }
            HaltReason::Idle { wake_at } if wake_at <= now => {
                vc.response = Response::NONE;
                vc.act = Act::Ready;
                // A reschedule IPI still on its way no longer ends this sleep (`Sim::wake_sent`).
                vc.wake_in_flight = false;
                self.poll_guest(v);
            }
            HaltReason::Idle { .. } | HaltReason::Finished => {
                // Woken by an interrupt only: handle it and halt again.
                self.start_halt(v, reason);
                self.run_vcpu(v);
            }
        }
    }

    /// `kvm_pv_kick_cpu_op` → `kvm_vcpu_kick`: set `pv_unhalted`, and wake the vCPU thread if it
    /// is blocked (or end its halt poll). A target running in guest mode gets a reschedule IPI
    /// that forces a VM exit (`smp_send_reschedule`); one on a run queue or in host work sees
    /// the request at its next entry.
    pub(crate) fn kick(&mut self, target: u32) {
        let now = self.now;
        let t = &mut self.vcpus[target as usize];
        t.kicked = true;
        // Before the thread has left `kvm_vcpu_halt`, `vcpu_block` consumes the kick with the halt.
        if now >= t.halt_left_at {
            t.pv_unhalted = true;
        }
        let in_guest = t.host == HostState::Running && t.host_work.is_none();
        if !self.end_halt(target) && in_guest {
            self.stop_segment(target);
            let c = &self.costs;
            self.vcpus[target as usize].host_work = Some(HostWork { remaining: c.vm_exit + c.vm_entry, after: After::Nothing });
            self.continue_if_running(target);
        }
    }

    /// A VM reached its work target: its threads asleep at a barrier will never be woken, and
    /// are finished from now on, as its other threads are at their next work unit.
    pub(crate) fn finish_barrier_sleepers(&mut self, vm: u32) {
        for v in self.vms[vm as usize].vcpu_range() {
            if !matches!(self.vcpus[v].act, Act::Halted(HaltReason::Idle { wake_at: Time::MAX })) {
                continue;
            }
            if self.vcpus[v].host == HostState::Blocked {
                self.account_blocked(v as u32);
            }
            self.vcpus[v].act = Act::Halted(HaltReason::Finished);
        }
    }

    /// A blocked vCPU's time since it blocked, or since this was last called, up to now: halted,
    /// or finished once its VM is done.
    fn account_blocked(&mut self, v: u32) {
        let now = self.now;
        let since = self.vcpus[v as usize].state_since;
        self.trace_slice(v, "halted", since, now);
        let vc = &mut self.vcpus[v as usize];
        let el = now - vc.state_since;
        if matches!(vc.act, Act::Halted(HaltReason::Finished)) {
            vc.time.finished_ns += el;
        } else {
            vc.time.halted_ns += el;
        }
        vc.state_since = now;
    }

    /// Make a blocked vCPU runnable and let the scheduler decide whether it preempts.
    pub(crate) fn wake(&mut self, v: u32) {
        debug_assert_eq!(self.vcpus[v as usize].host, HostState::Blocked);
        self.account_blocked(v);
        let vc = &mut self.vcpus[v as usize];
        vc.host = HostState::Runnable;
        vc.woken = true;
        vc.timer_gen = vc.timer_gen.wrapping_add(1);
        self.enqueue_woken(v);
    }
}

#[cfg(test)]
mod tests {
    use crate::simulation::test_host::{halting_alone, host, running};
    use crate::vcpu::{Act, After, HaltReason, HostState, HostWork};

    #[test]
    fn a_vcpu_preempted_in_its_hlt_exit_keeps_its_ipis_for_the_halt_decision() {
        let vm = "[[vm]]\nname = \"g\"\nvcpus = 2\nlock = \"pv-ticket\"\nworkload = { preset = \"kernbench\" }\n";
        let mut s = host("", false, vm);
        let vc = &mut s.vcpus[0];
        (vc.pcpu, vc.host, vc.act) = (0, HostState::Runnable, Act::Halted(HaltReason::LockWait));
        vc.host_work = Some(HostWork { remaining: 100, after: After::VcpuBlock });
        vc.pending_ipis.push(1);
        s.pcpus[0].queued.push(0);
        s.schedule(0);
        assert_eq!(s.pcpus[0].curr, Some(0));
        assert_eq!(s.vcpus[0].pending_ipis, vec![1], "left for vcpu_block, which re-enters to handle it");
    }

    #[test]
    fn a_kick_forces_an_exit_only_on_a_vcpu_in_guest_mode() {
        let vm = "[[vm]]\nname = \"g\"\nvcpus = 2\npin = \"1:1\"\nlock = \"pv-ticket\"\nworkload = { preset = \"kernbench\" }\n";
        let mut s = host("", false, vm);
        running(&mut s, 1, 1, Act::Compute { remaining: 1000 });
        s.kick(1);
        let c = &s.costs;
        assert_eq!(s.vcpus[1].host_work.map(|hw| hw.remaining), Some(c.vm_exit + c.vm_entry));
        assert!(s.vcpus[1].pv_unhalted);
        // One on a run queue sees the request at its next entry, at no extra cost.
        s.vcpus[0].host = HostState::Runnable;
        s.kick(0);
        assert!(s.vcpus[0].host_work.is_none() && s.vcpus[0].pv_unhalted);
    }

    #[test]
    fn an_ipi_a_guest_timer_or_a_peer_wake_ends_a_halt_poll() {
        let vm = "[[vm]]\nname = \"g\"\nvcpus = 2\npin = \"1:1\"\nlock = \"tas\"\nworkload = { preset = \"kernbench\" }\n";
        for source in ["ipi", "timer", "peer"] {
            let mut s = host("halt_poll = { max_ns = 200000 }", false, vm);
            halting_alone(&mut s, 1, 1);
            s.vcpu_block(1);
            assert!(s.polling(1), "{source}: polls");
            match source {
                "ipi" => s.deliver_ipi(0, 1),
                "timer" => {
                    s.now = 1_000_000;
                    let gen = s.vcpus[1].timer_gen;
                    s.guest_timer(1, gen);
                }
                _ => {
                    running(&mut s, 0, 0, Act::Ready);
                    s.wake_peer(0, 1);
                    assert!(s.polling(1), "the wake arrives in the sender's exit handler");
                    let hw = s.vcpus[0].host_work.take().expect("the sender's ICR-write exit");
                    s.now += hw.remaining;
                    let crate::vcpu::After::WakeSent { sleeper } = hw.after else { panic!("{:?}", hw.after) };
                    s.wake_sent(0, sleeper);
                }
            }
            assert!(!s.polling(1), "{source}: the poll ended");
            assert_eq!(s.vcpus[1].host, HostState::Running, "{source}: without blocking");
        }
    }

    #[test]
    fn only_vcpu_threads_halt_poll_and_host_threads_just_sleep() {
        let vm = "[[vm]]\nname = \"g\"\nvcpus = 1\nlock = \"tas\"\nworkload = { preset = \"kernbench\" }\n";
        let mut s = host("halt_poll = { max_ns = 200000 }", true, vm);
        let thread = s.vcpus.iter().position(|v| s.vms[v.vm as usize].host_threads).expect("a host thread") as u32;
        halting_alone(&mut s, 0, 0);
        halting_alone(&mut s, thread, 1);
        s.vcpu_block(0);
        s.vcpu_block(thread);
        assert!(s.polling(0), "the vCPU alone on its pCPU polls");
        assert!(!s.polling(thread) && s.vcpus[thread as usize].host == HostState::Blocked);
    }

    /// vCPU 0 of a 2-vCPU PV-ticket VM alone on pCPU 0 at the end of its HLT exit, halted for
    /// `reason`; halt polling off.
    fn at_the_end_of_a_hlt_exit(reason: HaltReason) -> crate::simulation::Sim {
        polling_up_to(0, reason)
    }

    /// [`at_the_end_of_a_hlt_exit`] on a host that halt-polls up to `max_poll_ns`.
    fn polling_up_to(max_poll_ns: u64, reason: HaltReason) -> crate::simulation::Sim {
        let vm = "[[vm]]\nname = \"g\"\nvcpus = 2\nlock = \"pv-ticket\"\nworkload = { preset = \"kernbench\" }\n";
        let mut s = host(&format!("halt_poll = {{ max_ns = {max_poll_ns} }}"), false, vm);
        halting_alone(&mut s, 0, 0);
        s.vcpus[0].act = Act::Halted(reason);
        s
    }

    #[test]
    fn a_kick_that_lands_during_the_entry_after_a_halt_ends_the_next_halt_at_once() {
        // x86 `vcpu_block` clears `pv_unhalted` when the thread leaves `kvm_vcpu_halt`, before
        // the entry: a kick that lands during the entry is still pending at the next HLT.
        let mut s = at_the_end_of_a_hlt_exit(HaltReason::LockWait);
        s.vcpu_block(0);
        assert_eq!(s.vcpus[0].host, HostState::Blocked);
        s.now += 1_000;
        s.kick(0);
        s.schedule(0);
        assert_eq!(s.pcpus[0].curr, Some(0), "woken by the kick, back on its pCPU");
        assert!(!s.vcpus[0].pv_unhalted, "consumed by this halt, before the entry");
        let hw = s.vcpus[0].host_work.expect("switching in and entering");
        assert_eq!(hw.after, After::Nothing);
        let (left, entry_ends) = (s.vcpus[0].halt_left_at, s.now + hw.remaining);
        assert_eq!(entry_ends - left, s.costs.vm_entry, "it leaves the halt where its entry begins");
        s.now += 100;
        s.kick(0);
        assert!(!s.vcpus[0].pv_unhalted, "a kick during the switch-in and wake-up goes with this halt");
        s.now = left + 1;
        s.kick(0);
        assert!(s.vcpus[0].pv_unhalted, "a kick during the entry stays");
        s.now = entry_ends;
        s.vcpus[0].host_work = None;
        s.halt_returns(0, HaltReason::LockWait);
        assert!(s.vcpus[0].pv_unhalted, "the halt that returned does not consume it");
        s.start_halt(0, HaltReason::LockWait);
        s.vcpus[0].host_work = None;
        s.vcpu_block(0);
        assert_eq!(s.vcpus[0].host, HostState::Running, "the next halt returns at once");
        assert!(s.vcpus[0].host_work.is_some_and(|hw| hw.remaining == s.costs.vm_entry));
        assert!(!s.vcpus[0].pv_unhalted, "and consumes it");
    }

    #[test]
    fn a_poll_that_ends_after_the_tick_that_ends_its_halt_does_not_block() {
        // As at `vcpu_block`: a poller descheduled while that tick came finds it pending.
        let mut s = polling_up_to(200_000, HaltReason::LockWait);
        s.vcpu_block(0);
        assert!(s.polling(0));
        let (period, phase) = (s.vms[0].guest_tick_ns, s.vms[0].guest_tick_phase_ns);
        s.now = super::next_guest_tick(s.vcpus[0].hlt_at, period, phase) + 1;
        s.stop_segment(0);
        s.vcpus[0].host_work = None;
        s.block_after_poll(0);
        assert_eq!(s.vcpus[0].host, HostState::Running, "the tick is pending: it re-enters");
    }

    #[test]
    fn a_vcpu_halted_for_a_lock_is_woken_by_its_next_guest_tick_without_a_kick() {
        // The PV lock slow path halts with `safe_halt` (interrupts on, kernel-mechanisms.md
        // §1.4): the guest's own timer tick ends the halt even if no kick comes.
        let mut s = at_the_end_of_a_hlt_exit(HaltReason::LockWait);
        s.vcpu_block(0);
        assert_eq!(s.vcpus[0].host, HostState::Blocked);
        let tick = s.vms[0].guest_tick_ns;
        let timer = std::iter::from_fn(|| s.q.pop()).find_map(|(at, e)| match e {
            crate::engine::Event::GuestTimer { vcpu: 0, gen } => Some((at, gen)),
            _ => None,
        });
        let (at, gen) = timer.expect("a guest timer is armed");
        assert!(at > s.now && at <= s.now + tick, "the next tick: {at}");
        s.now = at;
        s.guest_timer(0, gen);
        assert_ne!(s.vcpus[0].host, HostState::Blocked, "woken by its tick");
    }

    #[test]
    fn a_tick_that_comes_during_the_hlt_exit_ends_an_interrupts_on_halt_at_once() {
        // One just before the HLT is the guest's own: it was taken before the halt began.
        let mut s = at_the_end_of_a_hlt_exit(HaltReason::LockWait);
        let tick = super::next_guest_tick(1_000_000, s.vms[0].guest_tick_ns, s.vms[0].guest_tick_phase_ns);
        (s.vcpus[0].hlt_at, s.now) = (tick, tick + 250);
        s.vcpu_block(0);
        assert_eq!(s.vcpus[0].host, HostState::Blocked, "the tick at the HLT itself is not pending");
        for irqs_off in [false, true] {
            let mut s = at_the_end_of_a_hlt_exit(HaltReason::LockWait);
            let tick = super::next_guest_tick(1_000_000, s.vms[0].guest_tick_ns, s.vms[0].guest_tick_phase_ns);
            (s.vcpus[0].hlt_at, s.now, s.vcpus[0].irqs_off) = (tick - 100, tick + 150, irqs_off);
            s.vcpu_block(0);
            if irqs_off {
                assert_eq!(s.vcpus[0].host, HostState::Blocked, "`halt()` with IF = 0: no tick ends it");
            } else {
                assert_eq!(s.vcpus[0].host, HostState::Running, "the tick is pending: no block");
                assert!(s.vcpus[0].host_work.is_some_and(|hw| hw.remaining == s.costs.vm_entry), "it re-enters");
            }
        }
    }

    #[test]
    fn a_vcpu_halted_with_interrupts_off_for_a_lock_is_woken_by_a_kick_alone() {
        // `kvm_lock_spinning` halts with `halt()`, not `safe_halt()`, for a lock taken with
        // interrupts off: no tick ends it, an IPI stays pending, only the kick wakes it.
        let mut s = at_the_end_of_a_hlt_exit(HaltReason::LockWait);
        s.vcpus[0].irqs_off = true;
        s.vcpu_block(0);
        assert_eq!(s.vcpus[0].host, HostState::Blocked);
        let timers = std::iter::from_fn(|| s.q.pop()).filter(|(_, e)| matches!(e, crate::engine::Event::GuestTimer { vcpu: 0, .. })).count();
        assert_eq!(timers, 0, "no tick is armed");
        s.deliver_ipi(1, 0);
        assert_eq!(s.vcpus[0].host, HostState::Blocked, "an IPI does not end the halt");
        s.kick(0);
        assert_ne!(s.vcpus[0].host, HostState::Blocked, "a kick does");
        assert_eq!(s.vcpus[0].pending_ipis, vec![1], "the IPI waits for interrupts to be restored");
    }

    /// When the guest timer of `v`'s halt for a lock, begun on pCPU `p` at `now` on a fresh host
    /// with `vms`, fires.
    fn lock_wait_timer(vms: &str, v: u32, p: u32, now: u64) -> u64 {
        let s = &mut host("halt_poll = { max_ns = 0 }", false, vms);
        s.now = now;
        halting_alone(s, v, p);
        (s.vcpus[v as usize].act, s.vcpus[v as usize].hlt_at) = (Act::Halted(HaltReason::LockWait), now);
        s.vcpu_block(v);
        let timer = std::iter::from_fn(|| s.q.pop()).find_map(|(at, e)| match e {
            crate::engine::Event::GuestTimer { vcpu, .. } if vcpu == v => Some(at),
            _ => None,
        });
        timer.expect("a guest timer is armed")
    }

    #[test]
    fn a_vms_halted_waiters_wake_at_one_tick_on_a_grid_each_vm_draws_from_the_seed() {
        // Linux without `skew_tick` keeps all of a guest's CPUs on one tick grid, and the grid's
        // place on the host's clock is the guest's boot time.
        let guest = |name| format!("[[vm]]\nname = \"{name}\"\nvcpus = 2\nlock = \"pv-ticket\"\nworkload = {{ preset = \"kernbench\" }}\n");
        let vms = guest("a") + &guest("b");
        let s = host("", false, &vms);
        let tick = s.vms[0].guest_tick_ns;
        let phases = [s.vms[0].guest_tick_phase_ns, s.vms[1].guest_tick_phase_ns];
        let first = lock_wait_timer(&vms, 0, 0, 10_000_000);
        assert_eq!(first % tick, phases[0], "on VM a's grid");
        assert!(first > 10_000_000 && first <= 10_000_000 + tick);
        assert_eq!(lock_wait_timer(&vms, 1, 1, first - 1), first, "a sibling halted later wakes at the same tick");
        assert_eq!(lock_wait_timer(&vms, 1, 1, first), first + tick, "strictly after now");
        assert_eq!(lock_wait_timer(&vms, 2, 0, 10_000_000) % tick, phases[1], "VM b has its own grid");
        assert_ne!(phases[0], phases[1], "seed 1 draws two phases");
        for (vm, phase) in phases.into_iter().enumerate() {
            assert_eq!(phase, super::guest_tick_phase(s.seed, vm as u32, tick), "drawn from the run's seed");
        }
        let drawn: Vec<u64> = (1..=64).map(|seed| super::guest_tick_phase(seed, 0, tick)).collect();
        assert!(drawn.iter().all(|&p| p < tick));
        assert!(drawn.iter().any(|&p| p < tick / 4) && drawn.iter().any(|&p| p > tick * 3 / 4), "spread over the period: {drawn:?}");
    }

    /// The poll `vcpu->halt_poll_ns` becomes after a halt of `halted` ns that began with `poll`.
    fn poll_after(poll: u64, halted: u64) -> u64 {
        let vm = "[[vm]]\nname = \"g\"\nvcpus = 1\nlock = \"tas\"\nworkload = { preset = \"kernbench\" }\n";
        let mut s = host("halt_poll = { max_ns = 200000 }", false, vm);
        s.now = 1_000_000 + halted;
        (s.vcpus[0].halt_poll_ns, s.vcpus[0].halt_started) = (poll, Some(1_000_000));
        s.adapt_halt_poll(0, s.now);
        s.vcpus[0].halt_poll_ns
    }

    #[test]
    fn halt_polling_grows_after_short_halts_and_resets_after_long_ones_as_in_linux_6_8() {
        assert_eq!(poll_after(0, 3_000), 10_000, "the first grow starts at grow_start");
        assert_eq!(poll_after(10_000, 30_000), 20_000, "a short halt that outlasted the poll doubles it");
        assert_eq!(poll_after(20_000, 5_000), 20_000, "a halt the poll covered keeps it");
        assert_eq!(poll_after(160_000, 190_000), 320_000, "capped by max_ns only at the next halt");
        assert_eq!(poll_after(20_000, 300_000), 0, "halt_poll_ns_shrink = 0: a halt past max_ns resets it");
        assert_eq!(poll_after(0, 300_000), 0, "no poll and a long halt: stays off");
    }

    #[test]
    fn a_halt_is_measured_to_the_threads_return_not_to_its_entry() {
        // `kvm_vcpu_halt` takes `halt_ns` when the poll or the block ends; the entry follows.
        let vm = "[[vm]]\nname = \"g\"\nvcpus = 2\npin = \"1:1\"\nlock = \"tas\"\nworkload = { preset = \"kernbench\" }\n";
        let mut s = host("halt_poll = { max_ns = 200000 }", false, vm);
        let reason = HaltReason::Idle { wake_at: 1_000_000 };
        halting_alone(&mut s, 1, 1);
        s.vcpu_block(1);
        let poll = s.vcpus[1].halt_poll_ns;
        assert!(s.polling(1) && poll > 0);
        s.now += poll - 1;
        s.deliver_ipi(0, 1);
        assert!(!s.polling(1), "the IPI ended the poll");
        let hw = s.vcpus[1].host_work.expect("the entry, with the IPI's injection");
        assert!(hw.remaining >= s.costs.vm_entry && s.costs.vm_entry > 1);
        s.now += hw.remaining;
        s.stop_segment(1);
        s.vcpus[1].host_work = None;
        s.halt_returns(1, reason);
        assert_eq!(s.vcpus[1].halt_poll_ns, poll, "a halt the poll covered keeps it, though the entry ran past the poll");
    }

    #[test]
    fn a_halt_that_re_enters_at_once_leaves_the_poll_time_alone() {
        let mut s = polling_up_to(200_000, HaltReason::LockWait);
        (s.vcpus[0].pv_unhalted, s.vcpus[0].halt_poll_ns) = (true, 0);
        s.vcpu_block(0);
        assert_eq!(s.vcpus[0].halt_started, None, "kicked before it halted: no kvm_vcpu_halt");
        s.now += s.costs.vm_entry;
        s.halt_returns(0, HaltReason::LockWait);
        assert_eq!(s.vcpus[0].halt_poll_ns, 0, "not grown: no halt was measured");
    }

    #[test]
    fn a_kick_consumed_by_one_halt_does_not_keep_the_next_from_blocking() {
        // KVM's `vcpu_block` clears `vcpu->arch.pv.pv_unhalted` as the vCPU leaves HLT
        // (`KVM_MP_STATE_HALTED` → `RUNNABLE`), so `kvm_vcpu_check_block` sees no stale kick.
        let reason = HaltReason::Idle { wake_at: 1_000_000 };
        let mut s = at_the_end_of_a_hlt_exit(reason);
        s.vcpus[0].pv_unhalted = true;
        s.vcpu_block(0);
        assert_eq!(s.vcpus[0].host, HostState::Running, "kicked: re-enters at once");
        s.now += s.costs.vm_entry;
        s.vcpus[0].host_work = None;
        // Woken by a kick only, not by its sleep's end: it halts again.
        s.halt_returns(0, reason);
        assert!(!s.vcpus[0].pv_unhalted, "leaving the halt consumed the kick");
        assert!(s.in_hlt_exit(0), "halted again");
        s.now += s.costs.vm_exit;
        s.stop_segment(0);
        s.vcpus[0].host_work = None;
        s.vcpu_block(0);
        assert_eq!(s.vcpus[0].host, HostState::Blocked, "no kick pending: this halt blocks");
    }
}
