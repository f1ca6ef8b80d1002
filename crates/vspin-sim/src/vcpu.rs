//! A vCPU: its host-side state (scheduling, KVM flags, PLE window) and what its guest is doing.
use crate::engine::Time;
use crate::guest::{Req, Response};
use vspin_locks::Until;
use crate::memory::SimWord;
use crate::metrics::{Counters, TimeBreakdown};

/// The vCPU thread as the host scheduler sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HostState {
    Running,
    /// On a run queue, not running: preempted (KVM's `preempted` flag) or woken and not yet
    /// run (`preempted` false; the directed yield's candidate filters tell the two apart).
    Runnable,
    /// Blocked in HLT (`kvm_vcpu_block`).
    Blocked,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HaltReason {
    /// Halted in the PV lock slow path: with interrupts enabled (`safe_halt`) a kick or any
    /// interrupt ends it; for a lock taken with them off (`halt()`, `Vcpu::irqs_off`) only a kick.
    LockWait,
    /// Guest idle until a timer.
    Idle { wake_at: Time },
    /// The VM's work is done; it idles for the rest of the run.
    Finished,
}

/// What the guest is doing.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Act {
    /// Workload computation; `remaining` includes any pending memory latency, which runs first.
    Compute { remaining: u64 },
    /// The guest's next request, waiting for its previous memory access to complete.
    Delayed { req: Req, remaining: u64 },
    /// In a PAUSE loop on `word` until `until` holds; `stale` once the word was written while
    /// the vCPU could not observe it (it re-reads when it runs again).
    Spin { word: SimWord, until: Until, pauses_left: u64, stale: bool },
    Halted(HaltReason),
    /// The response to the last request is ready: poll the guest.
    Ready,
}

/// What the host does once its work for the vCPU is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum After {
    Nothing,
    PleDone { yielded: bool },
    VcpuBlock,
    /// The halt poll ran its whole time without a wake-up: block now.
    PollEnd,
    Yield,
    /// The exit of an IPI send has been handled: deliver, then enter or exit for the next send.
    SendIpis,
    /// The exit of a reschedule IPI to `sleeper` has been handled: its sleep ends, then the entry.
    WakeSent { sleeper: u32 },
    /// The exit of a `KVM_HC_KICK_CPU` has been handled: `target` is kicked (and, on 6.8 and
    /// 6.18 hosts, perhaps yielded to), then the entry.
    KickSent { target: u32 },
}

/// Host work on the vCPU's behalf (exit handling, VM entry, context switch) that runs before the
/// guest resumes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HostWork {
    pub remaining: u64,
    pub after: After,
}

pub(crate) struct SchedEntity {
    pub vruntime: u64,
    /// When it last started running; 0 after a migration (`migrate_task_rq_fair`: "no longer
    /// consider this task hot").
    pub exec_start: Time,
    /// When it last went to the head of its run queue's task list (`cfs_tasks`: woken or
    /// attached, and since 4.x picked), which orders the balancers' candidates.
    pub listed_at: Time,
    pub sum_exec: u64,
    pub prev_sum_exec: u64,
    /// EEVDF: virtual deadline, `vruntime + base_slice` when the slice was granted.
    pub deadline: u64,
    /// EEVDF: lag (`avg_vruntime − vruntime`) saved when the vCPU left its run queue.
    pub vlag: i64,
    /// EEVDF `RUN_TO_PARITY`: picked and not yet given a new slice (the kernel's
    /// `vlag == deadline` mark).
    pub protected: bool,
}

/// Where a vCPU may run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Affinity {
    Pinned(u32),
    Any,
}

