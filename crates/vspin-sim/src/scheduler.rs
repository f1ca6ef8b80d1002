//! The host scheduler: Linux CFS as in v3.18/3.19 (`kernel/sched/fair.c`,
//! `kernel-mechanisms.md` §5.4 and §7.1), one run queue per pCPU. With
//! `hypervisor.scheduler = "eevdf"` the picking, slicing, placement and yield rules are those of
//! `eevdf.rs` instead; run queues, context switches and placement on pCPUs are shared.
//!
//! - `vruntime` grows with execution time (all vCPU threads have the nice-0 weight).
//! - Tick preemption (`check_preempt_tick`): the current thread is preempted once it has run
//!   its ideal slice `max(latency, nr × min_granularity) / nr`, or, after `min_granularity`,
//!   once it is more than a slice of vruntime ahead of the leftmost thread.
//! - Wake-up (`place_entity` with `GENTLE_FAIR_SLEEPERS`): a woken thread's vruntime is raised
//!   to at least `min_vruntime − latency/2`, and it preempts the current thread if that one is
//!   more than `wakeup_granularity` of vruntime ahead (`check_preempt_wakeup`).
//! - Buddies (`pick_next_entity`): `skip` (set by `yield`) is passed over, and `last` and then
//!   `next` are preferred, each only while within `wakeup_granularity` of the leftmost thread.
//!   `next` is set by `yield_to` and by a wake-up that preempts; `last` is the thread that
//!   wake-up preempted, set only while the run queue holds `sched_nr_latency` (8) or more
//!   (`LAST_BUDDY`: with that many, the preempted thread's slice would otherwise come back late).
//!   A balancer does not move a buddy to a busy pCPU (`task_hot`, `CACHE_HOT_BUDDY`).
//!
//! Not modelled: CFS group scheduling. Each pCPU has one flat run queue of vCPU threads, as on a
//! host that starts its VMs without a cpu-controller cgroup each; libvirt (and autogroup, per
//! login session) puts each VM in a group of its own, whose one entity per pCPU competes with
//! the other VMs' at a share of `cpu.shares` (`calc_cfs_shares`), so that CPU time is shared per
//! VM, a woken vCPU's sleeper credit is worth less run time and it preempts less readily, and a
//! vCPU that sleeps makes its VM's entity the `next` buddy (`dequeue_task_fair`). The seeds do
//! not say how their VMs were started. Nor `wake_affine` (a woken vCPU is never moved to its
//! waker's pCPU; see placement below). Threads of equal vruntime are picked lowest vCPU first;
//! the kernel's tree picks the one queued first, and a queued thread before the current one.
//!
//! Placement of unpinned vCPUs: a woken vCPU goes to its previous pCPU if idle, else to the next
//! idle pCPU after it (wrapping round), else stays (a simplification of `select_idle_sibling`). A pCPU that goes idle pulls
//! a waiting unpinned vCPU (`idle_balance`) if its idle periods are long enough (`rq->avg_idle`,
//! a 1/8 moving average of idle lengths capped at 1 ms): at least `sysctl_sched_migration_cost`
//! (0.5 ms) in Linux 3.19 (CFS), at least the cost of a balance pass (`max_newidle_lb_cost`,
//! ~10 µs) in 6.8 (EEVDF). It pulls only a vCPU that is not cache-hot (`task_hot`: it ran
//! within the last 0.5 ms; in 6.8 a vCPU on an SMT sibling is never hot), from the longest run
//! queue, first in `detach_tasks`' order (`detach_order`). A pull on every idle moment, without the gates,
//! moved every waiting vCPU and erased lock-waiter preemption from the unpinned VEE'13 setup
//! (hackbench LWP share at x2 58% → 7%); with 3.19's gate it almost never pulls there (avg_idle
//! settles at a few µs).
//!
//! Periodic balancing (every pCPU over its scheduling domains, and the idle pCPUs' share of it
//! that Linux does through the NOHZ idle balancer) is `load_balance.rs`.
use crate::engine::Event;
use crate::scenario::SchedulerKind;
use crate::simulation::Sim;
use crate::vcpu::{Affinity, After, HostState, HostWork, HvsList};

/// `sysctl_sched_migration_cost`: the cache-hot horizon, and Linux 3.19's `idle_balance` gate
/// (ns).
pub(crate) const MIGRATION_COST_NS: u64 = 500_000;

/// `sd->max_newidle_lb_cost`, Linux 6.8's `newidle_balance` gate (since 5.16, commit
/// c5b0a7eefc70): what a balance pass is measured to cost. An estimate (ns): a pass over a
/// domain of a few CPUs takes a few µs to tens of µs.
pub(crate) const NEWIDLE_LB_COST_NS: u64 = 10_000;

