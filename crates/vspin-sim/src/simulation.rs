//! The simulation: builds a host from a scenario and runs its event loop.
//!
//! A vCPU that runs executes, in order, any pending host work (exit handling, VM entry, context
//! switch) and then its guest activity ([`Act`]). Guest code is polled only when its last request
//! has been answered; every request either costs time (a timed segment with an end event) or
//! none (bookkeeping), see [`Sim::handle`].
//!
//! `Sim` is one object; each domain module adds the methods of its concept in an `impl Sim`
//! block of its own:
//!
//! | module | `Sim` methods (the main ones) |
//! |---|---|
//! | `simulation` | `new`, `simulate` (the event loop), `run_vcpu`, `account`, `stop_segment`, `poll_guest`, `handle`, `finish` |
//! | `spin` | `spin_deadline`, `notify_watchers`, `reread`, `spin_check`, `ple_exit` |
//! | `directed_yield` | `kvm_vcpu_on_spin`, `kvm_sched_yield` and the candidate filters |
//! | `halt` | `start_halt`, `vcpu_block`, `block`, `guest_timer`, `kick`, `wake` |
//! | `ipi` | `shootdown`, `wake_peer`, `deliver_ipi`, `ipi_ack` |
//! | `scheduler` | `schedule`, `deschedule`, `switch_in`, `tick`, `yield_task`, `yield_to`, `enqueue_woken`, `idle_balance`, `migrate` |
//! | `eevdf` | `pick_eevdf`, `place`, `eevdf_yield`, `delay_dequeue` and the other EEVDF rules |
//! | `load_balance` | `periodic_balance`, `load_balance` |
//! | `interruptions` | `host_interruption` |
//! | `monitor` | `lock_begin`, `lock_acquired`, `lock_release`, `on_preempted`, `audit` |
use crate::cpuidle::IdleGovernor;
use crate::engine::{Event, EventQueue, Rng, Time};
use crate::guest::{self, MemOp, Note, Req, Response, SimCpu, WORDS_PER_CPU};
use crate::interruptions::HostInterruptions;
use crate::locks::GuestLock;
use crate::memory::{Access, Memory, MemoryCosts, SimWord};
use crate::metrics::{Counters, DurationHistogram, LockResult, RunResult, TimeBreakdown, VcpuResult, VmResult};
use crate::monitor::LockState;
use crate::scenario::{
    Background, DirectedYieldKind, HaltPollConfig, IdleState, IpiSend, LoadBalanceKind, LockKind, PauseCounter, PleConfig, PlePolicy, Pinning, RecordConfig, Scenario, SchedulerKind, TlbFlush,
    VmConfig,
};
use crate::timeline::Timeline;
use crate::topology::Topology;
use crate::vcpu::{Act, After, Affinity, HaltReason, HostState, HostWork, SchedEntity, Vcpu, WindowUnit};
use crate::workload::{guest_thread, host_thread, Barrier, Profile};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use vspin_locks::WordAlloc;

/// How often the lock monitor audits for lost wake-ups and missed writes.
const AUDIT_PERIOD_NS: Time = 1_000_000;

/// Costs in simulator units, derived once from the scenario.
pub(crate) struct Costs {
    pub vm_exit: u64,
    pub vm_entry: u64,
    pub hypercall: u64,
    pub ipi_send: u64,
    pub wakeup: u64,
    pub context_switch: u64,
    /// What a locked read-modify-write costs beyond the access itself (`atomic_extra_ns`).
    pub atomic_extra: u64,
    /// One spin-loop iteration (PAUSE + L1 re-read), in picoseconds.
    pub pause_ps: u64,
    pub clock_ghz: f64,
    /// The shortest memory stall (ns) that exceeds `ple_gap` cycles: the least `n` with
    /// `n × clock_ghz > gap_cycles`, found once so the hot path compares integers; `u64::MAX`
    /// for AMD's pause filter without a threshold, whose count only a VM entry reloads.
    pub ple_gap_ns: u64,
    /// What a PLE window counts (`WindowUnit::counts_stalls`).
    pub ple_unit: WindowUnit,
    /// An IPI to a vCPU in guest mode needs no exit (`hypervisor.posted_interrupts`).
    pub posted_interrupts: bool,
    pub tick_ns: u64,
    /// CFS tunables scaled by `1 + ilog2(min(ncpus, 8))` (§7.1).
    pub sched_latency: u64,
    pub min_granularity: u64,
    pub wakeup_granularity: u64,
    pub nr_latency: u64,
    /// EEVDF `sysctl_sched_base_slice`, 0.75 ms (v6.8) or 0.70 ms (v6.18) × the same factor
    /// (§7.2).
    pub base_slice: u64,
}

pub(crate) struct Pcpu {
    pub curr: Option<u32>,
    pub queued: Vec<u32>,
    /// EEVDF 6.18 (`DELAY_DEQUEUE`): blocked vCPUs that left with negative lag and stay on the
    /// run queue, counted in its average and picked (then dequeued) once eligible.
    pub delayed: Vec<u32>,
    pub min_vruntime: u64,
    pub next: Option<u32>,
    pub skip: Option<u32>,
    /// CFS `cfs_rq->last` (`LAST_BUDDY`): the vCPU a wake-up preempted while the run queue held
    /// `sched_nr_latency` or more, which gets its pCPU back first while within the wake-up
    /// granularity (`scheduler.rs`).
    pub last: Option<u32>,
    pub tick_armed: bool,
    /// EEVDF: the current vCPU used up its slice (`update_deadline` → `resched_curr`).
    pub need_resched: bool,
    pub idle: IdleGovernor,
    /// `rq->avg_idle`: the average length of this pCPU's idle periods, which gates
    /// `idle_balance`.
    pub avg_idle: u64,
    /// `rq->idle_stamp`: when the pCPU last went idle, until a thread is woken onto it.
    pub idle_stamp: Option<Time>,
    /// The pCPU's scheduling domains with their balancing state, lowest first (periodic
    /// balancing only).
    pub domains: Vec<crate::load_balance::Domain>,
    /// credit1 only.
    pub credit: crate::credit1::PcpuCredit,
}

pub(crate) struct Vm {
    pub name: String,
    /// None for a VM whose workload takes no locks and names none.
    pub lock: Option<&'static str>,
    pub workload: String,
    pub first_vcpu: u32,
    pub vcpus: u32,
    pub first_lock: u32,
    /// The barrier of its threads, if its workload has one (`workload::Barrier`).
    pub barrier: Option<Rc<Barrier>>,
    /// The guest's tick grid: every vCPU of the VM ticks at `guest_tick_phase_ns + k ×
    /// guest_tick_ns` (`halt::next_guest_tick`).
    pub guest_tick_ns: u64,
    pub guest_tick_phase_ns: u64,
    pub tlb_flush: TlbFlush,
    pub ipi_send: IpiSend,
    pub target: Option<u64>,
    pub work_units: u64,
    pub completed_at: Option<Time>,
    pub last_boosted: i64,
    /// This VM's PLE epochs and their inefficiency (`ple.rs`), and its APLE window under
    /// `policy = "aple"`.
    pub ple_epochs: crate::ple::PleEpochs,
    pub aple: Option<crate::ple::Aple>,
    /// How long this VM's lock acquisitions waited, and how long its locks were held
    /// (`metrics`, `lock_waits` and `lock_holds`).
    pub lock_waits: DurationHistogram,
    pub lock_holds: DurationHistogram,
    /// The host's background threads (`scenario::Background`), not a guest: left out of results.
    pub host_threads: bool,
}

impl Vm {
    /// Indices of this VM's vCPUs in `Sim::vcpus`.
    pub(crate) fn vcpu_range(&self) -> std::ops::Range<usize> {
        self.first_vcpu as usize..(self.first_vcpu + self.vcpus) as usize
    }
}

type GuestFuture = Pin<Box<dyn Future<Output = ()>>>;

