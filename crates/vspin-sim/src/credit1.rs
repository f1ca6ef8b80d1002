//! Xen's credit1 scheduler (`xen/common/sched_credit.c`; `kernel-mechanisms.md` §6), the policy
//! of `hypervisor.scheduler = "credit1"`. Run queues, context switches and the vCPU machinery
//! are `scheduler.rs`'s; this module decides who runs.
//!
//! Every vCPU has a credit balance and a priority, and a run queue is kept in priority order,
//! first in first out within a priority:
//!
//! ```text
//!        wakes while UNDER                 first tick while running
//!   UNDER ─────────────────▶ BOOST ────────────────────────────────▶ UNDER
//!     ▲ │  accounting: credit < 0                                      │
//!     │ └──────────────────────────▶ OVER ◀────────────────────────────┘
//!     └──────────────────────────────┘   accounting: credit ≥ 0
//! ```
//!
//! - **Burning** (`burn_credits`): the running vCPU pays 10 credits per ms it ran, charged at
//!   every `schedule()` and every tick (10 ms, three per slice).
//! - **Accounting** (`csched_acct`, every slice, 30 ms): the host's credits (10 per ms per pCPU)
//!   are shared among the active domains by weight (all 256 here), at most a slice's worth per
//!   active vCPU, and the unused share goes to the domains after it; each active vCPU gets its
//!   domain's share, and becomes OVER if its balance is negative, UNDER otherwise. A vCPU that
//!   piles up more than a slice's worth stops earning (leaves the active list) with half of it;
//!   it joins again at the first tick that finds it running. Each pCPU then re-sorts its run
//!   queue (UNDER and BOOST ahead of OVER, order kept) at its next tick.
//! - **Scheduling** (`csched_schedule`): the current vCPU, if still runnable, goes back into the
//!   run queue behind every vCPU of its priority or higher; the head runs for a slice (30 ms).
//!   If the head is OVER or there is none, the pCPU first tries to steal a vCPU of strictly
//!   higher priority from the others' run queues (`csched_load_balance`; a running vCPU is
//!   never stolen). With `ratelimit_us` (Xen 4.2–4.7) a vCPU that has run less than that keeps
//!   its pCPU, even when it yields.
//! - **Waking** (`csched_vcpu_wake`, `__runq_tickle` as in Xen 4.1): an UNDER vCPU becomes BOOST,
//!   joins its pCPU's run queue and preempts the current vCPU if of strictly higher priority; if
//!   the pCPU was busy, one idle pCPU is also told to reschedule (`opt_tickle_one_idle`), and it
//!   steals.
//! - **Yield** (`SCHEDOP_yield`, and a PLE exit, which Xen's VMX handler turns into one): with
//!   `yield = "stock"` the vCPU is re-inserted like any other, so when it is the highest
//!   priority on its pCPU it runs again at once: "yield is a no-op" (the seed). With
//!   `"patched"` (commit 5fc9f5ef6c) it goes behind one vCPU of lower priority, if there is one.
//!
//! - **LAS** (`las = true`, the locking-aware scheduler seed): the slice timer's expiry is the
//!   running vCPU's page (`slice_remaining`, read by the `las-tas` guest lock), and a guest yield
//!   that gives the pCPU away is repaid the credits of the slice it left.
//!
//! - **Keeping a VM's vCPUs apart** (`pick = "patched"`, `push = true`: the `xen-yield` seed's
//!   two shelved patches, "add knowledge of domains to cpu_pick()" and "periodically push vcpus
//!   which have become co-located to different cpus"). Work stealing moves vCPUs without regard
//!   to their VM, so two vCPUs of one VM come to share a pCPU, where one spins for a lock the
//!   other holds but cannot run to release. The patches were attached to the e-mail and are not
//!   public; the model reads the two sentences with Xen 4.0's own paths (`schedule.c`,
//!   `sched_credit.c`): `csched_cpu_pick` is consulted only by the tick's check on a running
//!   vCPU that has been earning a while (`csched_vcpu_acct`) and by `vcpu_migrate`. The patched
//!   pick keeps the vCPU where it is unless its pCPU holds another vCPU of its VM (running or
//!   queued), and then prefers a pCPU that holds none, an idle one first, cycling from the next
//!   pCPU as `cycle_cpu` does; so at a tick a running vCPU with a sibling on its pCPU is
//!   descheduled and woken on the chosen pCPU (`_VPF_migrating`, `context_saved`,
//!   `vcpu_migrate`, `vcpu_wake`, which BOOSTs an UNDER vCPU as any wake does). Push runs with
//!   each accounting (every slice, on the master pCPU, as `csched_acct` does) and moves queued
//!   vCPUs only, to the pCPU the patched pick would choose, through the same `vcpu_migrate` and
//!   wake (our choice: Xen's stealing moves a queued vCPU without a BOOST); a running vCPU is
//!   left to the pick. The stock pick ranks idle pCPUs by idle neighbours, which on a
//!   host of one socket without SMT never finds one better than the vCPU's own, so the stock
//!   tick check is not modelled.
//!
//! Left out, as they do not act in the seeds' setups: caps (parking), soft affinity, NUMA nodes
//! in the stealing order (peers are tried from the next pCPU round), the stock pick's placement
//! by idle neighbours (see above), and Xen's own time in the scheduler.
use crate::engine::{Event, Rng, Time};
use crate::scenario::{Credit1Config, Credit1Pick, Credit1Yield};
use crate::simulation::Sim;
use crate::vcpu::Affinity;

/// Random streams of the pCPUs' first slices are numbered from here, above every vCPU's and
/// every pCPU's interruptions (`interruptions.rs`).
const FIRST_SLICE_STREAM_BASE: u64 = 2 << 32;

/// What reading the LAS page costs the guest: "the access time to the shared memory was 65.1
/// cycle" (the LAS seed, §3).
pub(crate) const LAS_PAGE_READ_CYCLES: f64 = 65.1;
/// `CSCHED_CREDITS_PER_MSEC`.
const CREDITS_PER_MSEC: i64 = 10;
/// `CSCHED_TICKS_PER_TSLICE`.
const TICKS_PER_TSLICE: u64 = 3;
/// `CSCHED_DEFAULT_WEIGHT`: every domain has it (weights are not a scenario setting).
const WEIGHT: i64 = 256;
const NS_PER_MSEC: i64 = 1_000_000;

/// A vCPU's priority, lowest first (`CSCHED_PRI_TS_OVER` −2, `_UNDER` −1, `_BOOST` 0; an idle
/// pCPU's `CSCHED_PRI_IDLE` is the absence of a vCPU).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Priority {
    Over,
    #[default]
    Under,
    Boost,
}

/// A vCPU's credit1 state (`struct csched_vcpu`). A new vCPU is UNDER with no credit, and not
/// yet earning (`csched_alloc_vdata`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct VcpuCredit {
    pub credit: i64,
    pub pri: Priority,
    /// `CSCHED_FLAG_VCPU_YIELD`: set by a yield, consumed by the next run-queue insertion.
    pub yielded: bool,
    /// On its domain's active list: earning credits at each accounting.
    pub active: bool,
    /// `start_time`: up to when its running time has been charged, kept (as an offset from the
    /// moment it stopped) while it does not run, so that unburned time is charged later.
    pub start_time: i64,
    /// `residual`: the fraction of a credit not yet charged, in credit-nanoseconds.
    pub residual: i64,
    /// LAS: credits for the slice time a guest yield offered, paid if the yield takes effect.
    pub las_owed: i64,
    /// Credits burned so far, and time run on a pCPU up to its last switch-out: the audit
    /// checks that the one pays for the other.
    pub burned: i64,
    pub ran_ns: u64,
    /// `_VPF_migrating`: being descheduled to move to another pCPU, so not queued again here.
    pub migrating: bool,
}

