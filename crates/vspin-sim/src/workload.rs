//! Guest workloads: a profile of what each guest thread does between and inside critical
//! sections, with named presets. Parameters and their sources: `docs/calibration.md`.
//!
//! Each vCPU runs `threads_per_vcpu` guest threads executing this loop (the guest never preempts
//! a thread that holds a spinlock, so the only preemption a holder suffers comes from the
//! hypervisor):
//!
//! ```text
//! loop {
//!     compute(think)                          // useful work outside any contended lock
//!     maybe block(block)                      // switch to another runnable thread; with none,
//!                                             // guest idle: the vCPU halts until a wake-up
//!     lock(l)   with l drawn from Zipf(s) over `locks` locks (none: skip to the IPIs);
//!               with interrupts off first if l is one of the `irqs_off_share` of them
//!     compute(cs, or cs_long with its probability)  // critical section
//!     unlock(l) and restore interrupts            // pending IPIs are handled now
//!     maybe shootdown(targets)                // synchronous IPI, after the page-table lock
//!     maybe wake a sleeping peer              // reschedule IPI (a message, a completion)
//!     one work unit done
//!     every `barrier_every` units: wait at a barrier of all the VM's threads
//! }
//! ```
//!
//! Threads of a vCPU are interchangeable (they run the same profile), so the guest scheduler
//! keeps only their wake-up times and their progress towards the next barrier: a blocking thread
//! hands the vCPU to the thread that became runnable first, after a guest context switch (the
//! host's `context_switch_ns`; the same kernel path); the vCPU halts only when every thread is
//! blocked, and a reschedule IPI from a peer (`wake_peer`) ends the halt by making the next
//! thread runnable, one from the barrier by making the threads it woke runnable. One thread per
//! vCPU (the default) is a guest whose vCPU goes idle whenever its one thread blocks.
//!
//! A lock taken with interrupts off (`spin_lock_irqsave`, `spin_lock_irq`) holds its waiter's and
//! its holder's IPIs until `local_irq_restore` after the unlock, and its PV slow path halts with
//! interrupts off, a halt only a kick ends (`Sim::has_deliverable_ipis`). Which of a preset's locks
//! are such locks is a share of them, `irqs_off_share`, spread evenly over the popularity ranks
//! ([`Profile::irqs_off`]): the presets' lock sets are named in `docs/calibration.md`, their
//! ranks are not.
//!
//! The presets are estimates from what each benchmark does in the kernel, documented with their
//! reasoning in `docs/calibration.md`; none is fitted to a figure.
use crate::engine::Rng;
use crate::guest::{Note, SimCpu};
use crate::locks::GuestLock;
use crate::scenario::{Durations, Preset, WorkloadConfig};
use std::rc::Rc;

#[derive(Clone, Debug)]
pub struct Profile {
    pub think_ns: f64,
    pub cs_ns: f64,
    /// Share of critical sections that are long (a batch freed under `zone->lock`, a list walk).
    pub cs_long_probability: f64,
    pub cs_long_ns: f64,
    pub locks: u32,
    pub zipf_s: f64,
    pub block_probability: f64,
    pub block_ns: f64,
    pub shootdown_probability: f64,
    pub shootdown_targets: u32,
    pub wake_probability: f64,
    /// Share of the locks taken with interrupts off.
    pub irqs_off_share: f64,
    pub threads_per_vcpu: u32,
    pub durations: Durations,
    /// With fixed durations, each length's coefficient of variation (uniform around the mean).
    pub jitter: f64,
    /// A guest context switch between two threads of one vCPU.
    pub switch_ns: u64,
    /// Work units each thread does between two barriers of all the VM's threads; 0 for none.
    pub barrier_every: u32,
    /// Cumulative lock popularity.
    cdf: Vec<f64>,
    /// Whether the lock of each popularity rank is taken with interrupts off.
    irqs_off: Vec<bool>,
}

