//! CFS bandwidth control: a VM's CPU quota (`vm.cpu_max`, cgroup v2's `cpu.max`), enforced on
//! its vCPU threads as Linux enforces it on a task group (`kernel/sched/fair.c`, v6.8; 3.19 and
//! 6.18 have the same mechanism, with the differences below).
//!
//! Each period (`period_us`, 100 ms by default) the VM's pool is refilled to `quota_us`
//! (`__refill_cfs_bandwidth_runtime`, with no burst). The VM's share of each pCPU (its `cfs_rq`
//! there) runs on a local budget taken from the pool in slices of 5 ms
//! (`sched_cfs_bandwidth_slice_us`, `__assign_cfs_rq_runtime`), and the running vCPU's time is
//! charged to that budget (`account_cfs_rq_runtime`, from `update_curr`). When the budget is
//! spent and the pool is empty the pCPU reschedules, and the VM is *throttled* there
//! (`check_cfs_rq_runtime` → `throttle_cfs_rq`, also when the vCPU that spent it just blocked):
//! its running and queued vCPUs leave the run queue and wait, runnable, until a timer hands the
//! pCPU budget again. The period timer refills the pool and gives each throttled pCPU, in turn,
//! what it needs to get back above zero (`distribute_cfs_runtime`: the first throttled first
//! since 5.x, the last first in 3.19, which also throttles without asking the pool for 1 ns
//! first); `unthrottle_cfs_rq` re-queues the vCPUs. A vCPU
//! that wakes onto a throttled pCPU joins the held ones, and the VM's first vCPU on a pCPU checks
//! the budget before it is queued (`check_enqueue_throttle`). When a pCPU's last vCPU of the VM
//! blocks or moves away, the budget above 1 ms goes back to the pool (`__return_cfs_rq_runtime`),
//! and if pCPUs are throttled and the pool holds more than a slice, the slack timer distributes it
//! 5 ms later, unless a refill comes within 7 ms (`start_cfs_slack_bandwidth`).
//!
//! | the VM on a pCPU | budget | what happens |
//! |---|---|---|
//! | has a vCPU running | > 0 | its time is charged to the budget |
//! | has a vCPU running | ≤ 0 | a slice is taken from the pool; if none is left, `schedule()` throttles |
//! | throttled | ≤ 0 | its vCPUs are held off the run queue (`throttles` counts each); a wake joins them (6.18: each at its next VM entry, and a woken one is queued until then) |
//! | throttled | > 0 | a timer gave it budget: its vCPUs are queued again, placed as woken threads |
//!
//! This is what spinning costs a VM with a quota: a waiter spinning behind a holder that its own
//! VM's throttling descheduled on another pCPU burns the budget the holder needs, and the VM
//! stays throttled longer.
//!
//! Model choices, where the kernel differs or is silent:
//! - The run queues are flat, as everywhere in this host model: a VM's vCPUs compete as
//!   threads, not as one group entity per pCPU, so unthrottled vCPUs are placed one by one, as
//!   woken threads are (`place_entity` with `ENQUEUE_WAKEUP` is what the kernel does for the
//!   group).
//! - A spent budget is noticed at an `update_curr` of the VM's own run queue on the pCPU: its
//!   tick, `schedule()`, and the enqueue or dequeue of one of its own vCPUs there, where the
//!   tick is the usual moment; so a CFS tick runs with one thread too when a VM has a quota.
//!   The wake-up or move of another VM's vCPU updates only the root and that VM's run queue:
//!   the running VM's time since its last charge waits for its own next update
//!   (`update_curr_for` in `scheduler.rs`), and may overrun by up to a tick per pCPU, repaid in
//!   the next period.
//! - A run starts as the quota is set (`tg_set_cfs_bandwidth`): a full pool. The period timer
//!   fires at fixed points of the host's clock, whose reading at the start of the run is random
//!   (drawn from the seed): Linux 3.19 forwards an expiry that starts at 0 by whole periods, so
//!   VMs of one period refill together; since 6.4 (so in 6.8 and 6.18) each group's first
//!   expiry is a random point of the default 100 ms period, "so that timers interleave"
//!   (`init_cfs_bandwidth`, at the group's creation). So the first refill comes within the
//!   first period, and a run holds its first pool besides a refill for each period: a VM that
//!   can spend its quota gets up to a tenth more CPU time in ten periods than ten quotas. The
//!   phase also decides whether the pCPUs run dry at one tick or at several
//!   (`tests/host_scheduler.rs`); measure over seeds.
//! - The timer never idles (a group that uses nothing for a period stops it; a restart finds
//!   the pool full in both versions, refilled at the restart in 3.19 and at the last expiry
//!   before it in 6.8, which is what a timer that goes on gives); budget given to a pCPU never
//!   expires (Linux since 5.4; in 3.19 `expire_cfs_rq_runtime`, at each accounting past a
//!   pCPU's deadline, pushed the deadline on by a tick, so in effect it did not expire either),
//!   but 3.19 takes back at `return_cfs_rq_runtime` only budget issued since the last refill
//!   (older spare budget is trimmed and lost), and fires its slack timer on a 5 ms grid of the
//!   host's clock, 0-5 ms after budget comes back (5 ms after, since 5.x); a throttled pCPU is
//!   unthrottled at once, where the kernel sends it an IPI.
//! - Linux 6.18 throttles task by task (`throttle_cfs_rq` no longer dequeues the group): the
//!   VM's vCPUs stay queued, a vCPU picked while the VM is throttled gets a task work
//!   (`task_throttle_setup_work`), and at its next VM entry, where KVM runs pending task work
//!   (`xfer_to_guest_mode_handle_work`), it is dequeued and held (`throttle_cfs_rq_work`) if
//!   the VM still is. So each runs its switch-in a moment more, charged to the VM; a directed
//!   yield to one succeeds; and a balancer may move one to a pCPU where the VM is not throttled
//!   (`lb_throttled_hierarchy` looks at the destination only). A vCPU picked again while in
//!   guest mode pays a VM exit first (and an entry, which one held there pays without
//!   entering). An IPI for a vCPU that will be held waits, as interrupts are injected at entry.
//!   A vCPU halt-polling when its VM is throttled stops polling and blocks, as before 6.18. A
//!   pick that finishes the dequeue of a delayed vCPU returns the VM's spare budget, as
//!   `dequeue_entity` does once the VM has no thread left on the pCPU.
//! - Throttled time counts as `waiting` in the time breakdown: the vCPU is runnable and not
//!   running.
use crate::engine::{Event, Rng, Time};
use crate::scenario::{CpuMax, Scenario, SchedulerKind};
use crate::simulation::Sim;
use crate::vcpu::{After, HostState, HostWork};

