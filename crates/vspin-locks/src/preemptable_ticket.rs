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
//!   at rest (nobody holds or waits): head == tail, nothing else set; an unlock that leaves the
//!   lock at rest puts the tickets back at 0, so an idle lock is usually the word 0
//!
//!   lock:   fast: cas(0 → tail 1 | locked) ──ok──▶ HELD        (ticket 0 drawn and lock taken)
//!           slow: t = xadd(tail, 1).tail;  N = t − head
//!           while N > 0 (mod 2^B, "ahead of me"):
//!               spin ≤ N·t PAUSEs until head moves ──moved──▶ recompute N
//!                                       │ timed out
//!                                       ▼
//!           COMPETE: repeat { set locked (xchg); PAUSE } until it was 0 ─▶ HELD
//!   unlock: fast: word == tail 1 | locked && cas(it → 0) ──ok──▶ done  (the only ticket: rest)
//!           slow: xadd(word, 1 − locked): head += 1 and locked cleared by one add
//!                 (if head wrapped, its carry went to the spare bits above it: clear them)
//!                 if that left the lock at rest: cas(it → 0)
//! ```
//!
//! Decisions (see the module constants):
//! - Wrap-around: the patch compared `ticket <= head`, which fails when tickets wrap. Here the
//!   distance `ticket − head` is taken modulo 2^B and read as signed: a waiter whose ticket head
//!   has passed (because later waiters overtook it and released) competes at once.
//! - The competition is the patches' own loop: an atomic set of `locked` (v1.0's and v2.0's
//!   `xchg`, the compact patch's `cmpxchg`) every iteration with one PAUSE between, and no
//!   read-only test first. `locked` shares the cache line with the tickets, as in the patch's
//!   `arch_spinlock_t`. Which CPU may acquire is the same as with a test-and-test-and-set, but
//!   what the hardware sees is not: every attempt is a write, so the line moves to each competing
//!   CPU in turn, the countdown's reads of `head` miss, and under contention the stall between
//!   two PAUSEs exceeds PLE's `ple_gap`, so competing waiters do not PLE-exit. Until 2026-11-25
//!   this lock spun read-only between attempts; with PLE on (the seed's Linux 3.5 host) that
//!   made its waiters fall into the same directed-yield storms as the ticket lock
//!   (`docs/mechanisms/pticket.md`).
//! - `t = TIMEOUT_UNIT = 2^14` PAUSEs, the constant of the paper's patch (v1.0, `TIMEOUT_UNIT`)
//!   and of the authors' later compact patch (`pmtlock_timeout_shift = 14`); their v3.0 port to
//!   Linux 4.0 lowered it to 2^8. The paper reports that performance is not sensitive to `t`;
//!   `vspin reproduce pticket` sweeps it.
//! - The unlock's slow path advances `head` and clears `locked` with one `add`, as the authors'
//!   compact patch (`1-pmtlock-compact.patch`) does: it keeps `locked` in head's low bit and
//!   steps tickets by 2; here the holder knows `locked` is set, so adding `1 − locked` to the
//!   word does both, without halving the ticket space. The v1.0, v2.0 and v3.0 patches use two
//!   atomics, an `add` to `head` and an `xchg` of a separate lock word (`lock`, later
//!   `acquired`). When `head` wraps, the add carries into the spare bits above it, which no
//!   field reads; the unlocker that wrapped it clears them in its slow path.
//! - **Resting at zero** (our addition; no patch has it). The patch's uncontended lock+unlock is
//!   three locked instructions (`xadd` tail, set `locked`, add to the word) where a
//!   compare-exchange mutex makes two, which made it the slowest user-space lock here when
//!   uncontended (`docs/real-locks.md`). Here an uncontended pair is two compare-exchanges
//!   expecting known words, as `queued_spin_lock`'s fast path expects 0: `0 → tail 1 | locked`
//!   and back (the unlock reads the word first and tries only if it is that one). That needs an idle lock to be the word 0, so an unlock that leaves the lock at
//!   rest resets the tickets to 0; this is safe because at rest no ticket is outstanding (each
//!   holder drew one ticket and `head` counts the unlocks), so no waiter holds a number the
//!   reset could confuse. A compare-exchange that fails takes the line exclusive just as the
//!   `xadd` would, so a contended lock pays one more locked instruction on a line it then owns,
//!   not another cache-line transfer; a read-first trylock (tried before) paid a shared read and
//!   then an upgrade for every queued waiter. The unlock, whose line its spinners share, reads
//!   before it tries: a failed compare-exchange there would be a write that sends every spinner
//!   to re-read, for nothing. The queueing protocol (tickets,
//!   timeouts, the `locked` competition) is the patch's, unchanged; tickets now wrap only in a
//!   contention episode of 2^B acquisitions, which the interleaving tests still reach.
//! - `tail` is the top B bits of the 64-bit word rather than right above `head`: as in the
//!   [`ticket`](crate::ticket) lock, the `xadd` on it is then one `fetch_add` on real threads
//!   instead of a compare-exchange loop. The algorithm only reads and adds to the fields.
use crate::platform::{Field, Platform, RawSpinLock, SpinOutcome, Until, WordAlloc};
#[cfg(not(vspin_loom))]
use crate::{mutex::ConstInit, native::Native};

