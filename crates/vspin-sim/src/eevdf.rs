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
//!   picks by deadline.
//!
//! Not modelled: v6.12's `DELAY_DEQUEUE` and `PREEMPT_SHORT`, v6.18's 0.70 ms base slice,
//! `PICK_BUDDY` and slice protection (`vprot`), and `PLACE_DEADLINE_INITIAL` (threads are created
//! before the run starts).
use crate::simulation::Sim;

impl Sim {
    fn eevdf_threads(&self, p: u32) -> impl Iterator<Item = u32> + '_ {
        let rq = &self.pcpus[p as usize];
        rq.queued.iter().copied().chain(rq.curr)
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
        if self.nr_running(p) == 1 {
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

    /// `update_deadline` for the running thread, after its vruntime was charged.
    pub(crate) fn update_deadline(&mut self, p: u32, c: u32) {
        let slice = self.costs.base_slice;
        let se = &mut self.vcpus[c as usize].se;
        if se.vruntime < se.deadline {
            return;
        }
        se.deadline = se.vruntime + slice;
        se.protected = false;
        if self.nr_running(p) > 1 {
            self.pcpus[p as usize].need_resched = true;
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
        self.vcpus[v as usize].pcpu = p;
        let (n, _) = self.eevdf_load(p);
        let avg = self.avg_vruntime(p);
        let vlag = self.vcpus[v as usize].se.vlag as i128;
        let lag = if n > 0 { (vlag * (n + 1)).div_euclid(n) } else { 0 };
        let se = &mut self.vcpus[v as usize].se;
        se.vruntime = (avg - lag).max(0) as u64;
        se.deadline = se.vruntime + self.costs.base_slice;
    }

    /// `yield_task_fair`: the yielding thread's deadline moves one slice later.
    pub(crate) fn eevdf_yield(&mut self, p: u32, v: u32) {
        if self.nr_running(p) <= 1 {
            return;
        }
        self.update_curr(p);
        let se = &mut self.vcpus[v as usize].se;
        se.deadline += self.costs.base_slice;
        se.protected = false;
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::Scenario;
    use crate::simulation::Sim;
    use crate::vcpu::HostState;

    const MS: u64 = 1_000_000;

    /// An EEVDF host of `pcpus` pCPUs with `vcpus` vCPUs, run queues emptied for a test to fill.
    fn sim(pcpus: u32, vcpus: u32) -> Sim {
        let text = format!(
            "duration_ms = 1\n[host]\ncores_per_socket = {pcpus}\n[hypervisor]\nscheduler = \"eevdf\"\n\
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
        put(&mut s, 0, 0, 10 * MS, 11 * MS, true);
        put(&mut s, 0, 2, 10 * MS, 12 * MS, false);
        put(&mut s, 1, 1, 10 * MS, 11 * MS, true);
        put(&mut s, 1, 3, 10 * MS, 12 * MS, false);
        s.vcpus[1].se.protected = true;
        assert_eq!(s.yield_to(0, 3), 1);
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
}