/// `sysctl_sched_cfs_bandwidth_slice`: budget a pCPU takes from the pool at a time (ns).
const SLICE_NS: u64 = 5_000_000;
/// `min_cfs_rq_runtime`: budget a pCPU keeps when its last thread of the group leaves (ns).
const MIN_KEPT_NS: i64 = 1_000_000;
/// `cfs_bandwidth_slack_period`: how long the slack timer waits to gather returned budget (ns).
const SLACK_PERIOD_NS: u64 = 5_000_000;
/// `min_bandwidth_expiration`: no slack distribution this close to a refill (ns).
const MIN_EXPIRATION_NS: u64 = 2_000_000;
/// The RNG stream of the period timers' phases (vCPUs use 1..2^32, `interruptions` 2^32 + p,
/// credit1's first slices 2^33 + p, the guests' tick grids 2^34 + vm).
const PERIOD_PHASE_STREAM: u64 = 3 << 32;
/// `default_cfs_period`: the period a group has when it is created (ns).
const DEFAULT_PERIOD_NS: u64 = 100_000_000;
/// The host's clock at the start of a run is drawn below this (about 18 minutes): far more than
/// the longest period (1 s), so the phase it gives each timer is uniform.
const BOOT_CLOCK_RANGE_NS: u64 = 1 << 40;

/// One VM's quota and its state (`struct cfs_bandwidth` and the VM's `cfs_rq` on each pCPU).
pub(crate) struct Bandwidth {
    quota: u64,
    period: u64,
    /// `cfs_b->runtime`: what is left of this period's quota.
    pool: u64,
    /// Per pCPU, `cfs_rq->runtime_remaining`.
    budget: Vec<i64>,
    /// Per pCPU, the VM's vCPUs held off the run queue while it is throttled there, in the
    /// order they left it.
    held: Vec<Vec<u32>>,
    throttled: Vec<bool>,
    /// Throttled pCPUs, first throttled first (`cfs_b->throttled_cfs_rq`).
    order: Vec<u32>,
    slack_armed: bool,
    next_refill: Time,
    /// Per pCPU, the running vCPU's time not yet charged to `budget`: a wake-up or move of
    /// another VM's vCPU there updates the root run queue and that VM's, not this one
    /// (`update_curr` runs per `cfs_rq`), so the charge waits for this VM's own next update.
    uncharged: Vec<u64>,
    /// Refills so far, and per pCPU the refill count when it last asked the pool for budget or
    /// was given some (3.19's `runtime_expires`, read only there: [`Sim::return_spare_runtime`]).
    refills: u64,
    issued_in: Vec<u64>,
    /// The host's clock at the start of the run: 3.19's slack timer fires on a grid of it.
    boot_ns: Time,
}

impl Bandwidth {
    /// A quota set at time 0 with a full pool, whose period timer first fires at `first_refill`
    /// (in `(0, period]`), on a host whose clock read `boot_ns` then ([`timer_phases`]).
    fn new(c: &CpuMax, pcpus: usize, first_refill: Time, boot_ns: Time) -> Self {
        let (quota, period) = (c.quota_us * 1000, c.period_us * 1000);
        debug_assert!((1..=period).contains(&first_refill));
        Bandwidth {
            quota,
            period,
            pool: quota,
            budget: vec![0; pcpus],
            held: vec![Vec::new(); pcpus],
            throttled: vec![false; pcpus],
            order: Vec::new(),
            slack_armed: false,
            next_refill: first_refill,
            uncharged: vec![0; pcpus],
            refills: 0,
            issued_in: vec![0; pcpus],
            boot_ns,
        }
    }

    /// `__assign_cfs_rq_runtime`: top pCPU `p`'s budget up to `target` from the pool; whether it
    /// is then positive.
    fn assign(&mut self, p: u32, target: u64) -> bool {
        let budget = &mut self.budget[p as usize];
        let wanted = (target as i64 - *budget).max(0) as u64;
        let amount = wanted.min(self.pool);
        self.pool -= amount;
        *budget += amount as i64;
        self.issued_in[p as usize] = self.refills;
        *budget > 0
    }
}

/// Each VM's quota, if it has one (none at all if no VM has), with its period timer's phase.
pub(crate) fn quotas(sc: &Scenario, pcpus: usize) -> Vec<Option<Bandwidth>> {
    if sc.vms.iter().all(|vm| vm.cpu_max.is_none()) {
        return Vec::new();
    }
    let cpu_max: Vec<Option<&CpuMax>> = sc.vms.iter().map(|vm| vm.cpu_max.as_ref()).collect();
    let (boot_ns, first_refills) = timer_phases(&cpu_max, sc.hypervisor.scheduler, sc.seed);
    cpu_max.iter().zip(first_refills).map(|(c, at)| Some(Bandwidth::new((*c)?, pcpus, at?, boot_ns))).collect()
}

/// The host's clock when the run starts (`boot_ns`, a random moment), and where each VM's period
/// timer first fires, counted from the start of the run. The timer fires at fixed points of
/// that clock: 3.19 forwards an expiry that starts at 0 by whole periods (`start_bandwidth_timer`
/// → `hrtimer_forward`), so groups of one period refill together; since Linux 6.4 (so in 6.8 and
/// 6.18) `init_cfs_bandwidth` sets each group's first expiry at a random point of the default
/// period, 100 ms, as the group is created ("so that timers interleave"), and
/// `start_cfs_bandwidth` forwards it by the group's own period. `cpu_max` is each VM's quota, if
/// any; the draws come from one stream of the run's seed.
fn timer_phases(cpu_max: &[Option<&CpuMax>], scheduler: SchedulerKind, seed: u64) -> (Time, Vec<Option<Time>>) {
    let mut rng = Rng::stream(seed, PERIOD_PHASE_STREAM);
    let boot_ns = rng.below(BOOT_CLOCK_RANGE_NS);
    let first_refills = cpu_max
        .iter()
        .map(|c| {
            let period = (*c)?.period_us * 1000;
            let first_expiry = if scheduler == SchedulerKind::Cfs { 0 } else { rng.below(DEFAULT_PERIOD_NS) % period };
            Some(period - (boot_ns + period - first_expiry) % period)
        })
        .collect();
    (boot_ns, first_refills)
}

impl Sim {
    /// The quota of VM `vm`, if it has one and it is in force.
    fn bandwidth_of(&mut self, vm: u32) -> Option<&mut Bandwidth> {
        self.bandwidth.get_mut(vm as usize).and_then(Option::as_mut)
    }

    /// The quota of VM `vm`, if it has one, to read.
    fn quota_of(&self, vm: u32) -> Option<&Bandwidth> {
        self.bandwidth.get(vm as usize).and_then(Option::as_ref)
    }

    fn is_throttled(&self, vm: u32, p: u32) -> bool {
        self.quota_of(vm).is_some_and(|b| b.throttled[p as usize])
    }

    /// Whether `v` is held off its run queue by its VM's quota (before 6.18, every runnable vCPU
    /// of the VM on a pCPU where it is throttled; in 6.18, those whose task work has run).
    pub(crate) fn is_held(&self, v: u32) -> bool {
        let vc = &self.vcpus[v as usize];
        vc.host == HostState::Runnable
            && self.quota_of(vc.vm).is_some_and(|b| b.held[vc.pcpu as usize].contains(&v))
    }