pub(crate) struct Vcpu {
    pub vm: u32,
    pub index: u32,
    pub affinity: Affinity,
    pub host: HostState,
    /// Current pCPU if running or runnable; last pCPU if blocked.
    pub pcpu: u32,
    pub state_since: Time,
    pub act: Act,
    pub host_work: Option<HostWork>,
    /// Whether a timed segment (and its event) is in progress.
    pub active: bool,
    pub seg_start: Time,
    /// When the pending spin check fires (valid while spinning).
    pub spin_check_at: Time,
    /// Picoseconds into the current PAUSE iteration.
    pub pause_carry_ps: u64,
    pub gen: u32,
    pub timer_gen: u32,
    pub response: Response,
    /// Latency of the last memory access still to elapse before the guest's next action (the
    /// access itself took effect when issued; a spin that follows simply starts later).
    pub access_latency: u64,
    /// Whether that latency is a stall shorter than `ple_gap`, which the CPU counts as part of
    /// the PAUSE loop (its window is TSC time since the loop's first PAUSE); a longer one starts
    /// a new loop when it ends.
    pub stall_in_loop: bool,
    /// The word this vCPU read last and the word's write version then.
    pub last_read: (SimWord, u64),
    pub se: SchedEntity,
    /// Xen credit1's state of this vCPU (`credit1.rs`).
    pub credit: crate::credit1::VcpuCredit,
    // KVM state, as the kernel names it; who sets and clears each:
    /// `vcpu->preempted`: descheduled while runnable (`deschedule`), cleared at `switch_in`; a
    /// vCPU woken from HLT is runnable but not preempted.
    pub preempted: bool,
    /// `vcpu->arch.pv.pv_unhalted`: set by a PV kick (`kick`), so that a halt in progress or
    /// the next one returns at once. x86 `vcpu_block` clears it when the vCPU thread leaves
    /// `kvm_vcpu_halt`, before the VM entry (a poll that succeeds, a halt found runnable, a
    /// blocked thread back from its switch-in and wake-up, `halt_left_at`): a kick that lands
    /// during that entry stays pending and ends the next halt at once, a spurious wake-up for it.
    pub pv_unhalted: bool,
    /// This halt was ended by a kick (else it was a spurious wake-up: an interrupt or the
    /// guest timer); set by `kick`, taken when the halt returns.
    pub kicked: bool,
    /// Woken from a block and not yet run: set by `wake`, taken at `switch_in` (which pays the
    /// wake-up latency); the directed yield's filters read it.
    pub woken: bool,
    /// Linux 6.18: picked while its VM was throttled on its pCPU, so a task work
    /// (`throttle_cfs_rq_work`) waits for its next VM entry, where it is held if the VM still
    /// is (`bandwidth.rs`).
    pub throttle_work: bool,
    /// `vcpu->spin_loop.in_spin_loop`: inside `kvm_vcpu_on_spin` (set at the PLE exit), until
    /// the exit handler ends or, if it yielded, until the vCPU runs again.
    pub in_spin_loop: bool,
    /// `vcpu->spin_loop.dy_eligible`: toggled each time 3.18's search passes over this vCPU
    /// while it is in its spin loop (`kvm_vcpu_eligible_for_directed_yield`); cleared with
    /// `in_spin_loop`.
    pub dy_eligible: bool,
    /// HVS (`directed_yield.rs`): the list this vCPU joined when it was last descheduled while
    /// runnable, and whether HVS boosted it since it last left a pCPU (the seed's "yielded"
    /// mark).
    pub hvs_list: HvsList,
    pub hvs_boosted: bool,
    /// The PLE window in the CPU's unit (TSC cycles, or PAUSEs on AMD: [`WindowUnit`]), and as
    /// nanoseconds of spinning, kept in step by [`Vcpu::set_ple_window`]: spin deadlines need
    /// the latter on the hottest path.
    pub ple_window: u64,
    pub ple_window_ns: u64,
    pub ple_spun_ns: u64,
    /// `vcpu->halt_poll_ns`: how long the next halt polls (adapted after each halt).
    pub halt_poll_ns: u64,
    /// When the current halt entered `kvm_vcpu_halt` (after its HLT exit), for the poll's
    /// adaptation; `None` for a halt that re-entered at once (x86 `vcpu_block` calls
    /// `kvm_vcpu_halt` only if the vCPU is not runnable anyway), which adapts nothing.
    pub halt_started: Option<Time>,
    /// When the vCPU thread last left `kvm_vcpu_halt` (`Sim::leave_halt`): a blocked one after
    /// its switch-in and wake-up, before its entry. A kick that lands before then is consumed
    /// with that halt.
    pub halt_left_at: Time,
    /// When the guest executed its current HLT (the start of its exit): a guest tick due since
    /// then is pending at `vcpu_block`.
    pub hlt_at: Time,
    /// The guest's current computation is kernel work outside any lock (for the 6.8 directed
    /// yield's user-mode filter).
    pub computing_in_kernel: bool,
    pub pending_ipis: Vec<u32>,
    /// The guest runs with interrupts off (IF = 0), from the `local_irq_save` of a
    /// `spin_lock_irqsave` to the `local_irq_restore` after its unlock: its IPIs wait, and a halt
    /// then ends only by a kick (`Sim::has_deliverable_ipis`). Also while it sends IPIs (a
    /// shootdown's or a wake's), which Linux does with interrupts off.
    pub irqs_off: bool,
    /// The shootdown targets this vCPU has still to send an IPI, last first (`Sim::ipis_sent`).
    pub ipis_to_send: Vec<u32>,
    /// A reschedule IPI to this vCPU, asleep in guest idle, is being sent (`Sim::wake_sent`): its
    /// idle is already ending, so no other waker sends one, and a thread of it that has left a
    /// barrier is on its way, not lost.
    pub wake_in_flight: bool,
    /// Woken from its halt by a reschedule IPI (`Sim::wake_sent`) and not yet run: an interrupt
    /// waits for it (`KVM_REQ_EVENT`), which 6.8's directed yield counts. Cleared at switch-in.
    pub woken_by_ipi: bool,
    pub call_function_word: SimWord,
    // guest lock state (global lock indices)
    pub waiting: Option<u32>,
    /// When the guest called `lock()` for the lock in `waiting`.
    pub wait_began: Time,
    /// PAUSEs executed since then (accounted ones), and whether the wait has passed the
    /// waiter-side profile's threshold and been counted (`monitor`).
    pub wait_pauses: u64,
    pub wait_profiled: bool,
    pub held: Option<u32>,
    /// When its wait for the lock in `held` ended.
    pub hold_began: Time,
    pub releasing: Option<u32>,
    // results
    pub time: TimeBreakdown,
    pub counters: Counters,
    pub work_units: u64,
}