impl Profile {
    pub fn new(cfg: &WorkloadConfig, vcpus: u32, switch_ns: u64) -> Profile {
        let mut p = Profile::preset(cfg.preset, switch_ns);
        macro_rules! take {
            ($($f:ident),*) => { $( if let Some(v) = cfg.$f { p.$f = v; } )* };
        }
        take!(think_ns, cs_ns, cs_long_probability, cs_long_ns, locks, zipf_s, block_probability, block_ns, shootdown_probability, shootdown_targets, wake_probability, irqs_off_share, threads_per_vcpu, durations, jitter, barrier_every);
        p.shootdown_targets = p.shootdown_targets.min(vcpus.saturating_sub(1));
        if p.shootdown_targets == 0 {
            p.shootdown_probability = 0.0;
        }
        let weights: Vec<f64> = (1..=p.locks).map(|k| 1.0 / libm::pow(k as f64, p.zipf_s)).collect();
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        p.cdf = weights.iter().map(|w| {
            acc += w / total;
            acc
        }).collect();
        // Rank k is marked when the running count of marks, rounded, steps up at it: a share of
        // one half marks ranks 0, 2, 4, …, a quarter ranks 1, 5, 9, …, the whole share all.
        let marks = |k: u32| libm::floor(k as f64 * p.irqs_off_share + 0.5);
        p.irqs_off = (0..p.locks).map(|k| marks(k + 1) > marks(k)).collect();
        p
    }

    /// Whether lock `l` (a popularity rank) is taken with interrupts off.
    pub(crate) fn irqs_off(&self, l: usize) -> bool {
        self.irqs_off[l]
    }

    /// A preset's own values, before a scenario's overrides and before they are fitted to a VM
    /// (shootdown targets, the lock popularity table).
    pub(crate) fn preset(preset: Preset, switch_ns: u64) -> Profile {
        let base = |think_ns, cs_ns, locks, zipf_s| Profile {
            think_ns,
            cs_ns,
            cs_long_probability: 0.0,
            cs_long_ns: 1.0,
            locks,
            zipf_s,
            block_probability: 0.0,
            block_ns: 1.0,
            shootdown_probability: 0.0,
            shootdown_targets: 0,
            wake_probability: 0.0,
            irqs_off_share: 0.0,
            threads_per_vcpu: 1,
            durations: Durations::Exponential,
            jitter: 0.0,
            switch_ns,
            barrier_every: 0,
            cdf: Vec::new(),
            irqs_off: Vec::new(),
        };
        match preset {
            Preset::Kernbench => Profile {
                irqs_off_share: 0.5,
                block_probability: 0.002,
                block_ns: 200_000.0,
                shootdown_probability: 0.001,
                shootdown_targets: 2,
                ..base(8_000.0, 400.0, 32, 1.0)
            },
            Preset::Hackbench => Profile {
                irqs_off_share: 1.0,
                block_probability: 0.5,
                block_ns: 50_000.0,
                wake_probability: 0.5,
                ..base(2_000.0, 250.0, 16, 0.5)
            },
            // One record: copy a 512 KiB chunk into a fresh buffer whose freed top glibc
            // returns with madvise(MADV_DONTNEED): ~96 page faults and ~96 pages freed, moved
            // on and off the one zone's LRU 14 pages per `lru_lock` hold (~15 holds), and one
            // TLB flush to every vCPU of the mm. docs/calibration.md, row "ebizzy".
            Preset::Ebizzy => Profile {
                irqs_off_share: 1.0,
                shootdown_probability: 1.0 / 15.0,
                shootdown_targets: u32::MAX,
                ..base(20_000.0, 1_000.0, 1, 0.0)
            },
            Preset::Dvdstore => Profile {
                irqs_off_share: 0.5,
                block_probability: 0.05,
                block_ns: 200_000.0,
                wake_probability: 0.05,
                shootdown_probability: 0.002,
                shootdown_targets: 2,
                ..base(8_000.0, 300.0, 64, 1.0)
            },
            Preset::CpuHog => base(1_000_000.0, 0.0, 0, 0.0),
            Preset::Lkc => Profile {
                irqs_off_share: 0.5,
                cs_long_probability: 0.0005,
                cs_long_ns: 200_000.0,
                block_probability: 0.002,
                block_ns: 200_000.0,
                shootdown_probability: 0.001,
                shootdown_targets: 2,
                ..base(150_000.0, 400.0, 32, 1.0)
            },
            Preset::Exim => Profile {
                irqs_off_share: 0.25,
                cs_long_probability: 0.0005,
                cs_long_ns: 200_000.0,
                block_probability: 0.02,
                block_ns: 100_000.0,
                wake_probability: 0.02,
                shootdown_probability: 0.005,
                shootdown_targets: 2,
                ..base(100_000.0, 1_000.0, 4, 2.0)
            },
            // dbench 4.00 replaying `client.txt`: ~12.5 µs of CPU and ~1.75 acquisitions of
            // shared ext4, jbd2 and VFS spinlocks per operation; 1.21% of operations are Flush,
            // an `fsync` that waits ~4 ms. docs/calibration.md, row "dbench".
            Preset::Dbench => Profile {
                irqs_off_share: 0.125,
                cs_long_probability: 0.001,
                cs_long_ns: 20_000.0,
                block_probability: 0.007,
                block_ns: 4_000_000.0,
                ..base(6_700.0, 400.0, 16, 1.0)
            },
            Preset::Metis => Profile {
                irqs_off_share: 0.5,
                shootdown_probability: 0.002,
                shootdown_targets: 2,
                ..base(150_000.0, 200.0, 256, 0.0)
            },
        }
    }