/// The scheduler's private data (`struct csched_private`).
pub(crate) struct Credit1 {
    pub patched_yield: bool,
    /// The seed's "pick" and "push" patches (module docs).
    pub patched_pick: bool,
    pub push: bool,
    /// LAS: slice ends published, guest yields compensated.
    pub las: bool,
    pub tslice_ns: Time,
    pub tick_ns: Time,
    pub ratelimit_ns: Time,
    credits_per_tslice: i64,
    /// `active_sdom`: domains with an earning vCPU, in the list's order (new ones at the head).
    active_domains: Vec<u32>,
    /// `credit_balance`: the credits of all active vCPUs after the last accounting.
    credit_balance: i64,
    /// `runq_sort`: bumped by each accounting; a pCPU re-sorts when it has not seen the value.
    runq_sort: u64,
    /// `last_tickle_cpu`: the idle pCPU last told to reschedule.
    last_tickle: u32,
}

impl Credit1 {
    pub(crate) fn new(cfg: &Credit1Config) -> Credit1 {
        let tslice_ns = cfg.tslice_ms as Time * 1_000_000;
        // `__csched_set_tslice`: three ticks per slice, one if the slice is under 3 ms.
        let ticks = if cfg.tslice_ms < TICKS_PER_TSLICE as u32 { 1 } else { TICKS_PER_TSLICE };
        Credit1 {
            patched_yield: cfg.yield_ == Credit1Yield::Patched,
            patched_pick: cfg.pick == Credit1Pick::Patched,
            push: cfg.push,
            las: cfg.las,
            tslice_ns,
            tick_ns: (cfg.tslice_ms as Time * 1000 / ticks) * 1000,
            ratelimit_ns: cfg.ratelimit_us as Time * 1000,
            credits_per_tslice: CREDITS_PER_MSEC * cfg.tslice_ms as i64,
            active_domains: Vec::new(),
            credit_balance: 0,
            runq_sort: 0,
            last_tickle: 0,
        }
    }
}

/// A pCPU's credit1 state (`struct csched_pcpu`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PcpuCredit {
    /// The accounting epoch whose priorities this run queue was last sorted by.
    pub runq_sorted: u64,
    /// Generation of the pending slice-end timer (`Event::SliceEnd`); older ones are stale.
    pub slice_gen: u32,
    /// When the pending slice-end timer fires: what LAS publishes to the running vCPU.
    pub slice_end: Time,
    /// When the current vCPU began running (its runstate's `state_entry_time`), for the rate
    /// limit.
    pub running_since: Time,
}

impl Sim {
    fn credit1(&self) -> &Credit1 {
        self.credit1.as_ref().expect("credit1 scheduling runs only with its state")
    }

    fn credit1_mut(&mut self) -> &mut Credit1 {
        self.credit1.as_mut().expect("credit1 scheduling runs only with its state")
    }

    fn pri(&self, v: u32) -> Priority {
        self.vcpus[v as usize].credit.pri
    }

    /// The host was not started with the VMs: each pCPU's first slice ends at a random point of
    /// a slice, not all at one instant. Started together, the pCPUs would switch in lock step
    /// for as long as no vCPU blocks (accounting and ticks preempt nothing), co-scheduling each
    /// VM's vCPUs, the very cure for lock-holder preemption. The CFS hosts' counterpart is the
    /// random initial vruntime (`add_vcpu`).
    pub(crate) fn stagger_first_slices(&mut self) {
        let Some(c) = &self.credit1 else { return };
        let tslice = c.tslice_ns;
        for p in 0..self.pcpus.len() as u32 {
            if self.pcpus[p as usize].curr.is_some() {
                let mut rng = Rng::stream(self.seed, FIRST_SLICE_STREAM_BASE + p as u64);
                self.arm_slice_end(p, 1 + rng.below(tslice));
            }
        }
    }

    /// The first accounting, one slice after the start (`master_ticker`).
    pub(crate) fn start_credit_accounting(&mut self) {
        if let Some(c) = &self.credit1 {
            self.q.push(c.tslice_ns, Event::CreditAccounting);
        }
    }

    /// `burn_credits`: charge the running vCPU `v` for its time since `start_time`.
    fn burn_credits(&mut self, v: u32) {
        let now = self.now as i64;
        let cr = &mut self.vcpus[v as usize].credit;
        let delta = now - cr.start_time;
        if delta <= 0 {
            return;
        }
        let val = delta * CREDITS_PER_MSEC + cr.residual;
        let credits = val / NS_PER_MSEC;
        cr.residual = val % NS_PER_MSEC;
        cr.credit -= credits;
        cr.burned += credits;
        cr.start_time += credits * NS_PER_MSEC / CREDITS_PER_MSEC;
    }

    /// `csched_schedule`'s first step for the current vCPU `v`: charge it, and keep what was not
    /// charged as an offset (`start_time -= now`) until it runs again (`start_time += now`).
    fn uncharge(&mut self, v: u32) {
        self.burn_credits(v);
        self.vcpus[v as usize].credit.start_time -= self.now as i64;
    }

    /// The running vCPU `v` blocks: charged as at any `schedule()`; a yield it made that a rate
    /// limit held back, and what LAS owed it for one, lapse with the slice.
    pub(crate) fn credit_stop_running(&mut self, v: u32) {
        self.uncharge(v);
        self.count_run(v);
        let cr = &mut self.vcpus[v as usize].credit;
        cr.yielded = false;
        cr.las_owed = 0;
    }

    /// `__runq_insert`: behind every queued vCPU of the same or higher priority; a yielding vCPU
    /// (patched yield) behind one more, if that one is of lower priority.
    fn runq_insert(&mut self, p: u32, v: u32) {
        let pri = self.pri(v);
        let queued = &self.pcpus[p as usize].queued;
        let mut at = queued.iter().position(|&q| self.vcpus[q as usize].credit.pri < pri).unwrap_or(queued.len());
        let yielded = std::mem::take(&mut self.vcpus[v as usize].credit.yielded);
        if yielded && self.credit1().patched_yield && at < queued.len() {
            at += 1;
        }
        self.pcpus[p as usize].queued.insert(at, v);
    }

    /// `csched_runq_sort`: once per accounting, UNDER and BOOST ahead of OVER, order kept.
    fn runq_sort(&mut self, p: u32) {
        let epoch = self.credit1().runq_sort;
        if self.pcpus[p as usize].credit.runq_sorted == epoch {
            return;
        }
        self.pcpus[p as usize].credit.runq_sorted = epoch;
        let mut queued = std::mem::take(&mut self.pcpus[p as usize].queued);
        queued.sort_by_key(|&q| self.pri(q) == Priority::Over);
        self.pcpus[p as usize].queued = queued;
    }

