//! `loom` models of every algorithm on the native platform: all interleavings (up to a
//! preemption bound) of a few threads, under the C++ memory model with the orderings `native`
//! chooses.
//!
//! Checked in each execution:
//! - mutual exclusion: the counter is a `loom` `UnsafeCell`, and loom fails the model when two
//!   threads are ever inside it together (and the final count is exact);
//! - no lost wake-up: `halt` is a real wait (the futex is modelled with a loom mutex and
//!   condition variable), so a kick that never comes leaves threads blocked, which loom reports
//!   as a deadlock; a waiter spinning forever for it exceeds loom's branch budget.
//!
//! Keeping the state space small: each execution builds a fresh [`Machine`] of
//! `MAX_CPUS = 4` whose bounded spins are cut to one PAUSE ([`Machine::with_spin_cap`]), so the
//! kernel's 2^14 – 2^34 PAUSE thresholds end at once and the halt/kick slow paths are reached in
//! a few steps; a PAUSE is a `loom` yield. Run with `scripts/loom.sh` (release build; under a
//! minute on 2 cores, of which the models take about 12 s and the build the rest).
#![cfg(vspin_loom)]
use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
use vspin_locks::native::{block_on, Machine, Native, MAX_CPUS};
use vspin_locks::*;

/// Allocates fresh words; the first one (a ticket lock's only word) starts `start` away from
/// `init`, so that a free lock's tickets can begin just before their wrap.
struct Words {
    start: u64,
}

// SAFETY: each call makes a fresh word that nothing else uses. The first holds `init | start`,
// against the letter of the trait's contract and on purpose: for the ticket locks these tests
// give it, `start` moves `head` and `tail` together, to a free state that the lock's own
// acquisitions reach after 2^24 − 2 (or 2^16 − 2) of them.
unsafe impl WordAlloc<AtomicU64> for Words {
    fn word(&mut self, init: u64) -> AtomicU64 {
        AtomicU64::new(init | std::mem::take(&mut self.start))
    }
}

struct Shared<L> {
    lock: L,
    count: UnsafeCell<u64>,
}

// SAFETY: `count` is only touched with `lock` held, which is what loom checks.
unsafe impl<L: Sync> Sync for Shared<L> {}
unsafe impl<L: Send> Send for Shared<L> {}

/// Acquire `rounds` times, the last one (when `try_first`) starting with a `try_lock`.
fn work<L: RawSpinLock<Native>>(p: Native, s: &Shared<L>, rounds: u64, try_first: bool) {
    for round in 0..rounds {
        let taken = try_first && round + 1 == rounds && block_on(s.lock.try_lock(&p));
        if !taken {
            block_on(s.lock.lock(&p));
        }
        s.count.with_mut(|c| unsafe { *c += 1 });
        // SAFETY: this thread took the lock above.
        block_on(unsafe { s.lock.unlock(&p) });
    }
}

/// `threads` threads (the model's main thread included) acquiring `rounds` times each, with at
/// most `preemptions` preemptions per execution unless `LOOM_MAX_PREEMPTIONS` says otherwise.
fn model<L: RawSpinLock<Native> + Send + Sync + 'static>(threads: u64, rounds: u64, preemptions: usize) {
    model_on::<L>(PLAIN, threads, rounds, preemptions)
}

/// What a model runs on besides its threads.
#[derive(Clone, Copy)]
struct Setup {
    /// Where the lock word starts (see [`Words`]).
    start: u64,
    /// How many CPU ids the machine hands out.
    cpu_ids: usize,
    /// Whether a thread of its own sends CPUs 0 and 1 one kick each, as an interrupt wakes a
    /// halted vCPU: a halt then returns without the lock's kick (spuriously).
    interrupts: bool,
}

const PLAIN: Setup = Setup { start: 0, cpu_ids: MAX_CPUS, interrupts: false };

/// [`model`] on the given set-up.
fn model_on<L: RawSpinLock<Native> + Send + Sync + 'static>(setup: Setup, threads: u64, rounds: u64, preemptions: usize) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(builder.preemption_bound.unwrap_or(preemptions));
    builder.check(move || {
        // A fresh machine per execution; loom objects must not outlive it, so it is leaked.
        let machine: &'static Machine = Box::leak(Box::new(Machine::new().with_spin_cap(1).with_cpu_ids(setup.cpu_ids)));
        let p = Native::on(machine);
        let shared = Arc::new(Shared { lock: L::new(&mut Words { start: setup.start }), count: UnsafeCell::new(0) });
        let mut others: Vec<_> = (1..threads)
            .map(|i| {
                let s = shared.clone();
                loom::thread::spawn(move || work(p, &s, rounds, i == 1))
            })
            .collect();
        if setup.interrupts {
            others.push(loom::thread::spawn(move || {
                block_on(p.kick(0));
                block_on(p.kick(1));
            }));
        }
        work(p, &shared, rounds, false);
        for t in others {
            t.join().unwrap();
        }
        let total = shared.count.with(|c| unsafe { *c });
        assert_eq!(total, threads * rounds, "{}: lost updates", L::NAME);
    });
}