pub struct Sim {
    pub(crate) now: Time,
    pub(crate) end: Time,
    pub(crate) q: EventQueue,
    pub(crate) mem: Memory,
    pub(crate) costs: Costs,
    pub(crate) ple: PleConfig,
    pub(crate) halt_poll: HaltPollConfig,
    pub(crate) scheduler: SchedulerKind,
    pub(crate) directed_yield: DirectedYieldKind,
    pub(crate) load_balance: LoadBalanceKind,
    /// Xen credit1's private data, when it schedules.
    pub(crate) credit1: Option<crate::credit1::Credit1>,
    /// Gang scheduling's matrix and turn (`gang.rs`); `None` under any other scheduler.
    pub(crate) gang: Option<crate::gang::Gang>,
    /// Each VM's CPU quota (`bandwidth.rs`), by VM index; empty when no VM has one.
    pub(crate) bandwidth: Vec<Option<crate::bandwidth::Bandwidth>>,
    pub(crate) pcpus: Vec<Pcpu>,
    pub(crate) topology: Topology,
    pub(crate) idle_states: Vec<IdleState>,
    pub(crate) vcpus: Vec<Vcpu>,
    pub(crate) vms: Vec<Vm>,
    pub(crate) locks: Vec<LockState>,
    guests: Vec<GuestFuture>,
    /// The notes of the guest being polled (`guest::take_notes`), a buffer kept between polls.
    notes: Vec<Note>,
    /// Spinning vCPUs per word.
    pub(crate) watchers: Vec<Vec<u32>>,
    /// The first of the vCPUs' private words, one per vCPU in vCPU order, on which a lone PAUSE
    /// ([`Req::Relax`]) spins: nothing else touches them.
    first_relax_word: u32,
    pub(crate) spare_watchers: Vec<u32>,
    /// Per vCPU, the acknowledgements of the IPIs whose handlers are in its host work (`ipi.rs`):
    /// the sender of each, and while the vCPU runs, when its `IpiAck` is due; while it is
    /// descheduled, how much of its host work still comes before that handler's end. An `IpiAck`
    /// that finds no entry due then (its target was descheduled, and the entry moved) is stale.
    /// Beside the vCPUs rather than in them, which keeps `Vcpu` as small as the hot path wants.
    pub(crate) ipi_acks: Vec<Vec<(u32, Time)>>,
    /// While a kick's handler wakes its target (`kick_sent`): the kicker's pCPU, and whether
    /// the kicker was marked for rescheduling meanwhile (`resched_curr`: the wake-up won
    /// preemption, or found `need_resched` set by its `update_curr`). The kicker goes on to
    /// `kvm_sched_yield` and switches at its `schedule()` or on the way back to the guest.
    pub(crate) kick_handler: Option<(u32, bool)>,
    pub(crate) violations: Vec<String>,
    pub(crate) timeline: Option<Timeline>,
    /// Each lock keeps its own waits and holds for the results (`[record] locks`).
    record_locks: bool,
    pub(crate) interruptions: Option<HostInterruptions>,
    stop: bool,
    name: String,
    pub(crate) seed: u64,
}

/// A run that broke an invariant.
#[derive(Debug, Clone)]
pub struct InvariantViolation(pub Vec<String>);

impl std::fmt::Display for InvariantViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invariant violated: {}", self.0.join("; "))
    }
}

impl std::error::Error for InvariantViolation {}

/// The least whole number of ns whose cycles at `clock_ghz` exceed `gap_cycles`; `u64::MAX`
/// (no stall ever ends a PAUSE loop) when even that many ns do not.
fn stall_exceeding(gap_cycles: u64, clock_ghz: f64) -> u64 {
    let exceeds = |n: u64| n as f64 * clock_ghz > gap_cycles as f64;
    if !exceeds(u64::MAX) {
        return u64::MAX;
    }
    let mut n = (gap_cycles as f64 / clock_ghz) as u64;
    while n > 0 && exceeds(n - 1) {
        n -= 1;
    }
    while !exceeds(n) {
        n += 1;
    }
    n
}

fn ns(v: f64) -> u64 {
    v.round() as u64
}

impl Costs {
    fn of(sc: &Scenario) -> Costs {
        let (h, c) = (&sc.host, &sc.host.costs);
        // The scheduler's tunables scale with `1 + ilog2(min(CPUs, 8))` (`SCHED_TUNABLESCALING_LOG`).
        let factor = 1 + (sc.pcpus().clamp(1, 8)).ilog2() as u64;
        let pause_ps = ((c.pause_cycles / h.clock_ghz + c.l1_hit_ns) * 1000.0).round().max(1.0) as u64;
        Costs {
            vm_exit: ns(c.vm_exit_ns),
            vm_entry: ns(c.vm_entry_ns),
            hypercall: ns(c.hypercall_ns),
            ipi_send: ns(c.ipi_send_ns),
            wakeup: ns(c.wakeup_ns),
            context_switch: ns(c.context_switch_ns),
            atomic_extra: ns(c.atomic_extra_ns),
            pause_ps,
            clock_ghz: h.clock_ghz,
            ple_gap_ns: match sc.hypervisor.ple.counter {
                PauseCounter::Amd if sc.hypervisor.ple.gap_cycles == 0 => u64::MAX,
                _ => stall_exceeding(sc.hypervisor.ple.gap_cycles, h.clock_ghz),
            },
            ple_unit: match sc.hypervisor.ple.counter {
                PauseCounter::Intel => WindowUnit::TscCycles(h.clock_ghz),
                PauseCounter::Amd => WindowUnit::Pauses(pause_ps),
            },
            posted_interrupts: sc.hypervisor.posted_interrupts,
            tick_ns: 1_000_000_000 / h.hz as u64,
            sched_latency: 6_000_000 * factor,
            min_granularity: 750_000 * factor,
            wakeup_granularity: 1_000_000 * factor,
            nr_latency: 8,
            base_slice: match sc.hypervisor.scheduler {
                SchedulerKind::Eevdf618 => 700_000,
                _ => 750_000,
            } * factor,
        }
    }
}

impl Pcpu {
    fn idle() -> Pcpu {
        Pcpu {
            curr: None,
            queued: Vec::new(),
            delayed: Vec::new(),
            min_vruntime: 0,
            next: None,
            skip: None,
            last: None,
            tick_armed: false,
            need_resched: false,
            idle: IdleGovernor::default(),
            avg_idle: 2 * crate::scheduler::MIGRATION_COST_NS,
            idle_stamp: None,
            domains: Vec::new(),
            credit: Default::default(),
        }
    }
}

impl Sim {
    pub fn new(sc: &Scenario) -> Sim {
        let h = &sc.host;
        let n = sc.pcpus();
        let topology = Topology::new(h);
        let c = &h.costs;
        let mem = Memory::new(
            MemoryCosts {
                hit_ns: ns(c.l1_hit_ns).max(1),
                same_socket_ns: ns(c.transfer_same_socket_ns),
                cross_socket_ns: ns(c.transfer_cross_socket_ns),
            },
            topology.socket_of(),
        );
        let mut sim = Sim {
            now: 0,
            end: (sc.duration_ms * 1e6).round() as Time,
            q: EventQueue::new(),
            mem,
            costs: Costs::of(sc),
            ple: sc.hypervisor.ple.clone(),
            halt_poll: sc.hypervisor.halt_poll.clone(),
            scheduler: sc.hypervisor.scheduler,
            directed_yield: sc.hypervisor.directed_yield,
            load_balance: sc.hypervisor.load_balance,
            credit1: (sc.hypervisor.scheduler == SchedulerKind::Credit1)
                .then(|| crate::credit1::Credit1::new(&sc.hypervisor.credit1.clone().unwrap_or_default())),
            gang: (sc.hypervisor.scheduler == SchedulerKind::Gang)
                .then(|| crate::gang::Gang::new(&sc.vms, n, sc.hypervisor.gang.clone().unwrap_or_default().slice_ms)),
            bandwidth: crate::bandwidth::quotas(sc, n as usize),
            pcpus: (0..n).map(|_| Pcpu::idle()).collect(),
            topology,
            idle_states: h.idle_states.clone(),
            vcpus: Vec::new(),
            vms: Vec::new(),
            locks: Vec::new(),
            guests: Vec::new(),
            notes: {
                // A run that panicked in the middle of a poll on this thread may have left some.
                let mut stale = Vec::new();
                guest::take_notes(&mut stale);
                stale.clear();
                stale
            },
            watchers: Vec::new(),
            first_relax_word: 0,
            spare_watchers: Vec::new(),
            ipi_acks: Vec::new(),
            kick_handler: None,
            violations: Vec::new(),
            timeline: None,
            record_locks: sc.record.locks,
            interruptions: h.interruptions.as_ref().map(|i| HostInterruptions::new(i, n, sc.seed)),
            stop: false,
            name: sc.name.clone(),
            seed: sc.seed,
        };
        let mut load = vec![0u32; n as usize];
        for (vm_id, vm) in sc.vms.iter().enumerate() {
            sim.add_vm(vm_id as u32, vm, &sc.record, &mut load);
        }
        if let Some(bg) = &h.background {
            sim.add_host_threads(sc.vms.len() as u32, bg);
        }
        // After all other words, so that adding them moved no lock's address (the PV qspinlock
        // hashes addresses).
        sim.first_relax_word = sim.mem.len() as u32;
        for _ in &sim.vcpus {
            sim.mem.word(0);
        }
        sim.watchers = vec![Vec::new(); sim.mem.len()];
        sim
    }