/// PAUSE iterations of timeout per queue position (`TIMEOUT_UNIT` in the authors' patch).
pub const TIMEOUT_UNIT: u64 = 1 << 14;

/// Bit positions shared by the plain and paravirtual variants.
pub(crate) struct Layout<const BITS: u32>;

impl<const BITS: u32> Layout<BITS> {
    /// `head`, its carry, `locked`, the slow-path bit and `tail` must fit the word apart: with
    /// wider tickets `tail` would cover `locked`, the fast path would take the lock without
    /// setting it, and a timed-out waiter would win the competition beside the holder (a review
    /// found it at 24 bits, 2026-11-27). Both locks' `new` and `INIT` evaluate this, so a lock
    /// with such `BITS` does not compile.
    pub(crate) const FITS: () = assert!(BITS >= 2 && 3 * BITS + 2 <= 64, "preemptable ticket locks need 2 <= BITS <= 20");
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

    /// The word of a lock taken from rest at 0: ticket 0 drawn (tail 1, head 0) and `locked`.
    /// Both fast paths expect it (see "Resting at zero").
    pub(crate) const HELD_ALONE: u64 = Self::TAIL.with(Self::LOCKED, 1);

    /// Whether `word` is at rest: nobody holds or waits (head == tail) and no other bit is set.
    pub(crate) fn at_rest(word: u64) -> bool {
        let head = Self::HEAD.get(word);
        word == Self::TAIL.with(head, head)
    }

    /// Whether the unlock that returned the word `old` wrapped `head`, carrying into
    /// [`CARRY`](Self::CARRY) (a plain function rather than an `async fn`: see "No executor on
    /// the fast path" in [`native`](crate::native)).
    pub(crate) fn wrapped(old: u64) -> bool {
        Self::HEAD.get(old) == Self::HEAD.mask()
    }

    /// The start of both slow paths, after the fast path found the lock not at 0: draw a ticket
    /// and wait for its turn or a timeout (the queueing phase). What follows is the competition.
    pub(crate) async fn queue<P: Platform>(p: &P, word: &P::Word, timeout_unit: u64) {
        let old = p.fetch_add_field(word, Self::TAIL, 1).await;
        let ticket = Self::TAIL.get(old);
        let mut head = Self::HEAD.get(old);
        while let Some(ahead @ 1..) = Self::ahead(ticket, head) {
            match p.spin_until(word, Until::field_eq(Self::HEAD, head).not(), ahead.saturating_mul(timeout_unit)).await {
                SpinOutcome::Satisfied(v) => head = Self::HEAD.get(v),
                SpinOutcome::Exhausted(_) => break,
            }
        }
    }

    /// The end of both unlock slow paths: if the unlock left the word `after`, and that is at
    /// rest, put the tickets back at 0 for the next fast path (unless someone came in between).
    pub(crate) async fn rest_at_zero<P: Platform>(p: &P, word: &P::Word, after: u64) {
        if after != 0 && Self::at_rest(after) {
            let _ = p.compare_exchange(word, after, 0).await;
        }
    }

    /// Take the lock if nobody holds or waits for it: from `head == tail` with `locked` clear,
    /// draw the served ticket and set `locked` in one compare-exchange (a whole uncontended
    /// `lock` made atomic). The slow-path bit is kept: our unlock will then wake the halted.
    pub(crate) async fn try_lock<P: Platform>(p: &P, word: &P::Word) -> bool {
        let old = p.load(word).await;
        let idle = Self::HEAD.get(old) == Self::TAIL.get(old) && old & Self::LOCKED == 0;
        idle && p.compare_exchange(word, old, Self::TAIL.add(old, 1) | Self::LOCKED).await.is_ok()
    }

    /// Compete for `locked` as the patches do, with an `xchg` every iteration and no read-only
    /// test between (see "Decisions"), at most `max_pauses` PAUSEs: true if this CPU took it.
    pub(crate) async fn compete<P: Platform>(p: &P, word: &P::Word, max_pauses: u64) -> bool {
        matches!(p.spin_test_and_set(word, Self::LOCKED, max_pauses).await, SpinOutcome::Satisfied(_))
    }
}

/// The preemptable ticket lock (module docs) with `BITS`-bit tickets, 2 to 20 (a wider one does
/// not compile). A wrap needs `2^BITS` acquisitions within one contention episode and breaks only
/// FIFO order, never exclusion, which `locked` provides.
///
/// ```compile_fail
/// use vspin_locks::{mutex::ConstInit, native::Native, preemptable_ticket::PreemptableTicketLock};
/// let too_wide = PreemptableTicketLock::<Native, 24>::INIT; // `tail` would cover `locked`
/// ```
pub struct PreemptableTicketLock<P: Platform, const BITS: u32 = 16> {
    word: P::Word,
    timeout_unit: u64,
}

