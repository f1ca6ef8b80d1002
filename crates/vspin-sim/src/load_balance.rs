//! Periodic load balancing of the host scheduler (`hypervisor.load_balance = "periodic"`, the
//! default): Linux 3.19's `rebalance_domains` → `load_balance` (`kernel/sched/fair.c`), and its
//! 6.8 successor where the two differ (named below).
//!
//! Why it matters here: without it, an unpinned vCPU stays on the run queue it was woken onto
//! (a pCPU going idle pulls only a cold one, `scheduler.rs`), so two vCPUs of one VM can share a
//! pCPU for a whole run while other pCPUs run one each. Over-committed lock experiments are
//! sensitive to that: the ticket lock's convoys in the unpinned VEE'13 setup form on such queues
//! (`docs/mechanisms/pticket.md`, "Periodic load balancing").
//!
//! The model, per pCPU, on every tick (ticks stand for jiffies; an idle pCPU's share is done by
//! the NOHZ idle balancer in Linux, at the same intervals, so it is checked here as if it ticked):
//! - **Domains** (`sd_init`), lowest first, a level dropped when its span is its child's: SMT
//!   (the core's threads; groups: single pCPUs; `imbalance_pct` 110, `cache_nice_tries` 0), MC
//!   (the socket; groups: cores; 117, 1), DIE (all pCPUs; groups: sockets; 125 in 3.19 and 117
//!   on the 6.8 and 6.18 hosts, 1: sockets are not NUMA nodes here, whose level would try twice).
//! - **Who** (`should_we_balance`): at each level one pCPU of the local group balances for it,
//!   its first idle pCPU, else its first; another pCPU counts the level as balanced and stops
//!   its pass there (this matters only for groups of several pCPUs: SMT cores, sockets).
//! - **When**: a domain is balanced once `balance_interval` has passed since its last balance;
//!   the interval starts at `min_interval` = the span's pCPU count in ms, doubles up to
//!   `max_interval` (twice that) each time the domain is found balanced, returns to the minimum
//!   whenever it is found unbalanced (whether or not a vCPU could move), and is multiplied by
//!   `busy_factor` (32; 16 since Linux 5.10) while the pCPU runs something, capped at
//!   `max_load_balance_interval` (HZ × pCPUs / 10 jiffies).
//! - **Whether** (`find_busiest_group`): the busiest group is the one with the most runnable
//!   vCPUs per pCPU. The domain is balanced unless that group is above the local one and the
//!   local one is below the domain's average; a busy pCPU also needs the busiest group above the
//!   local one by `imbalance_pct`, an idle one needs it to hold more vCPUs than pCPUs.
//! - **How many** (`calculate_imbalance`, `fix_small_imbalance`, `detach_tasks`): enough to bring
//!   the busiest group down to the average without lifting the local one above it, rounded to
//!   whole vCPUs; below one vCPU, one if the busiest group is at least one vCPU per pCPU above
//!   the local one (3.19); since 5.5 (the 6.8 host) that one moves only on a pass after a failed
//!   one, unless the pulling pCPU is idle.
//! - **Which** (`find_busiest_queue`, `can_migrate_task`): from the pCPU of the busiest group
//!   running the most vCPUs (among those with a queued vCPU allowed to move), queued vCPUs in
//!   the order of the pCPU's task list (`detach_order`). A vCPU that ran within
//!   `sysctl_sched_migration_cost`, or (`CACHE_HOT_BUDDY`) is a buddy of its run queue while
//!   the pulling pCPU is busy (`task_hot`, shared with `idle_balance`: never between SMT
//!   siblings on the 6.8 host), is cache-hot and moves
//!   only once the domain has failed more than `cache_nice_tries` times in a row. A moved vCPU
//!   preempts the pCPU's current one as a woken one would (`attach_task` → `check_preempt_curr`).
//!
//! Simplifications (named, not hidden): load is the number of runnable vCPUs, not PELT's decayed
//! average (every vCPU thread is nice 0 and a busy vCPU is always runnable); active balancing
//! (the stopper thread pushing a *running* task) is not modelled, so a vCPU that never waits in a
//! run queue stays where it started: unpinned vCPUs start on the least-loaded pCPUs in Linux's
//! CPU order (`simulation.rs`), so 8 busy vCPUs on two idle 8-core sockets all run on the first
//! socket, where Linux's fork-time `find_idlest_group` and active balancing would spread them
//! over both; the balancing itself costs no
//! simulated time. A candidate skipped as cache-hot keeps its place in the task list (the kernel
//! moves it to the far end).
use crate::engine::Event;
use crate::scenario::{LoadBalanceKind, SchedulerKind};
use crate::simulation::Sim;
use crate::vcpu::Affinity;

