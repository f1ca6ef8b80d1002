//! What a run reports. Field names are the JSON schema of `vspin run --json`.
//!
//! Counter definitions:
//! - `halt_exits`: HLT VM exits (PV lock slow path and guest idle).
//! - `ple_exits`: Pause-Loop-Exiting VM exits.
//! - `kicks`: `KVM_HC_KICK_CPU` hypercalls.
//! - `spurious_wakeups`: returns from a PV-lock halt that no kick caused (an interrupt woke it).
//! - `directed_yields`: successful `yield_to` calls from `kvm_vcpu_on_spin` (or HVS's choice), and (with
//!   `directed_yield = "kvm-6.8"` or `"kvm-6.18"`) from a kick's `kvm_sched_yield`.
//! - `yields`: `SCHEDOP_yield` hypercalls (a guest lock's `yield_now`), and under
//!   `scheduler = "credit1"` PLE exits, which Xen turns into the same yield.
//! - `lhp_events`: lock-holder preemption: a holder's vCPU is descheduled while runnable and
//!   another vCPU waits for that lock (once per preemption of the holder).
//! - `lwp_events`: lock-waiter preemption: a FIFO lock is released (or free) while the waiter
//!   next in line is descheduled while runnable (once per hand-off).
//! - `lhp_waits`, `lwp_waits`: the same two problems as the VEE'13 authors profiled them, from
//!   the waiter's side: a lock wait that has executed 2^10 PAUSEs is counted once, at that
//!   moment, as `lhp_waits` if the lock is held and as `lwp_waits` if it is free (`monitor`).
//! - `context_switches`: host switches between two different vCPU threads or from idle;
//!   `migrations`: a host load balancer moved the runnable vCPU to another pCPU (under credit1:
//!   a steal, or the pick and push patches; a woken vCPU placed elsewhere is not counted).
//! - `acquisitions`: guest spinlock acquisitions; `shootdowns`: TLB flushes of other vCPUs
//!   (synchronous IPIs, or the paravirtual flushes of `vm.tlb_flush`, which may send none);
//!   `wake_ipis`: IPIs that woke a peer sleeping in guest idle.
//! - `out_of_order`: acquisitions that overtook a waiter who arrived earlier (only locks that
//!   do not promise FIFO; for those that do, an overtake is an invariant violation).
//! - `throttles`: the vCPU was held off its pCPU's run queue because its VM's CPU quota
//!   (`vm.cpu_max`) was spent there (`bandwidth.rs`), running or queued, or woken onto it then.
//!
//! Time breakdown per vCPU (sums to the simulated time): `useful` (workload compute, critical
//! sections included), `spin` (inside lock code and IPI waits: spinning and atomics), `exit`
//! (host work on the vCPU's behalf: exit handling, VM entry, context switch, wake-up; and host
//! `interruptions`),
//! `halted` (blocked in HLT), `waiting` (runnable but not running), `finished` (its VM completed).
//!
//! Lock waits per VM (`lock_waits`): every acquisition's wait, from the guest's call to `lock()`
//! to the issue of the atomic that took the lock, as the guest's clock sees it (time preempted
//! or halted included, as lockstat's wait time), counted in power-of-two buckets with the
//! waiting time they add up to; an uncontended acquisition waits 0 ns. The seeds argue from
//! this distribution: "most locks take ~1 µs & most spinning time wasted on locks that
//! wait ~1 ms" (VEE'13), "kernbench waits are mostly 2^9–2^16 cycles" (LAS).
//!
//! Lock holds per VM (`lock_holds`): every hold, from the moment its wait ended to the guest's
//! call to `unlock()`, on the guest's clock in the same buckets. A hold is the critical section
//! plus any time its vCPU spent descheduled inside it, so a lock-holder preemption shows as a
//! hold of a host time slice rather than of a critical section (lockstat's hold time; LAS keeps
//! the longest one it sees). With `[record] locks = true` each lock of each VM also reports its
//! own waits and holds (`locks`).
use serde::Serialize;

#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Counters {
    pub acquisitions: u64,
    pub halt_exits: u64,
    pub ple_exits: u64,
    pub kicks: u64,
    pub spurious_wakeups: u64,
    pub directed_yields: u64,
    pub yields: u64,
    pub lhp_events: u64,
    pub lwp_events: u64,
    pub lhp_waits: u64,
    pub lwp_waits: u64,
    pub context_switches: u64,
    pub migrations: u64,
    pub shootdowns: u64,
    pub wake_ipis: u64,
    pub out_of_order: u64,
    pub throttles: u64,
}