    /// Add VM `vm_id`: its shared words, its locks, and its vCPUs, each pinned as the scenario
    /// says or placed on the least loaded pCPU (`load`: vCPUs placed per pCPU so far).
    /// `record`: what the scenario asked to keep beyond the standard results (`[record]`).
    fn add_vm(&mut self, vm_id: u32, vm: &VmConfig, record: &RecordConfig, load: &mut [u32]) {
        let n = self.pcpus.len() as u32;
        let first = self.vcpus.len() as u32;
        let words: Rc<[SimWord]> = (0..guest::vm_words(vm.vcpus)).map(|_| self.mem.word(0)).collect();
        let profile = Rc::new(Profile::new(&vm.workload, vm.vcpus, self.costs.context_switch));
        let first_lock = self.locks.len() as u32;
        // A barrier's futex hash-bucket lock comes after the workload's locks.
        let barrier = (profile.barrier_every > 0).then(|| Rc::new(Barrier::new(vm.vcpus, profile.threads_per_vcpu)));
        let lock_count = profile.locks + barrier.is_some() as u32;
        let locks: Rc<[GuestLock]> = (0..lock_count).map(|_| GuestLock::new(vm, &mut self.mem)).collect();
        let fifo = vm.lock.is_some_and(GuestLock::fifo);
        self.locks.extend((0..lock_count).map(|_| LockState::new(vm_id, fifo, record.locks)));
        for i in 0..vm.vcpus {
            let affinity = match (&self.gang, &vm.pin) {
                // A gang's vCPUs keep the pCPUs of its row (`gang.rs`).
                (Some(g), _) => Affinity::Pinned(g.pcpu_of[vm_id as usize][i as usize]),
                (None, Pinning::List(l)) => Affinity::Pinned(l[i as usize] as u32), // validated: 0..pCPUs
                (None, Pinning::Named(s)) if s == "1:1" => Affinity::Pinned(i),
                (None, Pinning::Named(_)) => Affinity::Any,
            };
            let pcpu = match affinity {
                Affinity::Pinned(p) => p,
                Affinity::Any => (0..n).min_by_key(|&p| (load[p as usize], p)).unwrap_or(0),
            };
            load[pcpu as usize] += 1;
            let cpu = SimCpu::new(i, vm.vcpus, words.clone());
            let (locks, profile, barrier) = (locks.clone(), profile.clone(), barrier.clone());
            self.add_vcpu(vm_id, i, affinity, pcpu, &words, |rng| Box::pin(guest_thread(cpu, locks, profile, barrier, rng)));
        }
        let guest_tick_ns = 1_000_000_000 / vm.guest_hz as u64;
        self.vms.push(Vm {
            name: vm.name.clone(),
            lock: vm.lock.map(LockKind::name),
            workload: vm.workload.preset.name().into(),
            first_vcpu: first,
            vcpus: vm.vcpus,
            first_lock,
            barrier,
            guest_tick_ns,
            guest_tick_phase_ns: crate::halt::guest_tick_phase(self.seed, vm_id, guest_tick_ns),
            tlb_flush: vm.tlb_flush,
            ipi_send: vm.ipi_send(),
            target: vm.work_units,
            work_units: 0,
            completed_at: None,
            last_boosted: 0,
            ple_epochs: crate::ple::PleEpochs::new(&self.ple, record.ple_epochs),
            aple: (self.ple.policy == PlePolicy::Aple).then(|| crate::ple::Aple::new(self.ple.aple_settings())),
            lock_waits: DurationHistogram::default(),
            lock_holds: DurationHistogram::default(),
            host_threads: false,
        });
    }

    /// The host's own threads, one pinned to each pCPU. They ride on the vCPU machinery as one
    /// more "VM" (id `vm_id`) that the results leave out; the timeline shows it as `host`.
    fn add_host_threads(&mut self, vm_id: u32, bg: &Background) {
        let n = self.pcpus.len() as u32;
        let first = self.vcpus.len() as u32;
        let words: Rc<[SimWord]> = (0..guest::vm_words(n)).map(|_| self.mem.word(0)).collect();
        let (interval_ns, burst_ns) = (bg.interval_us * 1e3, bg.burst_us * 1e3);
        for p in 0..n {
            let cpu = SimCpu::new(p, n, words.clone());
            self.add_vcpu(vm_id, p, Affinity::Pinned(p), p, &words, |rng| Box::pin(host_thread(cpu, interval_ns, burst_ns, rng)));
        }
        self.vms.push(Vm {
            name: "host".into(),
            lock: None,
            workload: "host-threads".into(),
            first_vcpu: first,
            vcpus: n,
            first_lock: self.locks.len() as u32,
            barrier: None,
            guest_tick_ns: self.costs.tick_ns,
            guest_tick_phase_ns: 0,
            tlb_flush: TlbFlush::Ipi,
            ipi_send: IpiSend::Multicast,
            target: None,
            work_units: 0,
            completed_at: None,
            last_boosted: 0,
            ple_epochs: crate::ple::PleEpochs::new(&self.ple, false),
            aple: None,
            lock_waits: DurationHistogram::default(),
            lock_holds: DurationHistogram::default(),
            host_threads: true,
        });
    }

    /// Add vCPU `index` of VM `vm`, runnable on `pcpu`, running the guest code `start` returns.
    fn add_vcpu(&mut self, vm: u32, index: u32, affinity: Affinity, pcpu: u32, words: &[SimWord], start: impl FnOnce(Rng) -> GuestFuture) {
        let g = self.vcpus.len() as u32;
        let mut rng = Rng::stream(self.seed, g as u64 + 1);
        // The VMs' threads were started at unrelated times: give each a random position within
        // one scheduling period instead of an artificial lock-step start (which would
        // co-schedule each VM's vCPUs, the very cure for lock-waiter preemption).
        let start_vruntime = rng.below(self.costs.sched_latency);
        self.guests.push(start(rng));
        self.ipi_acks.push(Vec::new());
        self.vcpus.push(Vcpu {
            vm,
            index,
            affinity,
            host: HostState::Runnable,
            pcpu,
            state_since: 0,
            act: Act::Ready,
            host_work: None,
            active: false,
            seg_start: 0,
            spin_check_at: 0,
            pause_carry_ps: 0,
            gen: 0,
            timer_gen: 0,
            response: Response::NONE,
            access_latency: 0,
            stall_in_loop: false,
            last_read: (SimWord(u32::MAX), 0),
            se: SchedEntity {
                vruntime: start_vruntime,
                exec_start: 0,
                listed_at: 0,
                sum_exec: 0,
                prev_sum_exec: 0,
                deadline: start_vruntime + self.costs.base_slice,
                vlag: 0,
                protected: false,
            },
            credit: Default::default(),
            preempted: false,
            pv_unhalted: false,
            kicked: false,
            woken: false,
            throttle_work: false,
            in_spin_loop: false,
            hvs_list: crate::vcpu::HvsList::ResourceWaiter,
            hvs_boosted: false,
            dy_eligible: false,
            ple_window: crate::ple::initial_window(&self.ple),
            ple_window_ns: self.costs.ple_unit.ns(crate::ple::initial_window(&self.ple)),
            ple_spun_ns: 0,
            halt_poll_ns: 0,
            halt_started: None,
            halt_left_at: 0,
            hlt_at: 0,
            computing_in_kernel: false,
            pending_ipis: Vec::new(),
            irqs_off: false,
            ipis_to_send: Vec::new(),
            wake_in_flight: false,
            woken_by_ipi: false,
            call_function_word: words[index as usize * WORDS_PER_CPU + vspin_locks::PerCpuSlot::COUNT],
            waiting: None,
            held: None,
            releasing: None,
            wait_began: 0,
            hold_began: 0,
            wait_pauses: 0,
            wait_profiled: false,
            time: TimeBreakdown::default(),
            counters: Counters::default(),
            work_units: 0,
        });
        self.pcpus[pcpu as usize].queued.push(g);
    }

    /// Record a timeline of `[from, to)` (ns) during the run.
    pub(crate) fn with_timeline(mut self, from: Time, to: Time) -> Self {
        self.timeline = Some(Timeline::new(from, to));
        self
    }

    /// Run, returning the result and the timeline's Chrome trace JSON.
    pub(crate) fn run_traced(mut self) -> Result<(RunResult, String), InvariantViolation> {
        self.simulate()?;
        let timeline = self.timeline.take();
        let vms: Vec<(String, u32)> = self.vms.iter().map(|vm| (vm.name.clone(), vm.vcpus)).collect();
        let result = self.finish();
        Ok((result, timeline.map(|t| t.into_json(&vms)).unwrap_or_default()))
    }