    /// `csched_schedule` on `p`.
    pub(crate) fn credit1_schedule(&mut self, p: u32) {
        let now = self.now;
        let prev = self.pcpus[p as usize].curr;
        if let Some(c) = prev {
            self.uncharge(c);
        }
        // A migrating vCPU is not runnable here: neither kept by the rate limit nor queued, and a
        // yield it made ends with this `schedule()`, as `csched_schedule` clears
        // `CSCHED_FLAG_VCPU_YIELD` at every call.
        if let Some(c) = prev.filter(|&c| self.vcpus[c as usize].credit.migrating) {
            self.vcpus[c as usize].credit.yielded = false;
        } else if let Some(c) = prev {
            let ratelimit = self.credit1().ratelimit_ns;
            let ran = now - self.pcpus[p as usize].credit.running_since;
            if ratelimit > 0 && ran < ratelimit {
                self.vcpus[c as usize].credit.start_time += now as i64;
                // Xen 4.2-4.7 (which also keep a yielder here) re-arm for the whole rate limit
                // (`tslice = MICROSECS(prv->ratelimit_us)`); later versions for what is left.
                return self.arm_slice_end(p, ratelimit);
            }
            self.runq_insert(p, c);
        }
        let head = self.pcpus[p as usize].queued.first().copied();
        let next = match head {
            Some(h) if self.pri(h) > Priority::Over => {
                self.pcpus[p as usize].queued.remove(0);
                Some(h)
            }
            _ => match self.steal(p, head.map(|h| self.pri(h))) {
                Some(stolen) => Some(stolen),
                None => {
                    if head.is_some() {
                        self.pcpus[p as usize].queued.remove(0);
                    }
                    head
                }
            },
        };
        self.pcpus[p as usize].need_resched = false;
        if next == prev {
            // Picked again (or still idle): no context switch, and a LAS yield gave nothing up.
            if let Some(c) = next {
                let cr = &mut self.vcpus[c as usize].credit;
                cr.start_time += now as i64;
                cr.las_owed = 0;
            }
        } else {
            if let Some(c) = prev {
                self.count_run(c);
                self.repay_las_yield(c);
                self.stop_running(c);
            }
            self.pcpus[p as usize].curr = next;
            if let Some(n) = next {
                self.pcpus[p as usize].credit.running_since = now;
                self.vcpus[n as usize].credit.start_time += now as i64;
                self.switch_in(n, p);
            }
        }
        match self.pcpus[p as usize].curr {
            Some(_) => {
                let tslice = self.credit1().tslice_ns;
                self.arm_slice_end(p, tslice);
            }
            None => {
                let pc = &mut self.pcpus[p as usize].credit;
                pc.slice_gen = pc.slice_gen.wrapping_add(1);
                self.pcpus[p as usize].idle.enter(now, &self.idle_states);
            }
        }
        self.maybe_arm_tick(p);
    }

    /// The running vCPU `v` stops running: add its run to `ran_ns`.
    fn count_run(&mut self, v: u32) {
        let p = self.vcpus[v as usize].pcpu;
        self.vcpus[v as usize].credit.ran_ns += self.now - self.pcpus[p as usize].credit.running_since;
    }

    /// Audit: every vCPU has been charged for the time it ran, up to what a tick has not charged
    /// yet (a running vCPU pays at least every tick) and the fraction `burn_credits` carries.
    pub(crate) fn audit_credits(&mut self) {
        let Some(c) = &self.credit1 else { return };
        let slack = c.tick_ns + 2 * (NS_PER_MSEC / CREDITS_PER_MSEC) as u64;
        for v in 0..self.vcpus.len() as u32 {
            let vc = &self.vcpus[v as usize];
            let p = vc.pcpu as usize;
            let running = if self.pcpus[p].curr == Some(v) { self.now - self.pcpus[p].credit.running_since } else { 0 };
            let ran = vc.credit.ran_ns + running;
            let charged = (vc.credit.burned * NS_PER_MSEC / CREDITS_PER_MSEC).max(0) as u64;
            if ran.abs_diff(charged) > slack {
                let msg = format!(
                    "credit1 charged {} for {charged} ns but it ran {ran} ns (at {} ns)",
                    self.name_vcpu(v),
                    self.now
                );
                self.violations.push(msg);
            }
        }
    }

    /// The scheduler timer: `schedule()` again after `after` ns.
    fn arm_slice_end(&mut self, p: u32, after: Time) {
        let pc = &mut self.pcpus[p as usize].credit;
        pc.slice_gen = pc.slice_gen.wrapping_add(1);
        pc.slice_end = self.now + after;
        let gen = pc.slice_gen;
        self.q.push(self.now + after, Event::SliceEnd { pcpu: p, gen });
    }

    /// The slice timer of generation `gen` fires on `p`.
    pub(crate) fn slice_end(&mut self, p: u32, gen: u32) {
        if self.pcpus[p as usize].credit.slice_gen == gen && self.pcpus[p as usize].curr.is_some() {
            self.schedule(p);
        }
    }

    /// `csched_load_balance`: the first vCPU found queued (not running) on another pCPU, tried
    /// from the next pCPU round, with a strictly higher priority than `best` (the local head's,
    /// `None` for idle) and allowed on `p`; it is moved to `p`.
    fn steal(&mut self, p: u32, best: Option<Priority>) -> Option<u32> {
        let n = self.pcpus.len() as u32;
        for peer in (1..n).map(|i| (p + i) % n) {
            // An idle peer is about to pick its own queue (`csched_runq_steal`).
            if self.pcpus[peer as usize].curr.is_none() {
                continue;
            }
            let queued = &self.pcpus[peer as usize].queued;
            let found = queued
                .iter()
                .copied()
                .take_while(|&q| Some(self.pri(q)) > best)
                .find(|&q| matches!(self.vcpus[q as usize].affinity, Affinity::Any) || self.vcpus[q as usize].affinity == Affinity::Pinned(p));
            if let Some(v) = found {
                self.pcpus[peer as usize].queued.retain(|&q| q != v);
                self.vcpus[v as usize].counters.migrations += 1;
                self.set_task_cpu(v, p);
                return Some(v);
            }
        }
        None
    }

    /// `csched_vcpu_wake` and `__runq_tickle` for the woken vCPU `v`.
    pub(crate) fn credit1_wake(&mut self, v: u32) {
        let p = self.vcpus[v as usize].pcpu;
        let cr = &mut self.vcpus[v as usize].credit;
        if cr.pri == Priority::Under {
            cr.pri = Priority::Boost;
        }
        self.runq_insert(p, v);
        let cur = self.pcpus[p as usize].curr;
        let preempt = cur.is_none_or(|c| self.pri(v) > self.pri(c));
        let idler = cur.and_then(|_| self.idle_pcpu_for(v, p));
        // `__runq_tickle` raises SCHEDULE_SOFTIRQ: on the waker's own pCPU it runs on the way
        // out of the hypercall, which a kick's handler then finishes first (`resched_curr`).
        if preempt {
            self.resched_curr(p);
        }
        if let Some(i) = idler {
            self.credit1_mut().last_tickle = i;
            self.schedule(i);
        }
    }

    /// One idle pCPU that `v` may run on, cycling from the last one told (`last_tickle_cpu`).
    fn idle_pcpu_for(&self, v: u32, p: u32) -> Option<u32> {
        let n = self.pcpus.len() as u32;
        let from = self.credit1().last_tickle;
        let allowed = |q: u32| match self.vcpus[v as usize].affinity {
            Affinity::Any => true,
            Affinity::Pinned(x) => x == q,
        };
        (1..=n).map(|i| (from + i) % n).find(|&q| q != p && self.pcpus[q as usize].curr.is_none() && allowed(q))
    }

    /// `sched_yield` (`csched_vcpu_yield`): flag it; the `schedule()` that follows acts on it.
    pub(crate) fn credit1_yield(&mut self, v: u32) {
        self.vcpus[v as usize].credit.yielded = true;
    }

    /// LAS's page: the time left in running vCPU `v`'s slice; `None` unless LAS is on.
    pub(crate) fn las_slice_remaining(&self, v: u32) -> Option<Time> {
        if !self.credit1.as_ref().is_some_and(|c| c.las) {
            return None;
        }
        let p = self.vcpus[v as usize].pcpu;
        debug_assert_eq!(self.pcpus[p as usize].curr, Some(v), "only a running vCPU reads its page");
        Some(self.pcpus[p as usize].credit.slice_end.saturating_sub(self.now))
    }

