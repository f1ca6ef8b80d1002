//! OTICKET, the opportunistic ticket spinlock (Kim et al., APSys'15), and the design
//! alternatives the paper evaluates.
//!
//! The paravirtual ticket lock of Linux 4.0 ([`pv_ticket`](crate::pv_ticket)) with two changes
//! (the paper's Figure 5):
//! - **Opportunistic spinning.** A waiter `dist` tickets behind the head spins
//!   `SPIN_MAX_THRESHOLD >> (dist − 1)` PAUSEs before halting when `dist < TICKET_QUEUE_WAIT`,
//!   else the stock `SPIN_THRESHOLD`. The next waiter effectively never halts (2^34 PAUSEs);
//!   far waiters halt early and give their pCPU away. The distance is taken once, when the ticket
//!   is drawn, modulo the ticket width. The paper's `__ticket_distance` subtracts the tickets
//!   after C promotes them to `int`: a waiter whose ticket has wrapped past 0 while `head` has
//!   not gets a negative difference, returned as a huge `unsigned int`, and so the stock
//!   threshold. That happens to the few waiters queued across each wrap, every 2^15
//!   acquisitions with the kernel's 16-bit tickets (2^23 with this crate's 24-bit ones,
//!   [`ticket`](crate::ticket)); here they keep their opportunistic threshold.
//! - **Opportunistic wake-up.** An unlock that finds the slow-path flag kicks the waiters of the
//!   next `OPPORTUNISTIC_WAKEUP_NCPU` tickets, not only the next one, so that they are running
//!   and spinning again by their turn, hiding the wake-up latency.
//!
//! ```text
//!   lock:   t = xadd(tail, 2).tail; dist = (t − head)/2
//!           threshold = dist < 18 ? 2^34 >> (dist−1) : 2^15
//!           ┌─▶ spin ≤ threshold PAUSEs for head≈t ──yes──▶ HELD (clear flag if last)
//!           │                │ exhausted
//!           └── HALTED ◀── kvm_lock_spinning (as pv-ticket) ◀┘
//!   unlock: old = xadd(head, 2); if old.head & SLOWPATH:
//!               for k in 1..=4: kick the CPU waiting for ticket old.head + 2k
//! ```
//!
//! The const parameters select the paper's variants (type aliases below): `SPIN` is the spin
//! policy (stock, opportunistic, or always the maximum: "longer spinning") and `WAKE` how many
//! next tickets an unlock kicks.
use crate::platform::{Platform, RawSpinLock, SpinOutcome, WordAlloc};
use crate::pv_ticket::{
    check_and_clear_slowpath, head_reaches, kick_needed, kick_next, lock_spinning, try_take_ticket,
    SPIN_THRESHOLD, TICKET_LOCK_INC, TICKET_SLOWPATH_FLAG,
};
use crate::ticket::{served_at_once, HEAD, TAIL};
#[cfg(not(vspin_loom))]
use crate::{mutex::ConstInit, native::Native};

/// The paper's constants (Figure 5, Linux 4.0).
pub const SPIN_MAX_THRESHOLD: u64 = 1 << 34;
pub const TICKET_QUEUE_WAIT: u64 = 18;
pub const OPPORTUNISTIC_WAKEUP_NCPU: u64 = 4;

/// Spin policies for the `SPIN` parameter.
pub const STOCK_SPIN: u8 = 0;
pub const OPPORTUNISTIC_SPIN: u8 = 1;
pub const LONGER_SPIN: u8 = 2;

/// The four variants are this type with the paper's `SPIN` and `WAKE` (the aliases below); no
/// other pair builds a lock:
///
/// ```compile_fail,E0080
/// use vspin_locks::{mutex::NativeRaw, native::Native, oticket::OpportunisticTicketLock};
/// // `WAKE = 0` would wake no waiter that halted.
/// let m = vspin_locks::lock_api::Mutex::<NativeRaw<OpportunisticTicketLock<Native, 0, 0>>, u32>::new(0);
/// ```
pub struct OpportunisticTicketLock<P: Platform, const SPIN: u8, const WAKE: u64> {
    head_tail: P::Word,
}

debug_by_name!(OpportunisticTicketLock<P, const SPIN: u8, const WAKE: u64>);