debug_by_name!(PreemptableTicketLock<P, const BITS: u32>);

impl<P: Platform, const BITS: u32> PreemptableTicketLock<P, BITS> {
    /// Use `t` PAUSE iterations of timeout per queue position instead of [`TIMEOUT_UNIT`].
    pub const fn with_timeout_unit(mut self, t: u64) -> Self {
        self.timeout_unit = t;
        self
    }
}

// SAFETY: mutual exclusion is the protocol above, checked by the interleaving tests and the
// `loom` models.
unsafe impl<P: Platform, const BITS: u32> RawSpinLock<P> for PreemptableTicketLock<P, BITS> {
    const NAME: &'static str = "preemptable-ticket";
    /// FIFO only while no waiter times out; the simulator counts overtakes instead of failing.
    const FIFO: bool = false;
    /// The fast path found the lock not at 0.
    type Contended = ();
    /// The lock was not held alone.
    type Waiters = ();

    fn new(mem: &mut impl WordAlloc<P::Word>) -> Self {
        let () = Layout::<BITS>::FITS;
        PreemptableTicketLock { word: mem.word(0), timeout_unit: TIMEOUT_UNIT }
    }

    async unsafe fn lock_fast(&self, p: &P) -> Result<(), ()> {
        p.compare_exchange(&self.word, 0, Layout::<BITS>::HELD_ALONE).await.map(drop).map_err(drop)
    }

    async unsafe fn lock_slow(&self, p: &P, (): ()) {
        Layout::<BITS>::queue(p, &self.word, self.timeout_unit).await;
        Layout::<BITS>::compete(p, &self.word, u64::MAX).await;
    }

    async unsafe fn unlock_fast(&self, p: &P) -> Result<(), ()> {
        if p.load(&self.word).await == Layout::<BITS>::HELD_ALONE {
            p.compare_exchange(&self.word, Layout::<BITS>::HELD_ALONE, 0).await.map(drop).map_err(drop)
        } else {
            Err(())
        }
    }

    async unsafe fn unlock_slow(&self, p: &P, (): ()) {
        let old = p.fetch_add_field(&self.word, Layout::<BITS>::WORD, Layout::<BITS>::UNLOCK).await;
        let mut after = old.wrapping_add(Layout::<BITS>::UNLOCK);
        if Layout::<BITS>::wrapped(old) {
            p.fetch_and(&self.word, !Layout::<BITS>::CARRY).await;
            after &= !Layout::<BITS>::CARRY;
        }
        Layout::<BITS>::rest_at_zero(p, &self.word, after).await;
    }

    async fn try_lock(&self, p: &P) -> bool {
        Layout::<BITS>::try_lock(p, &self.word).await
    }
}

#[cfg(not(vspin_loom))]
// SAFETY: the free lock, as `new` builds it.
unsafe impl<const BITS: u32> ConstInit for PreemptableTicketLock<Native, BITS> {
    const INIT: Self = {
        let () = Layout::<BITS>::FITS;
        PreemptableTicketLock { word: Native::word(0), timeout_unit: TIMEOUT_UNIT }
    };
}

#[cfg(all(test, not(vspin_loom)))]
mod tests {
    use super::*;
    use crate::native::block_on;
    use crate::test_platform::{Call, Recorder};

    /// `T = N × t`: a waiter that draws ticket 3 behind the holder of ticket 0 (two waiters
    /// between) gives the queue 3·t PAUSEs to move before it times out and competes.
    #[test]
    fn a_waiter_three_places_back_first_waits_three_timeout_units() {
        type L = Layout<16>;
        let p = Recorder::new(0, 1);
        let word = std::cell::Cell::new(L::TAIL.with(L::LOCKED, 3));
        block_on(L::queue(&p, &word, 100));
        assert_eq!(p.calls(), [Call::Spin(300)]);
        assert_eq!(L::TAIL.get(word.get()), 4, "ticket 3 drawn");
    }

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

    #[test]
    fn a_lock_is_at_rest_only_with_head_at_tail_and_nothing_else_set() {
        type L8 = Layout<8>;
        let rest = L8::TAIL.with(L8::HEAD.with(0, 7), 7);
        assert!(L8::at_rest(0) && L8::at_rest(rest));
        assert!(!L8::at_rest(L8::TAIL.add(rest, 1)), "a ticket outstanding");
        assert!(!L8::at_rest(rest | L8::LOCKED) && !L8::at_rest(rest | L8::SLOWPATH));
        assert!(!L8::at_rest(rest | 1 << 8), "head's carry not yet cleared");
        assert_eq!((L8::TAIL.get(L8::HELD_ALONE), L8::HEAD.get(L8::HELD_ALONE)), (1, 0));
        assert_eq!(L8::HELD_ALONE & !L8::TAIL.with(0, L8::TAIL.mask()), L8::LOCKED, "held alone: ticket 0 and locked");
        assert!(!L8::at_rest(L8::HELD_ALONE));
    }
}