impl Counters {
    pub fn add(&mut self, o: &Counters) {
        self.acquisitions += o.acquisitions;
        self.halt_exits += o.halt_exits;
        self.ple_exits += o.ple_exits;
        self.kicks += o.kicks;
        self.spurious_wakeups += o.spurious_wakeups;
        self.directed_yields += o.directed_yields;
        self.yields += o.yields;
        self.lhp_events += o.lhp_events;
        self.lwp_events += o.lwp_events;
        self.lhp_waits += o.lhp_waits;
        self.lwp_waits += o.lwp_waits;
        self.context_switches += o.context_switches;
        self.migrations += o.migrations;
        self.shootdowns += o.shootdowns;
        self.wake_ipis += o.wake_ipis;
        self.out_of_order += o.out_of_order;
        self.throttles += o.throttles;
    }
}

/// Acquisitions whose wait `w` fell in `from_ns <= w < to_ns`, and the sum of those waits.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
pub struct WaitBucket {
    pub from_ns: u64,
    pub to_ns: u64,
    pub acquisitions: u64,
    pub wait_ns: u64,
}

/// Holds whose length `h` fell in `from_ns <= h < to_ns`, and the sum of those holds.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
pub struct HoldBucket {
    pub from_ns: u64,
    pub to_ns: u64,
    pub holds: u64,
    pub hold_ns: u64,
}

/// Durations in power-of-two buckets: bucket 0 holds durations of 0 ns, bucket `k` those of
/// `2^(k-1) ..< 2^k` ns; each bucket counts its durations and sums them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurationHistogram {
    count: [u64; 65],
    sum_ns: [u64; 65],
}

impl Default for DurationHistogram {
    fn default() -> Self {
        DurationHistogram { count: [0; 65], sum_ns: [0; 65] }
    }
}

impl DurationHistogram {
    pub fn record(&mut self, ns: u64) {
        let k = (u64::BITS - ns.leading_zeros()) as usize;
        self.count[k] += 1;
        self.sum_ns[k] += ns;
    }

    /// How many durations were recorded, and their sum.
    pub fn count(&self) -> u64 {
        self.count.iter().sum()
    }

    pub fn total_ns(&self) -> u64 {
        self.sum_ns.iter().sum()
    }

    /// The non-empty buckets, shortest first: `(from_ns, to_ns, count, sum_ns)`.
    fn nonempty(&self) -> impl Iterator<Item = (u64, u64, u64, u64)> + '_ {
        (0..65).filter(|&k| self.count[k] > 0).map(|k| {
            let from_ns = if k == 0 { 0 } else { 1 << (k - 1) };
            let to_ns = if k == 64 { u64::MAX } else { 1 << k };
            (from_ns, to_ns, self.count[k], self.sum_ns[k])
        })
    }

    /// The histogram as lock waits, one bucket per power of two that holds any.
    pub fn waits(&self) -> Vec<WaitBucket> {
        self.nonempty().map(|(from_ns, to_ns, acquisitions, wait_ns)| WaitBucket { from_ns, to_ns, acquisitions, wait_ns }).collect()
    }

    /// The histogram as lock holds, one bucket per power of two that holds any.
    pub fn holds(&self) -> Vec<HoldBucket> {
        self.nonempty().map(|(from_ns, to_ns, holds, hold_ns)| HoldBucket { from_ns, to_ns, holds, hold_ns }).collect()
    }
}

/// One guest lock's record, kept when the scenario asks for it (`[record] locks`).
#[derive(Clone, Debug, Serialize)]
pub struct LockResult {
    /// The lock's index in its VM's lock set (0 is the most popular under a Zipf choice).
    pub lock: u32,
    pub acquisitions: u64,
    /// The sums of its waits and of its holds.
    pub wait_ns: u64,
    pub hold_ns: u64,
    pub waits: Vec<WaitBucket>,
    pub holds: Vec<HoldBucket>,
}

