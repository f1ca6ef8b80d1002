//! `lock_api` adapters: every algorithm of this crate as a `Mutex<T>` on real threads.
//!
//! [`NativeRaw<L>`] wraps any lock `L` built on the [`Native`] platform and implements
//! [`lock_api::RawMutex`] by running `L`'s `lock`, `try_lock` and `unlock` with [`block_on`],
//! the slow paths of `lock` and `unlock` in functions of their own that are never inlined;
//! `lock_api::Mutex<NativeRaw<L>, T>` then adds the data, guards and poisoning-free API of
//! `parking_lot`. The aliases at the bottom name one mutex per algorithm
//! ([`TicketMutex`], [`OTicketMutex`], …).
//!
//! Three decisions:
//! - **`INIT` without an allocator.** `lock_api` needs `const INIT: Self`, but
//!   [`RawSpinLock::new`] takes a word allocator. Each lock file therefore implements
//!   [`ConstInit`] for its `Native` instance, next to its `new` (a struct literal with
//!   [`Native::word`], a `const fn`): the only place that knows the lock's fields and initial
//!   word. Under `--cfg vspin_loom` atomics are not `const`, so these impls and this module are absent
//!   and the `loom` models build locks with `new`.
//! - **`try_lock`** is [`RawSpinLock::try_lock`], written once per algorithm against the platform
//!   like `lock`: a compare-exchange from the lock's idle state to "held by me" (`0 → 1` for TAS;
//!   `head == tail` to `tail + inc` for the ticket family, also clearing a stale PV slow-path
//!   flag; `head == tail`, `locked` clear to `tail + 1`, `locked` set for the preemptable ones;
//!   a zero word to `locked` for the queued spinlocks, as `queued_spin_trylock`).
//! - **Fairness.** [`lock_api::RawMutexFair`] is implemented for the FIFO locks only (ticket,
//!   PV ticket, OTICKET and its variants, ITICKET), whose every unlock already hands the lock to
//!   the longest waiter, so `unlock_fair` is `unlock`. TAS is unfair by design, and the
//!   preemptable ticket locks let timed-out waiters overtake, so they do not claim it; nor do the
//!   queued spinlocks, where a newcomer may take a free lock (or the pending bit) ahead of queued
//!   waiters, and the 6.8 PV one steals.
//!
//! No lock records its owner, so a guard may be released on another thread (`GuardSend`), and a
//! thread that locks a mutex it already holds waits forever (the PV locks sleep, the others spin),
//! as with `parking_lot`.
use crate::iticket::ITicketLock;
use crate::las_tas::LasTasLock;
use crate::native::{block_on, Native};
use crate::oticket::{LongerSpinningLock, OTicketLock, OpportunisticSpinLock, OpportunisticTicketLock, OpportunisticWakeupLock};
use crate::platform::RawSpinLock;
use crate::preemptable_ticket::PreemptableTicketLock;
use crate::pv_preemptable_ticket::PvPreemptableTicketLock;
use crate::pv_qspinlock::PvQueuedSpinLock;
use crate::pv_qspinlock_v42::PvQueuedSpinLockV42;
use crate::pv_ticket::PvTicketLock;
use crate::qspinlock::QueuedSpinLock;
use crate::tas::{TasLock, TasYieldLock};
use crate::ticket::TicketLock;

/// A lock that can be built in a `const` context on the native platform.
///
/// # Safety
/// `INIT` is the lock free, as [`RawSpinLock::new`] builds it: [`NativeRaw`]'s mutual exclusion
/// starts from it.
pub unsafe trait ConstInit {
    /// The lock, free.
    const INIT: Self;
}

/// A [`RawSpinLock`] on real threads, as a `lock_api` raw mutex.
pub struct NativeRaw<L>(L);

/// The algorithm's name only: whether it is held is not a question its word answers alone.
impl<L: RawSpinLock<Native>> std::fmt::Debug for NativeRaw<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NativeRaw<{}>", L::NAME)
    }
}

impl<L: RawSpinLock<Native>> NativeRaw<L> {
    /// The algorithm's name (`"ticket"`, `"oticket"`, …).
    pub const NAME: &'static str = L::NAME;

    /// A raw mutex around `lock`, for a lock built with other parameters than its `INIT`; wrap it
    /// with `lock_api::Mutex::const_new`. The preemptable locks' timeout unit is the kernel's
    /// (2^14 PAUSEs per queue position, a few hundred µs); user-space critical sections are far
    /// shorter, so a smaller one bounds the wait behind a preempted waiter sooner:
    ///
    /// ```
    /// use vspin_locks::mutex::{ConstInit, NativeRaw, PreemptableTicketMutex};
    /// use vspin_locks::native::Native;
    /// use vspin_locks::preemptable_ticket::PreemptableTicketLock;
    ///
    /// static COUNT: PreemptableTicketMutex<u64> = vspin_locks::lock_api::Mutex::const_new(
    ///     NativeRaw::new(PreemptableTicketLock::<Native>::INIT.with_timeout_unit(256)),
    ///     0,
    /// );
    /// *COUNT.lock() += 1;
    /// assert_eq!(*COUNT.lock(), 1);
    /// ```
    pub const fn new(lock: L) -> Self {
        NativeRaw(lock)
    }
}

