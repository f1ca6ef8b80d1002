//! Test-and-set lock: Linux's `virt_spin_lock`.
//!
//! When a guest runs without paravirtual spinlocks, Linux (v4.x+, `arch/x86/include/asm/
//! qspinlock.h`) replaces the fair queued lock with an unfair test-and-set lock, because "fair
//! locks have horrible lock 'holder' preemption issues" (`kernel-mechanisms.md` §2.6). There is no
//! queue: any running waiter can take a free lock, so a preempted *waiter* never blocks the others
//! (no lock-waiter preemption), at the price of fairness and of a cache-line storm at each release.
//!
//! ```text
//!            cmpxchg 0→1 ok
//!   FREE(0) ────────────────▶ HELD(1)
//!      ▲                         │
//!      │     store 0 (unlock)    │
//!      └─────────────────────────┘
//!   waiters: spin reading the word until 0, then race with cmpxchg; losers spin again.
//! ```
//!
//! Protocol (`queued_spin_lock` fast path, then `virt_spin_lock`):
//! | step | operation | why |
//! |------|-----------|-----|
//! | 1 | `cmpxchg(word, 0, 1)` | uncontended fast path |
//! | 2 | spin `while word != 0 { PAUSE }` | read-only spinning keeps the line shared |
//! | 3 | `cmpxchg(word, 0, 1)`, on failure back to 2 | test-and-test-and-set |
//! | unlock | `store(word, 0)` | release store |
//! | trylock | `cmpxchg(word, 0, 1)` | step 1 alone |
use crate::platform::{Platform, RawSpinLock, SpinOutcome, Until, WordAlloc};
use std::convert::Infallible;
#[cfg(not(loom))]
use crate::{mutex::ConstInit, native::Native};

pub struct TasLock<P: Platform> {
    word: P::Word,
}

impl<P: Platform> RawSpinLock<P> for TasLock<P> {
    const NAME: &'static str = "tas";
    const FIFO: bool = false;
    type Contended = ();
    type Waiters = Infallible;

    fn new(mem: &mut impl WordAlloc<P::Word>) -> Self {
        TasLock { word: mem.word(0) }
    }

    async fn lock_fast(&self, p: &P) -> Result<(), ()> {
        match p.compare_exchange(&self.word, 0, 1).await {
            Ok(_) => Ok(()),
            Err(_) => Err(()),
        }
    }

    async fn lock_slow(&self, p: &P, (): ()) {
        loop {
            let seen = p.spin_until(&self.word, Until::eq(0), u64::MAX).await;
            debug_assert!(matches!(seen, SpinOutcome::Satisfied(_)));
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
impl ConstInit for TasLock<Native> {
    const INIT: Self = TasLock { word: Native::word(0) };
}