impl LockResult {
    pub(crate) fn new(lock: u32, r: &crate::monitor::LockRecord) -> Self {
        LockResult {
            lock,
            acquisitions: r.waits.count(),
            wait_ns: r.waits.total_ns(),
            hold_ns: r.holds.total_ns(),
            waits: r.waits.waits(),
            holds: r.holds.holds(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct TimeBreakdown {
    pub useful_ns: u64,
    pub spin_ns: u64,
    pub exit_ns: u64,
    pub halted_ns: u64,
    pub waiting_ns: u64,
    pub finished_ns: u64,
}

impl TimeBreakdown {
    pub fn add(&mut self, o: &TimeBreakdown) {
        self.useful_ns += o.useful_ns;
        self.spin_ns += o.spin_ns;
        self.exit_ns += o.exit_ns;
        self.halted_ns += o.halted_ns;
        self.waiting_ns += o.waiting_ns;
        self.finished_ns += o.finished_ns;
    }

    pub fn total(&self) -> u64 {
        self.useful_ns + self.spin_ns + self.exit_ns + self.halted_ns + self.waiting_ns + self.finished_ns
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct VcpuResult {
    pub vm: String,
    pub vcpu: u32,
    pub work_units: u64,
    /// `None` with PLE off: there is no window.
    pub ple_window_cycles: Option<u64>,
    pub time: TimeBreakdown,
    pub counters: Counters,
}

#[derive(Clone, Debug, Serialize)]
pub struct VmResult {
    pub name: String,
    /// None (JSON `null`) for a VM whose workload takes no locks and names none.
    pub lock: Option<String>,
    pub workload: String,
    pub vcpus: u32,
    pub work_units: u64,
    /// Work units per simulated second, over the VM's completion time if it completed.
    pub throughput_per_s: f64,
    /// When the VM finished its `work_units`, if it had a target and met it.
    pub completion_ms: Option<f64>,
    pub time: TimeBreakdown,
    pub counters: Counters,
    pub lock_waits: Vec<WaitBucket>,
    pub lock_holds: Vec<HoldBucket>,
    /// Each of the VM's locks, if the scenario asked for them (`[record] locks`).
    pub locks: Option<Vec<LockResult>>,
    /// The VM's PLE epochs (1,000 of its PLE exits each unless APLE sets another count) and
    /// their mean inefficiency: (windows spun + exit handling) ÷ CPU time (`ple.rs`). `None`
    /// before the first epoch ends, and under credit1.
    pub ple_epochs: u64,
    pub ple_inefficiency: Option<f64>,
    /// The mean window its PLE exits reached, cycles (`None` without exits or under credit1).
    pub ple_window_mean_cycles: Option<f64>,
    /// Every PLE epoch in order, if the scenario asked for them (`[record] ple_epochs`).
    pub ple_epoch_trace: Option<Vec<PleEpoch>>,
}

/// One PLE epoch of a VM, as it ended.
#[derive(Clone, Debug, Serialize)]
pub struct PleEpoch {
    /// Simulated time at the epoch's last exit.
    pub end_ms: f64,
    /// The mean of the VM's vCPUs' windows at that moment (before the exiting vCPU's own window
    /// grows or takes APLE's next one), cycles: what APPLES' footnote 5
    /// plots for stock KVM and APLE alike ("the average spinning threshold of all the VCPU in a
    /// VM for each epoch"). Under APLE a vCPU takes a new window at its next exit or switch-in,
    /// so the mean lags the VM's window by those that have not yet.
    pub window_cycles: f64,
    /// (windows spun + exit handling) ÷ the VM's CPU time over the epoch.
    pub inefficiency: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    pub scenario: String,
    pub seed: u64,
    pub simulated_ms: f64,
    pub events: u64,
    pub totals: Counters,
    pub vms: Vec<VmResult>,
    pub vcpus: Vec<VcpuResult>,
}

#[cfg(test)]
mod tests {
    use super::DurationHistogram;

    #[test]
    fn a_wait_lands_in_the_power_of_two_bucket_that_holds_it() {
        let mut h = DurationHistogram::default();
        for w in [0, 1, 2, 3, 1000, 1023, 1024, u64::MAX] {
            h.record(w);
        }
        let got: Vec<_> = h.waits().iter().map(|b| (b.from_ns, b.to_ns, b.acquisitions)).collect();
        assert_eq!(got, [(0, 1, 1), (1, 2, 1), (2, 4, 2), (512, 1024, 2), (1024, 2048, 1), (1 << 63, u64::MAX, 1)]);
        assert_eq!(h.waits()[2].wait_ns, 5);
    }

    #[test]
    fn holds_read_the_same_buckets_as_waits() {
        let mut h = DurationHistogram::default();
        for d in [400, 450, 3_000_000] {
            h.record(d);
        }
        let holds: Vec<_> = h.holds().iter().map(|b| (b.from_ns, b.to_ns, b.holds, b.hold_ns)).collect();
        let waits: Vec<_> = h.waits().iter().map(|b| (b.from_ns, b.to_ns, b.acquisitions, b.wait_ns)).collect();
        assert_eq!(holds, [(256, 512, 2, 850), (2_097_152, 4_194_304, 1, 3_000_000)]);
        assert_eq!(holds, waits);
        assert_eq!((h.count(), h.total_ns()), (3, 3_000_850));
    }
}
