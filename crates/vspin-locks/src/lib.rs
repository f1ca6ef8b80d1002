//! # vspin-locks
//!
//! Guest spinlock algorithms of the vspin seeds, each written once against the [`Platform`]
//! interface and run both inside the `vspin-sim` simulator and on real threads.
//!
//! One algorithm per file, each opening with a protocol description and a state diagram:
//! - [`tas`]: test-and-set, Linux's `virt_spin_lock` (no PV locks, unfair), and the Windows
//!   guest's test-and-set that yields after spinning (Xen's `yield` seed).
//! - [`las_tas`]: the LAS guest lock, Xen Linux 2.6.18's test-and-test-and-set byte lock that
//!   yields instead of taking the lock when its slice ends before the longest hold it has seen.
//! - [`ticket`]: the plain x86 ticket lock (FIFO).
//! - [`pv_ticket`]: the paravirtual ticket lock of Linux 3.19/4.0 with KVM kick (FIFO, halts).
//! - [`oticket`]: OTICKET (APSys'15) and its design alternatives: distance-based spinning and
//!   early wake-ups on top of the PV ticket lock (FIFO, halts).
//! - [`iticket`]: ITICKET, the PV ticket lock with a per-lock threshold doubled at every
//!   slow-path entry (an OTICKET-paper alternative; FIFO, halts).
//! - [`preemptable_ticket`]: the preemptable ticket lock of VEE'13 (FIFO until a waiter times
//!   out, then timed-out waiters may overtake a preempted one).
//! - [`pv_preemptable_ticket`]: its paravirtual variant (halts after timing out; unlock wakes all).
//! - [`qspinlock`]: the native queued spinlock of Linux 4.2+ (6.8 code): pending bit, then an
//!   MCS queue of per-CPU nodes (FIFO among queued waiters only).
//! - [`pv_qspinlock`]: its paravirtual variant of Linux 6.8 (lock stealing, halting queue nodes
//!   and head, a lock → node hash so that unlock kicks exactly the halted queue head).
//! - [`pv_qspinlock_v42`]: the paravirtual queued spinlock as first merged, in Linux 4.2 (no
//!   lock stealing: queued CPUs are served in queue order; a halted successor is kicked at
//!   hand-off; the OTICKET paper's Figure 9 measured this version).
//!
//! ## On real threads
//!
//! [`native`] implements the platform with atomics, a PAUSE loop and futexes (Linux; elsewhere a
//! halt is a yield), with the OS scheduler in the hypervisor's role: a thread descheduled while
//! it holds a ticket lock, or waits in its queue, stalls the others exactly as a preempted vCPU
//! does. [`mutex`] turns every algorithm into a [`lock_api`] mutex (re-exported, so that you
//! need no `lock_api` dependency of your own). Which one to pick:
//! - With no more threads than cores, any of them: uncontended, each costs about what
//!   `parking_lot::Mutex` does.
//! - With more threads than cores, [`PvQueuedSpinMutex`](mutex::PvQueuedSpinMutex): a running
//!   thread may steal the lock past a descheduled queue head, and queued waiters sleep behind a
//!   sleeping one. At 8 threads on 2 cores it keeps about half of `parking_lot`'s throughput.
//!   [`TasYieldMutex`](mutex::TasYieldMutex) keeps more, but it is unfair: whoever runs at an
//!   unlock takes the lock. So is [`TasMutex`](mutex::TasMutex), which never yields: its
//!   waiters spin out their slices behind a descheduled holder.
//! - Not the others. Every ticket-based lock, the PV and preemptable ones included, and the
//!   queued spinlock fall to hundreds or thousands of acquisitions per second there: a waiter
//!   spins behind a descheduled one in a queue that only the descheduled one can move. Their
//!   spin thresholds, where they have one, are tuned for a hypervisor's preemptions (2^14 to 2^15
//!   PAUSEs, milliseconds on threads, about an OS time slice; OTICKET's 2^34, minutes), so they
//!   rarely end such a wait before the OS does.
//!
//! If all you need is a mutex in user space, `parking_lot::Mutex` (or `std`'s) is at least as
//! fast as the best of these when threads outnumber cores, and fair enough. These locks are here
//! so that the algorithm you simulated is the one you run. `docs/real-locks.md` in the vspin
//! repository has the measurements. No lock path allocates, so a lock may guard a global
//! allocator.
//!
//! ```
//! use std::sync::Arc;
//! use vspin_locks::mutex::{PvQueuedSpinMutex, TicketMutex, TicketMutexGuard};
//!
//! let counter = Arc::new(PvQueuedSpinMutex::new(0u64));
//! let threads: Vec<_> = (0..4)
//!     .map(|_| {
//!         let counter = Arc::clone(&counter);
//!         std::thread::spawn(move || {
//!             for _ in 0..1000 {
//!                 *counter.lock() += 1;
//!             }
//!         })
//!     })
//!     .collect();
//! threads.into_iter().for_each(|t| t.join().unwrap());
//! assert_eq!(*counter.lock(), 4000);
//!
//! // In a static, like any lock_api mutex:
//! static TABLE: TicketMutex<Vec<u32>> = TicketMutex::new(Vec::new());
//! // Each mutex has its guard type, to pass a held lock around:
//! fn push_seven(mut table: TicketMutexGuard<'_, Vec<u32>>) {
//!     table.push(7);
//! }
//! push_seven(TABLE.lock());
//! assert_eq!(TABLE.try_lock().map(|t| t.len()), Some(1));
//! ```
//!
//! Underneath, a lock is used through [`RawSpinLock`], on any platform:
//! ```text
//! let lock = TicketLock::<MyPlatform>::new(&mut words);
//! lock.lock(&cpu).await;   // critical section
//! unsafe { lock.unlock(&cpu).await };   // unsafe: only the holder may unlock
//! ```
//! and on real threads the futures complete on their first poll:
//! ```
//! use vspin_locks::{native::{block_on, Native}, mutex::ConstInit, RawSpinLock, TicketLock};
//!
//! let lock = TicketLock::<Native>::INIT;
//! let cpu = Native::default();
//! block_on(lock.lock(&cpu));
//! assert!(!block_on(lock.try_lock(&cpu)));
//! // SAFETY: this thread holds the lock.
//! block_on(unsafe { lock.unlock(&cpu) });
//! ```

