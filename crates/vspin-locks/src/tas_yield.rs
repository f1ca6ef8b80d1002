//! Test-and-set lock that yields after a long spin: the Windows guest lock of the `xen-yield`
//! seed.
//!
//! Windows' kernel spinlock is a test-and-test-and-set lock. Under a hypervisor that recommends
//! it (Hyper-V's "Viridian" CPUID leaf 0x40000004, which Xen offers its Windows guests), a waiter
//! that has spun `EBX` times tells the hypervisor with `HvNotifyLongSpinWait`, and goes on
//! spinning. Xen sets `EBX = 2047` ("long spin count") and handles the call as `SCHEDOP_yield`
//! (`xen/arch/x86/hvm/viridian.c`, 2010, the seed's time); XenServer's patched Windows 2003/XP
//! spinlocks likewise "spin for a fixed number of cycles, then make a SCHED_yield hypercall" (the
//! seed). What the yield achieves is the scheduler's business: under credit1 without the yield
//! patch it nearly always runs the waiter again (`credit1.rs`).
//!
//! ```text
//!            cmpxchg 0→1 ok
//!   FREE(0) ────────────────────▶ HELD(1)
//!      ▲                             │
//!      │      store 0 (unlock)       │
//!      └─────────────────────────────┘
//!   waiters: read until 0, at most 2047 PAUSEs at a time, yielding between;
//!            then race with cmpxchg; losers spin again.
//! ```
//!
//! Protocol:
//! | step | operation | why |
//! |------|-----------|-----|
//! | 1 | `cmpxchg(word, 0, 1)` | uncontended fast path (`KeAcquireSpinLockRaiseToDpc`) |
//! | 2 | spin `while word != 0 { PAUSE }`, at most `LONG_SPIN_COUNT` PAUSEs | read-only spinning keeps the line shared |
//! | 3 | if still held: `yield_now` (`HvNotifyLongSpinWait` → `SCHEDOP_yield`), back to 2 | let the hypervisor run someone useful |
//! | 4 | `cmpxchg(word, 0, 1)`, on failure back to 2 | test-and-test-and-set |
//! | unlock | `store(word, 0)` | release store |
//! | trylock | step 1 alone | |
//!
//! Windows takes the lock with `lock bts`. A compare-exchange of 0 → 1 is the same locked write
//! of the line on x86 whether it succeeds or not, and the simulator charges a failed one as a
//! write too, so nothing the seed measures changes; but loom checks the compare-exchange form in
//! a second, and the `fetch_or` form exceeds its branch limit even with two threads.
//!
//! On real threads the yield is `sched_yield`, which makes this the classic user-space
//! "spin a while, then yield" lock.
use crate::platform::{Platform, RawSpinLock, SpinOutcome, Until, WordAlloc};
use std::convert::Infallible;
#[cfg(not(loom))]
use crate::{mutex::ConstInit, native::Native};

/// Xen's Viridian CPUID leaf 0x40000004 `EBX`: PAUSEs between two long-spin notifications.
pub const LONG_SPIN_COUNT: u64 = 2047;

pub struct TasYieldLock<P: Platform> {
    word: P::Word,
}

impl<P: Platform> RawSpinLock<P> for TasYieldLock<P> {
    const NAME: &'static str = "tas-yield";
    const FIFO: bool = false;
    type Contended = ();
    type Waiters = Infallible;

    fn new(mem: &mut impl WordAlloc<P::Word>) -> Self {
        TasYieldLock { word: mem.word(0) }
    }

    async fn lock_fast(&self, p: &P) -> Result<(), ()> {
        match p.compare_exchange(&self.word, 0, 1).await {
            Ok(_) => Ok(()),
            Err(_) => Err(()),
        }
    }

    async fn lock_slow(&self, p: &P, (): ()) {
        loop {
            if let SpinOutcome::Exhausted(_) = p.spin_until(&self.word, Until::eq(0), LONG_SPIN_COUNT).await {
                p.yield_now().await;
                continue;
            }
            if p.compare_exchange(&self.word, 0, 1).await.is_ok() {
                return;
            }
        }
    }

    async fn unlock_fast(&self, p: &P) -> Result<(), Infallible> {
        p.store(&self.word, 0).await;
        Ok(())
    }

    async fn unlock_slow(&self, _: &P, waiters: Infallible) {
        match waiters {}
    }

    async fn try_lock(&self, p: &P) -> bool {
        p.compare_exchange(&self.word, 0, 1).await.is_ok()
    }
}

#[cfg(not(loom))]
impl ConstInit for TasYieldLock<Native> {
    const INIT: Self = TasYieldLock { word: Native::word(0) };
}
