//! Paravirtual preemptable ticket lock (Ouyang & Lange, VEE'13).
//!
//! The [`preemptable_ticket`](crate::preemptable_ticket) lock plus "sleep when waiting too long
//! after timing out; wake all sleeping waiters at unlock". After its turn comes or it times out,
//! a waiter competes for `locked` with the plain lock's loop (an `xchg`, then a PAUSE); after
//! `SPIN_THRESHOLD` failed attempts (the PV ticket lock's 2^15: the paper gives no count and no
//! code of this lock is published), it publishes the lock it waits for in its per-CPU slot, joins the machine's waiting
//! mask, sets the lock's slow-path bit, re-checks `locked` (the pickup race) and halts. An
//! uncontended lock and unlock are the plain lock's two compare-exchanges from and back to rest
//! at 0; the unlock's slow path (taken whenever the word is not that of a lone holder, so always
//! when the slow-path bit is set) advances `head` and releases `locked` with one add; if the
//! slow-path bit was set, it clears the bit, then kicks every CPU waiting for this lock. Woken waiters compete again. None
//! is lost: a waiter joins the waiting mask before it sets the bit, so one whose bit the unlock
//! cleared is in the mask when the unlock scans it (at worst woken spuriously, if a new holder
//! came in between); a waiter that sets the bit after the release either sees `locked == 0` in
//! its pickup check and does not halt, or sees a new holder, whose unlock will find the bit.
//!
//! ```text
//!   lock:   cas(0 → tail 1 | locked) ──ok──▶ HELD             (as the preemptable ticket lock)
//!           queue (as preemptable ticket) ─▶ COMPETE ─won─▶ HELD
//!                                               │ 2^15 failed attempts
//!                                               ▼
//!           wait slot = lock; waiting_cpus |= me; word |= SLOWPATH; locked ? HALT : retry
//!           HALTED ──kick (unlock) or interrupt──▶ COMPETE
//!   unlock: word == tail 1 | locked && cas(it → 0) ──ok──▶ done
//!           old = xadd(word, 1 − LOCKED)       (head += 1 and LOCKED cleared: released)
//!           if old & SLOWPATH: clear SLOWPATH; kick every CPU whose wait slot is this lock
//!           (and if head wrapped, clear its carry; if at rest, back to 0: the plain lock's steps)
//! ```
use crate::platform::{CpuId, CpuMask, PerCpuSlot, Platform, RawSpinLock, WordAlloc};
use crate::preemptable_ticket::{Layout, TIMEOUT_UNIT};
use crate::pv_ticket::SPIN_THRESHOLD;
#[cfg(not(vspin_loom))]
use crate::{mutex::ConstInit, native::Native};

/// The paravirtual preemptable ticket lock (module docs) with `BITS`-bit tickets, 2 to 20, as
/// [`PreemptableTicketLock`](crate::preemptable_ticket::PreemptableTicketLock).
pub struct PvPreemptableTicketLock<P: Platform, const BITS: u32 = 16> {
    word: P::Word,
    timeout_unit: u64,
    halt_after: u64,
}

debug_by_name!(PvPreemptableTicketLock<P, const BITS: u32>);

impl<P: Platform, const BITS: u32> PvPreemptableTicketLock<P, BITS> {
    /// Use `t` PAUSE iterations of timeout per queue position instead of [`TIMEOUT_UNIT`].
    pub const fn with_timeout_unit(mut self, t: u64) -> Self {
        self.timeout_unit = t;
        self
    }

    /// Halt after `attempts` failed attempts to take `locked` instead of `SPIN_THRESHOLD`
    /// (2^15). The paper gives no count; each attempt is a locked write, so the same count
    /// spins longer than the PV ticket lock's reads do (`docs/mechanisms/pticket.md`).
    pub const fn with_halt_after(mut self, attempts: u64) -> Self {
        self.halt_after = attempts;
        self
    }