/// APPLES' HVS lists of descheduled, runnable vCPUs (the TPDS'17 seed §3.2–3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HvsList {
    /// Preempted by the host scheduler (its slice ran out, or a woken thread preempted it).
    ResourceWaiter,
    /// Descheduled by its own PLE exit's yield.
    LockWaiter,
    /// Preempted after HVS boosted it: ranked last, so that a boosted vCPU whose vruntime
    /// soon preempts it again is not picked over and over.
    Yielded,
}

impl Vcpu {
    pub(crate) fn set_ple_window(&mut self, window: u64, unit: WindowUnit) {
        self.ple_window = window;
        self.ple_window_ns = unit.ns(window);
    }
}

/// What a PLE window counts (`scenario::PauseCounter`), to turn it into time spent spinning.
#[derive(Debug, Clone, Copy)]
pub(crate) enum WindowUnit {
    /// Intel: TSC cycles, at this clock rate (GHz).
    TscCycles(f64),
    /// AMD: PAUSE instructions, one per spin-loop iteration of this many picoseconds.
    Pauses(u64),
}

impl WindowUnit {
    /// A window as nanoseconds of spinning.
    pub(crate) fn ns(self, window: u64) -> u64 {
        match self {
            WindowUnit::TscCycles(clock_ghz) => (window as f64 / clock_ghz).ceil() as u64,
            WindowUnit::Pauses(ps) => window.saturating_mul(ps).div_ceil(1000),
        }
    }

    /// Whether a memory stall inside the loop counts toward the window: Intel's window is time,
    /// so a stall shorter than `ple_gap` counts; AMD's is a count of PAUSEs, to which it adds
    /// nothing.
    pub(crate) fn counts_stalls(self) -> bool {
        matches!(self, WindowUnit::TscCycles(_))
    }

    /// A window as TSC cycles of spinning, as the results report every window.
    pub(crate) fn cycles(self, window: u64, clock_ghz: f64) -> u64 {
        match self {
            WindowUnit::TscCycles(_) => window,
            WindowUnit::Pauses(_) => (self.ns(window) as f64 * clock_ghz).round() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::WindowUnit;

    #[test]
    fn a_window_is_time_for_intel_and_a_count_of_spin_iterations_for_amd() {
        let intel = WindowUnit::TscCycles(2.4);
        assert_eq!(intel.ns(4096), 1707, "4096 cycles at 2.4 GHz, rounded up");
        assert_eq!(intel.cycles(4096, 2.4), 4096);
        let amd = WindowUnit::Pauses(5_667);
        assert_eq!(amd.ns(3000), 17_001, "3000 iterations of 5.667 ns");
        assert_eq!(amd.cycles(3000, 2.4), 40_802, "reported as TSC cycles of spinning");
    }
}