    /// A think time or critical section of mean (or, fixed, exact) length `ns`. Fixed lengths
    /// without jitter draw nothing, so exponential runs keep their random streams. Jitter is
    /// uniform: it stands for the small variations of a busy loop's length (`vspin bench-locks`
    /// measures them as `loop_cv`), whose long gaps (interrupts) the host's `interruptions` model.
    fn length(&self, rng: &mut Rng, ns: f64) -> u64 {
        let ns = match self.durations {
            Durations::Exponential => return rng.exp_ns(ns),
            Durations::Fixed if self.jitter > 0.0 => ns * (1.0 + self.jitter * 3f64.sqrt() * (2.0 * rng.uniform() - 1.0)),
            Durations::Fixed => ns,
        };
        (ns.round() as u64).max(1)
    }

    fn pick_lock(&self, rng: &mut Rng) -> usize {
        let u = rng.uniform();
        self.cdf.partition_point(|&c| c <= u).min(self.cdf.len() - 1)
    }
}

/// A thread queued on the barrier's futex, which only the barrier's last arrival makes runnable.
const AT_BARRIER: u64 = u64::MAX;

/// A thread of a vCPU that is not running.
#[derive(Clone, Copy)]
struct Parked {
    /// When it can run: its wake-up time (0: runnable from the start), or `AT_BARRIER`.
    ready_at: u64,
    /// Its work units finished since its last barrier.
    since_barrier: u32,
    /// The order in which the vCPU's threads queued on the barrier (a wake takes the first).
    queued_as: u64,
}

/// The guest scheduler of one vCPU: the running thread's progress towards its next barrier,
/// and its other threads by when each can run next.
///
/// The vCPU runs one loop (`guest_thread`) whatever thread it runs, so a thread that blocks in
/// the middle of a work unit and one that resumes from the barrier, at the top of the loop, trade
/// places: the unit in progress is finished by the thread that resumes. A unit therefore counts
/// for the thread that finishes it (`since_barrier` grows at each `WorkDone`), so each thread
/// meets the barrier after exactly `barrier_every` units of its own.
struct GuestThreads {
    /// The running thread's work units finished since its last barrier.
    since_barrier: u32,
    /// The vCPU's other threads.
    others: Vec<Parked>,
    /// How many times a thread of the vCPU has queued on the barrier: the next `queued_as`.
    queued: u64,
}

impl GuestThreads {
    fn new(threads_per_vcpu: u32) -> Self {
        let parked = Parked { ready_at: 0, since_barrier: 0, queued_as: 0 };
        GuestThreads { since_barrier: 0, others: vec![parked; threads_per_vcpu as usize - 1], queued: 0 }
    }

    /// The thread that can run first (by wake-up time, then place), as an index into `others`.
    fn earliest(&self) -> usize {
        (0..self.others.len()).min_by_key(|&i| (self.others[i].ready_at, i)).expect("a parked thread")
    }

    /// Make runnable the threads the barrier's last arrival has woken since the vCPU last looked:
    /// as many of its threads asleep at the barrier as have left the barrier's queue, first
    /// queued first (`futex_wake` walks the queue in arrival order). Returns whether there were
    /// any.
    fn take_barrier_wakes(&mut self, barrier: Option<&Barrier>, cpu: u32) -> bool {
        let Some(b) = barrier else { return false };
        let asleep = self.others.iter().filter(|t| t.ready_at == AT_BARRIER).count();
        let still_queued = b.queued_threads(cpu);
        debug_assert!(still_queued <= asleep, "a queued thread of vCPU {cpu} is not asleep");
        let woken = asleep.saturating_sub(still_queued);
        for _ in 0..woken {
            let first = (0..self.others.len()).filter(|&i| self.others[i].ready_at == AT_BARRIER)
                .min_by_key(|&i| self.others[i].queued_as).expect("an asleep thread");
            self.others[first].ready_at = 0;
        }
        woken > 0
    }