    /// Whether the VM's throttled vCPUs leave the run queue one by one, each at its next VM entry
    /// (Linux 6.18), rather than all at the throttle.
    fn task_based_throttle(&self) -> bool {
        self.scheduler == SchedulerKind::Eevdf618
    }

    /// No balancer moves a vCPU of a VM throttled on either pCPU (`throttled_lb_pair`), or, in
    /// 6.18, on the destination (`lb_throttled_hierarchy`: a vCPU still queued on a throttled
    /// pCPU may leave it for one where its VM has budget).
    pub(crate) fn throttled_pair(&self, vm: u32, src: u32, dst: u32) -> bool {
        (self.is_throttled(vm, src) && !self.task_based_throttle()) || self.is_throttled(vm, dst)
    }

    /// Arm every quota's period timer.
    pub(crate) fn start_bandwidth_timers(&mut self) {
        for vm in 0..self.bandwidth.len() as u32 {
            if let Some(b) = self.bandwidth_of(vm) {
                let at = b.next_refill;
                self.q.push(at, Event::BandwidthPeriod { vm });
            }
        }
    }

    /// `account_cfs_rq_runtime`: vCPU `v`, running on `p`, ran `delta` ns more, charged now with
    /// what was left uncharged before (an update of its VM's own run queue there).
    pub(crate) fn charge_runtime(&mut self, p: u32, v: u32, delta: u64) {
        let vm = self.vcpus[v as usize].vm;
        let Some(b) = self.bandwidth_of(vm) else { return };
        let delta = delta + std::mem::take(&mut b.uncharged[p as usize]);
        b.budget[p as usize] -= delta as i64;
        if b.budget[p as usize] > 0 || b.throttled[p as usize] {
            return;
        }
        if !b.assign(p, SLICE_NS) {
            self.pcpus[p as usize].need_resched = true;
        }
    }

    /// `update_curr` of another VM's run queue on `p` (a wake-up, a move): vCPU `v`, running
    /// there, ran `delta` ns more, to be charged at its VM's next own update.
    pub(crate) fn defer_charge(&mut self, p: u32, v: u32, delta: u64) {
        let vm = self.vcpus[v as usize].vm;
        if let Some(b) = self.bandwidth_of(vm) {
            b.uncharged[p as usize] += delta;
        }
    }

    /// `check_cfs_rq_runtime` (from `put_prev_entity`) at `schedule()` on `p`, for the VM of
    /// `v`, the vCPU that was running there (and may just have blocked): if the VM has spent its
    /// budget here and the pool is empty, it is throttled on `p`, even with no vCPU left there,
    /// so that its debt is repaid at the next refill.
    pub(crate) fn throttle_if_spent(&mut self, p: u32, v: u32) {
        let vm = self.vcpus[v as usize].vm;
        let recheck = self.scheduler != SchedulerKind::Cfs;
        let Some(b) = self.bandwidth_of(vm) else { return };
        // Since 5.x `throttle_cfs_rq` asks for 1 ns first: budget may have come back meanwhile
        // (3.19 throttles at once).
        if b.budget[p as usize] > 0 || b.throttled[p as usize] || (recheck && b.assign(p, 1)) {
            return;
        }
        self.throttle(vm, p);
    }

    /// Mark VM `vm` throttled on `p`, and list `p` for the timers' distribution: last in Linux
    /// 6.8 and 6.18 (`list_add_tail_rcu`), first in 3.19 (`list_add_rcu`, "so that an
    /// already-started distribute_cfs_runtime will not see us").
    fn mark_throttled(&mut self, vm: u32, p: u32) {
        let newest_first = self.scheduler == SchedulerKind::Cfs;
        let b = self.bandwidth_of(vm).expect("a VM with a quota");
        b.throttled[p as usize] = true;
        if newest_first {
            b.order.insert(0, p);
        } else {
            b.order.push(p);
        }
    }

    /// `throttle_cfs_rq`: VM `vm`'s vCPUs leave `p`'s run queue (in 6.18, one by one, later). A
    /// vCPU halt-polling there stops polling and blocks; a running one is descheduled and held
    /// with the queued ones. Under EEVDF each keeps its lag, taken while
    /// all of them still count in the run queue's average (`update_entity_lag` before the
    /// dequeue). Every caller has charged the running vCPU (`update_curr`) already.
    fn throttle(&mut self, vm: u32, p: u32) {
        self.mark_throttled(vm, p);
        let running = self.pcpus[p as usize].curr.filter(|&c| self.vcpus[c as usize].vm == vm);
        let polling = running.filter(|&c| self.polling(c));
        if self.task_based_throttle() {
            // Linux 6.18: the VM's vCPUs stay queued, each held when it next gets to its VM
            // entry ([`Sim::set_throttle_work`], [`Sim::throttle_at_entry`]).
            if let Some(c) = polling {
                self.poller_blocks(c);
            }
            return;
        }
        let running = running.filter(|_| polling.is_none());
        let queued: Vec<u32> = self.pcpus[p as usize].queued.iter().copied().filter(|&q| self.vcpus[q as usize].vm == vm).collect();
        if self.scheduler.is_eevdf() {
            for &v in running.iter().chain(&queued) {
                self.save_lag(p, v);
            }
        }
        if let Some(c) = polling {
            self.poller_blocks(c);
        }
        if let Some(c) = running {
            self.stop_running(c);
            self.pcpus[p as usize].curr = None;
            self.hold(vm, p, c);
        }
        self.pcpus[p as usize].queued.retain(|q| !queued.contains(q));
        for v in queued {
            self.hold(vm, p, v);
        }
    }

    /// A vCPU halt-polling on a pCPU where its VM is throttled stops polling and blocks
    /// (`kvm_vcpu_can_poll` sees the reschedule); the caller schedules.
    fn poller_blocks(&mut self, c: u32) {
        self.stop_segment(c);
        self.vcpus[c as usize].host_work = None;
        self.put_to_sleep(c);
    }

    /// Linux 6.18, at `schedule()` on `p`: `next` was picked, so if its VM is throttled there it
    /// gets the task work (`task_throttle_setup_work`). One picked again while in guest mode
    /// leaves it for the task work to run (the reschedule that led here is an exit).
    pub(crate) fn set_throttle_work(&mut self, p: u32, next: Option<u32>, prev: Option<u32>) {
        let Some(n) = next.filter(|_| self.task_based_throttle()) else { return };
        if !self.is_throttled(self.vcpus[n as usize].vm, p) {
            return;
        }
        self.vcpus[n as usize].throttle_work = true;
        let vc = &self.vcpus[n as usize];
        if next == prev && vc.active && vc.host_work.is_none() {
            self.stop_segment(n);
            let exit_and_entry = self.costs.vm_exit + self.costs.vm_entry;
            self.vcpus[n as usize].host_work = Some(HostWork { remaining: exit_and_entry, after: After::Nothing });
            self.run_vcpu(n);
        }
    }