/// `sd->busy_factor`: a busy pCPU balances this many times less often. 32 in Linux 3.19 (the
/// CFS host); 16 since 5.10 (commit "sched/fair: Reduce busy load balance interval"), so in
/// the 6.8 and 6.18 EEVDF hosts.
fn busy_factor(scheduler: SchedulerKind) -> u64 {
    match scheduler {
        SchedulerKind::Cfs => 32,
        SchedulerKind::Eevdf | SchedulerKind::Eevdf618 => 16,
        SchedulerKind::Credit1 => unreachable!("Xen's credit1 balances by stealing (credit1.rs)"),
        SchedulerKind::Gang => unreachable!("a gang's vCPUs keep their pCPUs (gang.rs)"),
    }
}

/// One scheduling domain of a pCPU and its balancing state, as `struct sched_domain` holds both.
pub(crate) struct Domain {
    /// Groups of pCPUs whose loads are compared; the first holds the balancing pCPU.
    groups: Vec<Vec<u32>>,
    imbalance_pct: u64,
    cache_nice_tries: u32,
    last_balance: u64,
    /// `balance_interval`, in ms.
    interval_ms: u64,
    /// `nr_balance_failed`.
    failed: u32,
}

impl Domain {
    fn new(groups: Vec<Vec<u32>>, imbalance_pct: u64, cache_nice_tries: u32) -> Domain {
        let mut d = Domain { groups, imbalance_pct, cache_nice_tries, last_balance: 0, interval_ms: 0, failed: 0 };
        d.interval_ms = d.span_len();
        d
    }

    fn span_len(&self) -> u64 {
        self.groups.iter().map(|g| g.len() as u64).sum()
    }
}

/// What a `load_balance` pass did.
enum Outcome {
    /// No imbalance worth moving for (`out_balanced`).
    Balanced,
    /// An imbalance, but nothing moved: every vCPU that could was cache-hot, or (6.8) the
    /// imbalance was below one vCPU on a first try.
    Failed,
    Moved,
}
use Outcome::{Balanced, Failed, Moved};

impl Sim {
    /// Arm every pCPU's balancing tick, when periodic balancing is on and some vCPU may move
    /// (with every vCPU pinned there is nothing to balance, and no event is spent on it).
    pub(crate) fn start_periodic_balance(&mut self) {
        if self.load_balance != LoadBalanceKind::Periodic
            || self.credit1.is_some()
            || self.vcpus.iter().all(|v| v.affinity != Affinity::Any)
        {
            return;
        }
        for p in 0..self.pcpus.len() as u32 {
            self.pcpus[p as usize].domains = self.domains(p);
            self.q.push(self.costs.tick_ns, Event::Balance { pcpu: p });
        }
    }