/// `Debug` for a raw lock, as its scenario name: the words it holds are other threads' to change
/// while it is printed, and a struct that embeds a lock can derive `Debug`.
macro_rules! debug_by_name {
    ($lock:ident<P $(, const $param:ident: $ty:ty)*>) => {
        impl<P: $crate::platform::Platform $(, const $param: $ty)*> std::fmt::Debug for $lock<P $(, $param)*> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(<Self as $crate::platform::RawSpinLock<P>>::NAME)
            }
        }
    };
}

pub mod iticket;
pub mod las_tas;
#[cfg(not(vspin_loom))]
pub mod mutex;
pub mod native;
pub mod oticket;
pub mod platform;
pub mod preemptable_ticket;
pub mod pv_preemptable_ticket;
pub mod pv_qspinlock;
pub mod pv_qspinlock_v42;
pub mod pv_ticket;
pub mod qspinlock;
pub mod tas;
pub mod ticket;
#[cfg(all(test, not(vspin_loom)))]
mod test_platform;

pub use lock_api;
pub use platform::{
    CpuId, CpuMask, Field, Nanos, PerCpuSlot, Platform, RawSpinLock, SpinOutcome, Until, WordAlloc, PV_LOCK_HASH_WORDS_PER_CPU,
};
pub use iticket::ITicketLock;
pub use las_tas::LasTasLock;
pub use oticket::{LongerSpinningLock, OTicketLock, OpportunisticSpinLock, OpportunisticWakeupLock};
pub use preemptable_ticket::PreemptableTicketLock;
pub use pv_preemptable_ticket::PvPreemptableTicketLock;
pub use pv_qspinlock::PvQueuedSpinLock;
pub use pv_qspinlock_v42::PvQueuedSpinLockV42;
pub use pv_ticket::PvTicketLock;
pub use qspinlock::QueuedSpinLock;
pub use tas::{TasLock, TasYieldLock, TestAndSetLock};
pub use ticket::TicketLock;

/// The Rust of `docs/tutorial.md`, compiled and run as a doctest so that the page stays true.
#[cfg(all(doctest, not(vspin_loom)))]
#[doc = include_str!("../../../docs/tutorial.md")]
pub struct TutorialDoctests;

#[cfg(all(test, not(vspin_loom)))]
mod tests {
    use super::*;
    use crate::{mutex::ConstInit, native::Native};

    #[test]
    fn a_raw_lock_prints_as_its_scenario_name() {
        let shown = [
            format!("{:?}", TicketLock::<Native>::INIT),
            format!("{:?}", OTicketLock::<Native>::INIT),
            format!("{:?}", PreemptableTicketLock::<Native>::INIT),
            format!("{:?}", TasYieldLock::<Native>::INIT),
            format!("{:?}", PvQueuedSpinLockV42::<Native>::INIT),
        ];
        assert_eq!(shown, ["ticket", "oticket", "preemptable-ticket", "tas-yield", "pv-qspinlock-v4.2"]);
    }
}
