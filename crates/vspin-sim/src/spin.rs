//! A spinning vCPU: the PAUSE loop of guest lock code as the CPU and KVM see it.
//!
//! A spinner waits on one word ([`Act::Spin`]) until a condition on its value holds or its PAUSE
//! budget runs out. Its one pending event, the spin check, is due at the earlier of the budget's
//! end and the end of its PLE window. A write to the word makes every running spinner re-read
//! it at once (the line's transfers serialize, `memory.rs`): a re-read that satisfies the
//! condition resumes the guest, one that does not spins on, and a re-read that stalls longer than
//! `ple_gap` starts a new PAUSE loop for PLE; a shorter stall counts toward the loop's window,
//! which the CPU measures in TSC time since the loop's first PAUSE. A spinner that reaches its
//! window exits (VMX `handle_pause`: `grow_ple_window`, then `kvm_vcpu_on_spin`;
//! `kernel-mechanisms.md` §4–5): the window grows and KVM looks for a vCPU to yield to.
use crate::engine::{Event, Time};
use crate::guest::Response;
use crate::memory::{Access, SimWord};
use crate::metrics::PleEpoch;
use crate::scenario::{DirectedYieldKind, PlePolicy};
use crate::simulation::Sim;
use crate::vcpu::{Act, After, HostState, HostWork};

impl Sim {
    /// When a spinning vCPU exhausts its PAUSE budget or reaches its PLE window, whichever is
    /// first, if nothing writes its word before.
    pub(crate) fn spin_deadline(&self, v: u32) -> Time {
        let vc = &self.vcpus[v as usize];
        let Act::Spin { pauses_left, .. } = vc.act else { unreachable!("only spinners have a spin deadline") };
        let start = self.now + vc.access_latency;
        let budget_end = match pauses_left.checked_mul(self.costs.pause_ps) {
            Some(ps) => start.saturating_add(ps.saturating_sub(vc.pause_carry_ps).div_ceil(1000)),
            // Past 2^64 ps (213 days of PAUSEs), exact in 128 bits as the line above is in 64:
            // accounting the spin must never move the end earlier (`reread` relies on it).
            None => {
                let ns = (pauses_left as u128 * self.costs.pause_ps as u128 - vc.pause_carry_ps as u128).div_ceil(1000);
                start.saturating_add(u64::try_from(ns).unwrap_or(Time::MAX))
            }
        };
        if self.ple.policy == PlePolicy::Off {
            return budget_end;
        }
        let window_left = vc.ple_window_ns.saturating_sub(vc.ple_spun_ns);
        // A short stall counts toward Intel's window (not toward AMD's count of PAUSEs), but the
        // exit comes at a PAUSE, after it.
        let ple_exit = if vc.stall_in_loop && self.costs.ple_unit.counts_stalls() {
            self.now.saturating_add(window_left).max(start)
        } else {
            start.saturating_add(window_left)
        };
        budget_end.min(ple_exit)
    }

    /// Wake every vCPU spinning on `w`: running spinners re-read it at once (their transfers
    /// serialize on the line); the others re-read when they run again.
    pub(crate) fn notify_watchers(&mut self, w: SimWord) {
        if self.watchers[w.0 as usize].is_empty() {
            return;
        }
        // Spinners that keep spinning re-register while we walk the list: give them a cleared
        // buffer that already has capacity, and keep this one as the next spare.
        let spare = std::mem::take(&mut self.spare_watchers);
        let mut list = std::mem::replace(&mut self.watchers[w.0 as usize], spare);
        for &x in &list {
            let vc = &self.vcpus[x as usize];
            if vc.host == HostState::Running && vc.host_work.is_none() && vc.active {
                self.account_spinner(x);
                self.reread(x, w);
            } else if let Act::Spin { stale, .. } = &mut self.vcpus[x as usize].act {
                *stale = true;
            }
        }
        list.clear();
        self.spare_watchers = list;
    }

    /// A spinner re-reads its word. If its condition now holds, the guest resumes (after the
    /// read's latency); otherwise it spins on, and its pending spin check stays unless the
    /// deadline moved earlier (a check that fires early re-arms).
    pub(crate) fn reread(&mut self, v: u32, w: SimWord) {
        let now = self.now;
        let done = self.mem.access(w, self.vcpus[v as usize].pcpu, Access::Read, now);
        let value = self.mem.value(w);
        let latency = done - now;
        self.access_done(v, w, latency);
        let vc = &mut self.vcpus[v as usize];
        // Fields in place, not the whole `Act`: `account` has just stored into it, and a wider
        // load of a narrower store in flight stalls the load until the store retires.
        let Act::Spin { word, until, stale, .. } = &mut vc.act else { unreachable!("only spinners re-read") };
        debug_assert_eq!(*word, w);
        if until.holds(value) {
            vc.response = Response::new(value, true);
            vc.act = Act::Ready;
            if vc.active {
                vc.active = false;
                vc.gen = vc.gen.wrapping_add(1);
            }
            self.poll_guest(v);
            return;
        }
        *stale = false;
        self.watchers[w.0 as usize].push(v);
        if !vc.active {
            self.continue_if_running(v);
            return;
        }
        if latency >= self.costs.ple_gap_ns {
            // The stall restarts the PLE loop and delays the rest of the PAUSE budget, so the
            // deadline can only have moved later: the pending check stands (it fires early and
            // re-arms). Why, in `docs/performance.md`, "A re-read past ple_gap keeps its check".
            debug_assert!(self.spin_deadline(v) >= self.vcpus[v as usize].spin_check_at, "a stalled re-read moved the spin deadline earlier");
            return;
        }
        let at = self.spin_deadline(v);
        let vc = &mut self.vcpus[v as usize];
        if at < vc.spin_check_at {
            vc.gen = vc.gen.wrapping_add(1);
            vc.spin_check_at = at;
            self.q.push(at, Event::SpinCheck { vcpu: v, gen: vc.gen });
        }
    }