    /// Run to the end of the scenario's duration (or until every VM with a target is done).
    pub fn run(mut self) -> Result<RunResult, InvariantViolation> {
        self.simulate()?;
        Ok(self.finish())
    }

    fn simulate(&mut self) -> Result<(), InvariantViolation> {
        self.start_bandwidth();
        for p in 0..self.pcpus.len() as u32 {
            self.schedule(p);
        }
        self.stagger_first_slices();
        self.start_interruptions();
        self.start_periodic_balance();
        self.start_credit_accounting();
        self.start_gang_turns();
        self.start_bandwidth_timers();
        self.q.push(AUDIT_PERIOD_NS, Event::Audit);
        self.q.push(self.end, Event::End);
        while let Some((t, ev)) = self.q.pop() {
            self.now = t;
            match ev {
                Event::SegmentEnd { vcpu, gen } if self.vcpus[vcpu as usize].gen == gen => self.segment_end(vcpu),
                Event::SpinCheck { vcpu, gen } if self.vcpus[vcpu as usize].gen == gen => self.spin_check(vcpu),
                Event::GuestTimer { vcpu, gen } => self.guest_timer(vcpu, gen),
                Event::Tick { pcpu } => self.tick(pcpu),
                Event::Balance { pcpu } => self.periodic_balance(pcpu),
                Event::SliceEnd { pcpu, gen } => self.slice_end(pcpu, gen),
                Event::CreditAccounting => self.credit_accounting(),
                Event::GangTurn { gen } => self.gang_turn_ends(gen),
                Event::BandwidthPeriod { vm } => self.bandwidth_period(vm),
                Event::BandwidthSlack { vm } => self.bandwidth_slack(vm),
                Event::Interruption { pcpu } => self.host_interruption(pcpu),
                Event::IpiAck { from, to } => self.ipi_ack(from, to),
                Event::SendHandled { vcpu } => self.send_handled(vcpu),
                Event::Audit => {
                    self.audit();
                    self.q.push(self.now + AUDIT_PERIOD_NS, Event::Audit);
                }
                Event::End => break,
                _ => {}
            }
            if self.stop {
                break;
            }
            if !self.violations.is_empty() {
                return Err(InvariantViolation(std::mem::take(&mut self.violations)));
            }
        }
        Ok(())
    }

    /// Record an interval of vCPU `v` on the timeline, if one is being recorded.
    pub(crate) fn trace_slice(&mut self, v: u32, name: &str, start: Time, end: Time) {
        if let Some(t) = self.timeline.as_mut() {
            let vc = &self.vcpus[v as usize];
            t.slice(vc.vm, vc.index, name, start, end);
        }
    }

    /// Record a point event of vCPU `v` on the timeline, if one is being recorded.
    pub(crate) fn trace_instant(&mut self, v: u32, name: impl FnOnce() -> String) {
        if let Some(t) = self.timeline.as_mut() {
            let vc = &self.vcpus[v as usize];
            t.instant(vc.vm, vc.index, name(), self.now);
        }
    }

    // ----- running a vCPU -------------------------------------------------------------------

    /// Continue a running vCPU that has no segment in progress.
    pub(crate) fn run_vcpu(&mut self, v: u32) {
        let now = self.now;
        let vc = &mut self.vcpus[v as usize];
        debug_assert!(vc.host == HostState::Running && !vc.active);
        vc.seg_start = now;
        vc.gen = vc.gen.wrapping_add(1);
        if let Some(hw) = vc.host_work {
            vc.active = true;
            self.q.push(now + hw.remaining, Event::SegmentEnd { vcpu: v, gen: vc.gen });
            return;
        }
        match vc.act {
            Act::Compute { remaining } | Act::Delayed { remaining, .. } => {
                vc.active = true;
                self.q.push(now + remaining, Event::SegmentEnd { vcpu: v, gen: vc.gen });
            }
            Act::Spin { word, stale: true, .. } => self.reread(v, word),
            Act::Spin { .. } => {
                vc.active = true;
                let at = self.spin_deadline(v);
                let vc = &mut self.vcpus[v as usize];
                vc.spin_check_at = at;
                self.q.push(at, Event::SpinCheck { vcpu: v, gen: vc.gen });
            }
            Act::Ready => self.poll_guest(v),
            Act::Halted(reason) => self.halt_returns(v, reason),
        }
    }

    /// Account the time of the segment in progress and cancel its event.
    pub(crate) fn stop_segment(&mut self, v: u32) {
        if !self.vcpus[v as usize].active {
            return;
        }
        self.account(v);
        let vc = &mut self.vcpus[v as usize];
        vc.active = false;
        vc.gen = vc.gen.wrapping_add(1);
    }

    /// Account the time of the segment in progress up to now (its event stays pending).
    pub(crate) fn account(&mut self, v: u32) {
        let now = self.now;
        let (pause_ps, stalls_count) = (self.costs.pause_ps, self.costs.ple_unit.counts_stalls());
        if self.timeline.is_some() {
            let vc = &self.vcpus[v as usize];
            if let Some(name) = crate::timeline::segment_name(vc, self.lock_base(vc.vm)) {
                self.trace_slice(v, &name, vc.seg_start, now);
            }
        }
        let vc = &mut self.vcpus[v as usize];
        let el = now - vc.seg_start;
        vc.seg_start = now;
        if let Some(hw) = vc.host_work.as_mut() {
            hw.remaining -= el;
            vc.time.exit_ns += el;
            return;
        }
        match &mut vc.act {
            Act::Compute { remaining } => {
                *remaining -= el;
                let waited = el.min(vc.access_latency);
                vc.access_latency -= waited;
                vc.time.spin_ns += waited;
                vc.time.useful_ns += el - waited;
            }
            Act::Delayed { remaining, .. } => {
                *remaining -= el;
                vc.time.spin_ns += el;
                if vc.stall_in_loop && stalls_count {
                    vc.ple_spun_ns += el;
                }
            }
            Act::Spin { .. } => Self::account_spin(vc, el, pause_ps, stalls_count),
            Act::Ready | Act::Halted(_) => {}
        }
    }

    /// [`Sim::account`] for a vCPU known to spin in guest mode (a watcher re-reading after a
    /// write): the same accounting without the dispatch on what it does.
    pub(crate) fn account_spinner(&mut self, v: u32) {
        if self.timeline.is_some() {
            return self.account(v);
        }
        let (pause_ps, stalls_count) = (self.costs.pause_ps, self.costs.ple_unit.counts_stalls());
        let now = self.now;
        let vc = &mut self.vcpus[v as usize];
        debug_assert!(vc.host_work.is_none());
        let el = now - vc.seg_start;
        vc.seg_start = now;
        Self::account_spin(vc, el, pause_ps, stalls_count);
    }

    fn account_spin(vc: &mut Vcpu, el: u64, pause_ps: u64, stalls_count: bool) {
        let Act::Spin { pauses_left, .. } = &mut vc.act else { unreachable!("only spinners spin") };
        let waited = el.min(vc.access_latency);
        vc.access_latency -= waited;
        let spun = el - waited;
        // Exact PAUSE counting: carry the part of an iteration not yet complete.
        let progress = spun * 1000 + vc.pause_carry_ps;
        let pauses = (*pauses_left).min(progress / pause_ps);
        *pauses_left -= pauses;
        vc.wait_pauses += pauses;
        vc.pause_carry_ps = progress % pause_ps;
        vc.ple_spun_ns += if vc.stall_in_loop && stalls_count { el } else { spun };
        vc.time.spin_ns += el;
    }

    fn segment_end(&mut self, v: u32) {
        self.stop_segment(v);
        let vc = &mut self.vcpus[v as usize];
        if let Some(hw) = vc.host_work.take() {
            // Host work ends with a VM entry, after which the CPU counts a new PAUSE loop.
            vc.ple_spun_ns = 0;
            if hw.after == After::Nothing && std::mem::take(&mut vc.throttle_work) {
                if self.throttle_at_entry(v) {
                    return;
                }
                // Not held after all (the VM got budget meanwhile): the IPIs that waited for the
                // entry are injected at it.
                if Self::has_deliverable_ipis(&self.vcpus[v as usize]) {
                    self.handle_pending_ipis(v, false);
                    return self.continue_if_running(v);
                }
            }
            self.after_host_work(v, hw.after);
        } else if let Act::Delayed { req, .. } = vc.act {
            vc.act = Act::Ready;
            if self.handle(v, req) {
                self.poll_guest(v);
                return;
            }
        } else {
            vc.act = Act::Ready;
        }
        self.continue_if_running(v);
    }

    pub(crate) fn continue_if_running(&mut self, v: u32) {
        let vc = &self.vcpus[v as usize];
        if vc.host == HostState::Running && !vc.active {
            self.run_vcpu(v);
        }
    }