    /// The running thread stops for `ns` (an I/O wait), or until the barrier wakes it
    /// (`AT_BARRIER`, once it has queued there), and the vCPU runs the thread that can run first,
    /// after a guest context switch (the host's `context_switch_ns`; the same kernel path). If
    /// none can run yet, the vCPU idles until one can or until a reschedule IPI: a peer's
    /// (`wake_peer`) makes the earliest runnable at once, the barrier's the threads it woke. A
    /// thread the barrier woke before it fell asleep goes on with no switch. With a single
    /// thread, an I/O wait is plain guest idle.
    async fn block(&mut self, cpu: &SimCpu, barrier: Option<&Barrier>, ns: u64, switch_ns: u64) {
        if self.others.is_empty() {
            cpu.sleep(ns).await;
            return;
        }
        let now = cpu.clock().await;
        let me = self.others.len();
        let ready_at = if ns == AT_BARRIER { AT_BARRIER } else { now + ns };
        self.others.push(Parked { ready_at, since_barrier: self.since_barrier, queued_as: self.queued });
        self.take_barrier_wakes(barrier, vspin_locks::Platform::cpu(cpu));
        let mut next = self.earliest();
        let mut slept = false;
        while self.others[next].ready_at > now {
            slept = true;
            let timed = self.others[next].ready_at != AT_BARRIER;
            cpu.sleep(if timed { self.others[next].ready_at - now } else { u64::MAX }).await;
            if self.take_barrier_wakes(barrier, vspin_locks::Platform::cpu(cpu)) {
                next = self.earliest();
            }
            // A timed sleep ends the wait whatever ended it (a peer's wake-up runs the earliest).
            if timed {
                break;
            }
        }
        self.since_barrier = self.others.swap_remove(next).since_barrier;
        if slept || next != me || ns != AT_BARRIER {
            cpu.kernel_compute(switch_ns).await;
        }
    }
}

/// A barrier of all the VM's threads, as glibc's `pthread_barrier_wait` over a futex in a
/// Linux 3.x guest: a thread that arrives takes the futex's hash-bucket spinlock (`hb->lock`),
/// queues itself (`FUTEX_QUEUE_NS` under the lock) and sleeps: its vCPU runs another of its
/// threads, or idles; the last one to arrive takes the same lock and, still holding it (3.19's
/// `futex_wake` wakes each waiter under `hb->lock`), takes each sleeper off the queue and wakes
/// it (`Sim::wake_vcpu`: a reschedule IPI to a vCPU in guest idle). A thread taken off before it
/// fell asleep does not sleep, as `futex_wait_queue_me` skips `schedule()` once
/// `__unqueue_futex` has emptied its queue entry.
///
/// The queue names each thread by its vCPU: threads of one vCPU are interchangeable, so the
/// vCPU's guest scheduler counts how many of its own are still queued (`queued_threads`).
pub(crate) struct Barrier {
    threads: u32,
    threads_per_vcpu: u32,
    state: std::cell::RefCell<BarrierState>,
}

#[derive(Default)]
struct BarrierState {
    arrived: u32,
    /// The vCPUs (VM-relative) of the threads queued on the futex, in arrival order.
    queued: Vec<u32>,
    /// Those the last arrival has still to wake, the next one last; the simulator takes each off
    /// when its wake takes effect (`unqueue`).
    waking: Vec<u32>,
}

/// The futex system call up to `hb->lock` (entry, `get_futex_key`, the hash), and `futex_wait`'s
/// work under it (`queue_me`): estimates of a few hundred cycles each (`docs/calibration.md`,
/// row "barrier").
const FUTEX_ENTRY_NS: u64 = 150;
const FUTEX_QUEUE_NS: u64 = 200;

impl Barrier {
    pub(crate) fn new(vcpus: u32, threads_per_vcpu: u32) -> Self {
        Barrier { threads: vcpus * threads_per_vcpu, threads_per_vcpu, state: Default::default() }
    }

    /// Whether every thread of vCPU `cpu` (VM-relative) is queued on the barrier or about to be
    /// woken: the only case in which the vCPU may sleep with no timer (the monitor's lost
    /// wake-up audit), as a wake ends such a sleep (once its IPI arrives: the audit spares a
    /// vCPU with one on its way).
    pub(crate) fn holds_every_thread_of(&self, cpu: u32) -> bool {
        self.queued_threads(cpu) == self.threads_per_vcpu as usize
    }