    /// Linux 6.18: running vCPU `v` will be held at its next VM entry (its task work is pending
    /// and its VM throttled on its pCPU), so an IPI for it waits: interrupts are injected at
    /// entry, and the task work runs before it.
    pub(crate) fn held_at_next_entry(&self, v: u32) -> bool {
        let vc = &self.vcpus[v as usize];
        vc.throttle_work && self.is_throttled(vc.vm, vc.pcpu)
    }

    /// Linux 6.18's `throttle_cfs_rq_work`, where running vCPU `v`'s host work would end in a VM
    /// entry: if its VM is still throttled on its pCPU, it leaves the run queue and is held, and
    /// the pCPU reschedules. Returns whether it was held.
    pub(crate) fn throttle_at_entry(&mut self, v: u32) -> bool {
        let (vm, p) = (self.vcpus[v as usize].vm, self.vcpus[v as usize].pcpu);
        if !self.is_throttled(vm, p) {
            return false;
        }
        self.update_curr(p);
        self.save_lag(p, v);
        self.stop_running(v);
        self.pcpus[p as usize].curr = None;
        self.hold(vm, p, v);
        self.schedule(p);
        true
    }

    /// Hold the runnable, not running vCPU `v` off `p`'s run queue. Its lag (EEVDF) is what it
    /// had when it left a run queue: taken at the throttle (6.18: at its VM entry), when it
    /// halted, or at the pCPU a balancer took it from.
    fn hold(&mut self, vm: u32, p: u32, v: u32) {
        self.clear_buddies(p, v);
        let vc = &mut self.vcpus[v as usize];
        debug_assert_eq!(vc.host, HostState::Runnable);
        vc.counters.throttles += 1;
        self.bandwidth_of(vm).expect("a VM with a quota").held[p as usize].push(v);
    }

    /// Before `v` is queued on `p` (woken, or moved there by a balancer): if its VM is throttled
    /// there, or this makes the VM's first vCPU there and no budget is to be had
    /// (`check_enqueue_throttle`), hold it instead. Returns whether it was held; then a spent
    /// budget of the vCPU running on `p` reschedules now.
    pub(crate) fn held_on_enqueue(&mut self, v: u32, p: u32) -> bool {
        let vm = self.vcpus[v as usize].vm;
        let (first_here, task_based) = (!self.vm_on(vm, p), self.task_based_throttle());
        let Some(b) = self.bandwidth_of(vm) else { return false };
        if !b.throttled[p as usize] {
            if !first_here || b.budget[p as usize] > 0 || b.assign(p, SLICE_NS) {
                return false;
            }
            self.mark_throttled(vm, p);
        }
        if task_based {
            // Queued all the same: its task work comes when it is picked.
            return false;
        }
        self.set_task_cpu(v, p);
        self.hold(vm, p, v);
        self.resched_if_spent(p);
        true
    }

    /// `resched_curr` after a budget ran out in an `update_curr` that no scheduling decision
    /// follows (a wake-up held, an unthrottle): the kernel reschedules at once, not at the tick.
    fn resched_if_spent(&mut self, p: u32) {
        if self.pcpus[p as usize].need_resched && self.pcpus[p as usize].curr.is_some() {
            self.resched_curr(p);
        }
    }

    /// The quota of each VM at the start: its first vCPU on each pCPU takes a slice of budget
    /// there, as a vCPU queued there would (`check_enqueue_throttle`); where none is left, the VM
    /// starts throttled. Runs before the first `schedule()`.
    pub(crate) fn start_bandwidth(&mut self) {
        for vm in 0..self.bandwidth.len() as u32 {
            for p in 0..self.pcpus.len() as u32 {
                if self.bandwidth_of(vm).is_none() || !self.vm_on(vm, p) {
                    continue;
                }
                let b = self.bandwidth_of(vm).expect("a VM with a quota");
                if !b.assign(p, SLICE_NS) {
                    self.throttle(vm, p);
                }
            }
        }
    }

    /// Whether VM `vm` has a vCPU running, queued or (6.18) delayed on `p`: its `cfs_rq` there
    /// has threads (`nr_queued`).
    fn vm_on(&self, vm: u32, p: u32) -> bool {
        let rq = &self.pcpus[p as usize];
        rq.curr.iter().chain(&rq.queued).chain(&rq.delayed).any(|&q| self.vcpus[q as usize].vm == vm)
    }

    /// `return_cfs_rq_runtime`: `v`'s VM may just have lost its last vCPU on `p`; if so, the
    /// budget there above 1 ms goes back to the pool, and the slack timer is armed if throttled
    /// pCPUs could use it. Linux 3.19 takes back only budget of the current period (the pCPU's
    /// `runtime_expires` is the pool's): older spare budget is trimmed all the same, and lost.
    pub(crate) fn return_spare_runtime(&mut self, v: u32, p: u32) {
        let vm = self.vcpus[v as usize].vm;
        if self.bandwidth_of(vm).is_none() || self.vm_on(vm, p) {
            return;
        }
        let (now, linux_3_19) = (self.now, self.scheduler == SchedulerKind::Cfs);
        let b = self.bandwidth_of(vm).expect("a VM with a quota");
        let spare = b.budget[p as usize] - MIN_KEPT_NS;
        if spare <= 0 {
            return;
        }
        b.budget[p as usize] -= spare;
        if linux_3_19 && b.issued_in[p as usize] != b.refills {
            return;
        }
        b.pool += spare as u64;
        let refill_soon = b.next_refill - now < SLACK_PERIOD_NS + MIN_EXPIRATION_NS;
        if b.pool > SLICE_NS && !b.order.is_empty() && !refill_soon && !b.slack_armed {
            b.slack_armed = true;
            // 3.19 forwards the slack timer by whole slack periods of the host's clock
            // (`start_bandwidth_timer`), so it fires 0-5 ms later; since 5.x, 5 ms later.
            let at = if linux_3_19 {
                let clock = b.boot_ns + now;
                now + SLACK_PERIOD_NS - clock % SLACK_PERIOD_NS
            } else {
                now + SLACK_PERIOD_NS
            };
            self.q.push(at, Event::BandwidthSlack { vm });
        }
    }

    /// The period timer (`do_sched_cfs_period_timer`): refill the pool, hand it to the throttled
    /// pCPUs, and re-arm.
    pub(crate) fn bandwidth_period(&mut self, vm: u32) {
        let now = self.now;
        let b = self.bandwidth_of(vm).expect("a VM with a quota");
        b.pool = b.quota;
        b.refills += 1;
        b.next_refill = now + b.period;
        let at = b.next_refill;
        self.q.push(at, Event::BandwidthPeriod { vm });
        self.distribute_runtime(vm);
    }

