//! Test-and-set lock that knows when its vCPU's slice ends: the guest half of the Locking-Aware
//! Scheduler (LAS, Lee, Son & Park).
//!
//! LAS attacks lock-holder preemption at its source: the hypervisor writes the end of the vCPU's
//! current slice into a page it shares with the guest, and the guest's spinlock remembers the
//! longest critical section it has seen. A CPU about to take the lock compares the two and, if
//! the slice would end before a critical section of that length, yields instead ("the guest
//! determines whether to take spinlock or not using the information in the shared memory"); the
//! hypervisor gives the yielded time back later. A hold longer than the credit scheduler's 30 ms
//! slice can only have been a preempted one, so it is not recorded ("spinlock time over 30ms have
//! been regarded as an occurrence of the LHP problem"). The lock itself is Xen Linux 2.6.18's,
//! an unfair test-and-test-and-set byte lock.
//!
//! ```text
//!                 slice left ≥ longest hold, cmpxchg 0→1 ok
//!   FREE(0) ───────────────────────────────────────────────▶ HELD(1)
//!      ▲   └─ slice left < longest hold: yield, look again       │
//!      │            store 0 (unlock), longest hold updated       │
//!      └──────────────────────────────────────────────────────────┘
//!   waiters: read until 0, then the slice check, then race with cmpxchg.
//! ```
//!
//! Protocol:
//! | step | operation | why |
//! |------|-----------|-----|
//! | 1 | read the slice left (`slice_remaining`) and `longest`; if less, `yield_now`, again | do not take a lock the slice cannot see released |
//! | 2 | `cmpxchg(word, 0, 1)`; if taken, `since = now` | the 2.6.18 lock, plus the start of the hold |
//! | 3 | else spin `while word != 0 { PAUSE }`, back to 1 | test-and-test-and-set |
//! | unlock | `hold = now − since`; if `longest < hold ≤ 30 ms`, `longest = hold`; `store(word, 0)` | `since` and `longest` are written only by the holder |
//! | trylock | step 2 alone | no waiting, so no slice check |
//!
//! Without a slice page (`slice_remaining` is `None`: any host but LAS, and real threads) the
//! lock neither checks nor times anything: it is the plain test-and-test-and-set lock, plus one
//! load of `since` at unlock.
use crate::platform::{Nanos, Platform, RawSpinLock, SpinOutcome, Until, WordAlloc};
use std::convert::Infallible;
#[cfg(not(vspin_loom))]
use crate::{mutex::ConstInit, native::Native};

/// Holds longer than the credit scheduler's slice are lock-holder preemptions, not recorded.
pub const LONGEST_RECORDED_HOLD_NS: Nanos = 30_000_000;

pub struct LasTasLock<P: Platform> {
    word: P::Word,
    /// The longest hold recorded, ns.
    longest: P::Word,
    /// When the current hold began (`now`), ns; 0 when it was not timed (no slice page).
    since: P::Word,
}

debug_by_name!(LasTasLock<P>);

impl<P: Platform> LasTasLock<P> {
    /// Step 1: `None` without a slice page; else whether the slice left outlasts the longest
    /// hold.
    async fn slice_check(&self, p: &P) -> Option<bool> {
        let left = p.slice_remaining().await?;
        Some(left >= p.load(&self.longest).await)
    }

    /// Step 2: take a free lock, and time the hold if there is a slice page (`timed`).
    async fn take(&self, p: &P, timed: bool) -> bool {
        if p.compare_exchange(&self.word, 0, 1).await.is_err() {
            return false;
        }
        if timed {
            p.store(&self.since, p.now().await.max(1)).await;
        }
        true
    }
}

// SAFETY: mutual exclusion is the protocol above, checked by the interleaving tests and the
// `loom` models.
unsafe impl<P: Platform> RawSpinLock<P> for LasTasLock<P> {
    const NAME: &'static str = "las-tas";
    const FIFO: bool = false;
    type Contended = ();
    type Waiters = Infallible;

    fn new(mem: &mut impl WordAlloc<P::Word>) -> Self {
        LasTasLock { word: mem.word(0), longest: mem.word(0), since: mem.word(0) }
    }

    async unsafe fn lock_fast(&self, p: &P) -> Result<(), ()> {
        let check = self.slice_check(p).await;
        if check != Some(false) && self.take(p, check.is_some()).await {
            Ok(())
        } else {
            Err(())
        }
    }

    async unsafe fn lock_slow(&self, p: &P, (): ()) {
        loop {
            let seen = p.spin_until(&self.word, Until::eq(0), u64::MAX).await;
            debug_assert!(matches!(seen, SpinOutcome::Satisfied(_)));
            let check = self.slice_check(p).await;
            if check == Some(false) {
                p.yield_now().await;
                continue;
            }
            if self.take(p, check.is_some()).await {
                return;
            }
        }
    }

    async unsafe fn unlock_fast(&self, p: &P) -> Result<(), Infallible> {
        let since = p.load(&self.since).await;
        if since != 0 {
            let hold = p.now().await.saturating_sub(since);
            if hold <= LONGEST_RECORDED_HOLD_NS && hold > p.load(&self.longest).await {
                p.store(&self.longest, hold).await;
            }
            p.store(&self.since, 0).await;
        }
        p.store(&self.word, 0).await;
        Ok(())
    }

    async unsafe fn unlock_slow(&self, _: &P, waiters: Infallible) {
        match waiters {}
    }

    async fn try_lock(&self, p: &P) -> bool {
        let timed = p.slice_remaining().await.is_some();
        self.take(p, timed).await
    }
}

#[cfg(not(vspin_loom))]
// SAFETY: the free lock, as `new` builds it.
unsafe impl ConstInit for LasTasLock<Native> {
    const INIT: Self = LasTasLock { word: Native::word(0), longest: Native::word(0), since: Native::word(0) };
}

#[cfg(all(test, not(vspin_loom)))]
mod tests {
    use super::*;
    use crate::native::block_on;
    use crate::test_platform::{Call, Recorder};
    use std::cell::Cell;

    /// Step 1 on the fast path: with a longest hold of 10 ns, a slice with 5 ns left does not
    /// even try the lock (no compare-exchange: it goes to the slow path, which yields); one with
    /// 10 or 20 ns left takes the free lock.
    #[test]
    fn the_fast_path_leaves_a_free_lock_alone_when_the_slice_ends_before_the_longest_hold() {
        for (slice, takes) in [(5, false), (10, true), (20, true)] {
            let mut p = Recorder::new(0, 1);
            p.slice = Some(slice);
            let lock = LasTasLock::<Recorder> { word: Cell::new(0), longest: Cell::new(10), since: Cell::new(0) };
            // SAFETY: an `Err` holds nothing here (`Contended` is `()`), so it may be dropped.
            let taken = block_on(unsafe { lock.lock_fast(&p) }).is_ok();
            assert_eq!(taken, takes, "slice {slice}");
            assert_eq!(p.calls().contains(&Call::CompareExchange), takes, "slice {slice}: compare-exchange tried");
            assert_eq!(lock.word.get(), takes as u64, "slice {slice}");
        }
    }
}
