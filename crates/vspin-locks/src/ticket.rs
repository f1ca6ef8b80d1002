//! Ticket lock: the x86 Linux spinlock of v2.6.25 – v4.1 without paravirtualization.
//!
//! A lock word holds two counters, `head` (now serving) and `tail` (next ticket). A CPU takes a
//! ticket with one `xadd` on `tail` and spins until `head` reaches it; unlock adds one to `head`.
//! Waiters are served strictly in ticket order, which is fair on bare metal and a disaster under
//! a hypervisor: if the vCPU holding the *next* ticket is descheduled, every later waiter spins
//! until it runs again (lock-waiter preemption, LWP).
//!
//! **Width.** Tickets wrap, and a ticket lock is correct only while fewer waiters queue on one
//! lock than there are tickets: one more, and a newcomer's ticket equals the holder's, so it is
//! served at once. The kernel sizes `__ticket_t` by that rule from `CONFIG_NR_CPUS`
//! (`arch/x86/include/asm/spinlock_types.h`: 8 bits below `256 / __TICKET_LOCK_INC` CPUs, else
//! 16; `kernel-mechanisms.md` §1.1), since only CPUs can wait on a spinlock. On real threads
//! every thread can wait, and Linux allows up to `PID_MAX_LIMIT` = 2^22 of them, so a 16-bit
//! ticket could wrap onto a held lock (32,768 sleeping waiters of a PV ticket lock, whose
//! tickets step by 2, are a thread-per-connection server's Tuesday). The tickets here have 24
//! bits: 2^23 PV tickets, more than the threads Linux can create. Nothing a lock does depends on
//! the width except where tickets wrap, every 2^24 acquisitions instead of 2^16 (2^23 and 2^15
//! for the PV family); the simulator's results are the same as with 16-bit tickets.
//!
//! The kernel's 32-bit word has `tail` right above `head`; here `tail` is the top 24 bits of the
//! 64-bit word (bits 40..64) and the bits between are zero or, for ITICKET, its threshold. The
//! algorithm only reads and adds to the fields, so their places change nothing it does, and
//! on real threads the `xadd` on `tail` becomes one 64-bit `fetch_add` whose carry leaves the
//! word: a field below bit 63 needs a compare-exchange loop to keep its carry out of the next
//! field (see `native`), which cost the uncontended lock about 1 ns more.
//!
//! ```text
//!   word = [ tail:24 | 0:16 | head:24 ]
//!
//!   lock:   t = xadd(tail, 1).tail ──▶ head == t ? ──yes──▶ HELD
//!                                          │ no
//!                                          ▼
//!                                  spin while head != t  (every unlock invalidates all spinners)
//!   unlock: head += 1   (24-bit add: no carry into tail; tickets wrap at 2^24)
//! ```
//!
//! Without `CONFIG_PARAVIRT_SPINLOCKS` the `SPIN_THRESHOLD` loop of `arch_spin_lock` calls a no-op
//! `__ticket_lock_spinning`, so it is an unbounded spin; it is written here as one.
use crate::platform::{Field, Platform, RawSpinLock, Until, WordAlloc};
use std::convert::Infallible;
#[cfg(not(vspin_loom))]
use crate::{mutex::ConstInit, native::Native};

/// Bits of a ticket (see "Width" in the module docs).
pub(crate) const TICKET_BITS: u32 = 24;
/// `head`: the ticket now served (bits 0..24 of `head_tail`).
pub(crate) const HEAD: Field = Field::new(0, TICKET_BITS);
/// `tail`: the next ticket to hand out (bits 40..64 of `head_tail`, see the module docs).
pub(crate) const TAIL: Field = Field::new(64 - TICKET_BITS, TICKET_BITS);

/// The fast path of `arch_spin_lock` is one `xadd` to `tail` (of 1, or of `TICKET_LOCK_INC` in
/// the PV family); this is its verdict on the old word: `Ok` if the lock was free, else the old
/// word, whose `tail` is our ticket. Each lock's `lock_fast` writes the `xadd` out: shared as an
/// `async fn`, it was polled out of line (see "No executor on the fast path" in
/// [`native`](crate::native)).
pub(crate) fn served_at_once(old: u64) -> Result<(), u64> {
    if HEAD.get(old) == TAIL.get(old) {
        Ok(())
    } else {
        Err(old)
    }
}

pub struct TicketLock<P: Platform> {
    head_tail: P::Word,
}

debug_by_name!(TicketLock<P>);

// SAFETY: mutual exclusion is the protocol above, checked by the interleaving tests and the
// `loom` models.
unsafe impl<P: Platform> RawSpinLock<P> for TicketLock<P> {
    const NAME: &'static str = "ticket";
    const FIFO: bool = true;
    type Contended = u64;
    type Waiters = Infallible;

    fn new(mem: &mut impl WordAlloc<P::Word>) -> Self {
        TicketLock { head_tail: mem.word(0) }
    }

    /// Draw a ticket; the old word if it is not served at once.
    async unsafe fn lock_fast(&self, p: &P) -> Result<(), u64> {
        served_at_once(p.fetch_add_field(&self.head_tail, TAIL, 1).await)
    }

    async unsafe fn lock_slow(&self, p: &P, old: u64) {
        p.spin_until(&self.head_tail, Until::field_eq(HEAD, TAIL.get(old)), u64::MAX).await;
    }

    async unsafe fn unlock_fast(&self, p: &P) -> Result<(), Infallible> {
        p.fetch_add_field(&self.head_tail, HEAD, 1).await;
        Ok(())
    }

    async unsafe fn unlock_slow(&self, _: &P, waiters: Infallible) {
        match waiters {}
    }

    /// `arch_spin_trylock`: draw a ticket only if it is served at once (head == tail).
    async fn try_lock(&self, p: &P) -> bool {
        let old = p.load(&self.head_tail).await;
        HEAD.get(old) == TAIL.get(old) && p.compare_exchange(&self.head_tail, old, TAIL.add(old, 1)).await.is_ok()
    }
}

#[cfg(not(vspin_loom))]
// SAFETY: the free lock, as `new` builds it.
unsafe impl ConstInit for TicketLock<Native> {
    const INIT: Self = TicketLock { head_tail: Native::word(0) };
}