impl Sim {
    /// Threads on pCPU `p` that can run, the current one included (6.18's `h_nr_runnable`): the
    /// run queue less the delayed threads ([`Sim::nr_queued`], the kernel's `rq->nr_running`).
    pub(crate) fn nr_runnable(&self, p: u32) -> usize {
        let rq = &self.pcpus[p as usize];
        rq.queued.len() + rq.curr.is_some() as usize
    }

    fn vr(&self, v: u32) -> i64 {
        self.vcpus[v as usize].se.vruntime as i64
    }

    /// `update_curr`: charge the running vCPU's execution to its vruntime, and to its VM's quota
    /// (the tick, `schedule()`, and the running vCPU's own yield or block).
    pub(crate) fn update_curr(&mut self, p: u32) {
        self.update_curr_charging(p, true);
    }

    /// `update_curr` as the enqueue or dequeue of `v` on `p` runs it: the kernel updates `v`'s
    /// VM's run queue there and the root, so the running vCPU's VM is charged its quota only if
    /// it is `v`'s; another VM's charge waits for its own next update (`bandwidth.rs`). The flat
    /// run queue's vruntimes are updated either way.
    pub(crate) fn update_curr_for(&mut self, p: u32, v: u32) {
        let vm = self.vcpus[v as usize].vm;
        let own = self.pcpus[p as usize].curr.is_some_and(|c| self.vcpus[c as usize].vm == vm);
        self.update_curr_charging(p, own);
    }

    fn update_curr_charging(&mut self, p: u32, charge_quota: bool) {
        let now = self.now;
        if let Some(c) = self.pcpus[p as usize].curr {
            let se = &mut self.vcpus[c as usize].se;
            let delta = now - se.exec_start;
            se.vruntime += delta;
            se.sum_exec += delta;
            se.exec_start = now;
            if self.scheduler.is_eevdf() {
                self.update_deadline(p, c);
            }
            if !self.bandwidth.is_empty() {
                if charge_quota {
                    self.charge_runtime(p, c, delta);
                } else {
                    self.defer_charge(p, c, delta);
                }
            }
        }
        self.update_min_vruntime(p);
    }