    /// `rebalance_domains` on pCPU `p` at a tick.
    pub(crate) fn periodic_balance(&mut self, p: u32) {
        let busy = self.pcpus[p as usize].curr.is_some();
        // `max_load_balance_interval`: HZ × pCPUs / 10 jiffies, a tenth of a second per pCPU.
        let cap_ns = self.pcpus.len() as u64 * 100_000_000;
        // The domains leave the pCPU for the pass, which changes the run queues.
        let mut domains = std::mem::take(&mut self.pcpus[p as usize].domains);
        for d in &mut domains {
            let interval_ns = (d.interval_ms * 1_000_000 * if busy { busy_factor(self.scheduler) } else { 1 }).min(cap_ns).max(self.costs.tick_ns);
            if self.now - d.last_balance < interval_ns {
                continue;
            }
            d.last_balance = self.now;
            let min = d.span_len();
            // `should_we_balance`: another pCPU of the local group balances this level and those
            // above; here it counts as balanced (`out_balanced`) and the pass stops.
            let ours = self.should_we_balance(p, d);
            match if ours { self.load_balance(p, d) } else { Balanced } {
                Balanced => {
                    d.failed = 0;
                    d.interval_ms = (d.interval_ms * 2).min(2 * min);
                }
                // "We were unbalanced, so reset the balancing interval": moved or not.
                Failed => {
                    d.failed += 1;
                    d.interval_ms = min;
                }
                Moved => {
                    d.failed = 0;
                    d.interval_ms = min;
                }
            }
            if !ours {
                break;
            }
        }
        self.pcpus[p as usize].domains = domains;
        self.q.push(self.now + self.costs.tick_ns, Event::Balance { pcpu: p });
    }

    /// Whether `p` is the pCPU of its group that balances domain `d`: the group's first idle
    /// pCPU, or its first pCPU when none is idle (`should_we_balance`, 3.19 and 6.8; 6.8 first
    /// prefers a pCPU whose whole core is idle, which this leaves out).
    fn should_we_balance(&self, p: u32, d: &Domain) -> bool {
        let local = &d.groups[0];
        let idle = |q: u32| self.pcpus[q as usize].curr.is_none() && self.nr_queued(q) == 0;
        let first = local.iter().copied().filter(|&q| idle(q)).min().or_else(|| local.iter().copied().min());
        first == Some(p)
    }

    /// `load_balance` of domain `d` into pCPU `p`.
    fn load_balance(&mut self, p: u32, d: &Domain) -> Outcome {
        let Some((n, busiest)) = self.imbalance(p, d) else { return Balanced };
        if n == 0 {
            return Failed;
        }
        // `can_migrate_task`: the affinity allows it, and the vCPU's VM is not throttled on either
        // pCPU (`throttled_lb_pair`, `bandwidth.rs`).
        let may_move = |s: &Sim, v: u32, src: u32| {
            let vc = &s.vcpus[v as usize];
            vc.affinity == Affinity::Any && !s.throttled_pair(vc.vm, src, p)
        };
        // `find_busiest_queue` in the busiest group, skipping queues whose every vCPU is pinned
        // (the `LBF_ALL_PINNED` retry).
        let gives = |q: u32| self.pcpus[q as usize].queued.iter().any(|&v| may_move(self, v, q));
        let Some(src) = busiest.iter().copied().filter(|&q| gives(q)).max_by_key(|&q| (self.nr_runnable(q), std::cmp::Reverse(q))) else {
            return Balanced;
        };
        let hot_ok = d.failed > d.cache_nice_tries;
        let mut candidates: Vec<u32> = self.pcpus[src as usize]
            .queued
            .iter()
            .copied()
            .filter(|&v| may_move(self, v, src) && (hot_ok || !self.task_hot(v, src, p)))
            .collect();
        if candidates.is_empty() {
            return Failed;
        }
        candidates.sort_by_key(|&v| self.detach_order(v));
        for &v in candidates.iter().take(n) {
            if self.pull(v, src, p) {
                self.check_preempt_curr(p, v);
            }
        }
        self.maybe_arm_tick(p);
        Moved
    }

