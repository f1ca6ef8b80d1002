//! Preemptable ticket lock (Ouyang & Lange, VEE'13; Linux 3.5 patch "pmtlock").
//!
//! A ticket lock whose waiters give up their place when the queue stops moving. A waiter takes a
//! ticket as usual; its queue position is `N = ticket − head`, and it waits for its turn at most
//! `T = N × t` PAUSE iterations, the countdown restarting whenever `head` moves. When its turn
//! comes, or when it times out (a waiter ahead of it is probably preempted: lock-waiter
//! preemption), it competes for the `locked` bit, which is what actually grants the lock. Without
//! preemption, only the head of the queue competes, so order is FIFO; with it, timed-out waiters
//! may overtake a preempted one, and mutual exclusion among them is kept by `locked`.
//!
//! ```text
//!   word = [ tail:B | 0 | slowpath:1 | locked:1 | 0:B | head:B ]    (B = ticket bits, 16 or 8)
//!
//!   lock:   t = xadd(tail, 1).tail;  N = t − head
//!           while N > 0 (mod 2^B, "ahead of me"):
//!               spin ≤ N·t PAUSEs until head moves ──moved──▶ recompute N
//!                                       │ timed out
//!                                       ▼
//!           COMPETE: repeat { spin until locked == 0; set locked (atomic) } until it was 0 ─▶ HELD
//!   unlock: xadd(word, 1 − locked): head += 1 and locked cleared by one add
//!           (if head wrapped, its carry went to the spare bits above it: clear them)
//! ```
//!
//! Decisions (see the module constants):
//! - Wrap-around: the patch compared `ticket <= head`, which fails when tickets wrap. Here the
//!   distance `ticket − head` is taken modulo 2^B and read as signed: a waiter whose ticket head
//!   has passed (because later waiters overtook it and released) competes at once.
//! - The competition is test-and-test-and-set on `locked`, which shares the cache line with the
//!   tickets as in the patch's `arch_spinlock_t`; the read-only spin between attempts changes only
//!   coherence traffic, not who may acquire.
//! - `t = TIMEOUT_UNIT = 2^14` PAUSEs, the constant of the paper's patch (v1.0, `TIMEOUT_UNIT`)
//!   and of the authors' later compact patch (`pmtlock_timeout_shift = 14`); their v3.0 port to
//!   Linux 4.0 lowered it to 2^8. The paper reports that performance is not sensitive to `t`;
//!   `vspin reproduce pticket` sweeps it.
//! - The unlock advances `head` and clears `locked` with one `add`, as the authors' compact patch
//!   (`1-pmtlock-compact.patch`) does: it keeps `locked` in head's low bit and steps tickets by
//!   2; here the holder knows `locked` is set, so adding `1 − locked` to the word does both,
//!   without halving the ticket space. The v1.0, v2.0 and v3.0 patches use two atomics, an `add`
//!   to `head` and an `xchg` of a separate lock word (`lock`, later `acquired`). When `head` wraps,
//!   the add carries into the spare bits above it, which no field reads; the unlocker that
//!   wrapped it clears them in its slow path. The lock keeps the patch's order, `xadd` first,
//!   then `locked`: three locked instructions per uncontended lock+unlock, one more than a ticket
//!   lock. A trylock-first fast path (read the word; if idle, take it with one compare-exchange)
//!   makes it two, but adds a read before every contended `xadd`, which changed the simulated
//!   lock's behaviour under contention (`docs/real-locks.md`), so it is not used.
//! - `tail` is the top B bits of the 64-bit word rather than right above `head`: as in the
//!   [`ticket`](crate::ticket) lock, the `xadd` on it is then one `fetch_add` on real threads
//!   instead of a compare-exchange loop. The algorithm only reads and adds to the fields.
use crate::platform::{Field, Platform, RawSpinLock, SpinOutcome, Until, WordAlloc};
#[cfg(not(loom))]
use crate::{mutex::ConstInit, native::Native};

/// PAUSE iterations of timeout per queue position (`TIMEOUT_UNIT` in the authors' patch).
pub const TIMEOUT_UNIT: u64 = 1 << 14;

/// Bit positions shared by the plain and paravirtual variants.
pub(crate) struct Layout<const BITS: u32>;

impl<const BITS: u32> Layout<BITS> {
    pub(crate) const HEAD: Field = Field::new(0, BITS);
    pub(crate) const TAIL: Field = Field::new(64 - BITS, BITS);
    /// Set while the lock is held.
    pub(crate) const LOCKED: u64 = 1 << (2 * BITS);
    /// Set when a paravirtual waiter may be halted.
    pub(crate) const SLOWPATH: u64 = 1 << (2 * BITS + 1);
    /// The spare bits above `head`, where its carry lands when an unlock wraps it.
    pub(crate) const CARRY: u64 = Self::HEAD.mask() << BITS;
    /// The whole word, for the unlock's one add.
    pub(crate) const WORD: Field = Field::new(0, 64);
    /// Added to the word by an unlock, whose holder has `locked` set: `head + 1`, `locked` clear.
    pub(crate) const UNLOCK: u64 = 1u64.wrapping_sub(Self::LOCKED);

    /// Waiters ahead of `ticket` when the queue head is `head`; `None` once head has passed it.
    pub(crate) fn ahead(ticket: u64, head: u64) -> Option<u64> {
        let distance = ticket.wrapping_sub(head) & Self::HEAD.mask();
        (distance < 1 << (BITS - 1)).then_some(distance)
    }