    /// The slack timer (`do_sched_cfs_slack_timer`): hand returned budget to throttled pCPUs,
    /// unless a refill is due within 2 ms or no more than a slice is free.
    pub(crate) fn bandwidth_slack(&mut self, vm: u32) {
        let now = self.now;
        let b = self.bandwidth_of(vm).expect("a VM with a quota");
        b.slack_armed = false;
        if b.next_refill - now < MIN_EXPIRATION_NS || b.pool <= SLICE_NS {
            return;
        }
        self.distribute_runtime(vm);
    }

    /// `distribute_cfs_runtime`: each throttled pCPU in turn gets what brings its budget to 1 ns,
    /// while the pool lasts, and those that reach it are unthrottled.
    fn distribute_runtime(&mut self, vm: u32) {
        let b = self.bandwidth_of(vm).expect("a VM with a quota");
        let mut freed = Vec::new();
        for &p in &b.order {
            if b.pool == 0 {
                break;
            }
            let budget = &mut b.budget[p as usize];
            let given = ((1 - *budget).max(0) as u64).min(b.pool);
            b.pool -= given;
            *budget += given as i64;
            b.issued_in[p as usize] = b.refills;
            if *budget > 0 {
                freed.push(p);
            }
        }
        b.order.retain(|p| !freed.contains(p));
        for p in freed {
            self.unthrottle(vm, p);
        }
    }

    /// `unthrottle_cfs_rq`: VM `vm`'s held vCPUs go back on `p`'s run queue, placed as woken
    /// threads; an idle `p` picks one.
    fn unthrottle(&mut self, vm: u32, p: u32) {
        let b = self.bandwidth_of(vm).expect("a VM with a quota");
        b.throttled[p as usize] = false;
        let held = std::mem::take(&mut b.held[p as usize]);
        let Some(&first) = held.first() else { return };
        // The VM's group entity is queued on the root: only the root is updated, and the VM
        // running on `p`, another one, is not charged.
        self.update_curr_for(p, first);
        let half_latency = self.costs.sched_latency / 2;
        for v in held {
            if self.scheduler.is_eevdf() {
                self.place(p, v);
            } else {
                let min_vr = self.pcpus[p as usize].min_vruntime;
                let se = &mut self.vcpus[v as usize].se;
                se.vruntime = se.vruntime.max(min_vr.saturating_sub(half_latency));
            }
            self.vcpus[v as usize].se.listed_at = self.now;
            self.pcpus[p as usize].queued.push(v);
        }
        // A vCPU polling in its halt stops once another thread is runnable beside it
        // (`single_task_running()` fails on its next iteration) and blocks.
        if self.pcpus[p as usize].curr.is_none() {
            self.schedule(p);
        } else if !self.poller_gives_way(p) {
            self.resched_if_spent(p);
        }
        self.maybe_arm_tick(p);
    }

    /// Under CFS the tick is armed for one thread too when a VM has a quota: it is when a spent
    /// budget is usually noticed.
    pub(crate) fn ticks_alone(&self) -> bool {
        self.scheduler == SchedulerKind::Cfs && !self.bandwidth.is_empty()
    }