// SAFETY: `L::lock` returns only once `L`'s protocol grants this thread the lock and `L::unlock`
// releases it (checked by the loom models and the stress tests); the acquiring load or RMW is
// `Acquire` and the releasing one `Release` (see `native`'s orderings).
unsafe impl<L: RawSpinLock<Native> + ConstInit> lock_api::RawMutex for NativeRaw<L> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = NativeRaw(L::INIT);
    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock(&self) {
        // SAFETY: an `Err` goes to the slow path, once.
        if let Err(contended) = block_on(unsafe { self.0.lock_fast(&Native::default()) }) {
            // SAFETY: our own fast path's `contended`, used once.
            unsafe { lock_slow(&self.0, contended) };
        }
    }

    #[inline]
    fn try_lock(&self) -> bool {
        block_on(self.0.try_lock(&Native::default()))
    }

    #[inline]
    unsafe fn unlock(&self) {
        // SAFETY: `lock_api` calls this only for the holder.
        if let Err(waiters) = block_on(unsafe { self.0.unlock_fast(&Native::default()) }) {
            // SAFETY: our own fast path's `waiters`, used once.
            unsafe { unlock_slow(&self.0, waiters) };
        }
    }
}

/// `L`'s lock slow path, out of line: its future (spin loops, halts, queue nodes) is far larger
/// than the fast path's, and inlined next to it, it made every uncontended lock build and spill
/// that state (see [`RawSpinLock`]).
///
/// # Safety
/// `contended` is what the caller's `lock_fast` on `lock` just returned.
#[cold]
#[inline(never)]
unsafe fn lock_slow<L: RawSpinLock<Native>>(lock: &L, contended: L::Contended) {
    // SAFETY: forwarded from the caller.
    block_on(unsafe { lock.lock_slow(&Native::default(), contended) })
}

/// `L`'s unlock slow path (kicking waiters), out of line for the same reason.
///
/// # Safety
/// `waiters` is what the caller's `unlock_fast` on `lock` just returned.
#[cold]
#[inline(never)]
unsafe fn unlock_slow<L: RawSpinLock<Native>>(lock: &L, waiters: L::Waiters) {
    // SAFETY: forwarded from the caller.
    block_on(unsafe { lock.unlock_slow(&Native::default(), waiters) })
}

/// Fair unlock for the FIFO locks: their unlock already serves the next ticket.
macro_rules! fair_unlock_is_unlock {
    ($($lock:ty $(, const $c:ident: $t:ty)*;)*) => {$(
        // SAFETY: `unlock_fair` is `unlock`.
        unsafe impl<$(const $c: $t),*> lock_api::RawMutexFair for NativeRaw<$lock> {
            #[inline]
            unsafe fn unlock_fair(&self) {
                // SAFETY: forwarded: the caller holds the lock.
                unsafe { lock_api::RawMutex::unlock(self) }
            }
        }
    )*};
}

fair_unlock_is_unlock! {
    TicketLock<Native>;
    PvTicketLock<Native>;
    OpportunisticTicketLock<Native, SPIN, WAKE>, const SPIN: u8, const WAKE: u64;
    ITicketLock<Native>;
}