    /// The group of `d` other than the local one with the most runnable vCPUs per pCPU (the
    /// first of equals).
    fn busiest_group<'d>(&self, d: &'d Domain) -> &'d [u32] {
        let avg = |g: &[u32]| self.runnable(g) / g.len() as f64;
        let mut best = &d.groups[1];
        for g in &d.groups[2..] {
            if avg(g) > avg(best) {
                best = g;
            }
        }
        best
    }

    /// Runnable vCPUs on the pCPUs of `g`, the load the balancer compares.
    fn runnable(&self, g: &[u32]) -> f64 {
        g.iter().map(|&q| self.nr_runnable(q)).sum::<usize>() as f64
    }

    /// How many vCPUs `p` should pull in domain `d`, and from which group (`find_busiest_group`
    /// and `calculate_imbalance`, loads counted in runnable vCPUs), or `None` when it is
    /// balanced (0: imbalanced, but this pass moves nothing and counts as failed).
    fn imbalance<'d>(&self, p: u32, d: &'d Domain) -> Option<(usize, &'d [u32])> {
        if d.groups.len() < 2 {
            return None;
        }
        let busiest = self.busiest_group(d);
        let (local_n, busiest_n) = (d.groups[0].len() as f64, busiest.len() as f64);
        let (local, remote) = (self.runnable(&d.groups[0]) / local_n, self.runnable(busiest) / busiest_n);
        let domain = d.groups.iter().map(|g| self.runnable(g)).sum::<f64>() / d.span_len() as f64;
        // `out_balanced` unless the busiest group is above the local one and the local one is
        // below the domain's average.
        if remote <= local || local >= domain {
            return None;
        }
        if self.pcpus[p as usize].curr.is_none() {
            // An idle pCPU pulls only from a group with more vCPUs than pCPUs (`group_overloaded`).
            if remote <= 1.0 {
                return None;
            }
        } else if 100.0 * remote <= d.imbalance_pct as f64 * local {
            return None;
        }
        // Move what brings the busiest group down to the average without taking the local one
        // above it; below one vCPU, `fix_small_imbalance` moves one if that does not reverse the
        // imbalance (busiest at least one vCPU per pCPU above local).
        let tasks = ((remote - domain) * busiest_n).min((domain - local) * local_n);
        if tasks < 1.0 {
            if remote - local < 1.0 {
                return None;
            }
            // Since Linux 5.5 (the 6.8 EEVDF host) there is no `fix_small_imbalance`: a vCPU
            // whose load exceeds the imbalance moves only after a failed pass has halved the
            // load it must fit (`shr_bound(load, nr_balance_failed)` in `detach_tasks`).
            // An idle pCPU's group has spare capacity, and then 6.8 counts the imbalance in
            // tasks or utilization (`migrate_task`, `migrate_util`), which that test does not
            // bound: it pulls at once.
            if self.scheduler.is_eevdf() && d.failed == 0 && self.pcpus[p as usize].curr.is_some() {
                return Some((0, busiest));
            }
            return Some((1, busiest));
        }
        // `detach_tasks` takes a vCPU while half its load fits in what is left.
        Some(((tasks + 0.5).floor() as usize, busiest))
    }

    /// The domains of pCPU `p`, lowest first, degenerate levels dropped.
    fn domains(&self, p: u32) -> Vec<Domain> {
        let n = self.pcpus.len() as u32;
        let core = |q: u32| {
            let mut c: Vec<u32> = std::iter::once(q).chain(self.topology.siblings(q).iter().copied()).collect();
            c.sort_unstable();
            c
        };
        let socket = self.topology.socket_of();
        // Groups of a span: the distinct values of `key` over it, in the circular order of
        // Linux's group list that starts at the one holding `p`.
        let grouped = |span: Vec<u32>, key: &dyn Fn(u32) -> Vec<u32>| {
            let mut groups: Vec<Vec<u32>> = Vec::new();
            for q in span {
                let g = key(q);
                if !groups.contains(&g) {
                    groups.push(g);
                }
            }
            let own = groups.iter().position(|g| g.contains(&p)).expect("p is in its own span");
            groups.rotate_left(own);
            groups
        };
        let mut levels = Vec::new();
        let smt = core(p);
        if smt.len() > 1 {
            levels.push(Domain::new(grouped(smt.clone(), &|q| vec![q]), 110, 0));
        }
        let package: Vec<u32> = (0..n).filter(|&q| socket[q as usize] == socket[p as usize]).collect();
        if package.len() > smt.len() {
            levels.push(Domain::new(grouped(package.clone(), &core), 117, 1));
        }
        if n as usize > package.len() {
            let by_socket = |q: u32| (0..n).filter(|&r| socket[r as usize] == socket[q as usize]).collect();
            // `sd_init`'s default `imbalance_pct`, which the machine level keeps: 125 in 3.19,
            // 117 since 4.x (so on the 6.8 and 6.18 hosts).
            let pct = if self.scheduler.is_eevdf() { 117 } else { 125 };
            levels.push(Domain::new(grouped((0..n).collect(), &by_socket), pct, 1));
        }
        levels
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::Scenario;
    use crate::simulation::Sim;
    use crate::vcpu::{Affinity, HostState};

    const MS: u64 = 1_000_000;

    /// A CFS host of `pcpus` pCPUs with periodic balancing and `vcpus` unpinned vCPUs, run
    /// queues emptied for a test to fill, at 100 ms.
    fn sim(sockets: u32, pcpus: u32, vcpus: u32) -> Sim {
        sim_on("cfs", sockets, pcpus, vcpus)
    }

    fn sim_on(scheduler: &str, sockets: u32, pcpus: u32, vcpus: u32) -> Sim {
        let text = format!(
            "duration_ms = 1000\n[host]\nsockets = {sockets}\ncores_per_socket = {pcpus}\n[hypervisor]\nscheduler = \"{scheduler}\"\nload_balance = \"periodic\"\n\
             [[vm]]\nname = \"g\"\nvcpus = {vcpus}\nlock = \"ticket\"\nworkload = {{ preset = \"cpu-hog\" }}\n"
        );
        let mut s = Sim::new(&Scenario::from_toml(&text).unwrap());
        for rq in &mut s.pcpus {
            rq.queued.clear();
            rq.curr = None;
        }
        s.now = 100 * MS;
        s.start_periodic_balance();
        s
    }

    /// Put `v` on `p`, running or queued, last run `ran_ago` ns ago.
    fn put(s: &mut Sim, p: u32, v: u32, running: bool, ran_ago: u64) {
        let vc = &mut s.vcpus[v as usize];
        vc.pcpu = p;
        vc.se.exec_start = s.now - ran_ago;
        vc.host = if running { HostState::Running } else { HostState::Runnable };
        if running {
            s.pcpus[p as usize].curr = Some(v);
        } else {
            s.pcpus[p as usize].queued.push(v);
        }
    }

    /// pCPUs 0 and 1 each run a vCPU and queue a cold one; pCPU 2 runs one.
    fn two_two_one(s: &mut Sim) {
        for (p, v) in [(0, 0), (1, 2)] {
            put(s, p, v, true, 0);
            put(s, p, v + 1, false, 10 * MS);
        }
        put(s, 2, 4, true, 0);
    }

    /// Two pCPUs: pCPU 0 runs a vCPU and queues two that ran 0.1 ms ago (cache-hot); pCPU 1 idle.
    fn three_on_one_two_hot() -> Sim {
        let mut s = sim(1, 2, 3);
        put(&mut s, 0, 0, true, 0);
        put(&mut s, 0, 1, false, 100_000);
        put(&mut s, 0, 2, false, 100_000);
        s
    }

    fn loads(s: &Sim) -> Vec<usize> {
        (0..s.pcpus.len() as u32).map(|p| s.nr_runnable(p)).collect()
    }

    #[test]
    fn a_busy_pcpu_pulls_cold_vcpus_from_a_stacked_queue() {
        let mut s = sim(1, 2, 5);
        put(&mut s, 0, 0, true, 0);
        for v in 1..4 {
            put(&mut s, 0, v, false, 10 * MS);
        }
        put(&mut s, 1, 4, true, 0);
        s.periodic_balance(1);
        // Imbalance 1.5 vCPUs: `detach_tasks` takes two (half of the second's load still fits).
        assert_eq!(loads(&s), vec![2, 3]);
    }

    #[test]
    fn cache_hot_vcpus_move_only_after_the_domain_failed_more_than_cache_nice_tries() {
        let mut s = three_on_one_two_hot();
        let mut moves = 0;
        for attempt in 0..3 {
            s.now += s.pcpus.len() as u64 * 100 * MS; // past any interval
            for v in 1..3 {
                s.vcpus[v].se.exec_start = s.now - 100_000;
            }
            s.periodic_balance(1);
            if s.nr_runnable(1) > 0 {
                moves = attempt;
                break;
            }
        }
        // MC's `cache_nice_tries` is 1: two failed passes, then the third moves both hot vCPUs
        // (3 against 0: an imbalance of 1.5).
        assert_eq!(moves, 2);
        assert_eq!(loads(&s), vec![1, 2]);
    }

    #[test]
    fn a_pass_that_finds_an_imbalance_but_moves_nothing_resets_the_interval() {
        let mut s = three_on_one_two_hot();
        s.pcpus[1].domains[0].interval_ms = 4;
        s.periodic_balance(1);
        assert_eq!(loads(&s), vec![3, 0], "both cache-hot: nothing moved");
        assert_eq!(s.pcpus[1].domains[0].interval_ms, 2, "back to min_interval, the span's 2 pCPUs");
    }

    #[test]
    fn a_vcpu_the_balancer_moved_is_no_longer_cache_hot() {
        let mut s = sim(1, 2, 5);
        put(&mut s, 0, 0, true, 0);
        for v in 1..4 {
            put(&mut s, 0, v, false, 100_000);
        }
        put(&mut s, 1, 4, true, 0);
        s.pcpus[1].domains[0].failed = 2; // past cache_nice_tries: hot vCPUs may move
        s.periodic_balance(1);
        let moved: Vec<u32> = s.pcpus[1].queued.iter().copied().filter(|&v| (1..4).contains(&v)).collect();
        assert!(!moved.is_empty(), "{:?}", loads(&s));
        for v in moved {
            assert!(!s.task_hot(v, 1, 0), "vCPU {v}: migrate_task_rq_fair zeroes exec_start");
        }
    }

    #[test]
    fn the_machine_level_imbalance_pct_is_125_in_3_19_and_117_since() {
        let pct = |scheduler: &str| {
            let text = format!(
                "duration_ms = 1\n[host]\nsockets = 2\ncores_per_socket = 2\n[hypervisor]\nscheduler = \"{scheduler}\"\n\
                 [[vm]]\nname = \"g\"\nvcpus = 2\nlock = \"ticket\"\nworkload = {{ preset = \"cpu-hog\" }}\n"
            );
            let s = Sim::new(&Scenario::from_toml(&text).unwrap());
            s.domains(0).iter().map(|d| d.imbalance_pct).collect::<Vec<_>>()
        };
        assert_eq!(pct("cfs"), [117, 125], "socket (MC), machine (DIE)");
        assert_eq!(pct("eevdf"), [117, 117]);
    }

    #[test]
    fn one_pcpu_of_a_group_balances_for_it_the_first_idle_else_the_first() {
        // Socket 0 (pCPUs 0, 1) runs 3 + 2 vCPUs, socket 1 (2, 3) one each, none idle: only
        // pCPU 2, the first of its socket, balances the machine level.
        let setup = || {
            let mut s = sim(2, 2, 7);
            for (p, vcpus) in [(0, 0..3), (1, 3..5), (2, 5..6), (3, 6..7)] {
                for v in vcpus.clone() {
                    put(&mut s, p, v, v == vcpus.start, 10 * MS);
                }
            }
            s.now += 200 * MS; // past the busy interval of every level
            s
        };
        let mut s = setup();
        s.periodic_balance(3);
        assert_eq!(loads(&s), vec![3, 2, 1, 1], "pCPU 3 leaves the machine level to pCPU 2");
        let mut s = setup();
        s.periodic_balance(2);
        assert!(loads(&s)[2] > 1, "pCPU 2 pulls for its socket: {:?}", loads(&s));
    }

    #[test]
    fn candidates_leave_3_19s_list_from_its_head_and_later_lists_from_their_tail() {
        // pCPU 0 runs vCPU 0 and queues two cold ones, vCPU 1 woken 5 ms ago and vCPU 2 1 ms ago.
        let moved = |scheduler| {
            let mut s = sim_on(scheduler, 1, 2, 4);
            put(&mut s, 0, 0, true, 0);
            for (v, ago) in [(1, 5 * MS), (2, MS)] {
                put(&mut s, 0, v, false, 10 * MS);
                s.vcpus[v as usize].se.listed_at = s.now - ago;
            }
            put(&mut s, 1, 3, true, 0);
            s.now += 200 * MS;
            s.periodic_balance(1);
            [1, 2].into_iter().find(|&v| s.vcpus[v as usize].pcpu == 1).unwrap_or_else(|| panic!("{:?}", loads(&s)))
        };
        assert_eq!(moved("cfs"), 2, "3.19: the most recently woken first");
        assert_eq!(moved("eevdf"), 1, "6.8: the least recently picked or woken first");
    }

    #[test]
    fn an_idle_pcpu_on_6_8_pulls_one_vcpu_at_once_a_busy_one_after_a_failed_pass() {
        // 2, 2, and pCPU 2: the imbalance is under one vCPU.
        let setup = |idle: bool| {
            let mut s = sim_on("eevdf", 1, 3, 5);
            for (p, v) in [(0, 0), (1, 2)] {
                put(&mut s, p, v, true, 0);
                put(&mut s, p, v + 1, false, 10 * MS);
            }
            if !idle {
                put(&mut s, 2, 4, true, 0);
            }
            s.now += 200 * MS;
            s.periodic_balance(2);
            loads(&s)[2]
        };
        assert_eq!(setup(true), 1, "an idle pCPU has spare capacity: migrate_task, no shr_bound");
        assert_eq!(setup(false), 1, "a busy one waits for a failed pass: nothing moved yet");
    }

    #[test]
    fn pinned_vcpus_never_move() {
        let mut s = sim(1, 2, 3);
        for v in 0..3 {
            s.vcpus[v as usize].affinity = Affinity::Pinned(0);
            put(&mut s, 0, v, v == 0, 10 * MS);
        }
        s.periodic_balance(1);
        assert_eq!(loads(&s), vec![3, 0]);
    }

    #[test]
    fn one_vcpu_more_moves_only_while_the_local_pcpu_is_below_the_average() {
        // 2, 2, 1: the lone vCPU's pCPU is below the average (5/3) and pulls one.
        let mut s = sim(1, 3, 5);
        two_two_one(&mut s);
        s.periodic_balance(2);
        assert_eq!(loads(&s), vec![1, 2, 2]);
        // Now 1, 2, 2 seen from a pCPU with 2: at the average's side already, nothing moves.
        s.now += 10 * MS;
        s.periodic_balance(1);
        assert_eq!(loads(&s), vec![1, 2, 2]);
    }

    #[test]
    fn sockets_are_balanced_as_groups() {
        // Socket 0 (pCPUs 0, 1) holds 4 vCPUs, socket 1 (2, 3) one: pCPU 3, idle, pulls.
        let mut s = sim(2, 2, 5);
        two_two_one(&mut s);
        s.periodic_balance(3);
        assert_eq!(s.nr_runnable(3), 1);
        assert_eq!(loads(&s).iter().sum::<usize>(), 5);
    }
}