    /// LAS: the guest of running vCPU `v` offers the rest of its slice by `SCHEDOP_yield`;
    /// "additional CPU time will be allotted to the related VCPU during the following
    /// scheduling", modelled as the credits of the time left, owed until the yield takes effect.
    pub(crate) fn las_note_yield(&mut self, v: u32) {
        if let Some(left) = self.las_slice_remaining(v) {
            self.vcpus[v as usize].credit.las_owed = left as i64 * CREDITS_PER_MSEC / NS_PER_MSEC;
        }
    }

    /// The yielder `v` lost its pCPU: it is paid what LAS owes it, up to a slice's worth of
    /// credit (accounting would stop an earning vCPU above that anyway).
    fn repay_las_yield(&mut self, v: u32) {
        let cap = self.credit1().credits_per_tslice;
        let cr = &mut self.vcpus[v as usize].credit;
        let owed = std::mem::take(&mut cr.las_owed);
        if owed > 0 {
            cr.credit = (cr.credit + owed).min(cap.max(cr.credit));
        }
    }

    /// `csched_tick` on a busy pCPU: charge the running vCPU, end its BOOST, let it earn again
    /// (`csched_vcpu_acct`), and re-sort the run queue after an accounting.
    pub(crate) fn credit1_tick(&mut self, p: u32) {
        let mut moving = None;
        if let Some(c) = self.pcpus[p as usize].curr {
            let cr = &mut self.vcpus[c as usize].credit;
            if cr.pri == Priority::Boost {
                cr.pri = Priority::Under;
            }
            self.burn_credits(c);
            if !self.vcpus[c as usize].credit.active {
                self.start_earning(c);
            } else if self.credit1().patched_pick && self.apart_from_siblings(c).is_some() {
                moving = Some(c);
            }
        }
        self.runq_sort(p);
        if let Some(c) = moving {
            self.migrate_running(c);
        }
    }

    /// Whether pCPU `q` holds, running or queued, a vCPU of `v`'s VM other than `v`.
    fn holds_sibling(&self, q: u32, v: u32) -> bool {
        let vm = self.vcpus[v as usize].vm;
        let pc = &self.pcpus[q as usize];
        pc.curr.iter().chain(&pc.queued).any(|&u| u != v && self.vcpus[u as usize].vm == vm)
    }

    /// The patched `csched_cpu_pick`'s answer for `v` when it is not `v`'s own pCPU: if that pCPU
    /// holds a sibling, the first pCPU that holds none, idle ones first, tried from the next
    /// pCPU round (`cycle_cpu`).
    fn apart_from_siblings(&self, v: u32) -> Option<u32> {
        let p = self.vcpus[v as usize].pcpu;
        if !self.holds_sibling(p, v) {
            return None;
        }
        let n = self.pcpus.len() as u32;
        let allowed = |q: u32| match self.vcpus[v as usize].affinity {
            Affinity::Any => true,
            Affinity::Pinned(x) => x == q,
        };
        let mut free = (1..n).map(|i| (p + i) % n).filter(|&q| allowed(q) && !self.holds_sibling(q, v));
        let first = free.next()?;
        Some(std::iter::once(first).chain(free).find(|&q| self.pcpus[q as usize].curr.is_none()).unwrap_or(first))
    }

    /// The running vCPU `v` leaves its pCPU (`_VPF_migrating`: `schedule()` runs without it)
    /// and, once saved, is placed by the patched pick (`vcpu_migrate`).
    fn migrate_running(&mut self, v: u32) {
        let p = self.vcpus[v as usize].pcpu;
        self.vcpus[v as usize].credit.migrating = true;
        self.schedule(p);
        self.vcpus[v as usize].credit.migrating = false;
        // `vcpu_migrate` picks again (with `commit`): if no pCPU is free of siblings now, the
        // vCPU wakes where it was, BOOSTed, as it would in Xen.
        let to = self.apart_from_siblings(v).unwrap_or(p);
        self.wake_elsewhere(v, to);
    }

    /// `vcpu_migrate`'s end for a runnable vCPU `v` on no run queue: it now belongs to `to` and
    /// wakes there, BOOSTed if UNDER like any woken vCPU (`csched_vcpu_wake`).
    fn wake_elsewhere(&mut self, v: u32, to: u32) {
        if self.vcpus[v as usize].pcpu != to {
            self.vcpus[v as usize].counters.migrations += 1;
            self.set_task_cpu(v, to);
        }
        self.credit1_wake(v);
    }

    /// The "push" patch, with each accounting: every vCPU queued on a pCPU that holds another
    /// vCPU of its VM moves where the patched pick would put it, by `vcpu_sleep_nosync` and
    /// `vcpu_migrate` as `__vcpu_set_affinity` moves a vCPU (our choice: the patch is not public;
    /// Xen's other mover of queued vCPUs, stealing, does not BOOST them).
    fn push_apart(&mut self) {
        for p in 0..self.pcpus.len() as u32 {
            let queued = self.pcpus[p as usize].queued.clone();
            for v in queued {
                // An earlier move's wake may have let another pCPU steal `v`.
                if !self.pcpus[p as usize].queued.contains(&v) {
                    continue;
                }
                if let Some(to) = self.apart_from_siblings(v) {
                    self.pcpus[p as usize].queued.retain(|&q| q != v);
                    self.wake_elsewhere(v, to);
                }
            }
        }
    }

    /// `__csched_vcpu_acct_start`: `v` joins its domain's active list, and the domain the head
    /// of `active_sdom` if it was not on it.
    fn start_earning(&mut self, v: u32) {
        self.vcpus[v as usize].credit.active = true;
        let vm = self.vcpus[v as usize].vm;
        let doms = &mut self.credit1_mut().active_domains;
        if !doms.contains(&vm) {
            doms.insert(0, vm);
        }
    }