/// Test-and-set (unfair; a preempted waiter blocks nobody).
pub type TasMutex<T> = lock_api::Mutex<NativeRaw<TasLock<Native>>, T>;
/// The LAS guest lock; no operating system publishes a thread's slice end, so on real threads it
/// is test-and-test-and-set.
pub type LasTasMutex<T> = lock_api::Mutex<NativeRaw<LasTasLock<Native>>, T>;
/// Test-and-set that calls `sched_yield` after every 2047 PAUSEs of waiting (the Windows guest
/// lock under Xen: `HvNotifyLongSpinWait` is a yield).
pub type TasYieldMutex<T> = lock_api::Mutex<NativeRaw<TasYieldLock<Native>>, T>;
/// The plain ticket lock (FIFO; collapses when a waiter is preempted).
pub type TicketMutex<T> = lock_api::Mutex<NativeRaw<TicketLock<Native>>, T>;
/// The paravirtual ticket lock: spin 2^15 PAUSEs, then futex-wait until the unlocker kicks.
pub type PvTicketMutex<T> = lock_api::Mutex<NativeRaw<PvTicketLock<Native>>, T>;
/// OTICKET: distance-based spinning and early wake-ups. The next waiter spins up to 2^34
/// PAUSEs (minutes) before it sleeps, so with more threads than cores it burns a core behind a
/// preempted holder, as [`LongerSpinningMutex`] does.
pub type OTicketMutex<T> = lock_api::Mutex<NativeRaw<OTicketLock<Native>>, T>;
/// OTICKET's opportunistic spinning alone.
pub type OpportunisticSpinMutex<T> = lock_api::Mutex<NativeRaw<OpportunisticSpinLock<Native>>, T>;
/// OTICKET's opportunistic wake-up alone.
pub type OpportunisticWakeupMutex<T> = lock_api::Mutex<NativeRaw<OpportunisticWakeupLock<Native>>, T>;
/// The PV ticket lock with the maximum threshold (2^34 PAUSEs, minutes): every waiter spins,
/// in effect, until its turn.
pub type LongerSpinningMutex<T> = lock_api::Mutex<NativeRaw<LongerSpinningLock<Native>>, T>;
/// ITICKET: a per-lock threshold doubled whenever a waiter halts.
pub type ITicketMutex<T> = lock_api::Mutex<NativeRaw<ITicketLock<Native>>, T>;
/// The preemptable ticket lock (timed-out waiters may overtake a preempted one).
pub type PreemptableTicketMutex<T> = lock_api::Mutex<NativeRaw<PreemptableTicketLock<Native>>, T>;
/// The paravirtual preemptable ticket lock (timed-out waiters futex-wait; unlock wakes all).
pub type PvPreemptableTicketMutex<T> = lock_api::Mutex<NativeRaw<PvPreemptableTicketLock<Native>>, T>;
/// The queued spinlock (qspinlock): pending bit, then an MCS queue of per-CPU nodes. As the
/// kernel's `queued_spin_trylock`, `try_lock` fails while anyone is pending or queued, even at
/// the instant the lock itself is free (as do the two PV variants').
///
/// A queue node is a CPU id's: with more than [`MAX_CPUS`](crate::native::MAX_CPUS) threads
/// holding ids at once, the others wait for a moment when nobody holds, is pending or queues,
/// and may starve under sustained contention (as do the two PV variants'; see "The machine" in
/// [`native`](crate::native)).
pub type QueuedSpinMutex<T> = lock_api::Mutex<NativeRaw<QueuedSpinLock<Native>>, T>;
/// The paravirtual queued spinlock: lock stealing, queue nodes and head futex-wait, the unlocker
/// wakes the one hashed head. The lock to use when threads outnumber cores (see the crate's
/// docs).
///
/// As with [`QueuedSpinMutex`], a queue node is a CPU id's: with more than
/// [`MAX_CPUS`](crate::native::MAX_CPUS) threads holding ids at once, the others may starve under
/// sustained contention.
pub type PvQueuedSpinMutex<T> = lock_api::Mutex<NativeRaw<PvQueuedSpinLock<Native>>, T>;
/// The paravirtual queued spinlock as merged in Linux 4.2: no stealing, a halted successor is
/// woken at hand-off.
pub type PvQueuedSpinV42Mutex<T> = lock_api::Mutex<NativeRaw<PvQueuedSpinLockV42<Native>>, T>;

/// One guard alias per mutex, as `parking_lot::MutexGuard`, so that a function returning or taking
/// a held lock can name its type.
macro_rules! guards {
    ($($guard:ident of $mutex:ident: $lock:ty;)*) => {$(
        #[doc = concat!("What [`", stringify!($mutex), "::lock`] returns: the data, borrowed while the lock is held.")]
        pub type $guard<'a, T> = lock_api::MutexGuard<'a, NativeRaw<$lock>, T>;
    )*};
}

guards! {
    TasMutexGuard of TasMutex: TasLock<Native>;
    LasTasMutexGuard of LasTasMutex: LasTasLock<Native>;
    TasYieldMutexGuard of TasYieldMutex: TasYieldLock<Native>;
    TicketMutexGuard of TicketMutex: TicketLock<Native>;
    PvTicketMutexGuard of PvTicketMutex: PvTicketLock<Native>;
    OTicketMutexGuard of OTicketMutex: OTicketLock<Native>;
    OpportunisticSpinMutexGuard of OpportunisticSpinMutex: OpportunisticSpinLock<Native>;
    OpportunisticWakeupMutexGuard of OpportunisticWakeupMutex: OpportunisticWakeupLock<Native>;
    LongerSpinningMutexGuard of LongerSpinningMutex: LongerSpinningLock<Native>;
    ITicketMutexGuard of ITicketMutex: ITicketLock<Native>;
    PreemptableTicketMutexGuard of PreemptableTicketMutex: PreemptableTicketLock<Native>;
    PvPreemptableTicketMutexGuard of PvPreemptableTicketMutex: PvPreemptableTicketLock<Native>;
    QueuedSpinMutexGuard of QueuedSpinMutex: QueuedSpinLock<Native>;
    PvQueuedSpinMutexGuard of PvQueuedSpinMutex: PvQueuedSpinLock<Native>;
    PvQueuedSpinV42MutexGuard of PvQueuedSpinV42Mutex: PvQueuedSpinLockV42<Native>;
}
