//! Test-and-set locks: Linux's `virt_spin_lock`, and the Windows guest lock that yields after a
//! long spin.
//!
//! When a guest runs without paravirtual spinlocks, Linux (v4.x+, `arch/x86/include/asm/
//! qspinlock.h`) replaces the fair queued lock with an unfair test-and-set lock, because "fair
//! locks have horrible lock 'holder' preemption issues" (`kernel-mechanisms.md` §2.6). There is no
//! queue: any running waiter can take a free lock, so a preempted *waiter* never blocks the others
//! (no lock-waiter preemption), at the price of fairness and of a cache-line storm at each release.
//!
//! Windows' kernel spinlock is the same test-and-test-and-set lock, but under a hypervisor that
//! recommends it (Hyper-V's "Viridian" CPUID leaf 0x40000004, which Xen offers its Windows
//! guests) a waiter that has spun `EBX` times tells the hypervisor with `HvNotifyLongSpinWait`,
//! and goes on spinning. Xen sets `EBX = 2047` ("long spin count") and handles the call as
//! `SCHEDOP_yield` (`xen/arch/x86/hvm/viridian.c`, 2010, the `xen-yield` seed's time);
//! XenServer's patched Windows 2003/XP spinlocks likewise "spin for a fixed number of cycles, then
//! make a SCHED_yield hypercall" (the seed). What the yield achieves is the scheduler's business:
//! under credit1 without the yield patch it nearly always runs the waiter again (`credit1.rs`).
//! On real threads the yield is `sched_yield`, which makes [`TasYieldLock`] the classic
//! user-space "spin a while, then yield" lock.
//!
//! ```text
//!            cmpxchg 0→1 ok
//!   FREE(0) ────────────────▶ HELD(1)
//!      ▲                         │
//!      │     store 0 (unlock)    │
//!      └─────────────────────────┘
//!   waiters: spin reading the word until 0 (the yielding lock: at most 2047 PAUSEs at a time,
//!            yielding between), then race with cmpxchg; losers spin again.
//! ```
//!
//! Protocol (`queued_spin_lock` fast path, then `virt_spin_lock`; `KeAcquireSpinLockRaiseToDpc`):
//! | step | operation | why |
//! |------|-----------|-----|
//! | 1 | `cmpxchg(word, 0, 1)` | uncontended fast path |
//! | 2 | spin `while word != 0 { PAUSE }` (at most `YIELD_AFTER` PAUSEs) | read-only spinning keeps the line shared |
//! | 3 | if still held after `YIELD_AFTER` PAUSEs: `yield_now` (`HvNotifyLongSpinWait` → `SCHEDOP_yield`), back to 2 | let the hypervisor run someone useful |
//! | 4 | `cmpxchg(word, 0, 1)`, on failure back to 2 | test-and-test-and-set |
//! | unlock | `store(word, 0)` | release store |
//! | trylock | `cmpxchg(word, 0, 1)` | step 1 alone |
//!
//! Windows takes the lock with `lock bts`. A compare-exchange of 0 → 1 is the same locked write
//! of the line on x86 whether it succeeds or not, and the simulator charges a failed one as a
//! write too, so nothing the seed measures changes; but loom checks the compare-exchange form in
//! a second, and the `fetch_or` form exceeds its branch limit even with two threads.
use crate::platform::{Platform, RawSpinLock, SpinOutcome, Until, WordAlloc};
use std::convert::Infallible;
#[cfg(not(vspin_loom))]
use crate::{mutex::ConstInit, native::Native};

/// Xen's Viridian CPUID leaf 0x40000004 `EBX`: PAUSEs between two long-spin notifications.
pub const LONG_SPIN_COUNT: u64 = 2047;
/// A waiter that never yields.
const NEVER: u64 = u64::MAX;

/// A test-and-set lock whose waiters yield after every `YIELD_AFTER` PAUSEs of waiting.
pub struct TestAndSetLock<P: Platform, const YIELD_AFTER: u64> {
    word: P::Word,
}

debug_by_name!(TestAndSetLock<P, const YIELD_AFTER: u64>);

/// Linux's `virt_spin_lock`: waiters spin until the lock is free.
pub type TasLock<P> = TestAndSetLock<P, NEVER>;
/// The Windows guest lock under Xen: waiters yield after every 2047 PAUSEs.
pub type TasYieldLock<P> = TestAndSetLock<P, LONG_SPIN_COUNT>;

// SAFETY: mutual exclusion is the protocol above, checked by the interleaving tests and the
// `loom` models.
unsafe impl<P: Platform, const YIELD_AFTER: u64> RawSpinLock<P> for TestAndSetLock<P, YIELD_AFTER> {
    const NAME: &'static str = match YIELD_AFTER {
        NEVER => "tas",
        LONG_SPIN_COUNT => "tas-yield",
        _ => "tas-yield-custom",
    };
    const FIFO: bool = false;
    type Contended = ();
    type Waiters = Infallible;

    fn new(mem: &mut impl WordAlloc<P::Word>) -> Self {
        TestAndSetLock { word: mem.word(0) }
    }

    async unsafe fn lock_fast(&self, p: &P) -> Result<(), ()> {
        match p.compare_exchange(&self.word, 0, 1).await {
            Ok(_) => Ok(()),
            Err(_) => Err(()),
        }
    }

    async unsafe fn lock_slow(&self, p: &P, (): ()) {
        loop {
            if let SpinOutcome::Exhausted(_) = p.spin_until(&self.word, Until::eq(0), YIELD_AFTER).await {
                p.yield_now().await;
                continue;
            }
            if p.compare_exchange(&self.word, 0, 1).await.is_ok() {
                return;
            }
        }
    }

    async unsafe fn unlock_fast(&self, p: &P) -> Result<(), Infallible> {
        p.store(&self.word, 0).await;
        Ok(())
    }

    async unsafe fn unlock_slow(&self, _: &P, waiters: Infallible) {
        match waiters {}
    }

    async fn try_lock(&self, p: &P) -> bool {
        p.compare_exchange(&self.word, 0, 1).await.is_ok()
    }
}

#[cfg(not(vspin_loom))]
// SAFETY: the free lock, as `new` builds it.
unsafe impl<const YIELD_AFTER: u64> ConstInit for TestAndSetLock<Native, YIELD_AFTER> {
    const INIT: Self = TestAndSetLock { word: Native::word(0) };
}