/// OTICKET: opportunistic spinning and opportunistic wake-up.
pub type OTicketLock<P> = OpportunisticTicketLock<P, OPPORTUNISTIC_SPIN, OPPORTUNISTIC_WAKEUP_NCPU>;
/// The paper's "opportunistic spinning only" (Figure 6).
pub type OpportunisticSpinLock<P> = OpportunisticTicketLock<P, OPPORTUNISTIC_SPIN, 1>;
/// The paper's "opportunistic wake-up only" (Figure 6).
pub type OpportunisticWakeupLock<P> = OpportunisticTicketLock<P, STOCK_SPIN, OPPORTUNISTIC_WAKEUP_NCPU>;
/// The paper's "longer spinning" alternative (Figure 9): threshold = `SPIN_MAX_THRESHOLD`.
pub type LongerSpinningLock<P> = OpportunisticTicketLock<P, LONGER_SPIN, 1>;

/// `__ticket_distance(head, tail)`: tickets between the head and ours.
fn distance(head: u64, tail: u64) -> u64 {
    (tail.wrapping_sub(head & !TICKET_SLOWPATH_FLAG) & HEAD.mask()) / TICKET_LOCK_INC
}

impl<P: Platform, const SPIN: u8, const WAKE: u64> OpportunisticTicketLock<P, SPIN, WAKE> {
    /// The paper's `SPIN_MAX_THRESHOLD >> (dist − 1)` for a waiter `dist` tickets behind `head`.
    /// A waiter whose ticket `head` already names (`dist` 0: it lost the fast path only to a stale
    /// slow-path flag) gets the next-in-line threshold; the paper's C would shift by −1.
    fn threshold(dist: u64) -> u64 {
        match SPIN {
            OPPORTUNISTIC_SPIN if dist < TICKET_QUEUE_WAIT => SPIN_MAX_THRESHOLD >> dist.saturating_sub(1),
            LONGER_SPIN => SPIN_MAX_THRESHOLD,
            _ => SPIN_THRESHOLD,
        }
    }
}

// SAFETY: mutual exclusion is the protocol above, checked by the interleaving tests and the
// `loom` models.
unsafe impl<P: Platform, const SPIN: u8, const WAKE: u64> RawSpinLock<P> for OpportunisticTicketLock<P, SPIN, WAKE> {
    const NAME: &'static str = match (SPIN, WAKE) {
        (OPPORTUNISTIC_SPIN, OPPORTUNISTIC_WAKEUP_NCPU) => "oticket",
        (OPPORTUNISTIC_SPIN, 1) => "oticket-spin-only",
        (STOCK_SPIN, OPPORTUNISTIC_WAKEUP_NCPU) => "oticket-wakeup-only",
        (LONGER_SPIN, 1) => "longer-spinning",
        // Checked wherever a lock is built (`new`, `INIT`): `WAKE = 0` would wake nobody.
        _ => panic!("only the paper's four variants are locks (its type aliases): no other SPIN and WAKE"),
    };
    const FIFO: bool = true;
    type Contended = u64;
    type Waiters = u64;

    fn new(mem: &mut impl WordAlloc<P::Word>) -> Self {
        let _variant_of_the_paper = Self::NAME;
        OpportunisticTicketLock { head_tail: mem.word(0) }
    }

    async unsafe fn lock_fast(&self, p: &P) -> Result<(), u64> {
        served_at_once(p.fetch_add_field(&self.head_tail, TAIL, TICKET_LOCK_INC).await)
    }

    async unsafe fn lock_slow(&self, p: &P, old: u64) {
        let want = TAIL.get(old);
        let threshold = Self::threshold(distance(HEAD.get(old), want));
        loop {
            if let SpinOutcome::Satisfied(v) = p.spin_until(&self.head_tail, head_reaches(want), threshold).await {
                check_and_clear_slowpath(p, &self.head_tail, v).await;
                return;
            }
            lock_spinning(p, &self.head_tail, want).await;
        }
    }

    async unsafe fn unlock_fast(&self, p: &P) -> Result<(), u64> {
        kick_needed(p.fetch_add_field(&self.head_tail, HEAD, TICKET_LOCK_INC).await)
    }

    async unsafe fn unlock_slow(&self, p: &P, head: u64) {
        kick_next(p, &self.head_tail, head, WAKE).await;
    }

    async fn try_lock(&self, p: &P) -> bool {
        try_take_ticket(p, &self.head_tail).await
    }
}

#[cfg(not(vspin_loom))]
// SAFETY: the free lock, as `new` builds it.
unsafe impl<const SPIN: u8, const WAKE: u64> ConstInit for OpportunisticTicketLock<Native, SPIN, WAKE> {
    const INIT: Self = {
        let _variant_of_the_paper = <Self as RawSpinLock<Native>>::NAME;
        OpportunisticTicketLock { head_tail: Native::word(0) }
    };
}

