//! ITICKET: the paravirtual ticket lock with a per-lock, adaptive spin threshold (an alternative
//! the OTICKET paper evaluates, APSys'15 §5, Figure 9).
//!
//! Each lock keeps its own threshold, starting at `SPIN_THRESHOLD` and doubled whenever one of
//! its waiters ends up in the slow path (halting), up to `SPIN_MAX_THRESHOLD`. Locks that make
//! waiters halt learn to spin longer; quiet locks keep the stock threshold. The paper adds two
//! bytes to the lock for it; here the threshold's exponent lives in spare bits of the lock word,
//! which is the same cache line as in the paper's `arch_spinlock_t`.
//!
//! ```text
//!   word = [ tail:24 | shift:8 | 0:8 | head:24 ]     threshold = 2^(15 + shift)
//!
//!   lock:   t = xadd(tail, 2).tail
//!           ┌─▶ spin ≤ threshold PAUSEs for head≈t ──yes──▶ HELD (clear flag if last)
//!           │                │ exhausted
//!           │                ▼
//!           │   shift += 1 (cmpxchg, capped at 2^34) ; kvm_lock_spinning (as pv-ticket)
//!           └── HALTED ◀──────┘
//!   unlock: as pv-ticket (kick the next ticket)
//! ```
use crate::oticket::SPIN_MAX_THRESHOLD;
use crate::platform::{Field, Platform, RawSpinLock, SpinOutcome, WordAlloc};
use crate::pv_ticket::{
    check_and_clear_slowpath, head_reaches, kick_needed, kick_next, lock_spinning, try_take_ticket,
    SPIN_THRESHOLD, TICKET_LOCK_INC,
};
use crate::ticket::{served_at_once, HEAD, TAIL};
#[cfg(not(vspin_loom))]
use crate::{mutex::ConstInit, native::Native};

/// How far the threshold has been doubled from `SPIN_THRESHOLD`.
const SHIFT: Field = Field::new(32, 8);
const MAX_SHIFT: u64 = SPIN_MAX_THRESHOLD.trailing_zeros() as u64 - SPIN_THRESHOLD.trailing_zeros() as u64;

pub struct ITicketLock<P: Platform> {
    head_tail: P::Word,
}

debug_by_name!(ITicketLock<P>);

impl<P: Platform> ITicketLock<P> {
    /// A waiter of this lock had to halt: spin twice as long next time.
    async fn double_threshold(&self, p: &P) {
        let v = p.load(&self.head_tail).await;
        let shift = SHIFT.get(v);
        if shift < MAX_SHIFT {
            let _ = p.compare_exchange(&self.head_tail, v, SHIFT.with(v, shift + 1)).await;
        }
    }
}

// SAFETY: mutual exclusion is the protocol above, checked by the interleaving tests and the
// `loom` models.
unsafe impl<P: Platform> RawSpinLock<P> for ITicketLock<P> {
    const NAME: &'static str = "iticket";
    const FIFO: bool = true;
    type Contended = u64;
    type Waiters = u64;

    fn new(mem: &mut impl WordAlloc<P::Word>) -> Self {
        ITicketLock { head_tail: mem.word(0) }
    }

    async unsafe fn lock_fast(&self, p: &P) -> Result<(), u64> {
        served_at_once(p.fetch_add_field(&self.head_tail, TAIL, TICKET_LOCK_INC).await)
    }

    async unsafe fn lock_slow(&self, p: &P, old: u64) {
        let want = TAIL.get(old);
        let mut threshold = SPIN_THRESHOLD << SHIFT.get(old);
        loop {
            match p.spin_until(&self.head_tail, head_reaches(want), threshold).await {
                SpinOutcome::Satisfied(v) => {
                    check_and_clear_slowpath(p, &self.head_tail, v).await;
                    return;
                }
                SpinOutcome::Exhausted(v) => threshold = SPIN_THRESHOLD << SHIFT.get(v),
            }
            self.double_threshold(p).await;
            lock_spinning(p, &self.head_tail, want).await;
        }
    }

    async unsafe fn unlock_fast(&self, p: &P) -> Result<(), u64> {
        kick_needed(p.fetch_add_field(&self.head_tail, HEAD, TICKET_LOCK_INC).await)
    }

    async unsafe fn unlock_slow(&self, p: &P, head: u64) {
        kick_next(p, &self.head_tail, head, 1).await;
    }

    /// As pv-ticket's; the threshold's shift (bits 32..40) is carried over unchanged.
    async fn try_lock(&self, p: &P) -> bool {
        try_take_ticket(p, &self.head_tail).await
    }
}

#[cfg(not(vspin_loom))]
// SAFETY: the free lock, as `new` builds it.
unsafe impl ConstInit for ITicketLock<Native> {
    const INIT: Self = ITicketLock { head_tail: Native::word(0) };
}