    fn after_host_work(&mut self, v: u32, after: After) {
        match after {
            After::Nothing => {}
            After::PleDone { yielded } => {
                // `yield_to` ends in `schedule()`, inside the exit handler; the spin loop is left
                // when the vCPU runs again (at once if it was picked again, else at its next
                // switch-in).
                if yielded {
                    let p = self.vcpus[v as usize].pcpu;
                    self.schedule(p);
                }
                let vc = &mut self.vcpus[v as usize];
                if vc.host == HostState::Running {
                    vc.in_spin_loop = false;
                    vc.dy_eligible = false;
                }
                if yielded {
                    self.reenter_if_running(v);
                }
            }
            After::Yield => {
                let p = self.vcpus[v as usize].pcpu;
                self.yield_task(p, v);
                self.schedule(p);
                self.reenter_if_running(v);
            }
            After::VcpuBlock => self.vcpu_block(v),
            After::PollEnd => self.block_after_poll(v),
            After::SendIpis => self.ipis_sent(v),
            After::WakeSent { sleeper } => self.wake_sent(v, sleeper),
            After::KickSent { target } => self.kick_sent(v, target),
        }
    }

    /// The handler of `v`'s `KVM_HC_KICK_CPU` has run to the kick (`kvm_pv_kick_cpu_op`: the
    /// target's `pv_unhalted` and `kvm_vcpu_kick`). On 6.8 and 6.18 hosts the same handler then
    /// calls `kvm_sched_yield` towards the target, whose `schedule()` comes before the VM entry;
    /// the entry follows if `v` keeps its pCPU. A target woken onto `v`'s own pCPU that wins
    /// wake-up preemption does not switch `v` out at once: `resched_curr` only sets
    /// `need_resched`, and the handler runs on to that `schedule()`, or to the check before the
    /// entry (`xfer_to_guest_mode_work`), where the switch happens.
    fn kick_sent(&mut self, v: u32, target: u32) {
        let p = self.vcpus[v as usize].pcpu;
        self.kick_handler = Some((p, false));
        self.deliver_kick(v, target);
        let Some((_, marked)) = self.kick_handler.take() else { unreachable!("set above") };
        let running = self.pcpus[p as usize].curr == Some(v);
        let yielded = running && self.directed_yield.is_modern() && self.kvm_sched_yield(v, target);
        if running && (yielded || marked) {
            self.schedule(p);
        }
        self.reenter_if_running(v);
    }

    /// `v`'s kick hypercall reaches `target` (`kvm_pv_kick_cpu_op`): where the timeline shows it.
    pub(crate) fn deliver_kick(&mut self, v: u32, target: u32) {
        let index = target - self.vms[self.vcpus[v as usize].vm as usize].first_vcpu;
        self.trace_instant(v, || format!("kick vCPU {index}"));
        self.kick(target);
    }

    /// The VM entry that ends an exit handler which may have called `schedule()`: paid here if
    /// the vCPU kept its pCPU, with the IPIs that came during the handler injected at it; a vCPU
    /// switched out pays it, and takes them, in `switch_in` when it runs again, which under
    /// credit1 can already have begun on another pCPU (a kick's wake-up there preempts at once,
    /// and an idle pCPU picks the kicker up): its switch-in work then ends with that entry.
    fn reenter_if_running(&mut self, v: u32) {
        let entry = self.costs.vm_entry;
        let vc = &mut self.vcpus[v as usize];
        if vc.host == HostState::Running && vc.host_work.is_none() {
            vc.host_work = Some(HostWork { remaining: entry, after: After::Nothing });
            self.handle_pending_ipis(v, false);
        }
    }

    pub(crate) fn poll_guest(&mut self, v: u32) {
        loop {
            guest::respond(self.vcpus[v as usize].response);
            let mut cx = Context::from_waker(Waker::noop());
            if let Poll::Ready(()) = self.guests[v as usize].as_mut().poll(&mut cx) {
                unreachable!("guest threads loop forever");
            }
            let req = guest::take_request().expect("a suspended guest always leaves a request");
            guest::take_notes(&mut self.notes);
            let finished = (0..self.notes.len()).any(|i| {
                let n = self.notes[i];
                !self.note(v, n)
            });
            self.notes.clear();
            if finished {
                break;
            }
            let vc = &mut self.vcpus[v as usize];
            // Computing and PAUSEs overlap a pending memory latency; everything else waits for it.
            if vc.access_latency > 0 && !matches!(req, Req::Compute(..) | Req::InterruptsOn | Req::Relax) {
                vc.act = Act::Delayed { req, remaining: std::mem::take(&mut vc.access_latency) };
                break;
            }
            if !self.handle(v, req) {
                break;
            }
        }
        self.continue_if_running(v);
    }

    /// Carry out a guest request. Returns true if it took no time (poll again at once).
    fn handle(&mut self, v: u32, req: Req) -> bool {
        let now = self.now;
        let c = &self.costs;
        let (exit, hypercall) = (c.vm_exit, c.hypercall);
        match req {
            Req::Mem(w, op) => {
                let old = self.mem.value(w);
                let (new, ok) = match op {
                    MemOp::Load => (None, false),
                    MemOp::Store(x) => (Some(x), false),
                    MemOp::FetchAddField(f, d) => (Some(f.add(old, d)), false),
                    MemOp::FetchOr(b) => (Some(old | b), false),
                    MemOp::FetchAnd(b) => (Some(old & b), false),
                    MemOp::Swap(x) => (Some(x), false),
                    MemOp::Cas(o, n) if old == o => (Some(n), true),
                    MemOp::Cas(..) => (Some(old), false),
                };
                let kind = if new.is_some() { Access::Write } else { Access::Read };
                let locked = !matches!(op, MemOp::Load | MemOp::Store(_));
                let done = self.mem.access(w, self.vcpus[v as usize].pcpu, kind, now) + if locked { self.costs.atomic_extra } else { 0 };
                if let Some(x) = new {
                    self.mem.set(w, x);
                    self.notify_watchers(w);
                }
                self.vcpus[v as usize].response = Response::new(old, ok);
                self.access_done(v, w, done - now);
                true
            }
            Req::Spin(w, until, max_pauses) => {
                let done = self.mem.access(w, self.vcpus[v as usize].pcpu, Access::Read, now);
                let value = self.mem.value(w);
                self.access_done(v, w, done - now);
                if until.holds(value) || max_pauses == 0 {
                    self.vcpus[v as usize].response = Response::new(value, until.holds(value));
                    return true;
                }
                self.vcpus[v as usize].act = Act::Spin { word: w, until, pauses_left: max_pauses, stale: false };
                self.watchers[w.0 as usize].push(v);
                false
            }
            Req::Relax => {
                // A PAUSE reads no memory: it spins on the vCPU's private word, which nothing else
                // writes, under a condition no word meets (no word has 1 under the mask 0).
                let w = SimWord(self.first_relax_word + v);
                let vc = &mut self.vcpus[v as usize];
                vc.last_read = (w, self.mem.version(w));
                vc.act = Act::Spin { word: w, until: vspin_locks::Until::masked_eq(0, 1), pauses_left: 1, stale: false };
                self.watchers[w.0 as usize].push(v);
                false
            }
            Req::Compute(t, kernel) => {
                let t = self.smt_stretched(v, t);
                let no_threshold = !self.costs.ple_unit.counts_stalls() && self.costs.ple_gap_ns == u64::MAX;
                let vc = &mut self.vcpus[v as usize];
                // Code between two loops starts a new one, unless the counter has no threshold
                // (AMD under Linux 3.x KVM: only a VM entry reloads it).
                if !no_threshold {
                    vc.ple_spun_ns = 0;
                }
                vc.computing_in_kernel = kernel;
                vc.act = Act::Compute { remaining: t + vc.access_latency };
                false
            }
            Req::Halt => {
                self.start_halt(v, HaltReason::LockWait);
                false
            }
            Req::Sleep(t) => {
                self.start_halt(v, HaltReason::Idle { wake_at: now.saturating_add(t) });
                false
            }
            Req::Kick(cpu) => {
                let target = self.vms[self.vcpus[v as usize].vm as usize].first_vcpu + cpu;
                let vc = &mut self.vcpus[v as usize];
                vc.counters.kicks += 1;
                vc.act = Act::Ready;
                vc.response = Response::NONE;
                // The kick lands when the hypercall's exit has been handled (`kick_sent`).
                vc.host_work = Some(HostWork { remaining: exit + hypercall, after: After::KickSent { target } });
                false
            }
            Req::Yield => {
                self.las_note_yield(v);
                let vc = &mut self.vcpus[v as usize];
                vc.counters.yields += 1;
                vc.act = Act::Ready;
                // The VM entry follows the yield's `schedule()`, if the vCPU keeps its pCPU.
                vc.host_work = Some(HostWork { remaining: exit + hypercall, after: After::Yield });
                false
            }
            Req::Shootdown { start, count } => self.shootdown(v, start, count),
            Req::WakePeer { start } => self.wake_peer(v, start),
            Req::WakeVcpu(cpu) => self.wake_vcpu(v, cpu),
            Req::InterruptsOn => self.interrupts_on(v),
            Req::Clock => {
                self.vcpus[v as usize].response = Response::new(now, false);
                true
            }
            Req::SliceRemaining => match self.las_slice_remaining(v) {
                None => {
                    self.vcpus[v as usize].response = Response::NONE;
                    true
                }
                Some(left) => {
                    self.vcpus[v as usize].response = Response::new(left, true);
                    let read = ns(crate::credit1::LAS_PAGE_READ_CYCLES / self.costs.clock_ghz);
                    self.handle(v, Req::Compute(read, true))
                }
            },
        }
    }