#[cfg(all(test, not(vspin_loom)))]
mod tests {
    use super::*;
    use crate::native::block_on;
    use crate::platform::{CpuMask, PerCpuSlot};
    use crate::test_platform::{Call, Recorder};

    #[test]
    fn a_waiter_already_at_the_head_gets_the_next_in_line_threshold() {
        assert_eq!(OTicketLock::<crate::native::Native>::threshold(0), SPIN_MAX_THRESHOLD);
        assert_eq!(OTicketLock::<crate::native::Native>::threshold(1), SPIN_MAX_THRESHOLD);
        assert_eq!(OTicketLock::<crate::native::Native>::threshold(2), SPIN_MAX_THRESHOLD >> 1);
    }

    /// The paper's `dist < TICKET_QUEUE_WAIT`: a waiter 17 tickets back still spins
    /// opportunistically (`2^34 >> 16`), one 18 back already gets the stock `SPIN_THRESHOLD`,
    /// and so halts as early as a PV ticket waiter.
    #[test]
    fn waiters_from_ticket_queue_wait_back_get_the_stock_threshold() {
        type O = OTicketLock<crate::native::Native>;
        assert_eq!(O::threshold(TICKET_QUEUE_WAIT - 1), SPIN_MAX_THRESHOLD >> (TICKET_QUEUE_WAIT - 2));
        assert_eq!(O::threshold(TICKET_QUEUE_WAIT - 1), 1 << 18);
        assert_eq!(O::threshold(TICKET_QUEUE_WAIT), SPIN_THRESHOLD);
    }

    /// Kicks of one unlock of a lock with the slow-path flag set, while CPUs 1..=6 wait (halted)
    /// for the next six tickets, CPU `k` for the `k`-th.
    fn kicks_of_a_flagged_unlock<const SPIN: u8, const WAKE: u64>() -> Vec<Call> {
        let p = Recorder::new(0, 8);
        let head = 0x40;
        let lock = OpportunisticTicketLock::<Recorder, SPIN, WAKE> {
            head_tail: std::cell::Cell::new(TAIL.with(head | TICKET_SLOWPATH_FLAG, head + 7 * TICKET_LOCK_INC)),
        };
        for cpu in 1..=6 {
            p.per_cpu(cpu, PerCpuSlot::PvWaitLock).set(p.addr(&lock.head_tail));
            p.per_cpu(cpu, PerCpuSlot::PvWaitWant).set(head + cpu as u64 * TICKET_LOCK_INC);
            p.cpumask(CpuMask::PvWaiting, 0).set(p.cpumask(CpuMask::PvWaiting, 0).get() | 1 << cpu);
        }
        // SAFETY: the recorder's CPU 0 stands for the holder of ticket `head`.
        block_on(unsafe { lock.unlock(&p) });
        assert_eq!(HEAD.get(lock.head_tail.get()), (head + TICKET_LOCK_INC) | TICKET_SLOWPATH_FLAG, "head moved on, flag kept");
        p.calls().into_iter().filter(|c| matches!(c, Call::Kick(_))).collect()
    }

    /// Opportunistic wake-up: the waiters of the next `OPPORTUNISTIC_WAKEUP_NCPU` (4) tickets are
    /// kicked, so that they are running by their turn; the variants without it kick one.
    #[test]
    fn a_flagged_unlock_kicks_the_waiters_of_the_next_four_tickets() {
        let four: Vec<Call> = (1..=4).map(Call::Kick).collect();
        assert_eq!(kicks_of_a_flagged_unlock::<OPPORTUNISTIC_SPIN, OPPORTUNISTIC_WAKEUP_NCPU>(), four, "oticket");
        assert_eq!(kicks_of_a_flagged_unlock::<STOCK_SPIN, OPPORTUNISTIC_WAKEUP_NCPU>(), four, "wake-up only");
        assert_eq!(kicks_of_a_flagged_unlock::<OPPORTUNISTIC_SPIN, 1>(), [Call::Kick(1)], "spin only");
    }

    #[test]
    fn distance_ignores_the_flag_and_wraps() {
        assert_eq!(distance(4, 10), 3);
        assert_eq!(distance(5, 10), distance(4, 10), "the slow-path flag in head is ignored");
        assert_eq!(distance(0xff_fffe, 2), 2);
    }
}