    /// The earning vCPUs of VM `vm`.
    fn active_vcpus(&self, vm: u32) -> impl Iterator<Item = u32> + '_ {
        let d = &self.vms[vm as usize];
        (d.first_vcpu..d.first_vcpu + d.vcpus).filter(|&v| self.vcpus[v as usize].credit.active)
    }

    /// `csched_acct`, every slice on the master pCPU.
    pub(crate) fn credit_accounting(&mut self) {
        let c = self.credit1();
        let (per_slice, tslice) = (c.credits_per_tslice, c.tslice_ns);
        let domains = c.active_domains.clone();
        let prev_balance = c.credit_balance;
        let counts: Vec<i64> = domains.iter().map(|&d| self.active_vcpus(d).count() as i64).collect();
        let weight_total: i64 = counts.iter().map(|n| WEIGHT * n).sum();
        if weight_total == 0 {
            self.credit1_mut().credit_balance = 0;
            self.q.push(self.now + tslice, Event::CreditAccounting);
            return;
        }
        let mut credit_total = per_slice * self.pcpus.len() as i64;
        // "Converge balance towards 0 when it drops negative."
        if prev_balance < 0 {
            credit_total -= prev_balance;
        }
        let mut weight_left = weight_total;
        let mut balance = 0;
        let mut extra = false;
        let mut order = domains.clone();
        for (&d, &n) in domains.iter().zip(&counts) {
            weight_left -= WEIGHT * n;
            let mut peak = n * per_slice;
            if prev_balance < 0 {
                peak += (-prev_balance * WEIGHT * n + weight_total - 1) / weight_total;
            }
            let mut fair = (credit_total * WEIGHT * n + weight_total - 1) / weight_total;
            if fair < peak {
                extra = true;
            } else {
                // "Give other domains a chance at unused credits."
                if weight_left != 0 {
                    credit_total += ((fair - peak) * weight_total + weight_left - 1) / weight_left;
                }
                // "Lazily keep domains with extra credits at the head of the queue."
                if extra {
                    order.retain(|&x| x != d);
                    order.insert(0, d);
                }
                fair = peak;
            }
            let per_vcpu = (fair + n - 1) / n;
            let vcpus: Vec<u32> = self.active_vcpus(d).collect();
            for v in vcpus {
                let cr = &mut self.vcpus[v as usize].credit;
                cr.credit += per_vcpu;
                if cr.credit < 0 {
                    cr.pri = Priority::Over;
                    cr.credit = cr.credit.max(-per_slice);
                } else {
                    cr.pri = Priority::Under;
                    // "Upper bound on credits means VCPU stops earning."
                    if cr.credit > per_slice {
                        cr.active = false;
                        cr.credit /= 2;
                    }
                }
                balance += cr.credit;
            }
        }
        order.retain(|&d| self.active_vcpus(d).next().is_some());
        let c = self.credit1_mut();
        c.active_domains = order;
        c.credit_balance = balance;
        c.runq_sort += 1;
        let push = c.push;
        self.q.push(self.now + tslice, Event::CreditAccounting);
        if push {
            self.push_apart();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Priority;
    use crate::simulation::test_host::{credit1_host, host};
    use crate::vcpu::HostState;

    /// Two pCPUs (`test_host`), `vcpus` vCPUs pinned to pCPU 0.
    fn xen(yield_: &str, vcpus: u32) -> crate::simulation::Sim {
        credit1_host(&format!("yield = \"{yield_}\""), "ticket", vcpus)
    }

    /// [`xen`] with the patched yield and a rate limit of 1 ms, two vCPUs.
    fn rate_limited() -> crate::simulation::Sim {
        credit1_host("yield = \"patched\", ratelimit_us = 1000", "ticket", 2)
    }

    /// One pCPU: vCPU 0 running, the others queued in the given priorities.
    fn queue(s: &mut crate::simulation::Sim, running: Priority, queued: &[Priority]) {
        s.pcpus[0].queued.clear();
        s.pcpus[0].curr = Some(0);
        s.vcpus[0].host = HostState::Running;
        s.vcpus[0].credit.pri = running;
        for (i, &pri) in queued.iter().enumerate() {
            let v = i as u32 + 1;
            s.vcpus[v as usize].credit.pri = pri;
            s.vcpus[v as usize].host = HostState::Runnable;
            s.pcpus[0].queued.push(v);
        }
    }

    #[test]
    fn a_stock_yield_runs_the_yielder_again_when_it_has_the_highest_priority() {
        let mut s = xen("stock", 3);
        queue(&mut s, Priority::Under, &[Priority::Over, Priority::Over]);
        s.credit1_yield(0);
        s.runq_insert(0, 0);
        assert_eq!(s.pcpus[0].queued, vec![0, 1, 2], "ahead of every lower priority: picked again");
    }

    #[test]
    fn a_patched_yield_goes_behind_exactly_one_lower_priority_vcpu() {
        let mut s = xen("patched", 3);
        queue(&mut s, Priority::Under, &[Priority::Over, Priority::Over]);
        s.credit1_yield(0);
        s.runq_insert(0, 0);
        assert_eq!(s.pcpus[0].queued, vec![1, 0, 2]);
        assert!(!s.vcpus[0].credit.yielded, "the flag serves one insertion");
    }

    #[test]
    fn a_patched_yield_with_no_lower_priority_goes_behind_its_equals() {
        let mut s = xen("patched", 3);
        queue(&mut s, Priority::Over, &[Priority::Under, Priority::Over]);
        s.credit1_yield(0);
        s.runq_insert(0, 0);
        assert_eq!(s.pcpus[0].queued, vec![1, 2, 0]);
    }

    #[test]
    fn a_woken_under_vcpu_is_boosted_and_preempts_an_over_one() {
        let mut s = xen("patched", 2);
        queue(&mut s, Priority::Over, &[]);
        s.vcpus[1].host = HostState::Runnable;
        s.credit1_wake(1);
        assert_eq!(s.vcpus[1].credit.pri, Priority::Boost);
        assert_eq!(s.pcpus[0].curr, Some(1), "BOOST beats OVER");
        assert_eq!(s.pcpus[0].queued, vec![0]);
    }

    #[test]
    fn a_tick_that_finds_a_boosted_vcpu_running_ends_its_boost() {
        // `csched_vcpu_acct`: "If this VCPU's priority was boosted when it last awoke, reset it.
        // If the VCPU is found here, then it's consuming a non-negligible amount of CPU".
        let mut s = xen("patched", 2);
        queue(&mut s, Priority::Boost, &[Priority::Under]);
        s.vcpus[0].credit.start_time = 0;
        s.now = 1_000_000;
        s.credit1_tick(0);
        assert_eq!(s.vcpus[0].credit.pri, Priority::Under);
        assert_eq!(s.vcpus[1].credit.pri, Priority::Under, "a queued vCPU keeps its priority");
    }

    #[test]
    fn accounting_shares_the_host_credits_among_earning_vcpus_and_sets_priorities() {
        let mut s = xen("patched", 2);
        for v in 0..2 {
            s.start_earning(v);
        }
        s.vcpus[0].credit.credit = -500;
        s.vcpus[1].credit.credit = 100;
        s.credit_accounting();
        // Two pCPUs: 600 credits a slice, all to the one domain (its peak: two vCPUs × 300).
        assert_eq!((s.vcpus[0].credit.credit, s.vcpus[0].credit.pri), (-200, Priority::Over));
        assert_eq!(s.vcpus[1].credit.pri, Priority::Under);
        assert_eq!(s.vcpus[1].credit.credit, 200, "over a slice's worth: stops earning with half of 400");
        assert!(!s.vcpus[1].credit.active);
    }

    #[test]
    fn running_ten_milliseconds_burns_a_hundred_credits() {
        let mut s = xen("patched", 1);
        s.vcpus[0].credit.start_time = 0;
        s.now = 10_000_000;
        s.burn_credits(0);
        assert_eq!(s.vcpus[0].credit.credit, -100);
        s.now = 10_050_000;
        s.burn_credits(0);
        assert_eq!(s.vcpus[0].credit.credit, -100, "half a credit is kept as residual");
        s.now = 10_100_000;
        s.burn_credits(0);
        assert_eq!(s.vcpus[0].credit.credit, -101);
    }

    /// Two VMs on the two pCPUs of `test_host`, unpinned, every run queue empty.
    fn two_vms(vcpus: [u32; 2]) -> crate::simulation::Sim {
        let hv = "scheduler = \"credit1\"\n";
        let vm = |name, n| format!("[[vm]]\nname = \"{name}\"\nvcpus = {n}\nlock = \"ticket\"\nworkload = {{ preset = \"cpu-hog\" }}\n");
        host(hv, false, &(vm("a", vcpus[0]) + &vm("b", vcpus[1])))
    }

    #[test]
    fn an_over_pcpu_steals_only_strictly_higher_priority_work() {
        let mut s = two_vms([2, 2]);
        // pCPU 1 runs vCPU 2 and has vCPU 3 (OVER) queued; pCPU 0's best is OVER too.
        s.pcpus[1].curr = Some(2);
        s.vcpus[3].credit.pri = Priority::Over;
        s.pcpus[1].queued.push(3);
        assert_eq!(s.steal(0, Some(Priority::Over)), None, "an equal priority is not worth a migration");
        s.vcpus[3].credit.pri = Priority::Under;
        assert_eq!(s.steal(0, Some(Priority::Over)), Some(3));
        assert!(s.pcpus[1].queued.is_empty());
        assert_eq!((s.vcpus[3].pcpu, s.vcpus[3].counters.migrations), (0, 1));
    }

    #[test]
    fn an_idle_pcpu_does_not_steal_from_another_idle_one() {
        let mut s = two_vms([2, 2]);
        s.pcpus[1].queued.push(3);
        assert_eq!(s.steal(0, None), None, "an idle peer is about to run its own queue");
        s.pcpus[1].curr = Some(2);
        assert_eq!(s.steal(0, None), Some(3));
    }

    #[test]
    fn accounting_shares_by_weight_times_earning_vcpus() {
        let mut s = two_vms([1, 2]);
        for v in 0..3 {
            s.start_earning(v);
        }
        s.credit_accounting();
        // 600 credits: domain b (two earning vCPUs) gets 400 by weight, within its peak of 600;
        // domain a (one) 200, within its 300.
        let credits: Vec<i64> = (0..3).map(|v| s.vcpus[v].credit.credit).collect();
        assert_eq!(credits, vec![200, 200, 200]);
    }

    /// [`rate_limited`], vCPU 0 UNDER yielding to an OVER vCPU `ran` ns after it began running.
    fn yield_after_running(ran: u64) -> crate::simulation::Sim {
        let mut s = rate_limited();
        queue(&mut s, Priority::Under, &[Priority::Over]);
        s.pcpus[0].credit.running_since = 0;
        s.now = ran;
        s.credit1_yield(0);
        s.credit1_schedule(0);
        s
    }

    #[test]
    fn the_rate_limit_keeps_a_yielder_that_just_began_running() {
        let s = yield_after_running(500_000);
        assert_eq!(s.pcpus[0].curr, Some(0), "ran 0.5 ms of a 1 ms rate limit: keeps the pCPU (Xen 4.2-4.7)");
        assert!(s.vcpus[0].credit.yielded, "the yield waits for the next schedule()");
    }

    #[test]
    fn each_pcpus_first_slice_ends_at_its_own_random_point_of_a_slice() {
        let hv = "scheduler = \"credit1\"\nple = { policy = \"off\" }\n";
        let vm = "[[vm]]\nname = \"g\"\nvcpus = 2\npin = \"1:1\"\nlock = \"tas\"\nworkload = { preset = \"cpu-hog\" }\n";
        let mut s = host(hv, false, vm);
        for p in 0..2 {
            s.pcpus[p].queued.push(p as u32);
            s.schedule(p as u32);
        }
        let tslice = s.credit1().tslice_ns;
        assert_eq!([s.pcpus[0].credit.slice_end, s.pcpus[1].credit.slice_end], [tslice, tslice], "both started at 0");
        s.stagger_first_slices();
        let ends = [s.pcpus[0].credit.slice_end, s.pcpus[1].credit.slice_end];
        assert!(ends.iter().all(|&e| (1..=tslice).contains(&e)) && ends[0] != ends[1], "{ends:?}");
    }

    #[test]
    fn las_publishes_the_slice_end_and_repays_a_yield_that_gave_the_pcpu_away() {
        let hv = "scheduler = \"credit1\"\nple = { policy = \"off\" }\ncredit1 = { las = true }\n";
        let vm = "[[vm]]\nname = \"g\"\nvcpus = 2\npin = [0, 0]\nlock = \"las-tas\"\nworkload = { preset = \"cpu-hog\" }\n";
        let mut s = host(hv, false, vm);
        queue(&mut s, Priority::Under, &[Priority::Under]);
        s.arm_slice_end(0, 30_000_000);
        s.now = 20_000_000;
        s.vcpus[0].credit.start_time = s.now as i64;
        assert_eq!(s.las_slice_remaining(0), Some(10_000_000));
        s.las_note_yield(0);
        s.credit1_yield(0);
        s.credit1_schedule(0);
        assert_eq!(s.pcpus[0].curr, Some(1), "behind its equal");
        assert_eq!(s.vcpus[0].credit.credit, 100, "10 ms given up: 100 credits");
        let mut plain = xen("patched", 2);
        queue(&mut plain, Priority::Under, &[]);
        assert_eq!(plain.las_slice_remaining(0), None, "no page without LAS");
    }

    #[test]
    fn vcpus_taking_turns_are_each_charged_ten_credits_per_ms_they_ran() {
        let mut s = xen("patched", 2);
        queue(&mut s, Priority::Under, &[Priority::Under]);
        s.vcpus[0].credit.start_time = 0;
        for (at, running) in [(10, 1), (25, 0), (30, 1), (40, 0)] {
            s.now = at * 1_000_000;
            s.credit1_schedule(0);
            assert_eq!(s.pcpus[0].curr, Some(running), "at {at} ms");
            // No event runs between the calls: leave no segment for the next switch to account.
            s.vcpus[running as usize].active = false;
        }
        // vCPU 0 ran 0-10 and 25-30 ms, vCPU 1 10-25 and 30-40 ms.
        assert_eq!((s.vcpus[0].credit.credit, s.vcpus[1].credit.credit), (-150, -250));
    }

    /// VM `a` (vCPUs 0, 1) and VM `b` (2, 3) unpinned on the two pCPUs of `test_host`, with the
    /// given `credit1` settings: pCPU 0 runs vCPU 0 with its sibling 1 queued, pCPU 1 runs
    /// vCPU 2 with its sibling 3 queued, all UNDER and earning.
    fn co_located(credit1: &str) -> crate::simulation::Sim {
        let hv = format!("scheduler = \"credit1\"\nple = {{ policy = \"off\" }}\ncredit1 = {{ {credit1} }}\n");
        let vm = |name| format!("[[vm]]\nname = \"{name}\"\nvcpus = 2\nlock = \"ticket\"\nworkload = {{ preset = \"cpu-hog\" }}\n");
        let mut s = host(&hv, false, &(vm("a") + &vm("b")));
        for (p, run, queued) in [(0, 0, 1), (1, 2, 3)] {
            s.pcpus[p as usize].curr = Some(run);
            (s.vcpus[run as usize].pcpu, s.vcpus[run as usize].host) = (p, HostState::Running);
            (s.vcpus[queued as usize].pcpu, s.vcpus[queued as usize].host) = (p, HostState::Runnable);
            s.pcpus[p as usize].queued.push(queued);
        }
        for v in 0..4 {
            s.start_earning(v);
        }
        s
    }

    #[test]
    fn the_patched_pick_moves_a_running_vcpu_off_its_siblings_pcpu_at_a_tick() {
        let mut s = co_located("pick = \"patched\"");
        s.credit1_tick(0);
        assert_eq!(s.vcpus[0].pcpu, 1, "VM a's vCPU 0 goes where no vCPU of a is");
        assert_eq!(s.vcpus[0].counters.migrations, 1);
        assert_eq!(s.pcpus[0].curr, Some(1), "its sibling runs in its place");
        assert_eq!(s.vcpus[0].credit.pri, Priority::Boost, "woken there like any vCPU (csched_vcpu_wake)");
        assert_eq!(s.pcpus[1].curr, Some(0), "and, BOOSTed, preempts VM b's UNDER vCPU");
        assert!(!s.pcpus[0].queued.contains(&0), "not queued again where it left");
        assert!(!s.vcpus[0].credit.migrating);
    }

    #[test]
    fn the_stock_pick_leaves_co_located_vcpus_where_they_are() {
        let mut s = co_located("pick = \"stock\"");
        s.credit1_tick(0);
        assert_eq!((s.vcpus[0].pcpu, s.pcpus[0].curr), (0, Some(0)));
        assert_eq!(s.vcpus[0].counters.migrations, 0);
    }

    #[test]
    fn the_patched_pick_keeps_a_vcpu_with_no_sibling_on_its_pcpu() {
        let mut s = co_located("pick = \"patched\"");
        // vCPU 1 leaves pCPU 0 (it blocked, say): vCPU 0 is alone of its VM there.
        s.pcpus[0].queued.clear();
        s.credit1_tick(0);
        assert_eq!((s.vcpus[0].pcpu, s.pcpus[0].curr), (0, Some(0)));
    }

    #[test]
    fn push_moves_queued_vcpus_off_their_siblings_pcpus_at_each_accounting() {
        let mut s = co_located("push = true");
        // pCPU 1 runs VM a's vCPU 1 instead, so vCPU 1 has somewhere to go and vCPU 3 has not.
        s.pcpus[0].queued.clear();
        s.pcpus[1].queued.clear();
        (s.pcpus[0].curr, s.pcpus[1].curr) = (Some(0), Some(1));
        s.pcpus[0].queued.push(2);
        s.pcpus[0].queued.push(3);
        for (v, p, host) in [(1, 1, HostState::Running), (2, 0, HostState::Runnable), (3, 0, HostState::Runnable)] {
            (s.vcpus[v as usize].pcpu, s.vcpus[v as usize].host) = (p, host);
        }
        s.credit_accounting();
        assert_eq!(s.vcpus[2].pcpu, 1, "VM b's vCPU 2 shared pCPU 0 with its sibling 3: pushed to pCPU 1");
        assert_eq!(s.vcpus[2].counters.migrations, 1);
        assert_eq!(s.vcpus[3].pcpu, 0, "then vCPU 3 is alone of its VM on pCPU 0 and stays");
        assert!(s.pcpus[1].queued.contains(&2) || s.pcpus[1].curr == Some(2));
    }

    #[test]
    fn push_leaves_a_running_vcpu_to_the_pick() {
        let mut s = co_located("push = true");
        // pCPU 1 idle: vCPU 1, queued beside its running sibling 0, goes there; 0 stays.
        s.pcpus[1].queued.clear();
        s.pcpus[1].curr = None;
        for v in [2, 3] {
            s.vcpus[v].host = HostState::Blocked;
        }
        s.credit_accounting();
        assert_eq!((s.vcpus[1].pcpu, s.pcpus[1].curr), (1, Some(1)), "the queued sibling moves, to the idle pCPU");
        assert_eq!((s.vcpus[0].pcpu, s.pcpus[0].curr), (0, Some(0)), "the running one stays");
    }

    #[test]
    fn a_pinned_vcpu_is_never_pushed_or_picked_away() {
        let hv = "scheduler = \"credit1\"\nple = { policy = \"off\" }\ncredit1 = { pick = \"patched\", push = true }\n";
        let vm = "[[vm]]\nname = \"g\"\nvcpus = 3\npin = [0, 0, 0]\nlock = \"ticket\"\nworkload = { preset = \"cpu-hog\" }\n";
        let mut s = host(hv, false, vm);
        queue(&mut s, Priority::Under, &[Priority::Under, Priority::Under]);
        for v in 0..3 {
            s.start_earning(v);
        }
        s.credit1_tick(0);
        s.credit_accounting();
        assert!((0..3).all(|v| s.vcpus[v].pcpu == 0 && s.vcpus[v].counters.migrations == 0));
    }

    #[test]
    fn the_first_tick_after_an_accounting_moves_under_vcpus_ahead_of_over_ones_in_order() {
        // `csched_runq_sort`, once per accounting (`prv->runq_sort`): a stable partition, UNDER
        // and BOOST ahead of OVER; so a patched yield's inversion lasts until the next accounting.
        let mut s = xen("patched", 5);
        queue(&mut s, Priority::Under, &[Priority::Over, Priority::Under, Priority::Over, Priority::Boost]);
        s.credit1_tick(0);
        assert_eq!(s.pcpus[0].queued, vec![1, 2, 3, 4], "no accounting since the last sort");
        s.credit1_mut().runq_sort += 1;
        s.credit1_tick(0);
        assert_eq!(s.pcpus[0].queued, vec![2, 4, 1, 3]);
    }

    #[test]
    fn a_wake_preempts_only_a_vcpu_of_strictly_lower_priority() {
        // `csched_vcpu_wake` BOOSTs only an UNDER vCPU; `__runq_tickle` preempts the current one
        // only if `new->pri > cur->pri`.
        let mut s = xen("patched", 2);
        queue(&mut s, Priority::Over, &[]);
        s.vcpus[1].credit.pri = Priority::Over;
        s.vcpus[1].host = HostState::Runnable;
        s.credit1_wake(1);
        assert_eq!(s.vcpus[1].credit.pri, Priority::Over, "an OVER vCPU wakes OVER");
        assert_eq!((s.pcpus[0].curr, s.pcpus[0].queued.clone()), (Some(0), vec![1]), "and does not preempt its equal");
        let mut s = xen("patched", 2);
        queue(&mut s, Priority::Boost, &[]);
        s.vcpus[1].host = HostState::Runnable;
        s.credit1_wake(1);
        assert_eq!(s.vcpus[1].credit.pri, Priority::Boost);
        assert_eq!((s.pcpus[0].curr, s.pcpus[0].queued.clone()), (Some(0), vec![1]), "BOOST does not preempt BOOST");
    }

    #[test]
    fn a_wake_on_a_busy_pcpu_tells_an_idle_pcpu_which_then_steals() {
        // `__runq_tickle` (Xen 4.1): with the waker's pCPU busy, one idle pCPU is told to
        // reschedule (`opt_tickle_one_idle`), and its `csched_load_balance` steals queued work.
        let mut s = two_vms([2, 1]);
        s.pcpus[0].curr = Some(0);
        (s.vcpus[0].pcpu, s.vcpus[0].host) = (0, HostState::Running);
        (s.vcpus[1].pcpu, s.vcpus[1].host) = (0, HostState::Runnable);
        s.pcpus[1].curr = None;
        s.credit1_wake(1);
        assert_eq!(s.pcpus[0].curr, Some(1), "BOOST preempts UNDER");
        assert_eq!((s.pcpus[1].curr, s.vcpus[0].pcpu), (Some(0), 1), "the idle pCPU steals the preempted vCPU");
    }

    #[test]
    fn accounting_makes_only_a_negative_balance_over_and_clamps_it_at_one_slice() {
        // `csched_acct`: `credit < 0` is OVER, else UNDER; "Lower bound on credits": below
        // -credits_per_tslice, set to it.
        let mut s = xen("patched", 2);
        for v in 0..2 {
            s.start_earning(v);
        }
        (s.vcpus[0].credit.credit, s.vcpus[1].credit.credit) = (-900, -300);
        s.vcpus[1].credit.pri = Priority::Over;
        s.credit_accounting();
        assert_eq!((s.vcpus[0].credit.credit, s.vcpus[0].credit.pri), (-300, Priority::Over), "-900 + 300 is clamped");
        assert_eq!((s.vcpus[1].credit.credit, s.vcpus[1].credit.pri), (0, Priority::Under), "no debt left");
    }

    #[test]
    fn a_host_wide_debt_is_paid_back_at_the_next_accounting() {
        // `csched_acct`: "Converge balance towards 0 when it drops negative": the negative
        // balance is added to the credits shared out, and to each domain's peak.
        let mut s = xen("patched", 2);
        for v in 0..2 {
            s.start_earning(v);
            s.vcpus[v as usize].credit.credit = -600;
        }
        s.credit_accounting();
        assert_eq!((s.vcpus[0].credit.credit, s.vcpus[1].credit.credit), (-300, -300));
        s.credit_accounting();
        // 600 credits and the balance of -600: 600 each.
        assert_eq!((s.vcpus[0].credit.credit, s.vcpus[1].credit.credit), (300, 300));
    }

    #[test]
    fn the_rate_limit_ends_once_the_vcpu_has_run_that_long() {
        // Xen 4.2-4.7 `csched_schedule` keeps the current vCPU while `runtime < ratelimit`.
        let s = yield_after_running(1_000_000);
        assert_eq!(s.pcpus[0].curr, Some(1), "ran the whole 1 ms: the yielder goes behind the OVER vCPU");
    }

    #[test]
    fn a_slice_under_three_ms_has_one_tick() {
        // `__csched_set_tslice`: three ticks per slice, one if `tslice_ms < CSCHED_TICKS_PER_TSLICE`.
        let tick = |tslice_ms| super::Credit1::new(&crate::scenario::Credit1Config { tslice_ms, ..Default::default() }).tick_ns;
        assert_eq!([tick(30), tick(3), tick(2), tick(1)], [10_000_000, 1_000_000, 2_000_000, 1_000_000]);
    }

    /// One VM of `vcpus` `las-tas` guests pinned to pCPU 0 under credit1 with LAS and the given
    /// further `credit1` settings.
    fn las(vcpus: u32, credit1: &str) -> crate::simulation::Sim {
        credit1_host(&format!("las = true{credit1}"), "las-tas", vcpus)
    }

    #[test]
    fn a_las_yield_that_keeps_the_pcpu_is_not_repaid_later() {
        // The LAS seed repays the time of a guest that "has yielded CPU"; one picked again at
        // once (alone on its pCPU) gave nothing up.
        let mut s = las(2, "");
        queue(&mut s, Priority::Under, &[]);
        s.arm_slice_end(0, 30_000_000);
        s.now = 20_000_000;
        s.vcpus[0].credit.start_time = s.now as i64;
        s.las_note_yield(0);
        s.credit1_yield(0);
        s.credit1_schedule(0);
        assert_eq!(s.pcpus[0].curr, Some(0), "alone: runs again");
        // vCPU 1 is queued meanwhile, and the next slice ends: vCPU 0 goes behind its equal.
        (s.vcpus[1].credit.pri, s.vcpus[1].host) = (Priority::Under, HostState::Runnable);
        s.pcpus[0].queued.push(1);
        s.now = 50_000_000;
        s.credit1_schedule(0);
        assert_eq!(s.pcpus[0].curr, Some(1));
        assert_eq!(s.vcpus[0].credit.credit, -300, "charged its 30 ms, repaid nothing");
    }

    #[test]
    fn a_yield_the_rate_limit_held_back_lapses_when_the_vcpu_blocks() {
        // Xen 4.2-4.7: the yield flag waits for the next `schedule()`, which a block is
        // (`csched_schedule` clears it, and the blocked vCPU is not re-inserted); LAS's repayment
        // is for a yield that gives the pCPU away, so it lapses too.
        let mut s = las(3, ", yield = \"patched\", ratelimit_us = 1000");
        queue(&mut s, Priority::Under, &[Priority::Under, Priority::Over]);
        s.vcpus[0].credit.start_time = 0;
        s.pcpus[0].credit.running_since = 0;
        s.arm_slice_end(0, 30_000_000);
        s.now = 500_000;
        s.las_note_yield(0);
        s.credit1_yield(0);
        s.credit1_schedule(0);
        assert_eq!(s.pcpus[0].curr, Some(0), "ran 0.5 ms of a 1 ms rate limit: keeps the pCPU");
        s.block(0);
        assert_eq!(s.pcpus[0].curr, Some(1));
        s.vcpus[1].active = false;
        s.now = 2_000_000;
        s.wake(0);
        assert_eq!(s.pcpus[0].curr, Some(0), "woken BOOST, it preempts, not behind the OVER vCPU 2 as a yielder");
        s.vcpus[0].active = false;
        s.now = 10_000_000;
        s.credit1_tick(0);
        s.now = 12_000_000;
        s.credit1_schedule(0);
        assert_eq!(s.pcpus[0].curr, Some(1), "its BOOST over, behind its equal");
        assert_eq!(s.vcpus[0].credit.credit, -105, "charged 0.5 + 10 ms, repaid nothing");
    }

    #[test]
    fn a_las_repayment_stops_at_a_slice_worth_of_credit() {
        // `csched_acct` stops an earning vCPU above `credits_per_tslice` anyway (module docs).
        let mut s = las(2, "");
        queue(&mut s, Priority::Under, &[Priority::Under]);
        s.arm_slice_end(0, 30_000_000);
        s.now = 20_000_000;
        s.vcpus[0].credit.start_time = s.now as i64;
        s.vcpus[0].credit.credit = 250;
        s.las_note_yield(0);
        s.credit1_yield(0);
        s.credit1_schedule(0);
        assert_eq!(s.pcpus[0].curr, Some(1));
        assert_eq!(s.vcpus[0].credit.credit, 300, "250 + 100 owed, capped at 300");
    }

    #[test]
    fn a_pcpu_whose_best_is_over_steals_an_under_vcpu_at_its_schedule() {
        // Xen's `csched_schedule`: `if ( snext->pri > CSCHED_PRI_TS_OVER ) __runq_remove(snext);
        // else snext = csched_load_balance(...)`: an OVER best sends the pCPU looking elsewhere.
        let mut s = two_vms([2, 2]);
        // pCPU 0 runs vCPU 0, OVER, with nothing queued; pCPU 1 runs vCPU 2 with vCPU 3 (UNDER)
        // queued.
        s.pcpus[0].curr = Some(0);
        (s.vcpus[0].pcpu, s.vcpus[0].host, s.vcpus[0].credit.pri) = (0, HostState::Running, Priority::Over);
        s.pcpus[1].curr = Some(2);
        (s.vcpus[2].pcpu, s.vcpus[2].host) = (1, HostState::Running);
        (s.vcpus[3].pcpu, s.vcpus[3].host, s.vcpus[3].credit.pri) = (1, HostState::Runnable, Priority::Under);
        s.pcpus[1].queued.push(3);
        s.credit1_schedule(0);
        assert_eq!(s.pcpus[0].curr, Some(3), "its own head (vCPU 0, re-queued) is OVER: it steals the UNDER vCPU");
        assert_eq!(s.pcpus[0].queued, vec![0]);
        assert!(s.pcpus[1].queued.is_empty());
        assert_eq!((s.vcpus[3].pcpu, s.vcpus[3].counters.migrations), (0, 1));
    }

    #[test]
    fn a_tick_on_a_vcpu_that_is_not_earning_makes_it_earn_at_the_next_accounting() {
        // Xen's `csched_vcpu_acct`: "Put this VCPU and domain back on the active list if it was
        // idling": `if ( list_empty(&svc->active_vcpu_elem) ) __csched_vcpu_acct_start(prv, svc)`.
        let mut s = xen("patched", 1);
        queue(&mut s, Priority::Under, &[]);
        s.vcpus[0].credit.start_time = 0;
        assert!(!s.vcpus[0].credit.active, "a new vCPU is not yet earning");
        s.credit_accounting();
        assert_eq!(s.vcpus[0].credit.credit, 0, "no vCPU earning: nothing shared");
        s.credit1_tick(0);
        assert!(s.vcpus[0].credit.active, "the tick found it running: it earns again");
        assert_eq!(s.credit1().active_domains, vec![0], "and its domain is active");
        s.credit_accounting();
        assert_eq!(s.vcpus[0].credit.credit, 300, "a slice's worth, its domain's peak (one earning vCPU)");
        assert_eq!(s.vcpus[0].credit.pri, Priority::Under);
    }
}