    /// Bookkeeping after a memory access of `latency` ns on `w` that the vCPU issued.
    pub(crate) fn access_done(&mut self, v: u32, w: SimWord, latency: u64) {
        let vc = &mut self.vcpus[v as usize];
        vc.last_read = (w, self.mem.version(w));
        vc.access_latency = vc.access_latency.max(latency);
        if latency >= self.costs.ple_gap_ns {
            // A stall longer than `ple_gap` between two PAUSEs starts a new loop for PLE.
            vc.ple_spun_ns = 0;
        }
        vc.stall_in_loop = vc.access_latency < self.costs.ple_gap_ns;
    }

    pub(crate) fn spin_check(&mut self, v: u32) {
        self.stop_segment(v);
        let window_ns = self.vcpus[v as usize].ple_window_ns;
        let vc = &mut self.vcpus[v as usize];
        let Act::Spin { word, pauses_left, .. } = vc.act else { unreachable!("spin check on a non-spinning vCPU") };
        if self.ple.policy != PlePolicy::Off && vc.ple_spun_ns >= window_ns {
            self.ple_exit(v);
        } else if pauses_left == 0 {
            self.watchers[word.0 as usize].retain(|&x| x != v);
            let value = self.mem.value(word);
            let vc = &mut self.vcpus[v as usize];
            vc.response = Response::new(value, false);
            vc.act = Act::Ready;
        }
        self.continue_if_running(v);
    }

    /// A PAUSE-loop exit: look for a vCPU to yield to, pay the exit, count it in the VM's
    /// epoch, and set the window the vCPU re-enters with (grown, or APLE's).
    fn ple_exit(&mut self, v: u32) {
        self.trace_instant(v, || "PLE exit".into());
        if self.credit1.is_some() {
            // Xen's `vmx_vmexit_handler`, `EXIT_REASON_PAUSE_INSTRUCTION`: `vcpu_yield()`, the
            // same as the guest's `SCHEDOP_yield`; Xen's window is fixed.
            let c = &self.costs;
            let vc = &mut self.vcpus[v as usize];
            vc.counters.ple_exits += 1;
            vc.counters.yields += 1;
            vc.host_work = Some(HostWork { remaining: c.vm_exit + c.hypercall, after: After::Yield });
            return;
        }
        let vc = &mut self.vcpus[v as usize];
        vc.counters.ple_exits += 1;
        vc.in_spin_loop = true;
        let (window, window_ns) = (vc.ple_window, vc.ple_window_ns);
        let yielded = match self.directed_yield {
            DirectedYieldKind::Off => false,
            kernel if kernel.is_hvs() => self.hvs_on_spin(v, kernel),
            kernel => self.kvm_vcpu_on_spin(v, kernel),
        };
        let c = &self.costs;
        // Without a yield, no `schedule()` comes between the handler and the VM entry.
        let handler = c.vm_exit + c.hypercall;
        let handling = handler + if yielded { c.context_switch } else { c.vm_entry };
        self.vcpus[v as usize].host_work =
            Some(HostWork { remaining: if yielded { handler } else { handler + c.vm_entry }, after: After::PleDone { yielded } });
        let vm = self.vcpus[v as usize].vm as usize;
        let window_cycles = self.costs.ple_unit.cycles(window, self.costs.clock_ghz);
        if self.vms[vm].ple_epochs.record_exit(window_cycles, window_ns, handling) {
            let cpu_ns = self.vm_cpu_ns(vm);
            let inefficiency = self.vms[vm].ple_epochs.end_epoch(cpu_ns);
            if self.vms[vm].ple_epochs.records() {
                let window_cycles = self.vm_mean_ple_window(vm);
                self.vms[vm].ple_epochs.record(PleEpoch { end_ms: self.now as f64 / 1e6, window_cycles, inefficiency });
            }
            if let Some(aple) = &mut self.vms[vm].aple {
                aple.epoch_ended(inefficiency);
            }
            let (epoch, next) = (self.vms[vm].ple_epochs.epochs, self.vms[vm].aple.as_ref().map(|a| a.window()));
            self.trace_instant(v, || match next {
                Some(w) => format!("PLE epoch {epoch}: inefficiency {inefficiency:.3}; APLE window {w}"),
                None => format!("PLE epoch {epoch}: inefficiency {inefficiency:.3}"),
            });
        }
        let next = match &self.vms[vm].aple {
            Some(aple) => aple.window(),
            None => crate::ple::grow(&self.ple, window),
        };
        self.vcpus[v as usize].set_ple_window(next, self.costs.ple_unit);
    }

    /// The mean of the VM's vCPUs' current PLE windows, cycles (of spinning, for AMD's counts).
    fn vm_mean_ple_window(&self, vm: usize) -> f64 {
        let (unit, clock_ghz) = (self.costs.ple_unit, self.costs.clock_ghz);
        let vcpus = &self.vcpus[self.vms[vm].vcpu_range()];
        vcpus.iter().map(|vc| unit.cycles(vc.ple_window, clock_ghz) as f64).sum::<f64>() / vcpus.len() as f64
    }

    /// The host CPU time the VM's vCPUs have had so far (`sum_exec_runtime`, the running ones
    /// up to now).
    fn vm_cpu_ns(&self, vm: usize) -> u64 {
        self.vcpus[self.vms[vm].vcpu_range()]
            .iter()
            .map(|vc| vc.se.sum_exec + if vc.host == HostState::Running { self.now - vc.se.exec_start } else { 0 })
            .sum()
    }
}
