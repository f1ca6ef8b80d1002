//! Ticket lock: the x86 Linux spinlock of v2.6.25 – v4.1 without paravirtualization.
//!
//! A lock word holds two 16-bit counters, `head` (now serving) and `tail` (next ticket), as in
//! `arch/x86/include/asm/spinlock_types.h` when `CONFIG_NR_CPUS >= 256 / __TICKET_LOCK_INC`, i.e.
//! 256 CPUs for this lock and 128 for the PV one, whose tickets advance by 2 (`kernel-mechanisms.md`
//! §1.1). A CPU takes a ticket with one `xadd` on `tail` and spins until `head` reaches it; unlock
//! adds one to `head`. Waiters are served strictly in ticket order, which is fair on bare metal and
//! a disaster under a hypervisor: if the vCPU holding the *next* ticket is descheduled, every
//! later waiter spins until it runs again (lock-waiter preemption, LWP).
//!
//! The kernel's 32-bit word has `tail` right above `head`; here `tail` is the top 16 bits of the
//! 64-bit word (bits 48..64) and the bits between are zero or, for ITICKET, its threshold. The
//! algorithm only reads and adds to the fields, so their places change nothing it does, and
//! on real threads the `xadd` on `tail` becomes one 64-bit `fetch_add` whose carry leaves the
//! word: a field below bit 63 needs a compare-exchange loop to keep its carry out of the next
//! field (see `native`), which cost the uncontended lock about 1 ns more.
//!
//! ```text
//!   word = [ tail:16 | 0:32 | head:16 ]
//!
//!   lock:   t = xadd(tail, 1).tail ──▶ head == t ? ──yes──▶ HELD
//!                                          │ no
//!                                          ▼
//!                                  spin while head != t  (every unlock invalidates all spinners)
//!   unlock: head += 1   (16-bit add: no carry into tail; tickets wrap at 2^16)
//! ```
//!
//! Without `CONFIG_PARAVIRT_SPINLOCKS` the `SPIN_THRESHOLD` loop of `arch_spin_lock` calls a no-op
//! `__ticket_lock_spinning`, so it is an unbounded spin; it is written here as one.
use crate::platform::{Field, Platform, RawSpinLock, Until, WordAlloc};
use std::convert::Infallible;
#[cfg(not(loom))]
use crate::{mutex::ConstInit, native::Native};

/// `head`: the ticket now served (bits 0..16 of `head_tail`).
pub(crate) const HEAD: Field = Field::new(0, 16);
/// `tail`: the next ticket to hand out (bits 48..64 of `head_tail`, see the module docs).
pub(crate) const TAIL: Field = Field::new(48, 16);

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

impl<P: Platform> RawSpinLock<P> for TicketLock<P> {
    const NAME: &'static str = "ticket";
    const FIFO: bool = true;
    type Contended = u64;
    type Waiters = Infallible;

    fn new(mem: &mut impl WordAlloc<P::Word>) -> Self {
        TicketLock { head_tail: mem.word(0) }
    }

    /// Draw a ticket; the old word if it is not served at once.
    async fn lock_fast(&self, p: &P) -> Result<(), u64> {
        served_at_once(p.fetch_add_field(&self.head_tail, TAIL, 1).await)
    }

    async fn lock_slow(&self, p: &P, old: u64) {
        p.spin_until(&self.head_tail, Until::field_eq(HEAD, TAIL.get(old)), u64::MAX).await;
    }

    async fn unlock_fast(&self, p: &P) -> Result<(), Infallible> {
        p.fetch_add_field(&self.head_tail, HEAD, 1).await;
        Ok(())
    }

    async fn unlock_slow(&self, _: &P, waiters: Infallible) {
        match waiters {}
    }

    /// `arch_spin_trylock`: draw a ticket only if it is served at once (head == tail).
    async fn try_lock(&self, p: &P) -> bool {
        let old = p.load(&self.head_tail).await;
        HEAD.get(old) == TAIL.get(old) && p.compare_exchange(&self.head_tail, old, TAIL.add(old, 1)).await.is_ok()
    }
}

#[cfg(not(loom))]
impl ConstInit for TicketLock<Native> {
    const INIT: Self = TicketLock { head_tail: Native::word(0) };
}
