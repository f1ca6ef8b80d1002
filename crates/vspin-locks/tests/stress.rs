//! Oversubscribed stress tests: every algorithm on real threads, four threads per core, each
//! incrementing a shared counter under the lock; the total must be exact.
//!
//! The OS scheduler preempts lock holders and queued waiters here as a hypervisor preempts
//! vCPUs, so the locks whose waiters spin without a timeout (ticket, the queued spinlock's MCS
//! queue, and TAS's unbounded spin) crawl: one hand-off to a descheduled waiter costs a scheduler
//! time slice. Their counts are kept small (`FEW`) so each test still takes seconds; the
//! preemption-tolerant locks do `MANY`.
//!
//! Each lock is run twice:
//! - as a `lock_api` mutex on the process-wide machine (the real configuration), every fourth
//!   acquisition through `try_lock` so that the trylock protocols race with queued waiters;
//! - on a machine whose bounded spins are cut to a few PAUSEs, so that the PV locks take their
//!   futex halt/kick slow path all the time.
//!
//! No test can hang: workers report completion on a channel and the test fails when `DEADLINE`
//! passes first.
use std::cell::UnsafeCell;
use std::sync::{mpsc, Arc, Barrier};
use std::time::{Duration, Instant};
use vspin_locks::mutex::{ConstInit, NativeRaw};
use vspin_locks::native::{block_on, Machine, Native};
use vspin_locks::*;

/// Acquisitions per thread for locks that collapse under oversubscription.
const FEW: u64 = 200;
/// Acquisitions per thread for the others.
const MANY: u64 = 20_000;
const DEADLINE: Duration = Duration::from_secs(120);

/// Bounded spins cut to 4 PAUSEs: the PV slow paths run on nearly every contended acquisition.
static SLOW_PATH: Machine = Machine::new().with_spin_cap(4);

fn threads() -> usize {
    4 * std::thread::available_parallelism().map_or(1, |n| n.get())
}

struct Shared<L> {
    lock: L,
    /// Read, then written back plus one, with a PAUSE between: lost updates if two threads
    /// are ever inside together.
    count: UnsafeCell<u64>,
}

// SAFETY: `count` is only touched with `lock` held (what the test checks).
unsafe impl<L: Sync> Sync for Shared<L> {}

fn critical_section(count: &UnsafeCell<u64>) {
    // SAFETY: called with the lock held.
    unsafe {
        let v = count.get().read_volatile();
        std::hint::spin_loop();
        count.get().write_volatile(v + 1);
    }
}

/// Run `threads()` workers doing `per_thread` acquisitions each; wait at most `DEADLINE`.
fn run_workers(per_thread: u64, work: impl Fn(u64) + Send + Sync + 'static) {
    let work = Arc::new(work);
    let (done, finished) = mpsc::channel();
    let n = threads();
    // All workers start together, or early ones finish before late ones are spawned.
    let start = Arc::new(Barrier::new(n));
    for _ in 0..n {
        let (work, done, start) = (work.clone(), done.clone(), start.clone());
        std::thread::spawn(move || {
            start.wait();
            for i in 0..per_thread {
                work(i);
            }
            done.send(()).unwrap();
        });
    }
    let deadline = Instant::now() + DEADLINE;
    for k in 0..n {
        let left = deadline.saturating_duration_since(Instant::now());
        finished.recv_timeout(left).unwrap_or_else(|_| panic!("{k} of {n} threads finished in {DEADLINE:?}"));
    }
}

/// The lock as a `lock_api` mutex on the default machine, mixing `lock` and `try_lock`.
fn through_lock_api<L: RawSpinLock<Native> + ConstInit + Send + Sync + 'static>(per_thread: u64) {
    let counter = Arc::new(lock_api::Mutex::<NativeRaw<L>, u64>::new(0));
    let c = counter.clone();
    run_workers(per_thread, move |i| {
        let mut guard = if i % 4 == 3 {
            loop {
                match c.try_lock() {
                    Some(guard) => break guard,
                    None => std::thread::yield_now(),
                }
            }
        } else {
            c.lock()
        };
        let v = *guard;
        std::hint::spin_loop();
        *guard = v + 1;
    });
    assert_eq!(*counter.lock(), threads() as u64 * per_thread, "{}: lost updates", L::NAME);
}

/// The raw lock on the slow-path machine.
fn on_slow_path_machine<L: RawSpinLock<Native> + ConstInit + Send + Sync + 'static>(per_thread: u64) {
    let shared = Arc::new(Shared { lock: L::INIT, count: UnsafeCell::new(0) });
    let s = shared.clone();
    let p = Native::on(&SLOW_PATH);
    run_workers(per_thread, move |_| {
        block_on(s.lock.lock(&p));
        critical_section(&s.count);
        // SAFETY: this thread took the lock above.
        block_on(unsafe { s.lock.unlock(&p) });
    });
    // SAFETY: every worker is done.
    assert_eq!(unsafe { *shared.count.get() }, threads() as u64 * per_thread, "{}: lost updates", L::NAME);
}

macro_rules! stress {
    ($($name:ident: $lock:ty, $n:expr;)*) => {$(
        mod $name {
            use super::*;
            #[test]
            fn exact_count_through_lock_api() {
                through_lock_api::<$lock>($n);
            }
            #[test]
            fn exact_count_with_slow_paths_forced() {
                on_slow_path_machine::<$lock>($n);
            }
        }
    )*};
}

stress! {
    tas: TasLock<Native>, FEW;
    tas_yield: TasYieldLock<Native>, FEW;
    las_tas: LasTasLock<Native>, FEW;
    ticket: TicketLock<Native>, FEW;
    pv_ticket: PvTicketLock<Native>, MANY;
    oticket: OTicketLock<Native>, MANY;
    oticket_spin_only: OpportunisticSpinLock<Native>, MANY;
    oticket_wakeup_only: OpportunisticWakeupLock<Native>, MANY;
    longer_spinning: LongerSpinningLock<Native>, FEW;
    iticket: ITicketLock<Native>, MANY;
    preemptable_ticket: PreemptableTicketLock<Native>, MANY;
    pv_preemptable_ticket: PvPreemptableTicketLock<Native>, MANY;
    qspinlock: QueuedSpinLock<Native>, FEW;
    pv_qspinlock: PvQueuedSpinLock<Native>, MANY;
    pv_qspinlock_v42: PvQueuedSpinLockV42<Native>, MANY;
}