    /// `t` of computation on vCPU `v`'s pCPU, slowed by the SMT siblings busy now (`topology`).
    fn smt_stretched(&self, v: u32, t: Time) -> Time {
        let siblings = self.topology.siblings(self.vcpus[v as usize].pcpu);
        if siblings.is_empty() {
            return t;
        }
        let busy = siblings
            .iter()
            .filter(|&&p| {
                self.pcpus[p as usize].curr.is_some_and(|x| {
                    let x = &self.vcpus[x as usize];
                    x.host_work.is_some() || matches!(x.act, Act::Compute { .. })
                })
            })
            .count();
        if busy == 0 { t } else { (t as f64 * self.topology.stretch(busy)).round() as Time }
    }

    // ----- bookkeeping notes from the workload --------------------------------------------------

    /// Record a note of vCPU `v`'s guest (it takes no time). Returns false if it was the work
    /// unit that completed the VM's target: the vCPU has halted for good.
    pub(crate) fn note(&mut self, v: u32, n: Note) -> bool {
        let lock_base = self.lock_base(self.vcpus[v as usize].vm);
        match n {
            Note::LockBegin(l) => self.lock_begin(v, lock_base + l),
            Note::LockAcquired(l) => self.lock_acquired(v, lock_base + l),
            Note::LockRelease(l) => self.lock_release(v, lock_base + l),
            Note::InterruptsOff => self.vcpus[v as usize].irqs_off = true,
            Note::WorkDone => return self.work_done(v),
        }
        true
    }

    /// [`Req::InterruptsOn`]. Returns false if it took host work (the IPIs that came meanwhile).
    pub(crate) fn interrupts_on(&mut self, v: u32) -> bool {
        let vc = &mut self.vcpus[v as usize];
        vc.irqs_off = false;
        vc.response = Response::NONE;
        // The IPIs that came meanwhile are taken now (an interrupt-window exit, or
        // virtual-interrupt delivery with posted interrupts).
        if vc.pending_ipis.is_empty() {
            return true;
        }
        vc.act = Act::Ready;
        self.handle_pending_ipis(v, true);
        false
    }

    /// [`Note::WorkDone`]. Returns false if it completed the VM's target (the vCPU halts).
    fn work_done(&mut self, v: u32) -> bool {
        let vm_id = self.vcpus[v as usize].vm;
        if let Some(l) = self.vcpus[v as usize].releasing.take() {
            self.locks[l as usize].releasers -= 1;
        }
        let vc = &mut self.vcpus[v as usize];
        vc.work_units += 1;
        let vm = &mut self.vms[vm_id as usize];
        vm.work_units += 1;
        if vm.completed_at.is_none() && vm.target.is_some_and(|t| vm.work_units >= t) {
            vm.completed_at = Some(self.now);
            self.stop = self.vms.iter().all(|m| m.target.is_none() || m.completed_at.is_some())
                && self.vms.iter().any(|m| m.target.is_some());
            self.finish_barrier_sleepers(vm_id);
        }
        if self.vms[vm_id as usize].completed_at.is_some() {
            self.start_halt(v, HaltReason::Finished);
            return false;
        }
        true
    }

    /// Global index of the VM's first lock.
    pub(crate) fn lock_base(&self, vm: u32) -> u32 {
        self.vms[vm as usize].first_lock
    }

    // ----- results ----------------------------------------------------------------------------

    fn finish(mut self) -> RunResult {
        let now = self.now;
        for v in 0..self.vcpus.len() as u32 {
            self.stop_segment(v);
            let (host, since) = (self.vcpus[v as usize].host, self.vcpus[v as usize].state_since);
            match host {
                HostState::Runnable => self.trace_slice(v, "preempted", since, now),
                HostState::Blocked => self.trace_slice(v, "halted", since, now),
                HostState::Running => {}
            }
            let vc = &mut self.vcpus[v as usize];
            let el = now - vc.state_since;
            match vc.host {
                HostState::Running => {}
                HostState::Runnable => vc.time.waiting_ns += el,
                HostState::Blocked if matches!(vc.act, Act::Halted(HaltReason::Finished)) => vc.time.finished_ns += el,
                HostState::Blocked => vc.time.halted_ns += el,
            }
        }
        for l in 0..self.locks.len() as u32 {
            self.profile_long_waits(l);
        }
        let mut totals = Counters::default();
        let mut vcpus = Vec::new();
        let mut vms = Vec::new();
        for (vm_id, vm) in self.vms.iter_mut().enumerate().filter(|(_, vm)| !vm.host_threads) {
            let mut time = TimeBreakdown::default();
            let mut counters = Counters::default();
            for vc in &self.vcpus[vm.vcpu_range()] {
                time.add(&vc.time);
                counters.add(&vc.counters);
                vcpus.push(VcpuResult {
                    vm: vm.name.clone(),
                    vcpu: vc.index,
                    work_units: vc.work_units,
                    ple_window_cycles: (self.ple.policy != PlePolicy::Off).then(|| self.costs.ple_unit.cycles(vc.ple_window, self.costs.clock_ghz)),
                    time: vc.time,
                    counters: vc.counters,
                });
            }
            totals.add(&counters);
            let span = vm.completed_at.unwrap_or(now).max(1);
            // A VM that met its target made exactly that many units by then; the units its other
            // vCPUs finish after it, on their way to halting, count in `work_units` only.
            let units_in_span = vm.target.filter(|_| vm.completed_at.is_some()).unwrap_or(vm.work_units);
            let locks = self.record_locks.then(|| {
                let own = self.locks.iter().filter(|l| l.vm == vm_id as u32);
                own.zip(0..).map(|(l, lock)| LockResult::new(lock, l.record.as_deref().expect("recorded"))).collect()
            });
            let e = &mut vm.ple_epochs;
            vms.push(VmResult {
                name: vm.name.clone(),
                lock: vm.lock.map(str::to_string),
                workload: vm.workload.clone(),
                vcpus: vm.vcpus,
                work_units: vm.work_units,
                throughput_per_s: units_in_span as f64 * 1e9 / span as f64,
                completion_ms: vm.completed_at.map(|t| t as f64 / 1e6),
                time,
                counters,
                lock_waits: vm.lock_waits.waits(),
                lock_holds: vm.lock_holds.holds(),
                locks,
                ple_epochs: e.epochs,
                ple_inefficiency: (e.epochs > 0).then(|| e.inefficiency_sum / e.epochs as f64),
                ple_window_mean_cycles: (e.exits_total > 0).then(|| e.window_cycles_sum as f64 / e.exits_total as f64),
                ple_epoch_trace: e.trace.take(),
            });
        }
        RunResult {
            scenario: self.name,
            seed: self.seed,
            simulated_ms: now as f64 / 1e6,
            events: self.q.processed(),
            totals,
            vms,
            vcpus,
        }
    }
}

/// Hosts for the unit tests of the simulation's modules: a scenario's [`Sim`] with its run queues
/// emptied, and vCPUs placed by hand.
#[cfg(test)]
pub(crate) mod test_host {
    use super::Sim;
    use crate::scenario::Scenario;
    use crate::vcpu::{Act, HaltReason, HostState};

    /// A host of 2 pCPUs with the given `[hypervisor]` line and VMs, run queues emptied for a
    /// test to fill.
    pub(crate) fn host(hypervisor: &str, background: bool, vms: &str) -> Sim {
        let text = format!(
            "duration_ms = 1\n[host]\ncores_per_socket = 2\n{}[hypervisor]\n{hypervisor}\n{vms}",
            if background { "background = { interval_us = 1000, burst_us = 100 }\n" } else { "" }
        );
        let mut s = Sim::new(&Scenario::from_toml(&text).unwrap());
        for rq in &mut s.pcpus {
            rq.queued.clear();
        }
        s
    }