    fn update_min_vruntime(&mut self, p: u32) {
        let rq = &self.pcpus[p as usize];
        let cur = rq.curr.map(|c| self.vcpus[c as usize].se.vruntime);
        let left = rq.queued.iter().chain(&rq.delayed).map(|&q| self.vcpus[q as usize].se.vruntime).min();
        let m = match (cur, left) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => return,
        };
        let rq = &mut self.pcpus[p as usize];
        rq.min_vruntime = rq.min_vruntime.max(m);
    }

    /// `wakeup_preempt_entity(curr, se) < 1`: `curr` is no more than the wake-up granularity of
    /// vruntime ahead of `se`.
    fn within_granularity(&self, curr: u32, se: u32) -> bool {
        self.vr(curr) - self.vr(se) <= self.costs.wakeup_granularity as i64
    }

    pub(crate) fn clear_buddies(&mut self, p: u32, v: u32) {
        let rq = &mut self.pcpus[p as usize];
        for buddy in [&mut rq.next, &mut rq.skip, &mut rq.last] {
            if *buddy == Some(v) {
                *buddy = None;
            }
        }
    }

    /// `pick_next_entity` over the queued vCPUs and the current one.
    fn pick_next(&mut self, p: u32) -> Option<u32> {
        match self.scheduler {
            SchedulerKind::Eevdf => return self.pick_eevdf(p, true),
            SchedulerKind::Eevdf618 => {
                let se = self.pick_eevdf_618(p)?;
                self.clear_buddies(p, se);
                return Some(se);
            }
            SchedulerKind::Cfs => {}
            SchedulerKind::Credit1 => unreachable!("credit1 picks in credit1_schedule"),
            SchedulerKind::Gang => unreachable!("a gang's pCPU runs its row's vCPU (gang_schedule)"),
        }
        let rq = &self.pcpus[p as usize];
        let cands = || rq.queued.iter().copied().chain(rq.curr);
        let key = |v: &u32| (self.vcpus[*v as usize].se.vruntime, *v);
        let left = cands().min_by_key(key)?;
        let mut se = left;
        if rq.skip == Some(left) {
            if let Some(second) = cands().filter(|&v| v != left).min_by_key(key) {
                if self.within_granularity(second, left) {
                    se = second;
                }
            }
        }
        // `last`, then `next`: a `next` buddy within the granularity wins over both.
        for buddy in [rq.last, rq.next].into_iter().flatten() {
            if cands().any(|c| c == buddy) && self.within_granularity(buddy, left) {
                se = buddy;
            }
        }
        self.clear_buddies(p, se);
        Some(se)
    }

    /// `schedule()` on pCPU `p`: pick the next vCPU and switch to it if it is not the current.
    pub(crate) fn schedule(&mut self, p: u32) {
        if self.credit1.is_some() {
            return self.credit1_schedule(p);
        }
        if self.gang.is_some() {
            return self.gang_schedule(p);
        }
        self.update_curr(p);
        if let Some(c) = self.pcpus[p as usize].curr.filter(|_| !self.bandwidth.is_empty()) {
            self.throttle_if_spent(p, c);
        }
        let prev = self.pcpus[p as usize].curr;
        let next = self.pick_next(p);
        self.pcpus[p as usize].need_resched = false;
        if !self.bandwidth.is_empty() {
            self.set_throttle_work(p, next, prev);
        }
        if next != prev {
            if let Some(n) = next {
                // `set_next_entity`: under EEVDF the new thread is protected until it is
                // ineligible or gets a new slice.
                self.vcpus[n as usize].se.protected = true;
            }
            self.switch_to(p, prev, next);
        }
        if self.pcpus[p as usize].curr.is_none() {
            self.idle_balance(p);
        }
        if self.pcpus[p as usize].curr.is_none() {
            let now = self.now;
            self.pcpus[p as usize].idle.enter(now, &self.idle_states);
        }
        self.maybe_arm_tick(p);
    }

    /// The switch a `schedule()` on `p` decided, from `prev` to another `next`: `prev`, if
    /// running, goes back to the run queue, and `next` leaves it and runs, or `p` has no current
    /// vCPU.
    pub(crate) fn switch_to(&mut self, p: u32, prev: Option<u32>, next: Option<u32>) {
        if let Some(pv) = prev {
            self.deschedule(pv);
        }
        match next {
            Some(n) => {
                let rq = &mut self.pcpus[p as usize];
                rq.queued.retain(|&q| q != n);
                rq.curr = Some(n);
                self.switch_in(n, p);
            }
            None => self.pcpus[p as usize].curr = None,
        }
    }

    /// The current vCPU of its pCPU stops running but stays runnable (KVM `preempted`), and
    /// goes back to its run queue.
    fn deschedule(&mut self, v: u32) {
        self.stop_running(v);
        let p = self.vcpus[v as usize].pcpu;
        self.pcpus[p as usize].queued.push(v);
    }

    /// The current vCPU of its pCPU stops running but stays runnable; the caller queues it.
    pub(crate) fn stop_running(&mut self, v: u32) {
        self.stop_segment(v);
        if !self.ipi_acks[v as usize].is_empty() {
            self.postpone_acks(v);
        }
        if self.in_send_handler(v) {
            self.q.push(self.now, Event::SendHandled { vcpu: v });
        }
        let now = self.now;
        let vc = &mut self.vcpus[v as usize];
        vc.host = HostState::Runnable;
        vc.state_since = now;
        vc.preempted = true;
        // A lock-waiter is descheduled by its own PLE yield, when its exit handler has ended
        // (`PleDone`); preempted inside the handler, it is the scheduler's doing.
        let boosted = std::mem::take(&mut vc.hvs_boosted);
        vc.hvs_list = match (vc.in_spin_loop && vc.host_work.is_none(), boosted) {
            (true, _) => HvsList::LockWaiter,
            (false, true) => HvsList::Yielded,
            (false, false) => HvsList::ResourceWaiter,
        };
        self.on_preempted(v);
    }

    /// Context switch to `v` on `p` (`kvm_sched_in`): shrink the PLE window, pay the switch, the
    /// wake-up if it was halted, and VM entry; then deliver IPIs that waited for it.
    pub(crate) fn switch_in(&mut self, v: u32, p: u32) {
        let now = self.now;
        let c = &self.costs;
        let (switch, wakeup, entry) = (c.context_switch, c.wakeup, c.vm_entry);
        let since = self.vcpus[v as usize].state_since;
        self.trace_slice(v, "preempted", since, now);
        let idle_exit = self.pcpus[p as usize].idle.leave(now);
        let vc = &mut self.vcpus[v as usize];
        debug_assert_eq!(vc.host, HostState::Runnable);
        vc.time.waiting_ns += now - vc.state_since;
        vc.host = HostState::Running;
        vc.state_since = now;
        vc.pcpu = p;
        vc.preempted = false;
        vc.se.exec_start = now;
        if self.scheduler.is_eevdf() {
            // `pick_next_task_fair` moves the picked task to the head of `cfs_tasks` (since 4.x).
            vc.se.listed_at = now;
        }
        vc.se.prev_sum_exec = vc.se.sum_exec;
        let window = match &self.vms[vc.vm as usize].aple {
            Some(aple) => aple.window(),
            None => crate::ple::shrink(&self.ple, vc.ple_window),
        };
        vc.set_ple_window(window, self.costs.ple_unit);
        vc.ple_spun_ns = 0;
        // A vCPU that yielded from `kvm_vcpu_on_spin` finishes that function only now.
        if std::mem::take(&mut vc.in_spin_loop) {
            vc.dy_eligible = false;
        }
        vc.counters.context_switches += 1;
        // A vCPU preempted in guest mode re-enters after the switch; one preempted in host work
        // (an exit being handled) finishes that work first, and it ends in the entry.
        let reentry = if vc.host_work.is_none() { entry } else { 0 };
        vc.woken_by_ipi = false;
        let woken = std::mem::take(&mut vc.woken);
        let back_from_block = switch + idle_exit + if woken { wakeup } else { 0 };
        let cost = back_from_block + reentry;
        match vc.host_work.as_mut() {
            Some(hw) => hw.remaining += cost,
            None => vc.host_work = Some(HostWork { remaining: cost, after: After::Nothing }),
        }
        if woken {
            // Back from its halt's block, the thread leaves `kvm_vcpu_halt` before its entry.
            self.leave_halt(v, now + back_from_block);
        }
        if !self.ipi_acks[v as usize].is_empty() {
            self.resume_acks(v, cost);
        }
        // A vCPU preempted in its HLT exit keeps its IPIs for `vcpu_block`, which then re-enters
        // to handle them (the interrupt ends a `safe_halt`) instead of blocking.
        if !self.in_hlt_exit(v) && !self.held_at_next_entry(v) {
            self.handle_pending_ipis(v, false);
        }
        self.on_switched_in(v);
        self.run_vcpu(v);
    }

    /// The periodic tick runs while the pCPU is busy (it stops only when idle, `NO_HZ_IDLE`).
    /// Under CFS a tick with one thread does nothing, so it is armed only for two or more; under
    /// EEVDF it renews the running thread's deadline every slice (`update_deadline`), which the
    /// next wake-up's pick compares against, so it runs for one thread too; under credit1 it
    /// charges the running vCPU (every 10 ms, not the host's `hz`).
    pub(crate) fn maybe_arm_tick(&mut self, p: u32) {
        // Gang turns are host-wide (`gang.rs`): no pCPU's tick decides anything.
        if self.gang.is_some() {
            return;
        }
        let needed = if self.scheduler == SchedulerKind::Cfs && !self.ticks_alone() { 2 } else { 1 };
        if !self.pcpus[p as usize].tick_armed && self.nr_runnable(p) >= needed {
            self.pcpus[p as usize].tick_armed = true;
            let t = self.credit1.as_ref().map_or(self.costs.tick_ns, |c| c.tick_ns);
            self.q.push((self.now / t + 1) * t, Event::Tick { pcpu: p });
        }
    }

    /// Scheduler tick: `check_preempt_tick` (CFS) or `update_deadline` (EEVDF).
    pub(crate) fn tick(&mut self, p: u32) {
        self.pcpus[p as usize].tick_armed = false;
        if self.credit1.is_some() {
            self.credit1_tick(p);
        } else if self.scheduler.is_eevdf() {
            self.update_curr(p);
            if self.pcpus[p as usize].need_resched {
                self.schedule(p);
            }
        } else if self.nr_runnable(p) > 1 || self.ticks_alone() {
            self.update_curr(p);
            // A VM's quota ran out here (`bandwidth.rs`).
            if self.pcpus[p as usize].need_resched {
                self.schedule(p);
            } else if let Some(c) = self.pcpus[p as usize].curr.filter(|_| self.nr_runnable(p) > 1) {
                let nr = self.nr_runnable(p) as u64;
                let period = if nr > self.costs.nr_latency { nr * self.costs.min_granularity } else { self.costs.sched_latency };
                let ideal = period / nr;
                let se = &self.vcpus[c as usize].se;
                let ran = se.sum_exec - se.prev_sum_exec;
                let mut resched = ran > ideal;
                if resched {
                    self.clear_buddies(p, c);
                } else if ran >= self.costs.min_granularity {
                    let left = self.pcpus[p as usize].queued.iter().map(|&q| self.vr(q)).min();
                    resched = left.is_some_and(|l| self.vr(c) - l > ideal as i64);
                }
                if resched {
                    self.schedule(p);
                }
            }
        }
        self.maybe_arm_tick(p);
    }

    /// `yield_task_fair`: mark the yielding vCPU as the skip buddy (CFS) or push its deadline
    /// back (EEVDF).
    pub(crate) fn yield_task(&mut self, p: u32, v: u32) {
        if self.credit1.is_some() {
            return self.credit1_yield(v);
        }
        // A gang's pCPU has no one else to run while the row's turn lasts.
        if self.gang.is_some() {
            return;
        }
        if self.scheduler.is_eevdf() {
            return self.eevdf_yield(p, v);
        }
        if self.nr_runnable(p) <= 1 {
            return;
        }
        self.clear_buddies(p, v);
        self.pcpus[p as usize].skip = Some(v);
    }

    /// `yield_to(target)` from `v` (§5.4): >0 yielded, 0 not possible, <0 `-ESRCH`.
    pub(crate) fn yield_to(&mut self, v: u32, target: u32) -> i32 {
        let p = self.vcpus[v as usize].pcpu;
        let tp = self.vcpus[target as usize].pcpu;
        if self.nr_queued(p) == 1 && self.nr_queued(tp) == 1 {
            return -1;
        }
        // A vCPU held by its VM's quota is not on a run queue (`yield_to_task_fair`).
        if self.vcpus[target as usize].host != HostState::Runnable || self.is_held(target) {
            return 0;
        }
        // EEVDF v6.8 sets the buddy too but never reads it (`NEXT_BUDDY` is off); v6.18 picks
        // it while it is eligible (`PICK_BUDDY`).
        if self.scheduler != SchedulerKind::Eevdf {
            self.pcpus[tp as usize].next = Some(target);
        }
        self.yield_task(p, v);
        if tp != p {
            self.schedule(tp);
        }
        1
    }

    /// Enqueue a woken vCPU (`place_entity`, `check_preempt_wakeup`).
    pub(crate) fn enqueue_woken(&mut self, v: u32) {
        if self.credit1.is_some() {
            return self.credit1_wake(v);
        }
        if self.gang.is_some() {
            return self.gang_wake(v);
        }
        // EEVDF v6.18: a delayed vCPU is still on its run queue (`ttwu_runnable`): it is woken
        // where it is, and only the preemption check runs (after `update_curr`, as there).
        if self.requeue_delayed(v) {
            let p = self.vcpus[v as usize].pcpu;
            self.update_curr_for(p, v);
            return self.wakeup_preempt_eevdf(v, p);
        }
        self.vcpus[v as usize].se.listed_at = self.now;
        let p = self.select_pcpu(v);
        self.account_idle_period(p);
        // `enqueue_entity` runs `update_curr` first: place against an up-to-date min_vruntime.
        self.update_curr_for(p, v);
        if self.scheduler.is_eevdf() {
            return self.enqueue_woken_eevdf(v, p);
        }
        self.migrate(v, p);
        if self.held_on_enqueue(v, p) {
            return;
        }
        let half_latency = self.costs.sched_latency / 2;
        let min_vr = self.pcpus[p as usize].min_vruntime;
        let se = &mut self.vcpus[v as usize].se;
        se.vruntime = se.vruntime.max(min_vr.saturating_sub(half_latency));
        self.pcpus[p as usize].queued.push(v);
        self.check_preempt_curr(p, v);
        self.maybe_arm_tick(p);
    }

    /// `check_preempt_curr` for `v`, just queued on `p` (woken there under CFS, or moved there by
    /// a balancer): an idle pCPU picks, a halt-polling vCPU stops (`single_task_running` turns
    /// false), else the newcomer may preempt.
    pub(crate) fn check_preempt_curr(&mut self, p: u32, v: u32) {
        let Some(c) = self.pcpus[p as usize].curr else {
            return self.schedule(p);
        };
        // The current vCPU's VM just spent its quota here (`bandwidth.rs`): reschedule now.
        if self.pcpus[p as usize].need_resched && !self.bandwidth.is_empty() {
            return self.resched_curr(p);
        }
        if !self.poller_gives_way(p) {
            self.preempt_if_newcomer_wins(p, c, v);
        }
    }

    /// `check_preempt_wakeup` for `v`, just queued on `p` (woken, or moved there by a
    /// balancer), against `p`'s current vCPU `c`: under CFS it preempts if `c` is more than the
    /// wake-up granularity ahead, and becomes the `next` buddy; under EEVDF if `pick_eevdf`
    /// (with `RUN_TO_PARITY`) would now run it.
    pub(crate) fn preempt_if_newcomer_wins(&mut self, p: u32, c: u32, v: u32) {
        let wins = match self.scheduler {
            SchedulerKind::Cfs => self.vr(c) - self.vr(v) > self.costs.wakeup_granularity as i64,
            SchedulerKind::Eevdf | SchedulerKind::Eevdf618 => self.pick_eevdf(p, true) == Some(v),
            SchedulerKind::Credit1 => unreachable!("credit1 wakes through credit1_wake"),
            SchedulerKind::Gang => unreachable!("a gang wakes through gang_wake"),
        };
        if !wins {
            return;
        }
        if self.scheduler == SchedulerKind::Cfs {
            // `scale`: `cfs_rq->nr_running`, which counts the current vCPU and the newcomer.
            let scale = self.nr_runnable(p) as u64 >= self.costs.nr_latency;
            let rq = &mut self.pcpus[p as usize];
            rq.next = Some(v);
            if scale {
                rq.last = Some(c);
            }
        }
        self.resched_curr(p);
    }

    /// `resched_curr`: `p` picks again now (an idle `p` at once), unless its current vCPU is
    /// running a kick's handler (`kick_sent`), which is only marked and switches at the handler's
    /// end.
    pub(crate) fn resched_curr(&mut self, p: u32) {
        if let Some((kicker_pcpu, marked)) = self.kick_handler.as_mut() {
            if *kicker_pcpu == p && self.pcpus[p as usize].curr.is_some() {
                *marked = true;
                return;
            }
        }
        self.schedule(p);
    }

    /// EEVDF wake-up: placed by its lag; it preempts if `pick_eevdf` would now run it (or the
    /// current vCPU's slice just ran out).
    fn enqueue_woken_eevdf(&mut self, v: u32, p: u32) {
        if self.held_on_enqueue(v, p) {
            return;
        }
        // No buddy to clear on the old pCPU: EEVDF never sets one here.
        self.place(p, v);
        self.pcpus[p as usize].queued.push(v);
        self.wakeup_preempt_eevdf(v, p);
    }

    /// EEVDF `check_preempt_wakeup_fair` for `v`, just made runnable on `p`.
    fn wakeup_preempt_eevdf(&mut self, v: u32, p: u32) {
        if self.poller_gives_way(p) {
            return;
        }
        match self.pcpus[p as usize].curr {
            Some(c) if !self.pcpus[p as usize].need_resched => self.preempt_if_newcomer_wins(p, c, v),
            _ => self.resched_curr(p),
        }
        self.maybe_arm_tick(p);
    }

    /// A vCPU halt-polling on `p` stops and blocks now that another thread is queued there;
    /// the scheduler then picks among the queued. Returns whether one did.
    pub(crate) fn poller_gives_way(&mut self, p: u32) -> bool {
        match self.pcpus[p as usize].curr {
            Some(c) if self.polling(c) => {
                self.poll_gives_way(c);
                self.maybe_arm_tick(p);
                true
            }
            _ => false,
        }
    }

    /// The running vCPU `v` of `p` blocks (halts): charge its run, and under EEVDF keep its lag
    /// (or, in v6.18, keep it queued as delayed).
    pub(crate) fn dequeue_sleeper(&mut self, p: u32, v: u32) {
        if self.credit1.is_some() {
            return self.credit_stop_running(v);
        }
        if self.gang.is_some() {
            return self.update_curr(p);
        }
        self.update_curr(p);
        self.clear_buddies(p, v);
        if self.scheduler.is_eevdf() && !self.delay_dequeue(p, v) {
            self.save_lag(p, v);
        }
    }

    /// `idle_balance` on a pCPU that just went idle (see the module docs for the gates).
    fn idle_balance(&mut self, p: u32) {
        let now = self.now;
        self.pcpus[p as usize].idle_stamp = Some(now);
        let gate = match self.scheduler {
            SchedulerKind::Cfs => MIGRATION_COST_NS,
            SchedulerKind::Eevdf | SchedulerKind::Eevdf618 => NEWIDLE_LB_COST_NS,
            SchedulerKind::Credit1 => unreachable!("credit1 steals in credit1_schedule"),
            SchedulerKind::Gang => unreachable!("a gang's pCPU idles while its row's vCPU halts"),
        };
        if self.pcpus[p as usize].avg_idle < gate {
            return;
        }
        let movable = |s: &Sim, q: u32, src: u32| {
            let vc = &s.vcpus[q as usize];
            vc.affinity == Affinity::Any && !s.task_hot(q, src, p) && !s.throttled_pair(vc.vm, src, p)
        };
        let n = self.pcpus.len() as u32;
        let busiest = (0..n)
            .filter(|&o| o != p && self.pcpus[o as usize].queued.iter().any(|&q| movable(self, q, o)))
            .max_by_key(|&o| (self.nr_runnable(o), std::cmp::Reverse(o)));
        let Some(src) = busiest else { return };
        let queued = &self.pcpus[src as usize].queued;
        let Some(v) = queued.iter().copied().filter(|&q| movable(self, q, src)).min_by_key(|&q| self.detach_order(q)) else {
            return;
        };
        if !self.pull(v, src, p) {
            return;
        }
        self.pcpus[p as usize].idle_stamp = None;
        self.schedule(p);
    }

    /// The order in which `detach_tasks` considers the queued vCPUs, least first: from the head
    /// of 3.19's `cfs_tasks` (the most recently woken or attached first), from the tail of the
    /// later kernels' (the least recently picked, woken or attached first).
    pub(crate) fn detach_order(&self, v: u32) -> (i128, u32) {
        let listed = self.vcpus[v as usize].se.listed_at as i128;
        (if self.scheduler.is_eevdf() { listed } else { -listed }, v)
    }

    /// `task_hot`, the cache-hot test of `can_migrate_task`: `v` ran on `src` within the
    /// migration cost, or (`CACHE_HOT_BUDDY`) it is a buddy of `src`'s run queue and `dst` is
    /// busy; unless (since 5.x, so on the EEVDF hosts) `src` and `dst` are SMT siblings, which
    /// share every cache. The buddies are `next` and `last` in 3.19, `next` alone since 6.6;
    /// the model keeps no `next` on the 6.8 host, whose pick never reads it (`yield_to`), so
    /// there only the time counts.
    pub(crate) fn task_hot(&self, v: u32, src: u32, dst: u32) -> bool {
        if self.scheduler.is_eevdf() && self.topology.siblings(dst).contains(&src) {
            return false;
        }
        let rq = &self.pcpus[src as usize];
        if (rq.next == Some(v) || rq.last == Some(v)) && self.nr_runnable(dst) > 0 {
            return true;
        }
        self.now - self.vcpus[v as usize].se.exec_start < MIGRATION_COST_NS
    }

    /// Move the queued (not running) vCPU `v` from `src`'s run queue to `p`'s (a balancer's
    /// migration; a woken vCPU placed on another pCPU is not counted as one). Returns whether
    /// it was queued there: its VM's quota may hold it instead (`bandwidth.rs`).
    pub(crate) fn pull(&mut self, v: u32, src: u32, p: u32) -> bool {
        self.vcpus[v as usize].counters.migrations += 1;
        // Dequeue from `src` as `dequeue_entity` does: its vruntime or lag is taken while it
        // still counts there.
        self.clear_buddies(src, v);
        if self.scheduler.is_eevdf() {
            // 6.8's `enqueue_entity` runs `update_curr` before `place_entity`; 3.19's adds
            // `min_vruntime` first (below, in `migrate`).
            self.update_curr_for(p, v);
            self.update_curr_for(src, v);
            self.save_lag(src, v);
            self.pcpus[src as usize].queued.retain(|&q| q != v);
            let se = &self.vcpus[v as usize].se;
            let left = se.deadline.saturating_sub(se.vruntime);
            self.place(p, v);
            // v6.18 `PLACE_REL_DEADLINE`: a migrated thread keeps what was left of its slice.
            if self.scheduler == SchedulerKind::Eevdf618 {
                let se = &mut self.vcpus[v as usize].se;
                se.deadline = se.vruntime + left;
            }
        } else {
            self.migrate(v, p);
            self.pcpus[src as usize].queued.retain(|&q| q != v);
        }
        self.vcpus[v as usize].se.listed_at = self.now;
        self.return_spare_runtime(v, src);
        if self.held_on_enqueue(v, p) {
            return false;
        }
        self.pcpus[p as usize].queued.push(v);
        true
    }

    /// A thread is woken onto `p`: if `p` was idle, fold that idle period into `avg_idle`
    /// (`ttwu_do_wakeup`).
    fn account_idle_period(&mut self, p: u32) {
        let now = self.now;
        let rq = &mut self.pcpus[p as usize];
        if let Some(since) = rq.idle_stamp.take() {
            let sample = now - since;
            // `update_avg`: avg += (sample - avg) >> 3, in signed arithmetic.
            let avg = rq.avg_idle as i64 + ((sample as i64 - rq.avg_idle as i64) >> 3);
            rq.avg_idle = (avg.max(0) as u64).min(2 * MIGRATION_COST_NS);
        }
    }

    fn select_pcpu(&self, v: u32) -> u32 {
        let vc = &self.vcpus[v as usize];
        match vc.affinity {
            Affinity::Pinned(p) => p,
            Affinity::Any => {
                let n = self.pcpus.len() as u32;
                let idle = |p: u32| self.nr_runnable(p) == 0;
                (0..n).map(|i| (vc.pcpu + i) % n).find(|&p| idle(p)).unwrap_or(vc.pcpu)
            }
        }
    }

    /// Move a not-running vCPU's scheduling state to pCPU `p` (vruntime renormalized).
    fn migrate(&mut self, v: u32, p: u32) {
        let from = self.vcpus[v as usize].pcpu;
        if from == p {
            return;
        }
        self.clear_buddies(from, v);
        self.update_curr_for(from, v);
        let (src, dst) = (self.pcpus[from as usize].min_vruntime, self.pcpus[p as usize].min_vruntime);
        let vc = &mut self.vcpus[v as usize];
        vc.se.vruntime = (vc.se.vruntime + dst).saturating_sub(src);
        self.set_task_cpu(v, p);
    }

    /// `set_task_cpu`: `v` now belongs to `p`; moved from another pCPU, it is no longer
    /// cache-hot (`migrate_task_rq_fair` zeroes `exec_start`).
    pub(crate) fn set_task_cpu(&mut self, v: u32, p: u32) {
        let vc = &mut self.vcpus[v as usize];
        if vc.pcpu != p {
            vc.se.exec_start = 0;
            vc.pcpu = p;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::simulation::test_host::{host, running};
    use crate::simulation::Sim;
    use crate::vcpu::{Act, HostState};

    /// A VM of `vcpus` pinned to pCPU 0 under CFS: vCPU 0 running there at 100 ms of vruntime
    /// (also `min_vruntime`), the others not queued.
    fn cfs_pcpu_0_running_vcpu_0_of(vcpus: usize) -> Sim {
        let pins = vec!["0"; vcpus].join(", ");
        let vm = format!("[[vm]]\nname = \"g\"\nvcpus = {vcpus}\npin = [{pins}]\nlock = \"tas\"\nworkload = {{ preset = \"kernbench\" }}\n");
        let mut s = host("scheduler = \"cfs\"", false, &vm);
        s.now = 100_000_000;
        running(&mut s, 0, 0, Act::Ready);
        (s.vcpus[0].se.vruntime, s.vcpus[0].se.exec_start) = (100_000_000, s.now);
        s.pcpus[0].min_vruntime = 100_000_000;
        s
    }

    fn cfs_pcpu_0_running_vcpu_0() -> Sim {
        cfs_pcpu_0_running_vcpu_0_of(2)
    }

    #[test]
    fn cfs_places_a_woken_vcpu_no_further_back_than_half_a_latency_behind_min_vruntime() {
        // `place_entity` with GENTLE_FAIR_SLEEPERS: max(vruntime, min_vruntime - latency / 2).
        for (slept_at, placed_at) in [(0, None), (99_900_000, Some(99_900_000))] {
            let mut s = cfs_pcpu_0_running_vcpu_0();
            let floor = 100_000_000 - s.costs.sched_latency / 2;
            (s.vcpus[1].host, s.vcpus[1].se.vruntime) = (HostState::Runnable, slept_at);
            s.enqueue_woken(1);
            assert_eq!(s.vcpus[1].se.vruntime, placed_at.unwrap_or(floor), "slept at vruntime {slept_at}");
        }
    }

    #[test]
    fn cfs_wake_up_preempts_only_a_current_vcpu_more_than_the_granularity_ahead() {
        // `check_preempt_wakeup`: `wakeup_preempt_entity` is 1 only when vdiff > gran.
        for (ahead, preempts) in [(0, false), (1, true)] {
            let mut s = cfs_pcpu_0_running_vcpu_0();
            let gran = s.costs.wakeup_granularity;
            (s.vcpus[1].host, s.vcpus[1].se.vruntime) = (HostState::Runnable, 100_000_000 - gran - ahead);
            s.pcpus[0].queued.push(1);
            s.preempt_if_newcomer_wins(0, 0, 1);
            // Preempting, it becomes the `next` buddy, which `schedule()` picks (and clears).
            let (curr, next) = (s.pcpus[0].curr, s.pcpus[0].next);
            assert_eq!((curr, next), if preempts { (Some(1), None) } else { (Some(0), None) }, "{ahead} ns past it");
        }
    }

    #[test]
    fn cfs_gives_a_vcpu_preempted_among_eight_runnable_its_pcpu_back_first() {
        // `LAST_BUDDY`: `check_preempt_wakeup` marks the preempted thread `last` when
        // `nr_running >= sched_nr_latency`; `pick_next_entity` then prefers it to the leftmost
        // while it is within the wake-up granularity.
        for (others, last) in [(5, None), (6, Some(0))] {
            let mut s = cfs_pcpu_0_running_vcpu_0_of(9);
            let gran = s.costs.wakeup_granularity;
            for v in 2..2 + others {
                (s.vcpus[v].host, s.vcpus[v].se.vruntime) = (HostState::Runnable, 100_000_000 - gran / 2);
                s.pcpus[0].queued.push(v as u32);
            }
            s.vcpus[1].host = HostState::Runnable;
            s.enqueue_woken(1);
            assert_eq!((s.pcpus[0].curr, s.pcpus[0].last), (Some(1), last), "{} runnable", others + 2);
            // The wakee blocks at once: the preempted vCPU, half a granularity right of the
            // leftmost, runs next only as the `last` buddy.
            (s.pcpus[0].curr, s.vcpus[1].host) = (None, HostState::Blocked);
            let picked = s.pick_next(0);
            assert_eq!(picked, Some(if last.is_some() { 0 } else { 2 }), "{} runnable", others + 2);
            assert_eq!(s.pcpus[0].last, None, "picking the buddy clears it");
        }
    }

    #[test]
    fn a_balancer_leaves_a_buddy_where_it_is_unless_the_destination_is_idle() {
        // `task_hot` with `CACHE_HOT_BUDDY`: a buddy of its run queue is hot for a busy
        // destination only; the time test alone decides for an idle one.
        let mut s = cfs_pcpu_0_running_vcpu_0();
        (s.vcpus[1].host, s.vcpus[1].se.exec_start) = (HostState::Runnable, 0);
        s.pcpus[0].queued.push(1);
        assert!(!s.task_hot(1, 0, 1), "ran long ago: cold");
        s.pcpus[0].next = Some(1);
        assert!(!s.task_hot(1, 0, 1), "pCPU 1 is idle");
        s.pcpus[0].curr = None;
        running(&mut s, 0, 1, Act::Ready);
        assert!(s.task_hot(1, 0, 1), "the next buddy, for a busy pCPU 1");
        (s.pcpus[0].next, s.pcpus[0].last) = (None, Some(1));
        assert!(s.task_hot(1, 0, 1), "the last buddy, for a busy pCPU 1");
    }
}
