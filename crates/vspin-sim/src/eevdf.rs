//! The EEVDF host scheduler of Linux v6.8 (`kernel/sched/fair.c`, `kernel-mechanisms.md` §7.2),
//! the policy of `hypervisor.scheduler = "eevdf"`; `scheduler.rs` runs CFS and calls in here.
//!
//! Every vCPU thread has the nice-0 weight, so weighted averages are plain ones:
//! - `avg_vruntime` `V` is the mean vruntime of the run queue's threads, the running one
//!   included. A thread is **eligible** when its vruntime is at most `V` (lag ≥ 0), tested as
//!   `n × vruntime ≤ Σ vruntime` in integers, as `vruntime_eligible` does.
//! - **Deadline** `vruntime + base_slice`, granted when a thread is placed and renewed by
//!   `update_deadline` once its vruntime reaches it; renewal asks for a reschedule when another
//!   thread is queued. The model looks at that on every `update_curr`, so a slice ends at the
//!   first scheduler tick (or other scheduling event) after the deadline. The tick runs while a
//!   pCPU has any thread, one included, so a lone thread's deadline stays within a slice and a
//!   tick of its vruntime for the next wake-up to be compared against.
//! - **Pick** (`pick_eevdf`): the eligible thread with the earliest deadline. `RUN_TO_PARITY`
//!   (`vlag == deadline` in the kernel, `protected` here) keeps a thread that was switched in
//!   running until it is ineligible or gets a new slice, against wake-ups and against a
//!   reschedule of its pCPU alike: `schedule()` picks with the previous thread still current,
//!   as `pick_next_task_fair` does with `CONFIG_FAIR_GROUP_SCHED` (the usual configuration of a
//!   KVM host, whose vCPU threads live in cgroups), and marks only a newly switched-in thread.
//! - **Sleep and wake-up** (`update_entity_lag`, `place_entity` with `PLACE_LAG`): a thread
//!   leaving the queue keeps its lag, clamped to ±max(2 × slice, tick); it comes back at
//!   `V − lag × (n + 1) / n` with a fresh deadline. There is no sleeper credit. A woken thread
//!   preempts only if `pick_eevdf`, `RUN_TO_PARITY` included, would now pick it.
//! - **Yield** (`yield_task_fair`): the deadline moves one slice later. `yield_to` also sets the
//!   `next` buddy, but v6.8 honours it only under `NEXT_BUDDY`, off by default: KVM's directed
//!   yield only pushes the spinner's deadline back and reschedules the target's pCPU, which
//!   picks by deadline. A spinner that is the only eligible thread is picked again after each
//!   yield, so its deadline runs ahead a slice per PLE exit; nothing at the tick checks
//!   eligibility, so it then keeps the pCPU until its vruntime reaches that deadline, while the
//!   holder it spins for waits (`tests/host_scheduler.rs`). This is upstream's own runaway,
//!   fixed in v6.17 by 79104becf42b ("the deadline will be increased by the slice at each
//!   loop").
//!
//!
//! `hypervisor.scheduler = "eevdf-6.18"` follows v6.18 (`kernel-mechanisms.md` §7.2, L6.18),
//! which adds:
//! - **Delayed dequeue** (`DELAY_DEQUEUE`, since v6.12): a thread that blocks while ineligible
//!   stays on its run queue, counted in `V`, until it is woken or picked. Woken, it is requeued
//!   where it is with its vruntime and deadline (`ttwu_runnable`: no choice of CPU); picked, it
//!   is dequeued for good and the pick goes on. Either way a lag above zero is cut to zero
//!   (`DELAY_ZERO`), so the debt of a thread that blocked owing service is forgiven as `V`
//!   passes it, where v6.8 keeps it frozen across the sleep.
//! - The 0.70 ms base slice. `update_curr` asks for a reschedule whenever the running thread is
//!   unprotected (picked again after its slice ended) and another is queued, not only when the
//!   slice ends.
//! - `yield` forfeits the slice of an eligible thread (`vruntime = deadline`; 79104becf42b,
//!   v6.17); `yield_to`'s
//!   `next` buddy runs first while eligible (`PICK_BUDDY`); a migrated thread keeps what was
//!   left of its slice (`PLACE_REL_DEADLINE`).
//!
//! Not modelled, because every thread has the base slice: `PREEMPT_SHORT` (a woken thread with a
//! shorter slice) and the `vprot` slice protection, which with equal slices ends at the
//! deadline as v6.8's does. Nor `PLACE_DEADLINE_INITIAL` (threads are created before the run
//! starts). The balancers count runnable threads only, and never migrate a delayed one: v6.18's
//! `can_migrate_task` does when it balances load between overloaded groups (`migrate_load`),
//! and a delayed thread keeps its weight in the run queue's load; neither is modelled.
//!
//! Two choices of the model that a reader of short or cgroup-heavy hosts should know (found by a
//! review against v6.8 and v6.18 `fair.c`, 2026-11-27):
//! - **One flat run queue per pCPU.** Every vCPU thread is an entity of it, as on a host without
//!   a cpu-controller cgroup per VM or per vCPU. libvirt gives each VM, and each vCPU thread, a
//!   cgroup of its own; there `yield_task_fair` moves only the vCPU's entity in its own group's
//!   queue, where it is alone, so neither v6.8's deadline push nor v6.18's forfeit reaches the
//!   group entities that compete, and CPU shares are per VM, not per vCPU. On such a host the
//!   runaway above does not happen and a directed yield does little but set the buddy.
//! - **Start positions.** Each thread starts at a random vruntime within CFS's period
//!   (`sched_latency`: 24 ms on 8 or more CPUs), so that VMs do not start in lock step. Under
//!   EEVDF that is a lag of up to ±12 ms, twice the clamp of ±max(2 × slice, tick) a placed
//!   thread can have. The excess decays as the threads run (the one with most lag is picked
//!   first until `V` passes it). Measured with a scratch build that started EEVDF threads
//!   within two slices instead (`examples/modern-host-eevdf.toml`, seeds 1–5, the two VMs'
//!   work units per second summed): with `pv-ticket` 812 k against 842 k at 100 ms and 834 k
//!   against 838 k at 1 s; with `tas` 733 k against 735 k and 730 k against 737 k. So it weighs
//!   a few percent on runs of 100 ms, under 1% at a second; with the plain ticket lock the run
//!   is chaotic (5.6 k to 143 k per VM over seeds at 1 s) and the start decides which convoys
//!   form, as any other start would.
//!
//! v6.8's yield (`"eevdf"`) is also that of 6.6 to 6.12 kernels without 79104becf42b, which was
//! backported to some stable branches (a downstream change cites 6.12.63; not checked here).
use crate::scenario::SchedulerKind;
use crate::simulation::Sim;

