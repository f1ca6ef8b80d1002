//! A vspin lock may guard a global allocator: no lock path allocates, so the first slow path of a
//! thread (which claims its CPU id) can run inside an allocation. Before the registry stopped
//! growing on the heap, the claim's own allocation re-entered the allocator's lock and aborted
//! the process ("already borrowed") or queued the thread behind its own ticket.
//!
//! This binary's allocator takes one of the locks, chosen by `LOCK`, around every call to the
//! system allocator. For each lock a fresh thread allocates while the main thread holds that
//! lock, so the thread's first use of the lock is a slow path inside the allocator.
//!
//! A lost wake-up would leave the allocating thread halted for good, and the test with it: a
//! watchdog aborts the process with the lock's number after `DEADLINE`.
#![cfg(not(vspin_loom))]
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lock_api::RawMutex;
use vspin_locks::mutex::{OTicketMutex, PvPreemptableTicketMutex, PvQueuedSpinMutex, PvQueuedSpinV42Mutex, PvTicketMutex, QueuedSpinMutex};

/// The raw locks of the mutexes whose slow paths ask for a CPU id (those that halt or queue on
/// per-CPU nodes), one of each.
macro_rules! raw_locks {
    ($($name:ident: $mutex:ident),*) => {
        $(static $name: $mutex<()> = $mutex::new(());)*
        /// Each lock as its raw mutex, in the order `LOCK` numbers them.
        fn raw(i: usize) -> &'static dyn Raw {
            [$(unsafe { $name.raw() } as &dyn Raw),*][i]
        }
        const LOCKS: usize = [$(stringify!($name)),*].len();
    };
}
raw_locks!(PV_TICKET: PvTicketMutex, OTICKET: OTicketMutex, PV_PREEMPTABLE: PvPreemptableTicketMutex, QUEUED: QueuedSpinMutex,
           PV_QUEUED: PvQueuedSpinMutex, PV_QUEUED_V42: PvQueuedSpinV42Mutex);

/// `RawMutex` as an object, so that one allocator can take any of the locks.
trait Raw: Sync {
    fn lock(&self);
    fn unlock(&self);
}

impl<R: RawMutex + Sync> Raw for R {
    fn lock(&self) {
        RawMutex::lock(self);
    }
    fn unlock(&self) {
        // SAFETY: called by `Guarded` right after its own `lock`.
        unsafe { RawMutex::unlock(self) }
    }
}

/// Which lock the allocator takes; `usize::MAX` for none (before and after the test).
static LOCK: AtomicUsize = AtomicUsize::new(usize::MAX);

struct Guarded;

impl Guarded {
    fn with<R>(&self, f: impl FnOnce() -> R) -> R {
        match LOCK.load(Ordering::Acquire) {
            usize::MAX => f(),
            i => {
                raw(i).lock();
                let r = f();
                raw(i).unlock();
                r
            }
        }
    }
}

unsafe impl GlobalAlloc for Guarded {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.with(|| unsafe { System.alloc(layout) })
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.with(|| unsafe { System.dealloc(ptr, layout) })
    }
}

#[global_allocator]
static ALLOCATOR: Guarded = Guarded;

/// Far beyond the test's ~0.2 s, even on a loaded machine.
const DEADLINE: Duration = Duration::from_secs(60);

/// Abort the process unless `done` is set within `DEADLINE`. A hung test cannot be failed by a
/// panic in another thread, so this aborts. Once it has set `ready` it allocates nothing (the
/// allocator's lock may be the one that hangs: a thread's first steps can allocate, which is why
/// the test waits for `ready` before it turns that lock on), and it turns the lock off before
/// it writes.
fn watchdog(ready: &AtomicBool, done: &AtomicBool) {
    let start = Instant::now();
    std::thread::sleep(Duration::from_millis(1));
    ready.store(true, Ordering::Release);
    while !done.load(Ordering::Acquire) {
        if start.elapsed() > DEADLINE {
            let lock = LOCK.swap(usize::MAX, Ordering::AcqRel);
            let mut buf = [0u8; 160];
            let mut out = std::io::Cursor::new(&mut buf[..]);
            let _ = writeln!(out, "global_allocator: lock {lock} made no progress in {DEADLINE:?}: a lost wake-up? aborting");
            let len = out.position() as usize;
            let _ = std::io::stderr().write_all(&buf[..len]);
            std::process::abort();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_lock_guarding_the_global_allocator_takes_its_first_slow_path_inside_an_allocation() {
    static READY: AtomicBool = AtomicBool::new(false);
    static DONE: AtomicBool = AtomicBool::new(false);
    // Spawned, and run until it stops allocating, while the allocator takes no lock.
    std::thread::spawn(|| watchdog(&READY, &DONE));
    while !READY.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    for i in 0..LOCKS {
        LOCK.store(i, Ordering::Release);
        static HELD: AtomicBool = AtomicBool::new(false);
        HELD.store(false, Ordering::Release);
        let allocating = std::thread::spawn(|| {
            while !HELD.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
            // The main thread holds the allocator's lock: this waits in the slow path, where
            // the thread claims its CPU id, and then allocates.
            let boxes: Vec<Box<u64>> = (0..1000).map(Box::new).collect();
            boxes.iter().map(|b| **b).sum::<u64>()
        });
        raw(i).lock();
        HELD.store(true, Ordering::Release);
        // Long enough for the other thread to pass its spin threshold and halt.
        std::thread::sleep(std::time::Duration::from_millis(20));
        raw(i).unlock();
        assert_eq!(allocating.join().expect("the allocating thread ran to the end"), 499_500, "lock {i}");
    }
    LOCK.store(usize::MAX, Ordering::Release);
    DONE.store(true, Ordering::Release);
}