    /// Whether a ticket drawn from the word `old` has waiters ahead of it. If not, each variant's
    /// `lock_fast` competes for `locked` at once. That fast path is written out in both rather
    /// than shared as an `async fn` here, whose future the compiler polled out of line (see
    /// "No executor on the fast path" in [`native`](crate::native)).
    pub(crate) fn must_wait(old: u64) -> bool {
        matches!(Self::ahead(Self::TAIL.get(old), Self::HEAD.get(old)), Some(1..))
    }

    /// Whether the unlock that returned the word `old` wrapped `head`, carrying into
    /// [`CARRY`](Self::CARRY) (a plain function, like `must_wait`, for the same reason).
    pub(crate) fn wrapped(old: u64) -> bool {
        Self::HEAD.get(old) == Self::HEAD.mask()
    }

    /// The start of both slow paths: if the ticket drawn from `old` had waiters ahead, wait for
    /// its turn or a timeout (the queueing phase), then compete once for `locked`: true if that
    /// won. If it had none, the fast path (`lock_fast`) has competed already and lost: false.
    pub(crate) async fn wait_turn_and_take<P: Platform>(p: &P, word: &P::Word, old: u64, timeout_unit: u64) -> bool {
        if !Self::must_wait(old) {
            return false;
        }
        let ticket = Self::TAIL.get(old);
        let mut head = Self::HEAD.get(old);
        while let Some(ahead @ 1..) = Self::ahead(ticket, head) {
            match p.spin_until(word, Until::field_eq(Self::HEAD, head).not(), ahead * timeout_unit).await {
                SpinOutcome::Satisfied(v) => head = Self::HEAD.get(v),
                SpinOutcome::Exhausted(_) => break,
            }
        }
        Self::try_take(p, word).await
    }

    /// Take the lock if nobody holds or waits for it: from `head == tail` with `locked` clear,
    /// draw the served ticket and set `locked` in one compare-exchange (a whole uncontended
    /// `lock` made atomic). The slow-path bit is kept: our unlock will then wake the halted.
    pub(crate) async fn try_lock<P: Platform>(p: &P, word: &P::Word) -> bool {
        let old = p.load(word).await;
        let idle = Self::HEAD.get(old) == Self::TAIL.get(old) && old & Self::LOCKED == 0;
        idle && p.compare_exchange(word, old, Self::TAIL.add(old, 1) | Self::LOCKED).await.is_ok()
    }

    /// One attempt at the `locked` bit; true if it was free.
    pub(crate) async fn try_take<P: Platform>(p: &P, word: &P::Word) -> bool {
        p.fetch_or(word, Self::LOCKED).await & Self::LOCKED == 0
    }
}

pub struct PreemptableTicketLock<P: Platform, const BITS: u32 = 16> {
    word: P::Word,
    timeout_unit: u64,
}

impl<P: Platform, const BITS: u32> PreemptableTicketLock<P, BITS> {
    /// Use `t` PAUSE iterations of timeout per queue position instead of [`TIMEOUT_UNIT`].
    pub fn with_timeout_unit(mut self, t: u64) -> Self {
        self.timeout_unit = t;
        self
    }
}

impl<P: Platform, const BITS: u32> RawSpinLock<P> for PreemptableTicketLock<P, BITS> {
    const NAME: &'static str = "preemptable-ticket";
    /// FIFO only while no waiter times out; the simulator counts overtakes instead of failing.
    const FIFO: bool = false;
    type Contended = u64;
    /// The unlock wrapped `head`: clear its carry.
    type Waiters = ();

    fn new(mem: &mut impl WordAlloc<P::Word>) -> Self {
        PreemptableTicketLock { word: mem.word(0), timeout_unit: TIMEOUT_UNIT }
    }

    async fn lock_fast(&self, p: &P) -> Result<(), u64> {
        let old = p.fetch_add_field(&self.word, Layout::<BITS>::TAIL, 1).await;
        if !Layout::<BITS>::must_wait(old) && Layout::<BITS>::try_take(p, &self.word).await {
            Ok(())
        } else {
            Err(old)
        }
    }

    async fn lock_slow(&self, p: &P, old: u64) {
        if Layout::<BITS>::wait_turn_and_take(p, &self.word, old, self.timeout_unit).await {
            return;
        }
        loop {
            p.spin_until(&self.word, Until::masked_eq(Layout::<BITS>::LOCKED, 0), u64::MAX).await;
            if Layout::<BITS>::try_take(p, &self.word).await {
                return;
            }
        }
    }

    async fn unlock_fast(&self, p: &P) -> Result<(), ()> {
        let old = p.fetch_add_field(&self.word, Layout::<BITS>::WORD, Layout::<BITS>::UNLOCK).await;
        if Layout::<BITS>::wrapped(old) {
            Err(())
        } else {
            Ok(())
        }
    }

    async fn unlock_slow(&self, p: &P, (): ()) {
        p.fetch_and(&self.word, !Layout::<BITS>::CARRY).await;
    }

    async fn try_lock(&self, p: &P) -> bool {
        Layout::<BITS>::try_lock(p, &self.word).await
    }
}

#[cfg(not(loom))]
impl<const BITS: u32> ConstInit for PreemptableTicketLock<Native, BITS> {
    const INIT: Self = PreemptableTicketLock { word: Native::word(0), timeout_unit: TIMEOUT_UNIT };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_distance_is_signed_modulo_the_ticket_width() {
        type L8 = Layout<8>;
        assert_eq!(L8::ahead(5, 5), Some(0));
        assert_eq!(L8::ahead(7, 5), Some(2));
        assert_eq!(L8::ahead(1, 255), Some(2), "tickets wrapped, head did not yet");
        assert_eq!(L8::ahead(4, 5), None, "head passed the ticket");
        assert_eq!(L8::ahead(255, 1), None, "head wrapped past the ticket");
        assert_eq!(Layout::<16>::ahead(3, 0xfffe), Some(5));
    }
}