/// Three threads are explored with fewer preemptions when two waiters can spin without bound
/// (TAS, ticket, the preemptable lock's `locked` bit, the queued spinlock's MCS queue): every PAUSE is a loom yield, a free
/// scheduling point, and two spinners yielding to each other multiply the executions beyond
/// minutes. The PV locks halt after one PAUSE here, and a halted thread is not scheduled. The
/// yielding TAS lock's waiters alternate one-PAUSE spins with yields, and with one preemption its
/// three-thread model exceeds loom's branch limit: it is explored with none (every thread switch
/// at a yield or a blocking point). The 6.8 PV qspinlock's three threads get three preemptions
/// (~15 s): that is what it takes to reach the store-buffering outcome of its queue node's halt
/// against `pv_kick_node`, which loom found there without the `smp_mb` after the node's swap.
macro_rules! models {
    ($($name:ident: $lock:ty, $three_thread_preemptions:expr;)*) => {$(
        mod $name {
            use super::*;
            #[test]
            fn two_threads_twice() {
                model::<$lock>(2, 2, 2);
            }
            #[test]
            fn three_threads_once() {
                model::<$lock>(3, 1, $three_thread_preemptions);
            }
        }
    )*};
}

models! {
    tas: TasLock<Native>, 1;
    tas_yield: TasYieldLock<Native>, 0;
    las_tas: LasTasLock<Native>, 1;
    ticket: TicketLock<Native>, 1;
    pv_ticket: PvTicketLock<Native>, 2;
    oticket: OTicketLock<Native>, 2;
    oticket_spin_only: OpportunisticSpinLock<Native>, 2;
    oticket_wakeup_only: OpportunisticWakeupLock<Native>, 2;
    longer_spinning: LongerSpinningLock<Native>, 2;
    iticket: ITicketLock<Native>, 2;
    preemptable_ticket: PreemptableTicketLock<Native>, 1;
    pv_preemptable_ticket: PvPreemptableTicketLock<Native>, 2;
    qspinlock: QueuedSpinLock<Native>, 1;
    pv_qspinlock: PvQueuedSpinLock<Native>, 3;
    pv_qspinlock_v42: PvQueuedSpinLockV42<Native>, 2;
}

/// Free locks whose tickets are two draws from their wrap: four acquisitions cross it. The ticket
/// family's tickets are 24 bits, the preemptable locks' 16.
const WRAP24: u64 = 0xff_fffe << 40 | 0xff_fffe;
const WRAP16: u64 = 0xfffe << 48 | 0xfffe;

macro_rules! models_across_the_wrap {
    ($($name:ident: $lock:ty, $start:expr;)*) => {
        mod across_the_wrap {
            use super::*;
            $(
                #[test]
                fn $name() {
                    model_on::<$lock>(Setup { start: $start, ..PLAIN }, 2, 2, 2);
                }
            )*
        }
    };
}

models_across_the_wrap! {
    ticket: TicketLock<Native>, WRAP24;
    pv_ticket: PvTicketLock<Native>, WRAP24;
    oticket: OTicketLock<Native>, WRAP24;
    iticket: ITicketLock<Native>, WRAP24;
    preemptable_ticket: PreemptableTicketLock<Native>, WRAP16;
    pv_preemptable_ticket: PvPreemptableTicketLock<Native>, WRAP16;
}

/// Machines that hand out fewer CPU ids than the model has waiters, so that a waiter that asks
/// for its CPU gets none: its halt is a yield, its per-CPU words are the overflow row, which no
/// unlock scans, and it has no queue node (the PV queued locks make it try for the lock until it
/// is free, as the kernel's CPUs past `MAX_NODES` do). In a PV ticket lock two of three threads
/// may halt (one id: the second has none); in the PV queued locks the one thread that can queue
/// behind a holder and a pending waiter has none (no ids). Each model fails when the overflow
/// path is broken (a halt that sleeps: deadlock; a queued lock's overflow path that returns at
/// once: two holders). The native qspinlock's is out of reach: its overflow spinner beside the
/// pending one exceeds loom's branch budget with the two preemptions it needs.
macro_rules! models_with_an_overflow_thread {
    ($($name:ident: $lock:ty, ids $ids:expr, threads $threads:expr, rounds $rounds:expr, preemptions $preemptions:expr;)*) => {
        mod with_an_overflow_thread {
            use super::*;
            $(
                #[test]
                fn $name() {
                    model_on::<$lock>(Setup { cpu_ids: $ids, ..PLAIN }, $threads, $rounds, $preemptions);
                }
            )*
        }
    };
}

models_with_an_overflow_thread! {
    pv_ticket: PvTicketLock<Native>, ids 1, threads 3, rounds 1, preemptions 2;
    pv_preemptable_ticket: PvPreemptableTicketLock<Native>, ids 1, threads 3, rounds 1, preemptions 2;
    pv_qspinlock: PvQueuedSpinLock<Native>, ids 0, threads 3, rounds 1, preemptions 1;
    pv_qspinlock_v42: PvQueuedSpinLockV42<Native>, ids 0, threads 3, rounds 1, preemptions 1;
}

/// The PV locks with halts that return without the lock's kick: an interrupt thread kicks CPUs 0
/// and 1 once each, at any point of the execution (loom's futex itself never wakes spuriously).
/// A lock that took a return from `halt` for its turn would let two in: with the PV ticket
/// lock's slow path so broken (return after `lock_spinning`), its model here fails with a
/// causality violation where the models without interrupts pass.
macro_rules! models_with_interrupts {
    ($($name:ident: $lock:ty;)*) => {
        mod with_interrupts {
            use super::*;
            $(
                #[test]
                fn $name() {
                    model_on::<$lock>(Setup { interrupts: true, ..PLAIN }, 3, 1, 2);
                }
            )*
        }
    };
}

models_with_interrupts! {
    pv_ticket: PvTicketLock<Native>;
    oticket: OTicketLock<Native>;
    pv_preemptable_ticket: PvPreemptableTicketLock<Native>;
    pv_qspinlock: PvQueuedSpinLock<Native>;
    pv_qspinlock_v42: PvQueuedSpinLockV42<Native>;
}