    /// [`host`] under credit1 with the given `credit1` settings, PLE off; one VM of `vcpus` CPU
    /// hogs pinned to pCPU 0, taking `lock`.
    pub(crate) fn credit1_host(credit1: &str, lock: &str, vcpus: u32) -> Sim {
        let hv = format!("scheduler = \"credit1\"\nple = {{ policy = \"off\" }}\ncredit1 = {{ {credit1} }}\n");
        let pins = vec!["0"; vcpus as usize].join(", ");
        let vm = format!("[[vm]]\nname = \"g\"\nvcpus = {vcpus}\npin = [{pins}]\nlock = \"{lock}\"\nworkload = {{ preset = \"cpu-hog\" }}\n");
        host(&hv, false, &vm)
    }

    /// `v` running on pCPU `p`, its guest doing `act`.
    pub(crate) fn running(s: &mut Sim, v: u32, p: u32, act: Act) {
        s.pcpus[p as usize].curr = Some(v);
        let vc = &mut s.vcpus[v as usize];
        (vc.pcpu, vc.host, vc.act) = (p, HostState::Running, act);
    }

    /// `v` alone on pCPU `p`, just out of an HLT exit for an idle sleep.
    pub(crate) fn halting_alone(s: &mut Sim, v: u32, p: u32) {
        running(s, v, p, Act::Halted(HaltReason::Idle { wake_at: 1_000_000 }));
        s.vcpus[v as usize].halt_poll_ns = 10_000;
    }
}

#[cfg(test)]
mod tests {
    use super::stall_exceeding;
    use super::test_host::{credit1_host, halting_alone, host, running};
    use super::Sim;
    use crate::guest::Req;
    use crate::vcpu::{Act, After, HaltReason, HostState};

    /// vCPU 0 alone on pCPU 1 blocks while vCPUs 1 and 2 wait on pCPU 0, having last run
    /// `ran_ago` ns before; pCPU 1's idle periods have averaged `avg_idle`. Who runs on pCPU 1?
    fn idle_pull(scheduler: &str, avg_idle: u64, ran_ago: u64) -> Option<u32> {
        let vm = "[[vm]]\nname = \"g\"\nvcpus = 3\npin = \"none\"\nlock = \"tas\"\nworkload = { preset = \"kernbench\" }\n";
        let mut s = host(&format!("scheduler = \"{scheduler}\""), false, vm);
        s.now = 10_000_000;
        for v in [1, 2] {
            let vc = &mut s.vcpus[v as usize];
            (vc.pcpu, vc.host, vc.se.exec_start) = (0, HostState::Runnable, s.now - ran_ago);
            s.pcpus[0].queued.push(v);
        }
        s.pcpus[1].avg_idle = avg_idle;
        halting_alone(&mut s, 0, 1);
        s.block(0);
        s.pcpus[1].curr
    }

    #[test]
    fn an_idle_pcpu_pulls_only_a_cold_vcpu_and_only_when_its_idle_periods_are_long() {
        assert!(idle_pull("cfs", 1_000_000, 1_000_000).is_some(), "long idle periods, a cold vCPU: pulled");
        assert_eq!(idle_pull("cfs", 400_000, 1_000_000), None, "3.19: idle periods average under 0.5 ms");
        assert_eq!(idle_pull("cfs", 1_000_000, 100_000), None, "the waiting vCPUs ran 0.1 ms ago: cache-hot");
        assert!(idle_pull("eevdf", 400_000, 1_000_000).is_some(), "6.8: the gate is a balance pass's cost");
        assert_eq!(idle_pull("eevdf", 5_000, 1_000_000), None, "6.8: idle periods shorter than a pass");
    }

    #[test]
    fn a_yield_that_keeps_the_pcpu_pays_one_entry_after_schedule() {
        let vm = "[[vm]]\nname = \"g\"\nvcpus = 1\nlock = \"tas\"\nworkload = { preset = \"kernbench\" }\n";
        let mut s = host("", false, vm);
        running(&mut s, 0, 0, Act::Ready);
        s.after_host_work(0, super::After::PleDone { yielded: true });
        assert_eq!(s.pcpus[0].curr, Some(0), "nothing else to run: picked again");
        assert_eq!(s.vcpus[0].host_work.map(|hw| hw.remaining), Some(s.costs.vm_entry));
    }

    /// vCPU 0 kicks vCPU 1, halted for a lock on the same pCPU (both pinned to pCPU 0).
    fn kick_a_halted_waiter_sharing_my_pcpu(directed_yield: &str) -> Sim {
        let vm = "[[vm]]\nname = \"g\"\nvcpus = 2\npin = [0, 0]\nlock = \"pv-ticket\"\nworkload = { preset = \"kernbench\" }\n";
        let mut s = host(&format!("directed_yield = \"{directed_yield}\""), false, vm);
        for v in &mut s.vcpus {
            v.se.vruntime = 0;
        }
        running(&mut s, 1, 0, Act::Halted(HaltReason::LockWait));
        s.block(1);
        running(&mut s, 0, 0, Act::Ready);
        s.handle(0, Req::Kick(1));
        s
    }

    /// The kicker's exit is handled: run its host work to the kick.
    fn kick_handled(s: &mut Sim) {
        let hw = s.vcpus[0].host_work.take().expect("the kick's exit");
        assert!(matches!(hw.after, After::KickSent { target: 1 }));
        assert_eq!(hw.remaining, s.costs.vm_exit + s.costs.hypercall, "the entry comes after the handler");
        s.now += hw.remaining;
        s.after_host_work(0, hw.after);
    }

    #[test]
    fn a_kicker_switched_out_inside_its_kick_handler_delivers_the_kick_at_the_switch() {
        let mut s = kick_a_halted_waiter_sharing_my_pcpu("kvm-6.8");
        s.now += 100;
        s.pcpus[0].curr = None;
        s.stop_running(0);
        let handled: Vec<u64> = std::iter::from_fn(|| s.q.pop())
            .filter_map(|(at, e)| matches!(e, crate::engine::Event::SendHandled { vcpu: 0 }).then_some(at))
            .collect();
        assert_eq!(handled, vec![s.now]);
        assert!(!s.vcpus[1].kicked, "not before the handler ends");
        s.send_handled(0);
        // The idle pCPU runs it at once, and its `vcpu_block` consumes `pv_unhalted`.
        assert!(s.vcpus[1].kicked && s.vcpus[1].host != HostState::Blocked, "kicked at the switch");
        assert_eq!(s.vcpus[0].host_work.map(|hw| (hw.remaining, hw.after)), Some((s.costs.vm_entry, After::Nothing)));
        assert_eq!(s.vcpus[0].counters.directed_yields, 0, "no kvm_sched_yield from a vCPU leaving its pCPU");
        s.send_handled(0);
        assert_eq!(s.vcpus[0].host_work.map(|hw| hw.remaining), Some(s.costs.vm_entry), "a second event is stale");
    }

    #[test]
    fn an_ipi_that_reaches_a_kicker_inside_its_handler_waits_for_the_entry() {
        let mut s = kick_a_halted_waiter_sharing_my_pcpu("kvm");
        s.deliver_ipi(1, 0);
        assert_eq!(s.vcpus[0].host_work.map(|hw| hw.remaining), Some(s.costs.vm_exit + s.costs.hypercall), "not added to the handler");
        kick_handled(&mut s);
        assert_eq!(s.vcpus[0].host_work.map(|hw| hw.remaining), Some(s.costs.vm_entry + s.costs.ipi_send), "injected at the entry");
    }

    #[test]
    fn a_kick_lands_when_its_hypercall_exit_has_been_handled() {
        let mut s = kick_a_halted_waiter_sharing_my_pcpu("kvm");
        assert_eq!(s.vcpus[1].host, HostState::Blocked, "kvm_pv_kick_cpu_op runs in the exit's handler");
        assert!(!s.vcpus[1].pv_unhalted);
        kick_handled(&mut s);
        assert!(s.vcpus[1].pv_unhalted);
        assert_eq!(s.vcpus[1].host, HostState::Runnable, "woken, waiting for the pCPU");
        assert_eq!(s.vcpus[0].host_work.map(|hw| (hw.remaining, hw.after)), Some((s.costs.vm_entry, After::Nothing)));
    }

    #[test]
    fn since_linux_5_13_a_kick_yields_the_kickers_pcpu_to_the_woken_waiter() {
        let mut s = kick_a_halted_waiter_sharing_my_pcpu("kvm-6.8");
        kick_handled(&mut s);
        assert_eq!(s.vcpus[0].counters.directed_yields, 1);
        assert_eq!(s.pcpus[0].curr, Some(1), "the kicker's schedule() picks the woken waiter");
        assert_eq!(s.vcpus[0].host, HostState::Runnable);
        let mut s = kick_a_halted_waiter_sharing_my_pcpu("kvm");
        kick_handled(&mut s);
        assert_eq!(s.vcpus[0].counters.directed_yields, 0, "3.18's kick only wakes");
        assert_eq!(s.pcpus[0].curr, Some(0));
    }