    /// How many threads of vCPU `cpu` (VM-relative) are queued on the barrier or about to be
    /// woken.
    pub(crate) fn queued_threads(&self, cpu: u32) -> usize {
        let s = self.state.borrow();
        s.queued.iter().chain(&s.waking).filter(|&&t| t == cpu).count()
    }

    /// A thread of vCPU `cpu` joins the queue, as an arrival does (the monitor's tests).
    #[cfg(test)]
    pub(crate) fn queue(&self, cpu: u32) {
        self.state.borrow_mut().queued.push(cpu);
    }

    /// A thread of vCPU `cpu` leaves the queue, as a woken one does (the monitor's tests).
    #[cfg(test)]
    pub(crate) fn leave(&self, cpu: u32) {
        let mut s = self.state.borrow_mut();
        let i = s.queued.iter().position(|&t| t == cpu).expect("a queued thread");
        s.queued.remove(i);
    }

    /// The next thread of vCPU `cpu` to be woken leaves the queue: its wake takes effect.
    pub(crate) fn unqueue(&self, cpu: u32) {
        let mut s = self.state.borrow_mut();
        if let Some(i) = s.waking.iter().rposition(|&t| t == cpu) {
            s.waking.remove(i);
        }
    }

    /// The running thread of `cpu` waits until every thread has arrived; `hb` is the futex's
    /// hash-bucket lock, number `lock` of the VM's locks.
    async fn wait(&self, cpu: &SimCpu, threads: &mut GuestThreads, hb: &GuestLock, lock: u32, switch_ns: u64) {
        cpu.kernel_compute(FUTEX_ENTRY_NS).await;
        cpu.note(Note::LockBegin(lock));
        hb.lock(cpu).await;
        cpu.note(Note::LockAcquired(lock));
        self.state.borrow_mut().arrived += 1;
        if self.state.borrow().arrived == self.threads {
            {
                let mut s = self.state.borrow_mut();
                s.arrived = 0;
                s.waking = std::mem::take(&mut s.queued);
                s.waking.reverse();
            }
            // In arrival order, as `futex_wake` walks the hash bucket's queue; each wake takes
            // its thread off the list (`Sim::wake_vcpu`), when it takes effect.
            loop {
                let next = self.state.borrow().waking.last().copied();
                let Some(t) = next else { break };
                cpu.wake_vcpu(t).await;
            }
            cpu.note(Note::LockRelease(lock));
            // SAFETY: this thread took `hb` above.
            unsafe { hb.unlock(cpu).await };
            return;
        }
        let me = vspin_locks::Platform::cpu(cpu);
        self.state.borrow_mut().queued.push(me);
        threads.queued += 1;
        cpu.kernel_compute(FUTEX_QUEUE_NS).await;
        cpu.note(Note::LockRelease(lock));
        // SAFETY: this thread took `hb` above.
        unsafe { hb.unlock(cpu).await };
        if threads.others.is_empty() {
            while self.queued_threads(me) > 0 {
                cpu.sleep(u64::MAX).await;
            }
            return;
        }
        threads.block(cpu, Some(self), AT_BARRIER, switch_ns).await;
    }
}

