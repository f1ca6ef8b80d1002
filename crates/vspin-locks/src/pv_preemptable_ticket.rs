//! Paravirtual preemptable ticket lock (Ouyang & Lange, VEE'13).
//!
//! The [`preemptable_ticket`](crate::preemptable_ticket) lock plus "sleep when waiting too long
//! after timing out; wake all sleeping waiters at unlock". After its turn comes or it times out,
//! a waiter competes for `locked` for at most `SPIN_THRESHOLD` PAUSEs of spinning; then it
//! publishes the lock it waits for in its per-CPU slot, joins the machine's waiting mask, sets the
//! lock's slow-path bit, re-checks `locked` (the pickup race) and halts. Unlock releases `locked`
//! and clears the slow-path bit in one atomic; if the bit was set it kicks every CPU waiting for
//! this lock. Woken waiters compete again; none is lost, because a waiter that sets the bit after
//! the unlock cleared it sees `locked == 0` in its pickup check and does not halt.
//!
//! ```text
//!   lock:   queue (as preemptable ticket) ─▶ COMPETE ─won─▶ HELD
//!                                               │ 2^15 PAUSEs without winning
//!                                               ▼
//!           wait slot = lock; waiting_cpus |= me; word |= SLOWPATH; locked ? HALT : retry
//!           HALTED ──kick (unlock) or interrupt──▶ COMPETE
//!   unlock: head += 1; old = fetch_and(word, ¬(LOCKED|SLOWPATH));
//!           if old & SLOWPATH: kick every CPU whose wait slot is this lock
//! ```
use crate::platform::{CpuId, CpuMask, PerCpuSlot, Platform, RawSpinLock, SpinOutcome, Until, WordAlloc};
use crate::preemptable_ticket::{Layout, TIMEOUT_UNIT};
use crate::pv_ticket::SPIN_THRESHOLD;
#[cfg(not(loom))]
use crate::{mutex::ConstInit, native::Native};

pub struct PvPreemptableTicketLock<P: Platform, const BITS: u32 = 16> {
    word: P::Word,
    timeout_unit: u64,
}

impl<P: Platform, const BITS: u32> PvPreemptableTicketLock<P, BITS> {
    /// Use `t` PAUSE iterations of timeout per queue position instead of [`TIMEOUT_UNIT`].
    pub fn with_timeout_unit(mut self, t: u64) -> Self {
        self.timeout_unit = t;
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

impl<P: Platform, const BITS: u32> RawSpinLock<P> for PvPreemptableTicketLock<P, BITS> {
    const NAME: &'static str = "pv-preemptable-ticket";
    const FIFO: bool = false;
    type Contended = u64;
    type Waiters = ();

    fn new(mem: &mut impl WordAlloc<P::Word>) -> Self {
        PvPreemptableTicketLock { word: mem.word(0), timeout_unit: TIMEOUT_UNIT }
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
            let free = Until::masked_eq(Layout::<BITS>::LOCKED, 0);
            if let SpinOutcome::Exhausted(_) = p.spin_until(&self.word, free, SPIN_THRESHOLD).await {
                self.wait(p).await;
            }
            if Layout::<BITS>::try_take(p, &self.word).await {
                return;
            }
        }
    }

    async fn unlock_fast(&self, p: &P) -> Result<(), ()> {
        p.fetch_add_field(&self.word, Layout::<BITS>::HEAD, 1).await;
        let old = p.fetch_and(&self.word, !(Layout::<BITS>::LOCKED | Layout::<BITS>::SLOWPATH)).await;
        if old & Layout::<BITS>::SLOWPATH == 0 {
            Ok(())
        } else {
            Err(())
        }
    }

    async fn unlock_slow(&self, p: &P, (): ()) {
        self.kick_waiters(p).await;
    }

    async fn try_lock(&self, p: &P) -> bool {
        Layout::<BITS>::try_lock(p, &self.word).await
    }
}

#[cfg(not(loom))]
impl<const BITS: u32> ConstInit for PvPreemptableTicketLock<Native, BITS> {
    const INIT: Self = PvPreemptableTicketLock { word: Native::word(0), timeout_unit: TIMEOUT_UNIT };
}