    /// Every quota's books balance: a throttled pCPU has an empty budget and (before 6.18) none
    /// of the VM's vCPUs running or queued, a held vCPU is runnable on that pCPU, no pCPU's
    /// budget exceeds a slice, and uncharged time waits only where the VM runs. (The pool may
    /// exceed the quota between refills, with budget returned from an earlier period, as in the
    /// kernel since budgets stopped expiring.)
    pub(crate) fn audit_bandwidth(&mut self) {
        let mut found = Vec::new();
        for (vm, b) in self.bandwidth.iter().enumerate() {
            let Some(b) = b else { continue };
            for p in 0..b.held.len() {
                if b.budget[p] > SLICE_NS as i64 {
                    found.push(format!("VM {vm}'s budget on pCPU {p}, {} ns, exceeds a slice", b.budget[p]));
                }
                let throttled = b.throttled[p];
                if !throttled && !b.held[p].is_empty() {
                    found.push(format!("VM {vm} holds vCPUs {:?} on pCPU {p}, which is not throttled", b.held[p]));
                }
                let queued_while_throttled = self.vm_on(vm as u32, p as u32) && !self.task_based_throttle();
                if throttled && (queued_while_throttled || b.budget[p] > 0) {
                    found.push(format!("VM {vm} is throttled on pCPU {p} with budget {} ns or a vCPU queued there", b.budget[p]));
                }
                let running = self.pcpus[p].curr.filter(|&c| self.vcpus[c as usize].vm == vm as u32);
                if b.uncharged[p] > 0 && running.is_none() {
                    found.push(format!("VM {vm} has {} ns uncharged on pCPU {p}, where none of its vCPUs runs", b.uncharged[p]));
                }
                for &v in &b.held[p] {
                    let vc = &self.vcpus[v as usize];
                    if vc.host != HostState::Runnable || vc.pcpu != p as u32 {
                        found.push(format!("held vCPU {v} of VM {vm} is {:?} on pCPU {}, not runnable on {p}", vc.host, vc.pcpu));
                    }
                }
            }
        }
        for f in found {
            self.violations.push(format!("bandwidth: {f} (at {} ns)", self.now));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::Event;
    use crate::scenario::{CpuMax, Scenario, SchedulerKind};
    use crate::simulation::Sim;
    use crate::vcpu::{Act, HostState};

    const MS: u64 = 1_000_000;

    /// `pcpus` pCPUs under `scheduler`; VM `q` (vCPUs 0 and 1) has a quota of `quota_us` per
    /// 10 ms, VM `o` (vCPUs 2 and 3) none. Run queues emptied for the test to fill.
    fn host(scheduler: &str, pcpus: u32, quota_us: u64) -> Sim {
        let text = format!(
            "duration_ms = 100\n[host]\ncores_per_socket = {pcpus}\n[hypervisor]\nscheduler = \"{scheduler}\"\n\
             [[vm]]\nname = \"q\"\nvcpus = 2\nlock = \"ticket\"\nworkload = {{ preset = \"cpu-hog\" }}\n\
             cpu_max = {{ quota_us = {quota_us}, period_us = 10000 }}\n\
             [[vm]]\nname = \"o\"\nvcpus = 2\nlock = \"ticket\"\nworkload = {{ preset = \"cpu-hog\" }}\n"
        );
        let mut s = Sim::new(&Scenario::from_toml(&text).unwrap());
        for rq in &mut s.pcpus {
            rq.queued.clear();
        }
        s
    }

    /// On pCPU 0 of `host`: vCPU 0 of `q` runs computing, vCPUs 1 (`q`), 2 and 3 (`o`) are
    /// queued.
    fn busy(scheduler: &str) -> Sim {
        let mut s = host(scheduler, 1, 1000);
        s.pcpus[0].curr = Some(0);
        s.vcpus[0].host = HostState::Running;
        s.vcpus[0].act = Act::Compute { remaining: 1_000_000_000 };
        s.pcpus[0].queued = vec![1, 2, 3];
        for v in [1, 2, 3] {
            s.vcpus[v].host = HostState::Runnable;
            s.vcpus[v].pcpu = 0;
        }
        s
    }

    fn quota(s: &Sim) -> &super::Bandwidth {
        s.bandwidth[0].as_ref().unwrap()
    }

    fn quota_mut(s: &mut Sim) -> &mut super::Bandwidth {
        s.bandwidth[0].as_mut().unwrap()
    }

    /// [`busy`], with the VM's pool empty and vCPU 0 having run 1 µs since its budget was
    /// last charged.
    fn busy_with_an_empty_pool(scheduler: &str) -> Sim {
        let mut s = busy(scheduler);
        quota_mut(&mut s).pool = 0;
        s.now = 1_000;
        s.vcpus[0].se.exec_start = 0;
        s
    }

    #[test]
    fn a_pcpu_takes_budget_in_slices_and_the_pool_gives_what_it_has() {
        let mut s = busy("eevdf");
        s.charge_runtime(0, 0, 0);
        // The pool held the whole 1 ms quota, less than a 5 ms slice: all of it moved.
        assert_eq!((quota(&s).budget[0], quota(&s).pool), (1_000_000, 0));
        s.charge_runtime(0, 0, 1_000_000);
        assert!(s.pcpus[0].need_resched, "a spent budget with an empty pool reschedules");
    }

    #[test]
    fn a_wake_up_of_another_vms_vcpu_leaves_the_running_vms_charge_to_its_own_next_update() {
        // vCPU 0 of `q` runs on pCPU 0 with 1 ms of budget. A wake-up of `o`'s vCPU 2 there
        // updates only the root and `o`'s run queue: `q` is not charged until an update of its
        // own (here the wake-up of its vCPU 1), which charges both stretches.
        let mut s = busy("eevdf");
        (quota_mut(&mut s).budget[0], quota_mut(&mut s).pool) = (MS as i64, 0);
        s.vcpus[0].se.exec_start = 0;
        s.now = 300_000;
        s.update_curr_for(0, 2);
        assert_eq!((quota(&s).budget[0], quota(&s).uncharged[0]), (MS as i64, 300_000));
        assert_eq!(s.vcpus[0].se.sum_exec, 300_000, "its run is accounted all the same");
        s.now = 500_000;
        s.update_curr_for(0, 1);
        assert_eq!((quota(&s).budget[0], quota(&s).uncharged[0]), (500_000, 0));
    }

    #[test]
    fn the_period_timer_fires_at_fixed_points_of_the_hosts_clock_whose_phase_is_random() {
        let c = |period_us| CpuMax { quota_us: 1000, period_us };
        let (a, b) = (c(100_000), c(50_000));
        let phases = |scheduler, seed| super::timer_phases(&[Some(&a), None, Some(&a), Some(&b)], scheduler, seed).1;
        for seed in 1..=20 {
            // Linux 3.19: every timer at whole periods of the clock, so groups of one period
            // refill together, and one of half that period at the same points or between.
            let old = phases(SchedulerKind::Cfs, seed);
            assert!(old[1].is_none() && old[0] == old[2], "seed {seed}: {old:?}");
            assert!(old.iter().flatten().all(|&t| (1..=100 * MS).contains(&t)));
            assert_eq!(old[0].unwrap() % (50 * MS), old[3].unwrap() % (50 * MS), "seed {seed}: {old:?}");
            assert_eq!(old, phases(SchedulerKind::Cfs, seed), "seed {seed}: drawn from the seed");
        }
        // Since 6.4 each group's timer has its own random offset: equal periods interleave.
        let apart = (1..=20).filter(|&seed| {
            let new = phases(SchedulerKind::Eevdf, seed);
            new[0] != new[2]
        });
        assert_eq!(apart.count(), 20);
    }

    #[test]
    fn in_6_18_the_pick_that_finishes_a_delayed_dequeue_returns_the_vms_spare_budget() {
        // vCPU 0 of `q` blocked on pCPU 0 and stayed queued as delayed, with 4 ms of budget
        // left; the pick meets it eligible and dequeues it, and `q` has no vCPU left there.
        let mut s = host("eevdf-6.18", 1, 8000);
        let b = quota_mut(&mut s);
        (b.pool, b.budget[0], b.next_refill) = (0, 4 * MS as i64, 10 * MS);
        s.pcpus[0].queued = vec![2];
        s.vcpus[2].host = HostState::Runnable;
        (s.vcpus[2].se.vruntime, s.vcpus[2].se.deadline) = (10 * MS, 30 * MS);
        (s.vcpus[0].se.vruntime, s.vcpus[0].se.deadline) = (9 * MS, 15 * MS);
        s.vcpus[0].host = HostState::Blocked;
        s.pcpus[0].delayed.push(0);
        assert_eq!(s.pick_eevdf_618(0), Some(2));
        assert_eq!((quota(&s).budget[0], quota(&s).pool), (MS as i64, 3 * MS));
    }

    #[test]
    fn a_spent_budget_throttles_the_vms_vcpus_on_the_pcpu_and_the_refill_brings_them_back() {
        let mut s = busy_with_an_empty_pool("eevdf");
        s.schedule(0);
        // vCPU 0 was running and vCPU 1 queued: both held, in that order; `o`'s vCPUs take the
        // pCPU.
        assert!(matches!(s.pcpus[0].curr, Some(2 | 3)));
        assert_eq!(quota(&s).held[0], vec![0, 1]);
        assert!(s.is_held(0) && s.is_held(1));
        assert_eq!((s.vcpus[0].counters.throttles, s.vcpus[1].counters.throttles), (1, 1));
        // The one that was running is preempted, runnable, and no candidate for `yield_to`.
        assert_eq!(s.vcpus[0].host, HostState::Runnable);
        assert_eq!(s.yield_to(2, 0), 0);
        // Ten milliseconds on, with `o`'s vCPU computing since then (no event has run).
        s.now = 10 * MS;
        let c = s.pcpus[0].curr.unwrap();
        let vc = &mut s.vcpus[c as usize];
        (vc.host_work, vc.act, vc.seg_start, vc.se.exec_start) = (None, Act::Compute { remaining: 1_000_000_000 }, s.now, s.now);
        s.bandwidth_period(0);
        let b = quota(&s);
        assert!(!b.throttled[0] && b.held[0].is_empty() && b.budget[0] == 1 && b.pool == 1_000_000 - 1_001);
        assert!(s.pcpus[0].queued.contains(&0) && s.pcpus[0].queued.contains(&1));
        assert!(!s.is_held(0) && !s.is_held(1));
    }

    #[test]
    fn a_vcpu_that_blocks_after_spending_the_budget_leaves_its_vm_throttled() {
        // `put_prev_entity` checks the group of the task that blocked, too: the VM's queued
        // vCPU 1 must not run on a budget already spent.
        let mut s = busy_with_an_empty_pool("eevdf");
        s.vcpus[0].act = Act::Halted(crate::vcpu::HaltReason::Idle { wake_at: 50 * MS });
        s.block(0);
        assert!(quota(&s).throttled[0], "the blocked vCPU's VM is throttled");
        assert_eq!(quota(&s).held[0], vec![1]);
        assert!(matches!(s.pcpus[0].curr, Some(2 | 3)));
    }

    #[test]
    fn an_unthrottled_vcpu_ends_the_halt_poll_of_the_vcpu_on_its_pcpu() {
        // `o`'s vCPU 2 polls in its halt on pCPU 0, alone there while `q` is throttled; `q`'s
        // vCPU 0 is held. The refill queues vCPU 0 beside the poller, whose next iteration finds
        // `single_task_running()` false: it blocks, and vCPU 0 runs.
        let mut s = host("eevdf", 1, 1000);
        s.pcpus[0].curr = Some(2);
        (s.vcpus[2].host, s.vcpus[2].act) = (HostState::Running, Act::Halted(crate::vcpu::HaltReason::Idle { wake_at: 50 * MS }));
        s.vcpus[2].host_work = Some(crate::vcpu::HostWork { remaining: 100_000, after: crate::vcpu::After::PollEnd });
        assert!(s.polling(2));
        (s.vcpus[0].host, s.vcpus[0].pcpu) = (HostState::Runnable, 0);
        (quota_mut(&mut s).throttled[0], quota_mut(&mut s).held[0]) = (true, vec![0]);
        s.unthrottle(0, 0);
        assert_eq!(s.vcpus[2].host, HostState::Blocked, "the poll gave way");
        assert_eq!(s.pcpus[0].curr, Some(0));
    }

    #[test]
    fn the_lags_of_a_throttled_vms_vcpus_are_taken_while_all_still_count() {
        // Alone on the pCPU, vCPU 0 (running) and vCPU 1 (queued) at vruntimes 102 and 98 ms:
        // the average is 100 ms, so their lags are -2 and +2 ms.
        let mut s = busy("eevdf");
        s.pcpus[0].queued = vec![1];
        for (v, vr) in [(0, 102 * MS), (1, 98 * MS)] {
            s.vcpus[v].se.vruntime = vr;
        }
        s.vcpus[0].se.exec_start = 0;
        quota_mut(&mut s).pool = 0;
        quota_mut(&mut s).budget[0] = -1;
        s.schedule(0);
        assert_eq!(quota(&s).held[0], vec![0, 1]);
        assert_eq!((s.vcpus[0].se.vlag, s.vcpus[1].se.vlag), (-2 * MS as i64, 2 * MS as i64));
    }

    /// Linux 6.18: vCPU 0 of `q` ran on pCPU 0 beside `o`'s vCPU 2 and spent `q`'s budget
    /// there; `schedule()` throttled `q` and picked vCPU 0 again (the earlier deadline).
    fn repicked_while_throttled() -> Sim {
        let mut s = host("eevdf-6.18", 2, 1000);
        s.pcpus[0].curr = Some(0);
        s.pcpus[0].queued = vec![2];
        s.vcpus[0].host = HostState::Running;
        (s.vcpus[2].host, s.vcpus[2].pcpu) = (HostState::Runnable, 0);
        (s.vcpus[0].se.vruntime, s.vcpus[0].se.deadline) = (10 * MS, 11 * MS);
        (s.vcpus[2].se.vruntime, s.vcpus[2].se.deadline) = (10 * MS, 20 * MS);
        s.vcpus[0].se.exec_start = 0;
        let b = quota_mut(&mut s);
        (b.pool, b.budget[0]) = (0, -1);
        s.schedule(0);
        s
    }

    #[test]
    fn in_6_18_a_throttled_vms_vcpus_stay_queued_and_each_is_held_at_its_next_vm_entry() {
        let mut s = repicked_while_throttled();
        // Throttled, but nothing leaves the run queue: vCPU 0, picked again, gets the task work,
        // and is no one a balancer must leave alone on pCPU 0.
        assert!(quota(&s).throttled[0] && quota(&s).held[0].is_empty());
        assert_eq!(s.pcpus[0].curr, Some(0));
        assert!(s.vcpus[0].throttle_work && !s.is_held(0));
        assert!(!s.throttled_pair(0, 0, 1) && s.throttled_pair(0, 1, 0));
        // At its VM entry the work finds `q` still throttled: vCPU 0 is held, and `o` runs.
        assert!(s.throttle_at_entry(0));
        assert_eq!((quota(&s).held[0].clone(), s.pcpus[0].curr), (vec![0], Some(2)));
        assert!(s.is_held(0) && s.vcpus[0].counters.throttles == 1);
        // Before 6.18 the throttle holds it at once.
        let mut s = busy_with_an_empty_pool("eevdf");
        s.schedule(0);
        assert_eq!(quota(&s).held[0], vec![0, 1]);
    }

    #[test]
    fn in_6_18_an_ipi_waits_for_a_vcpu_that_will_be_held_at_its_vm_entry() {
        // vCPU 0 of `q`, picked again on pCPU 0 while `q` is throttled there, has its task work
        // pending. An IPI from vCPU 1 is not handled before the entry (interrupts are
        // injected there), and the vCPU is held with it still pending.
        let mut s = repicked_while_throttled();
        assert!(s.held_at_next_entry(0));
        s.deliver_ipi(1, 0);
        assert_eq!(s.vcpus[0].pending_ipis, vec![1]);
        assert!(s.throttle_at_entry(0));
        assert_eq!(s.vcpus[0].pending_ipis, vec![1]);
        assert!(std::iter::from_fn(|| s.q.pop()).all(|(_, e)| !matches!(e, Event::IpiAck { .. })), "no acknowledgement queued");
    }

    #[test]
    fn in_6_18_an_ipi_held_by_a_send_loop_still_waits_for_a_vcpu_held_at_the_loops_last_entry() {
        // vCPU 0 ends a flush's send loop (interrupts back on) with an IPI from vCPU 1 pending
        // and its task work due at that entry: the IPI is taken only after the hold.
        let mut s = repicked_while_throttled();
        s.vcpus[0].irqs_off = true;
        s.vcpus[0].ipis_to_send = vec![1];
        s.deliver_ipi(1, 0);
        s.ipis_sent(0);
        assert!(!s.vcpus[0].irqs_off);
        assert_eq!(s.vcpus[0].pending_ipis, vec![1], "left for the entry after the hold");
        assert!(std::iter::from_fn(|| s.q.pop()).all(|(_, e)| !matches!(e, Event::IpiAck { .. })), "no acknowledgement queued");
    }

    #[test]
    fn linux_3_19_fires_the_slack_timer_on_a_grid_of_the_hosts_clock() {
        for (scheduler, grid) in [("cfs", true), ("eevdf", false)] {
            let mut s = host(scheduler, 2, 8000);
            let b = quota_mut(&mut s);
            (b.pool, b.budget, b.next_refill) = (2_500_000, vec![4 * MS as i64, -1], 10 * MS);
            s.throttle(0, 1);
            s.now = 1_234_567;
            s.return_spare_runtime(0, 0);
            let boot_ns = quota(&s).boot_ns;
            let at = std::iter::from_fn(|| s.q.pop()).find(|&(_, e)| e == Event::BandwidthSlack { vm: 0 }).map(|(t, _)| t).unwrap();
            if grid {
                assert!((boot_ns + at) % (5 * MS) == 0 && at > s.now && at <= s.now + 5 * MS, "{scheduler}: {at}");
            } else {
                assert_eq!(at, s.now + 5 * MS, "{scheduler}");
            }
        }
    }

    #[test]
    fn linux_3_19_hands_budget_to_the_last_throttled_first_and_6_8_to_the_first() {
        for (scheduler, first) in [("cfs", 1), ("eevdf", 0)] {
            let mut s = host(scheduler, 2, 1000);
            let b = quota_mut(&mut s);
            b.pool = 0;
            b.budget = vec![-(MS as i64) / 2, -(MS as i64) / 2];
            s.throttle(0, 0);
            s.throttle(0, 1);
            // The refill (1 ms) brings one debt of 0.5 ms to 1 ns, and leaves the other at -1 ns.
            s.now = 10 * MS;
            s.bandwidth_period(0);
            let b = quota(&s);
            assert_eq!(b.throttled, vec![first == 1, first == 0], "{scheduler}");
            assert_eq!(b.order, vec![1 - first], "{scheduler}");
        }
    }

    #[test]
    fn linux_6_8_checks_for_returned_budget_before_it_throttles_and_3_19_does_not() {
        for (scheduler, throttled) in [("eevdf", false), ("cfs", true)] {
            let mut s = busy(scheduler);
            let b = quota_mut(&mut s);
            (b.pool, b.budget[0]) = (5, -1);
            s.throttle_if_spent(0, 0);
            assert_eq!(quota(&s).throttled[0], throttled, "{scheduler}");
        }
    }

    #[test]
    fn a_vcpu_woken_onto_a_throttled_pcpu_joins_the_held_ones() {
        let mut s = busy("eevdf");
        quota_mut(&mut s).pool = 0;
        s.schedule(0);
        s.vcpus[0].host = HostState::Runnable;
        quota_mut(&mut s).held[0].retain(|&v| v != 0);
        assert!(s.held_on_enqueue(0, 0));
        assert_eq!(quota(&s).held[0], vec![1, 0]);
        // Another VM's vCPU is queued as usual.
        assert!(!s.held_on_enqueue(2, 0));
    }

    #[test]
    fn the_vms_first_vcpu_on_a_pcpu_without_budget_is_held_there() {
        // `check_enqueue_throttle`: pCPU 0 holds no vCPU of `q` and the pool is empty.
        let mut s = host("eevdf", 1, 1000);
        quota_mut(&mut s).pool = 0;
        s.vcpus[0].host = HostState::Runnable;
        assert!(s.held_on_enqueue(0, 0));
        assert!(quota(&s).throttled[0]);
        // With budget in the pool it takes a slice instead.
        let mut s = host("eevdf", 1, 1000);
        s.vcpus[0].host = HostState::Runnable;
        assert!(!s.held_on_enqueue(0, 0));
        assert_eq!(quota(&s).budget[0], MS as i64);
    }

    #[test]
    fn no_balancer_moves_a_vcpu_of_a_vm_throttled_on_either_pcpu() {
        let mut s = host("eevdf", 2, 1000);
        quota_mut(&mut s).throttled[1] = true;
        assert!(s.throttled_pair(0, 0, 1) && s.throttled_pair(0, 1, 0));
        assert!(!s.throttled_pair(1, 0, 1), "another VM moves freely");
    }

    #[test]
    fn an_unthrottled_vcpu_under_cfs_is_placed_as_a_woken_one() {
        // Held since long ago at vruntime 0, it comes back no further behind than half the
        // latency from `min_vruntime`.
        let mut s = busy("cfs");
        quota_mut(&mut s).pool = 0;
        s.schedule(0);
        s.pcpus[0].min_vruntime = 100 * MS;
        s.vcpus[1].se.vruntime = 0;
        s.now = 10 * MS;
        s.bandwidth_period(0);
        assert_eq!(s.vcpus[1].se.vruntime, 100 * MS - s.costs.sched_latency / 2);
    }

    /// `q` with 4 ms of budget left on pCPU 0 and throttled on pCPU 1; the pool holds 2.5 ms,
    /// and the next refill is at 10 ms.
    fn slack_host() -> Sim {
        let mut s = host("eevdf", 2, 8000);
        let b = quota_mut(&mut s);
        (b.pool, b.budget, b.next_refill) = (2_500_000, vec![4 * MS as i64, -1], 10 * MS);
        s.throttle(0, 1);
        s
    }

    #[test]
    fn budget_left_on_a_pcpu_the_vm_leaves_returns_to_the_pool_and_the_slack_timer_hands_it_on() {
        let mut s = slack_host();
        s.now = MS;
        s.return_spare_runtime(0, 0);
        // All but `min_cfs_rq_runtime` (1 ms) went back, and with more than a slice free and a
        // throttled pCPU the slack timer is armed for 5 ms later.
        assert_eq!((quota(&s).budget[0], quota(&s).pool, quota(&s).slack_armed), (MS as i64, 5_500_000, true));
        let armed = std::iter::from_fn(|| s.q.pop()).any(|(t, e)| e == Event::BandwidthSlack { vm: 0 } && t == 6 * MS);
        assert!(armed);
        s.now = 6 * MS;
        s.bandwidth_slack(0);
        let b = quota(&s);
        assert!(!b.throttled[1] && b.budget[1] == 1 && b.pool == 5_500_000 - 2 && !b.slack_armed);
    }

    #[test]
    fn linux_3_19_takes_back_only_budget_issued_since_the_last_refill() {
        // pCPU 0 took its 4 ms before a refill and has not asked since: 6.8 returns the spare
        // 3 ms to the pool, 3.19 trims it all the same and loses it.
        for (scheduler, pool) in [("eevdf", 3 * MS), ("cfs", 0)] {
            let mut s = host(scheduler, 2, 8000);
            let b = quota_mut(&mut s);
            (b.pool, b.budget[0], b.next_refill) = (0, 4 * MS as i64, 10 * MS);
            b.refills = 1;
            s.now = MS;
            s.return_spare_runtime(0, 0);
            assert_eq!((quota(&s).budget[0], quota(&s).pool), (MS as i64, pool), "{scheduler}");
        }
    }

    #[test]
    fn the_slack_timer_stays_away_from_a_refill() {
        // Returned at 4 ms, the slack would come 1 ms before the 10 ms refill: not armed.
        let mut s = slack_host();
        s.now = 4 * MS;
        s.return_spare_runtime(0, 0);
        assert!(!quota(&s).slack_armed);
        // Armed earlier, it does nothing when it fires within 2 ms of the refill.
        let mut s = slack_host();
        quota_mut(&mut s).pool = 6 * MS;
        s.now = 8_500_000;
        s.bandwidth_slack(0);
        assert!(quota(&s).throttled[1]);
    }
}