/// The guest thread of one vCPU.
pub(crate) async fn guest_thread(cpu: SimCpu, locks: Rc<[GuestLock]>, profile: Rc<Profile>, barrier: Option<Rc<Barrier>>, mut rng: Rng) {
    use vspin_locks::Platform;
    let nr = cpu.nr_cpus();
    let mut threads = GuestThreads::new(profile.threads_per_vcpu);
    loop {
        if let Some(b) = &barrier {
            if threads.since_barrier == profile.barrier_every {
                threads.since_barrier = 0;
                b.wait(&cpu, &mut threads, &locks[profile.locks as usize], profile.locks, profile.switch_ns).await;
            }
        }
        cpu.compute(profile.length(&mut rng, profile.think_ns)).await;
        if profile.block_probability > 0.0 && rng.uniform() < profile.block_probability {
            let ns = rng.exp_ns(profile.block_ns);
            threads.block(&cpu, barrier.as_deref(), ns, profile.switch_ns).await;
        }
        // A workload without locks (`cpu-hog`) still blocks, shoots down and wakes if told to:
        // an I/O-bound or IPI-heavy neighbour that contends for no lock of its own.
        if profile.locks > 0 {
            let l = profile.pick_lock(&mut rng);
            let irqs_off = profile.irqs_off(l);
            if irqs_off {
                cpu.note(Note::InterruptsOff);
            }
            cpu.note(Note::LockBegin(l as u32));
            locks[l].lock(&cpu).await;
            cpu.note(Note::LockAcquired(l as u32));
            let long = profile.cs_long_probability > 0.0 && rng.uniform() < profile.cs_long_probability;
            cpu.compute(profile.length(&mut rng, if long { profile.cs_long_ns } else { profile.cs_ns })).await;
            cpu.note(Note::LockRelease(l as u32));
            // SAFETY: this thread took `locks[l]` above.
            unsafe { locks[l].unlock(&cpu).await };
            if irqs_off {
                cpu.interrupts_on().await;
            }
        }
        // As `tlb_finish_mmu` does, the flush is sent after the page-table lock is dropped.
        if profile.shootdown_probability > 0.0 && rng.uniform() < profile.shootdown_probability {
            let start = rng.below(nr as u64) as u32;
            cpu.shootdown(start, profile.shootdown_targets).await;
        }
        if profile.wake_probability > 0.0 && rng.uniform() < profile.wake_probability {
            cpu.wake_peer(rng.below(nr as u64) as u32).await;
        }
        cpu.note(Note::WorkDone);
        threads.since_barrier += 1;
    }
}

/// A host background thread (`scenario::Background`): sleep, then a burst of host work. It runs
/// on the vCPU machinery, so its sleeps and wake-ups go through the same CFS paths as a halting
/// vCPU's. Each burst thus pays what any waking thread pays (`wakeup_ns` and `context_switch_ns`,
/// 4.5 µs at the defaults) plus a VM exit and entry that a host thread would not (0.5 µs).
pub(crate) async fn host_thread(cpu: SimCpu, interval_ns: f64, burst_ns: f64, mut rng: Rng) {
    loop {
        cpu.sleep(rng.exp_ns(interval_ns)).await;
        cpu.compute(rng.exp_ns(burst_ns)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(workload: &str) -> Profile {
        let cfg: WorkloadConfig = toml::from_str(workload).unwrap();
        Profile::new(&cfg, 1, 0)
    }

    #[test]
    fn jitter_is_the_coefficient_of_variation_of_fixed_lengths() {
        let p = profile("preset = \"kernbench\"\ndurations = \"fixed\"\njitter = 0.1");
        let mut rng = Rng::stream(1, 0);
        let xs: Vec<f64> = (0..100_000).map(|_| p.length(&mut rng, 1000.0) as f64).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let cv = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64).sqrt() / mean;
        assert!((mean - 1000.0).abs() < 2.0, "mean {mean}");
        assert!((cv - 0.1).abs() < 0.002, "cv {cv}");
        let bound = 1000.0 * 0.1 * 3f64.sqrt();
        assert!(xs.iter().all(|&x| (x - 1000.0).abs() <= bound + 0.5), "uniform within ±√3·cv of the mean");
    }

    #[test]
    fn fixed_lengths_without_jitter_are_exact_and_draw_nothing() {
        let p = profile("preset = \"kernbench\"\ndurations = \"fixed\"");
        let (mut rng, mut untouched) = (Rng::stream(1, 0), Rng::stream(1, 0));
        assert!((0..100).all(|_| p.length(&mut rng, 300.4) == 300));
        assert_eq!(rng.next_u64(), untouched.next_u64());
    }

    #[test]
    fn the_locks_taken_with_interrupts_off_are_spread_evenly_over_the_popularity_ranks() {
        let marked = |share: f64| {
            let p = profile(&format!("preset = \"kernbench\"\nlocks = 8\nirqs_off_share = {share:?}"));
            (0..8).filter(|&l| p.irqs_off(l)).collect::<Vec<_>>()
        };
        assert_eq!(marked(0.0), Vec::<usize>::new());
        assert_eq!(marked(0.25), vec![1, 5]);
        assert_eq!(marked(0.5), vec![0, 2, 4, 6]);
        assert_eq!(marked(1.0), (0..8).collect::<Vec<_>>());
        assert!(profile("preset = \"ebizzy\"").irqs_off(0), "ebizzy's one lock, `lru_lock`, is taken with interrupts off");
    }
}