impl Sim {
    /// The threads the run queue's average and pick see: queued, delayed (6.18) and current.
    fn eevdf_threads(&self, p: u32) -> impl Iterator<Item = u32> + '_ {
        let rq = &self.pcpus[p as usize];
        rq.queued.iter().chain(&rq.delayed).copied().chain(rq.curr)
    }

    /// `cfs_rq->nr_queued`: runnable and delayed threads, the current one included. It is also
    /// the pCPU's `rq->nr_running`, which `single_task_running`, `yield` and `yield_to` read: a
    /// delayed thread counts there until it is dequeued (v6.18 `dequeue_entities` returns before
    /// `sub_nr_running`). Without delayed threads (CFS, v6.8) it is [`Sim::nr_runnable`].
    pub(crate) fn nr_queued(&self, p: u32) -> usize {
        self.nr_runnable(p) + self.pcpus[p as usize].delayed.len()
    }

    /// `entity_eligible`: `v`, counted on `p`'s run queue, has lag ≥ 0.
    pub(crate) fn eligible(&self, p: u32, v: u32) -> bool {
        let (n, sum) = self.eevdf_load(p);
        n * self.vcpus[v as usize].se.vruntime as i128 <= sum
    }

    /// `(n, Σ vruntime)` over the run queue's threads.
    fn eevdf_load(&self, p: u32) -> (i128, i128) {
        self.eevdf_threads(p).fold((0, 0), |(n, sum), v| (n + 1, sum + self.vcpus[v as usize].se.vruntime as i128))
    }

    /// `avg_vruntime`: the mean vruntime (rounded down), or `min_vruntime` on an empty queue.
    fn avg_vruntime(&self, p: u32) -> i128 {
        match self.eevdf_load(p) {
            (0, _) => self.pcpus[p as usize].min_vruntime as i128,
            (n, sum) => sum.div_euclid(n),
        }
    }

    /// `pick_eevdf`: the eligible thread with the earliest deadline (ties to the lower index).
    /// With `parity`, a protected current thread that is still eligible keeps the CPU.
    pub(crate) fn pick_eevdf(&self, p: u32, parity: bool) -> Option<u32> {
        if self.nr_queued(p) == 1 {
            return self.eevdf_threads(p).next();
        }
        let (n, sum) = self.eevdf_load(p);
        let eligible = |v: &u32| n * self.vcpus[*v as usize].se.vruntime as i128 <= sum;
        if let Some(c) = self.pcpus[p as usize].curr {
            if parity && self.vcpus[c as usize].se.protected && eligible(&c) {
                return Some(c);
            }
        }
        let earliest = self.eevdf_threads(p).filter(eligible).min_by_key(|&v| (self.vcpus[v as usize].se.deadline, v));
        // Some thread is always eligible (the least vruntime is at most the mean).
        earliest.or_else(|| self.eevdf_threads(p).min_by_key(|&v| (self.vcpus[v as usize].se.vruntime, v)))
    }

    /// `update_deadline` for the running thread, after its vruntime was charged, and the
    /// reschedule `update_curr` asks for: in v6.8 when the slice is used up, in v6.18 also
    /// whenever the thread runs unprotected (`!protect_slice`: it was picked again after its
    /// slice ended, so `set_next_entity` did not protect it anew) and another thread is queued.
    pub(crate) fn update_deadline(&mut self, p: u32, c: u32) {
        let slice = self.costs.base_slice;
        let se = &mut self.vcpus[c as usize].se;
        let renewed = se.vruntime >= se.deadline;
        if renewed {
            se.deadline = se.vruntime + slice;
            se.protected = false;
        }
        let resched = match self.scheduler {
            SchedulerKind::Eevdf618 => (renewed || !se.protected) && self.nr_queued(p) > 1,
            _ => renewed && self.nr_runnable(p) > 1,
        };
        if resched {
            self.pcpus[p as usize].need_resched = true;
            if self.scheduler == SchedulerKind::Eevdf618 {
                self.clear_buddies(p, c);
            }
        }
    }

    /// `update_entity_lag`: remember how far behind (or ahead of) the queue's average thread
    /// `v` leaves its run queue `p` (call while `v` is still counted there).
    pub(crate) fn save_lag(&mut self, p: u32, v: u32) {
        let limit = (2 * self.costs.base_slice).max(self.costs.tick_ns) as i128;
        let lag = self.avg_vruntime(p) - self.vcpus[v as usize].se.vruntime as i128;
        self.vcpus[v as usize].se.vlag = lag.clamp(-limit, limit) as i64;
    }

    /// `place_entity` with `PLACE_LAG`: put `v` (not yet queued) on `p` with the lag it left its
    /// last run queue with, scaled for the thread it adds, and a fresh deadline.
    pub(crate) fn place(&mut self, p: u32, v: u32) {
        self.set_task_cpu(v, p);
        let (n, _) = self.eevdf_load(p);
        let avg = self.avg_vruntime(p);
        let vlag = self.vcpus[v as usize].se.vlag as i128;
        let lag = if n > 0 { (vlag * (n + 1)).div_euclid(n) } else { 0 };
        let se = &mut self.vcpus[v as usize].se;
        se.vruntime = (avg - lag).max(0) as u64;
        se.deadline = se.vruntime + self.costs.base_slice;
    }

    /// `yield_task_fair`: the yielding thread's deadline moves one slice later; in v6.18 an
    /// eligible one also forfeits the rest of its slice (its vruntime jumps to the old deadline).
    pub(crate) fn eevdf_yield(&mut self, p: u32, v: u32) {
        if self.nr_queued(p) <= 1 {
            return;
        }
        self.update_curr(p);
        if self.scheduler == SchedulerKind::Eevdf618 {
            self.clear_buddies(p, v);
            if !self.eligible(p, v) {
                return;
            }
            let se = &mut self.vcpus[v as usize].se;
            se.vruntime = se.deadline;
        }
        let se = &mut self.vcpus[v as usize].se;
        se.deadline += self.costs.base_slice;
        se.protected = false;
    }

    /// v6.18 `pick_next_entity`: the `next` buddy if it is eligible (`PICK_BUDDY`, set by
    /// `yield_to`), else `pick_eevdf`; a delayed thread so picked is dequeued for good
    /// (`DELAY_ZERO` clips a positive lag to 0) and the pick starts again.
    pub(crate) fn pick_eevdf_618(&mut self, p: u32) -> Option<u32> {
        if let Some(next) = self.pcpus[p as usize].next {
            if self.eligible(p, next) {
                return Some(next);
            }
        }
        loop {
            let v = self.pick_eevdf(p, true)?;
            if !self.pcpus[p as usize].delayed.contains(&v) {
                return Some(v);
            }
            self.save_lag(p, v);
            self.pcpus[p as usize].delayed.retain(|&d| d != v);
            let se = &mut self.vcpus[v as usize].se;
            se.vlag = se.vlag.min(0);
            // `dequeue_entity` returns the VM's spare quota budget once it has no thread here.
            self.return_spare_runtime(v, p);
        }
    }

    /// v6.18 `dequeue_entity` of a thread that blocks: one with negative lag (not eligible)
    /// stays on the run queue, delayed (`DELAY_DEQUEUE`). Returns whether it did.
    pub(crate) fn delay_dequeue(&mut self, p: u32, v: u32) -> bool {
        if self.scheduler != SchedulerKind::Eevdf618 || self.eligible(p, v) {
            return false;
        }
        self.pcpus[p as usize].delayed.push(v);
        true
    }

    /// v6.18 `requeue_delayed_entity`, the wake-up of a delayed thread (`ttwu_runnable`): it
    /// stays on its pCPU with its vruntime and deadline, unless it has meanwhile become owed
    /// service (lag > 0), which `DELAY_ZERO` forgets by placing it at the average. Returns
    /// whether `v` was delayed.
    pub(crate) fn requeue_delayed(&mut self, v: u32) -> bool {
        let p = self.vcpus[v as usize].pcpu;
        if !self.pcpus[p as usize].delayed.contains(&v) {
            return false;
        }
        let owed = self.avg_vruntime(p) > self.vcpus[v as usize].se.vruntime as i128;
        self.pcpus[p as usize].delayed.retain(|&d| d != v);
        if owed {
            self.vcpus[v as usize].se.vlag = 0;
            self.place(p, v);
        }
        self.pcpus[p as usize].queued.push(v);
        true
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::Scenario;
    use crate::simulation::Sim;
    use crate::vcpu::HostState;

    const MS: u64 = 1_000_000;

    /// An EEVDF (v6.8) host of `pcpus` pCPUs with `vcpus` vCPUs, run queues emptied for a test
    /// to fill.
    fn sim(pcpus: u32, vcpus: u32) -> Sim {
        sim_of("eevdf", pcpus, vcpus)
    }

    fn sim_of(scheduler: &str, pcpus: u32, vcpus: u32) -> Sim {
        let text = format!(
            "duration_ms = 1\n[host]\ncores_per_socket = {pcpus}\n[hypervisor]\nscheduler = \"{scheduler}\"\n\
             [[vm]]\nname = \"g\"\nvcpus = {vcpus}\nlock = \"ticket\"\nworkload = {{ preset = \"cpu-hog\" }}\n"
        );
        let mut s = Sim::new(&Scenario::from_toml(&text).unwrap());
        for rq in &mut s.pcpus {
            rq.queued.clear();
        }
        s
    }

    /// Put `v` on `p` with the given vruntime and deadline, running or queued.
    fn put(s: &mut Sim, p: u32, v: u32, vruntime: u64, deadline: u64, running: bool) {
        let vc = &mut s.vcpus[v as usize];
        vc.pcpu = p;
        vc.se.vruntime = vruntime;
        vc.se.deadline = deadline;
        vc.host = if running { HostState::Running } else { HostState::Runnable };
        if running {
            s.pcpus[p as usize].curr = Some(v);
        } else {
            s.pcpus[p as usize].queued.push(v);
        }
    }

    #[test]
    fn the_eligible_vcpu_with_the_earliest_deadline_is_picked() {
        let mut s = sim(1, 3);
        put(&mut s, 0, 0, 10 * MS, 20 * MS, true);
        put(&mut s, 0, 1, 11 * MS, 12 * MS, false);
        // Earliest deadline of all, but ahead of the mean vruntime (12 ms): not eligible.
        put(&mut s, 0, 2, 15 * MS, MS, false);
        assert_eq!(s.pick_eevdf(0, false), Some(1));
    }

    #[test]
    fn run_to_parity_keeps_a_protected_eligible_vcpu_running() {
        let mut s = sim(1, 2);
        put(&mut s, 0, 0, 10 * MS, 20 * MS, true);
        put(&mut s, 0, 1, 10 * MS, 12 * MS, false);
        s.vcpus[0].se.protected = true;
        assert_eq!(s.pick_eevdf(0, true), Some(0), "protected until ineligible or a new slice");
        assert_eq!(s.pick_eevdf(0, false), Some(1));
        s.vcpus[0].se.vruntime = 13 * MS;
        assert_eq!(s.pick_eevdf(0, true), Some(1), "an ineligible vCPU loses its protection");
    }

    #[test]
    fn a_woken_vcpu_comes_back_with_the_lag_it_left_with() {
        for vlag in [-(MS as i64), 0, MS as i64] {
            let mut s = sim(1, 3);
            put(&mut s, 0, 0, 10 * MS, 20 * MS, true);
            put(&mut s, 0, 1, 12 * MS, 20 * MS, false);
            s.vcpus[2].se.vlag = vlag;
            s.place(0, 2);
            s.pcpus[0].queued.push(2);
            let avg = s.avg_vruntime(0);
            assert_eq!(avg - s.vcpus[2].se.vruntime as i128, vlag as i128, "no sleeper credit, no debit");
            assert_eq!(s.vcpus[2].se.deadline, s.vcpus[2].se.vruntime + s.costs.base_slice);
        }
    }

    #[test]
    fn a_saved_lag_is_clamped_to_two_slices_or_a_tick() {
        let mut s = sim(1, 2);
        put(&mut s, 0, 0, 100 * MS, 200 * MS, true);
        put(&mut s, 0, 1, 0, 10 * MS, false);
        let limit = (2 * s.costs.base_slice).max(s.costs.tick_ns);
        s.save_lag(0, 1);
        assert_eq!(s.vcpus[1].se.vlag, limit as i64);
        s.save_lag(0, 0);
        assert_eq!(s.vcpus[0].se.vlag, -(limit as i64));
    }

    #[test]
    fn directed_yield_only_pushes_the_spinners_deadline_back() {
        let mut s = sim(2, 4);
        spinner_yields_across_pcpus(&mut s);
        assert_eq!(s.vcpus[0].se.deadline, 11 * MS + s.costs.base_slice);
        assert_eq!(s.pcpus[1].next, None, "v6.8 never reads the buddy (NEXT_BUDDY off)");
        assert_eq!(s.pcpus[1].curr, Some(1), "the target's pCPU keeps its protected vCPU");
    }

    #[test]
    fn a_lone_running_vcpu_gets_a_new_deadline_at_the_first_tick_past_its_slice() {
        // The tick runs with one thread too, so a vCPU that wakes later is compared with a
        // deadline at most a slice plus a tick away, not one left far behind.
        let mut s = sim(1, 1);
        let slice = s.costs.base_slice;
        put(&mut s, 0, 0, 10 * MS, 10 * MS + slice, true);
        s.vcpus[0].se.exec_start = 0;
        s.maybe_arm_tick(0);
        assert!(s.pcpus[0].tick_armed, "no tick with one thread");
        s.now = s.costs.tick_ns;
        s.tick(0);
        let se = &s.vcpus[0].se;
        assert_eq!(se.vruntime, 10 * MS + s.costs.tick_ns);
        assert_eq!(se.deadline, se.vruntime + s.costs.base_slice);
        assert!(s.pcpus[0].tick_armed, "the tick goes on");
    }

    /// v6.18: `v` blocks while running on `p` (`dequeue_sleeper`, then off the CPU).
    fn block(s: &mut Sim, p: u32, v: u32) {
        s.dequeue_sleeper(p, v);
        s.vcpus[v as usize].host = HostState::Blocked;
        s.pcpus[p as usize].curr = None;
    }

    /// vCPU 0 (running on pCPU 0) yields to vCPU 3, queued on pCPU 1 behind the protected vCPU 1.
    fn spinner_yields_across_pcpus(s: &mut Sim) {
        put(s, 0, 0, 10 * MS, 11 * MS, true);
        put(s, 0, 2, 10 * MS, 12 * MS, false);
        put(s, 1, 1, 10 * MS, 11 * MS, true);
        put(s, 1, 3, 10 * MS, 12 * MS, false);
        s.vcpus[1].se.protected = true;
        assert_eq!(s.yield_to(0, 3), 1, "yielded");
    }

    /// vCPU 0 runs on pCPU 0 at `(vruntime, deadline)` = `running`, vCPU 1 waits there at
    /// `waiting`, and vCPU 0 blocks.
    fn block_the_runner(s: &mut Sim, running: (u64, u64), waiting: (u64, u64)) {
        put(s, 0, 0, running.0, running.1, true);
        put(s, 0, 1, waiting.0, waiting.1, false);
        s.vcpus[0].se.exec_start = s.now;
        block(s, 0, 0);
    }

    #[test]
    fn in_6_18_a_vcpu_that_blocks_owing_service_stays_queued_as_delayed() {
        let mut s = sim_of("eevdf-6.18", 1, 2);
        block_the_runner(&mut s, (12 * MS, 20 * MS), (10 * MS, 20 * MS));
        assert_eq!(s.pcpus[0].delayed, vec![0], "ahead of the mean (11 ms): negative lag");
        assert_eq!(s.avg_vruntime(0), 11 * MS as i128, "a delayed vCPU still counts in the average");
        // An eligible one leaves at once, as in v6.8.
        let mut s = sim_of("eevdf-6.18", 1, 2);
        block_the_runner(&mut s, (10 * MS, 20 * MS), (12 * MS, 20 * MS));
        assert!(s.pcpus[0].delayed.is_empty());
        assert_eq!(s.vcpus[0].se.vlag, MS as i64);
        // And v6.8 never delays.
        let mut s = sim(1, 2);
        block_the_runner(&mut s, (12 * MS, 20 * MS), (10 * MS, 20 * MS));
        assert!(s.pcpus[0].delayed.is_empty());
    }

    #[test]
    fn in_6_18_a_delayed_vcpu_is_woken_in_place_with_its_vruntime_and_deadline() {
        let mut s = sim_of("eevdf-6.18", 2, 2);
        block_the_runner(&mut s, (12 * MS, 13 * MS), (10 * MS, 20 * MS));
        assert!(s.requeue_delayed(0));
        assert_eq!(s.pcpus[0].queued, vec![1, 0], "on its own pCPU, though pCPU 1 is idle");
        assert!(s.pcpus[0].delayed.is_empty());
        let se = &s.vcpus[0].se;
        assert_eq!((se.vruntime, se.deadline), (12 * MS, 13 * MS), "not placed again");
        assert!(!s.requeue_delayed(1), "only a delayed vCPU is requeued");
    }

    #[test]
    fn in_6_18_a_delayed_vcpu_owed_service_by_its_wake_up_starts_afresh_at_the_average() {
        let mut s = sim_of("eevdf-6.18", 1, 3);
        block_the_runner(&mut s, (12 * MS, 13 * MS), (10 * MS, 20 * MS));
        // vCPU 2 runs far ahead meanwhile; vCPU 0 is now behind the mean.
        put(&mut s, 0, 2, 20 * MS, 30 * MS, true);
        assert!(s.requeue_delayed(0));
        let avg_without_0 = (10 + 20) * MS / 2;
        let se = &s.vcpus[0].se;
        assert_eq!(se.vruntime, avg_without_0, "DELAY_ZERO: its lag is forgotten");
        assert_eq!(se.deadline, avg_without_0 + s.costs.base_slice);
    }

    #[test]
    fn in_6_18_a_picked_delayed_vcpu_is_dequeued_with_no_positive_lag_and_the_pick_goes_on() {
        let mut s = sim_of("eevdf-6.18", 1, 3);
        put(&mut s, 0, 1, 10 * MS, 30 * MS, false);
        put(&mut s, 0, 2, 14 * MS, 25 * MS, false);
        // vCPU 0, delayed, has become eligible with the earliest deadline.
        s.vcpus[0].se.vruntime = 9 * MS;
        s.vcpus[0].se.deadline = 15 * MS;
        s.vcpus[0].host = HostState::Blocked;
        s.pcpus[0].delayed.push(0);
        assert_eq!(s.pick_eevdf(0, true), Some(0));
        assert_eq!(s.pick_eevdf_618(0), Some(1));
        assert!(s.pcpus[0].delayed.is_empty());
        assert_eq!(s.vcpus[0].se.vlag, 0, "its lag of 2 ms is clipped to 0");
        // Alone, a delayed vCPU is picked and dequeued: the pCPU goes idle.
        let mut s = sim_of("eevdf-6.18", 1, 1);
        s.pcpus[0].delayed.push(0);
        assert_eq!(s.pick_eevdf_618(0), None);
    }

    #[test]
    fn in_6_18_yield_forfeits_the_slice_and_yield_to_picks_its_eligible_target() {
        let mut s = sim_of("eevdf-6.18", 2, 4);
        spinner_yields_across_pcpus(&mut s);
        let se = &s.vcpus[0].se;
        assert_eq!((se.vruntime, se.deadline), (11 * MS, 11 * MS + s.costs.base_slice));
        assert_eq!(s.pcpus[1].curr, Some(3), "PICK_BUDDY runs the target, eligible, at once");
        assert_eq!(s.pcpus[1].next, None, "the buddy is cleared once it runs");
    }

    #[test]
    fn in_6_18_a_delayed_vcpu_counts_in_nr_running_so_yield_to_is_not_refused() {
        let mut s = sim_of("eevdf-6.18", 2, 3);
        put(&mut s, 0, 0, 10 * MS, 11 * MS, true);
        put(&mut s, 1, 2, 10 * MS, 11 * MS, true);
        s.vcpus[1].pcpu = 0;
        s.vcpus[1].host = HostState::Blocked;
        s.pcpus[0].delayed.push(1);
        assert_eq!(s.yield_to(0, 2), 0, "the target runs: no yield, but not -ESRCH");
        s.pcpus[0].delayed.clear();
        assert_eq!(s.yield_to(0, 2), -1, "one thread on each run queue: -ESRCH");
    }

    #[test]
    fn the_6_18_base_slice_is_0_70_ms_times_the_cpu_factor() {
        assert_eq!(sim_of("eevdf-6.18", 2, 1).costs.base_slice, 1_400_000);
        assert_eq!(sim(2, 1).costs.base_slice, 1_500_000);
    }
}