    /// Halt until an unlock kicks us, unless the lock became free meanwhile.
    async fn wait(&self, p: &P) {
        let me = p.cpu();
        let slot = p.per_cpu(me, PerCpuSlot::PvWaitLock);
        let mask = p.cpumask(CpuMask::PvWaiting, me / 64);
        p.store(slot, p.addr(&self.word)).await;
        p.fetch_or(mask, 1 << (me % 64)).await;
        p.fetch_or(&self.word, Layout::<BITS>::SLOWPATH).await;
        if p.load(&self.word).await & Layout::<BITS>::LOCKED != 0 {
            p.halt().await;
        }
        p.fetch_and(mask, !(1 << (me % 64))).await;
        p.store(slot, 0).await;
    }

    /// Kick every CPU halted (or about to halt) for this lock.
    async fn kick_waiters(&self, p: &P) {
        let lock = p.addr(&self.word);
        for chunk in 0..p.nr_cpus().div_ceil(64) {
            let mut waiting = p.load(p.cpumask(CpuMask::PvWaiting, chunk)).await;
            while waiting != 0 {
                let cpu: CpuId = chunk * 64 + waiting.trailing_zeros();
                waiting &= waiting - 1;
                if p.load(p.per_cpu(cpu, PerCpuSlot::PvWaitLock)).await == lock {
                    p.kick(cpu).await;
                }
            }
        }
    }
}

// SAFETY: mutual exclusion is the protocol above, checked by the interleaving tests and the
// `loom` models.
unsafe impl<P: Platform, const BITS: u32> RawSpinLock<P> for PvPreemptableTicketLock<P, BITS> {
    const NAME: &'static str = "pv-preemptable-ticket";
    const FIFO: bool = false;
    /// The fast path found the lock not at 0.
    type Contended = ();
    /// The lock was not held alone (there may be halted waiters to kick).
    type Waiters = ();

    fn new(mem: &mut impl WordAlloc<P::Word>) -> Self {
        let () = Layout::<BITS>::FITS;
        PvPreemptableTicketLock { word: mem.word(0), timeout_unit: TIMEOUT_UNIT, halt_after: SPIN_THRESHOLD }
    }

    async unsafe fn lock_fast(&self, p: &P) -> Result<(), ()> {
        p.compare_exchange(&self.word, 0, Layout::<BITS>::HELD_ALONE).await.map(drop).map_err(drop)
    }

    async unsafe fn lock_slow(&self, p: &P, (): ()) {
        Layout::<BITS>::queue(p, &self.word, self.timeout_unit).await;
        while !Layout::<BITS>::compete(p, &self.word, self.halt_after).await {
            self.wait(p).await;
        }
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
        // Clear the slow-path bit only if this unlock saw it, and then kick everyone in the mask
        // (including a waiter whose later setting of the bit this clears). A bit set after the
        // add and not seen here is the next holder's to act on.
        let halted = old & Layout::<BITS>::SLOWPATH;
        let carry = if Layout::<BITS>::wrapped(old) { Layout::<BITS>::CARRY } else { 0 };
        if halted | carry != 0 {
            p.fetch_and(&self.word, !(halted | carry)).await;
        }
        if halted != 0 {
            self.kick_waiters(p).await;
        }
        let after = old.wrapping_add(Layout::<BITS>::UNLOCK) & !(halted | carry);
        Layout::<BITS>::rest_at_zero(p, &self.word, after).await;
    }

    async fn try_lock(&self, p: &P) -> bool {
        Layout::<BITS>::try_lock(p, &self.word).await
    }
}

#[cfg(not(vspin_loom))]
// SAFETY: the free lock, as `new` builds it.
unsafe impl<const BITS: u32> ConstInit for PvPreemptableTicketLock<Native, BITS> {
    const INIT: Self = {
        let () = Layout::<BITS>::FITS;
        PvPreemptableTicketLock { word: Native::word(0), timeout_unit: TIMEOUT_UNIT, halt_after: SPIN_THRESHOLD }
    };
}