    #[test]
    fn a_kick_whose_wake_up_preempts_the_kicker_still_yields_to_the_target_before_the_switch() {
        for (directed_yield, yields) in [("kvm-6.8", 1), ("kvm", 0)] {
            let mut s = kick_a_halted_waiter_sharing_my_pcpu(directed_yield);
            // The kicker has run 50 ms more than the waiter: the waiter wins wake-up preemption.
            s.vcpus[0].se.vruntime = 50_000_000;
            kick_handled(&mut s);
            assert_eq!(
                s.vcpus[0].counters.directed_yields, yields,
                "{directed_yield}: resched_curr only marks the kicker, whose handler goes on"
            );
            assert_eq!(s.pcpus[0].curr, Some(1), "{directed_yield}: the switch comes before the entry");
            assert_eq!(s.vcpus[0].host, HostState::Runnable);
        }
    }

    #[test]
    fn a_kick_that_finds_the_kickers_eevdf_slice_spent_still_yields_before_the_switch() {
        let vm = "[[vm]]\nname = \"g\"\nvcpus = 3\npin = [0, 0, 0]\nlock = \"pv-ticket\"\nworkload = { preset = \"kernbench\" }\n";
        let mut s = host("scheduler = \"eevdf\"\ndirected_yield = \"kvm-6.8\"", false, vm);
        let slice = s.costs.base_slice;
        for v in &mut s.vcpus {
            (v.se.vruntime, v.se.deadline) = (0, slice);
        }
        running(&mut s, 1, 0, Act::Halted(HaltReason::LockWait));
        s.block(1);
        (s.vcpus[2].pcpu, s.vcpus[2].host) = (0, HostState::Runnable);
        s.pcpus[0].queued.push(2);
        running(&mut s, 0, 0, Act::Ready);
        s.handle(0, Req::Kick(1));
        // The kicker ran past its deadline with vCPU 2 waiting: the kick's `update_curr` sets
        // `need_resched`, and the wake-up finds it set.
        s.vcpus[0].se.vruntime = slice;
        kick_handled(&mut s);
        assert_eq!(s.vcpus[0].counters.directed_yields, 1, "the handler runs on to kvm_sched_yield");
        assert_ne!(s.pcpus[0].curr, Some(0), "and switches before the entry");
    }

    /// A lone vCPU spinning on word 0 with 1000 ns of its PLE window spun, after a memory stall
    /// one ns shorter than the gap (1 µs where no gap ends a loop), accounted to its end.
    fn spinner_after_a_short_stall(hypervisor: &str) -> Sim {
        let vm = "[[vm]]\nname = \"g\"\nvcpus = 1\nlock = \"ticket\"\nworkload = { preset = \"kernbench\" }\n";
        let mut s = host(hypervisor, false, vm);
        let w = crate::memory::SimWord(0);
        let spin = Act::Spin { word: w, until: vspin_locks::Until::eq(0), pauses_left: 1 << 20, stale: false };
        running(&mut s, 0, 0, spin);
        let stall = (s.costs.ple_gap_ns - 1).min(1000);
        (s.vcpus[0].seg_start, s.vcpus[0].ple_spun_ns) = (s.now, 1000);
        s.access_done(0, w, stall);
        s.now += stall;
        s.account(0);
        s
    }

    #[test]
    fn a_pause_budget_past_two_to_the_64_picoseconds_ends_where_accounting_leaves_it() {
        // PLE off: the deadline is the budget's end alone. The budget's picoseconds overflow a
        // u64 by less than one PAUSE; after one PAUSE is accounted they fit, and the end must
        // be the same instant (`reread` skips recomputing it when it can only move later).
        let vm = "[[vm]]\nname = \"g\"\nvcpus = 1\nlock = \"ticket\"\nworkload = { preset = \"kernbench\" }\n";
        let mut s = host("ple = { policy = \"off\" }", false, vm);
        let pause_ps = s.costs.pause_ps;
        let pauses_left = u64::MAX / pause_ps + 1;
        let spin = Act::Spin { word: crate::memory::SimWord(0), until: vspin_locks::Until::eq(0), pauses_left, stale: false };
        running(&mut s, 0, 0, spin);
        s.vcpus[0].seg_start = s.now;
        let before = s.spin_deadline(0);
        assert!(before < u64::MAX, "exact, not the end of time");
        assert_eq!(before, s.now + (pauses_left as u128 * pause_ps as u128).div_ceil(1000) as u64);
        s.now += pause_ps.div_ceil(1000);
        s.account(0);
        assert!(matches!(s.vcpus[0].act, Act::Spin { pauses_left: p, .. } if p < pauses_left), "a PAUSE was counted");
        assert_eq!(s.spin_deadline(0), before);
    }

    #[test]
    fn a_stall_shorter_than_ple_gap_counts_toward_the_window_and_a_longer_one_restarts_it() {
        let mut s = spinner_after_a_short_stall("");
        let (w, gap) = (crate::memory::SimWord(0), s.costs.ple_gap_ns);
        assert_eq!(s.vcpus[0].ple_spun_ns, 1000 + gap - 1, "the CPU's window is time since the loop's first PAUSE");
        s.access_done(0, w, gap);
        assert_eq!(s.vcpus[0].ple_spun_ns, 0, "a stall longer than the gap: a new loop");
        s.now += gap + 10;
        s.account(0);
        assert_eq!(s.vcpus[0].ple_spun_ns, 10, "the new loop starts after the stall");
    }

    #[test]
    fn amds_pause_filter_counts_pauses_not_stalls_and_without_a_threshold_only_an_entry_reloads_it() {
        let mut s = spinner_after_a_short_stall("ple = { policy = \"kvm\", counter = \"amd\" }");
        let (w, gap) = (crate::memory::SimWord(0), s.costs.ple_gap_ns);
        assert_eq!(s.vcpus[0].ple_window_ns, (3000 * s.costs.pause_ps).div_ceil(1000), "3000 PAUSEs of spinning");
        assert_eq!(s.vcpus[0].ple_spun_ns, 1000, "a short stall executes no PAUSE");
        s.access_done(0, w, gap);
        assert_eq!(s.vcpus[0].ple_spun_ns, 0, "a gap longer than the threshold reloads the count");

        let mut s = spinner_after_a_short_stall("ple = { policy = \"fixed\", counter = \"amd\", gap_cycles = 0 }");
        assert_eq!(s.vcpus[0].ple_spun_ns, 1000);
        s.access_done(0, w, 1_000_000);
        assert_eq!(s.vcpus[0].ple_spun_ns, 1000, "Linux 3.x KVM sets no threshold: no gap reloads the count");
        s.vcpus[0].act = Act::Ready;
        s.handle(0, Req::Compute(5_000, true));
        assert_eq!(s.vcpus[0].ple_spun_ns, 1000, "nor does code between two loops");
    }

    #[test]
    fn the_ple_gap_threshold_is_the_first_stall_longer_than_the_gap() {
        assert_eq!(stall_exceeding(128, 2.4), 54, "53 ns is 127.2 cycles, 54 ns is 129.6");
        assert_eq!(stall_exceeding(128, 2.0), 65, "64 ns is exactly the gap, not longer");
        assert_eq!(stall_exceeding(0, 2.4), 1);
        assert_eq!(stall_exceeding(u64::MAX >> 1, 0.1), u64::MAX, "2^63 cycles at 0.1 GHz outlast u64 ns");
    }

    #[test]
    fn a_las_guests_yield_hypercall_earns_back_the_slice_it_gives_up() {
        // LAS seed: when the guest "has yielded CPU ... additional CPU time will be allotted to
        // the related VCPU during the following scheduling".
        let mut s = credit1_host("las = true", "las-tas", 2);
        for v in 0..2 {
            s.vcpus[v].host = HostState::Runnable;
            s.pcpus[0].queued.push(v as u32);
        }
        s.schedule(0);
        assert_eq!(s.pcpus[0].curr, Some(0));
        s.vcpus[0].active = false;
        s.now = 10_000_000;
        s.handle(0, Req::Yield);
        let hw = s.vcpus[0].host_work.take().unwrap();
        s.after_host_work(0, hw.after);
        assert_eq!(s.pcpus[0].curr, Some(1), "behind its equal");
        assert_eq!(s.vcpus[0].credit.credit, -100 + 200, "ran 10 ms, gave up 20");
    }
}
