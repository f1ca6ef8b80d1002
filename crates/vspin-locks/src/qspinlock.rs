//! Queued spinlock (qspinlock): the native x86 Linux spinlock since v4.2, as in Linux 6.8
//! `kernel/locking/qspinlock.c` (`queued_spin_lock_slowpath`) with the x86 and generic helpers of
//! `include/asm-generic/qspinlock.h` and `arch/x86/include/asm/qspinlock.h`
//! (`kernel-mechanisms.md` §2.1, §2.2).
//!
//! A 32-bit lock word in three parts: the `locked` byte, the `pending` byte and the `tail`, the
//! code of the last CPU in an MCS queue of per-CPU nodes (layout for `NR_CPUS < 16K`,
//! `include/asm-generic/qspinlock_types.h`). The first waiter does not queue: it sets `pending`
//! and spins on `locked` in the lock word itself (the "pending-bit fast path"); further waiters
//! queue. A queued CPU links its node behind the old tail and spins on its *own* node's `locked`
//! (its own cache line, so a hand-off invalidates one spinner, not all); the queue head spins on
//! the lock word until both `locked` and `pending` are clear, takes the lock, and passes
//! head-ship to its successor by setting the successor's node `locked`.
//!
//! ```text
//!   val = [ tail: cpu+1:14 idx:2 | pending:8 | locked:8 ]        (tail,pending,locked) below
//!
//!   0,0,0 ──cmpxchg──▶ 0,0,1 HELD (fast path)
//!   0,0,1 ──fetch_or(pending)──▶ 0,1,1 PENDING: spin until locked==0 ──▶ 0,0,1 (add −pending+locked)
//!   0,1,0 (hand-over in flight): spin ≤ _Q_PENDING_LOOPS for it to finish, then decide again
//!   t,*,* or *,1,* seen ──▶ QUEUE:
//!       node.locked = 0, node.next = NULL; trylock once more
//!       old = xchg_tail(me) ── old tail? ──yes──▶ prev.next = me; spin until node.locked
//!                                   │ no                                   │
//!                                   ▼                                      ▼
//!       HEAD: spin until locked==0 && pending==0
//!             tail == me ? cmpxchg(val → 0,0,1) : set_locked; spin until node.next; next.locked = 1
//!   unlock: locked = 0  (a byte store: pending and tail are untouched)
//! ```
//!
//! **Not FIFO by arrival.** Queued waiters acquire in queue order, but a CPU that arrives while
//! no one is queued or pending takes the pending bit (or a free lock) ahead of earlier arrivals
//! still between their first read of the word and their `xchg_tail`, and two CPUs waiting in
//! the `_Q_PENDING_LOOPS` window race for `pending`. So [`RawSpinLock::FIFO`] is false: the
//! simulator's monitor measures order by arrival at `lock()`.
//!
//! **One node per CPU.** The kernel keeps `MAX_NODES = 4` nodes per CPU (task, softirq, hardirq,
//! NMI), indexed by the tail's `idx`, because an interrupt may take a spinlock while the CPU
//! already waits in the queue for another. Guests here take spinlocks only from their workload
//! thread, never from an interrupt handler, so `idx` is always 0 and the node lives in the
//! per-CPU slots [`PerCpuSlot::QNext`] and [`PerCpuSlot::QLocked`].
//!
//! **No node.** A CPU id at or above [`Platform::nr_cpus`] has no per-CPU node of its own: the
//! native platform hands such an id to threads beyond its `MAX_CPUS` (see
//! [`native`](crate::native)). Queuing it would share one node among all of them and put an
//! unencodable CPU in the tail, so it does what the kernel does when all `MAX_NODES` nodes of a
//! CPU are in use (`idx >= MAX_NODES`, `kernel-mechanisms.md` §2.2): spin on
//! `queued_spin_trylock` and never queue.
//!
//! **Sub-word atomics.** x86 stores and exchanges single bytes and half-words of the lock word;
//! the platform has whole-word operations only. Each helper below states the word operation it
//! uses and why it has the same effect on every value the lock word can hold there; where the
//! kernel also has a generic (`_Q_PENDING_BITS != 8`) version made of word atomics, that version
//! is used and cited.
use crate::platform::{CpuId, Field, PerCpuSlot, Platform, RawSpinLock, SpinOutcome, Until, WordAlloc};
use std::convert::Infallible;
#[cfg(not(vspin_loom))]
use crate::{mutex::ConstInit, native::Native};

/// `_Q_LOCKED_MASK`: the `locked` byte (`_Q_LOCKED_OFFSET = 0`, `_Q_LOCKED_BITS = 8`).
pub(crate) const LOCKED: Field = Field::new(0, 8);
/// `_Q_PENDING_MASK`: the `pending` byte (`_Q_PENDING_OFFSET = 8`, `_Q_PENDING_BITS = 8`).
pub(crate) const PENDING: Field = Field::new(8, 8);
/// `_Q_LOCKED_PENDING_MASK`: `locked` and `pending` together (`locked_pending`).
pub(crate) const LOCKED_PENDING: Field = Field::new(0, 16);
/// `_Q_TAIL_MASK`: `idx` (2 bits) then `cpu + 1` (14 bits) from `_Q_TAIL_OFFSET = 16`.
pub(crate) const TAIL: Field = Field::new(16, 16);
/// `_Q_TAIL_CPU_OFFSET`.
const TAIL_CPU_OFFSET: u32 = 18;
/// The 32-bit `atomic_t val` as a whole.
const VAL: Field = Field::new(0, 32);
/// `_Q_LOCKED_VAL`.
pub(crate) const LOCKED_VAL: u64 = 1;
/// `_Q_PENDING_VAL`.
pub(crate) const PENDING_VAL: u64 = 1 << PENDING.shift;
/// `_Q_PENDING_LOOPS` for x86 (`arch/x86/include/asm/qspinlock.h`): how long a newcomer waits
/// for a pending → locked hand-over in flight before it queues.
const PENDING_LOOPS: u64 = 1 << 9;

/// A spin's last observed value, whether or not the condition held (`atomic_cond_read` with a
/// loop bound returns the value it stopped at).
pub(crate) fn last_value(s: SpinOutcome) -> u64 {
    match s {
        SpinOutcome::Satisfied(v) | SpinOutcome::Exhausted(v) => v,
    }
}

/// `encode_tail(cpu, idx = 0)`, already shifted into place.
pub(crate) fn encode_tail(cpu: CpuId) -> u64 {
    (cpu as u64 + 1) << TAIL_CPU_OFFSET
}

/// `decode_tail`: the CPU whose node a non-zero tail names.
fn decode_tail(val: u64) -> CpuId {
    ((val >> TAIL_CPU_OFFSET) as u32 & ((1 << (TAIL.bits - 2)) - 1)) - 1
}

/// `set_locked`: `WRITE_ONCE(lock->locked, _Q_LOCKED_VAL)`. When the queue head calls it,
/// `locked` is 0 (native: it waited for that, and no one else sets it while a tail exists) or
/// already 1 (PV: `pv_wait_head_or_lock` took the lock), so OR-ing 1 in is the byte store.
pub(crate) async fn set_locked<P: Platform>(p: &P, w: &P::Word) {
    let old = p.fetch_or(w, LOCKED_VAL).await;
    debug_assert!(LOCKED.get(old) <= LOCKED_VAL, "set_locked over locked = {}", LOCKED.get(old));
}

/// `clear_pending`: `WRITE_ONCE(lock->pending, 0)`, a byte store of zero, i.e. an AND.
pub(crate) async fn clear_pending<P: Platform>(p: &P, w: &P::Word) {
    p.fetch_and(w, !(PENDING.mask() << PENDING.shift)).await;
}

/// `xchg_tail`: publish `tail` as the queue's tail, keeping `locked` and `pending`; returns the
/// old word. The generic version (`_Q_PENDING_BITS != 8`, a `try_cmpxchg` loop on `val`); x86
/// exchanges the tail half-word, with the same effect.
pub(crate) async fn xchg_tail<P: Platform>(p: &P, w: &P::Word, tail: u64) -> u64 {
    let mut old = p.load(w).await;
    loop {
        let new = TAIL.with(old, tail >> TAIL.shift);
        match p.compare_exchange(w, old, new).await {
            Ok(v) => return v,
            Err(v) => old = v,
        }
    }
}

/// Whether this CPU has a queue node (see "No node" in the module docs).
pub(crate) fn has_node<P: Platform>(p: &P) -> bool {
    p.cpu() < p.nr_cpus()
}

/// For a CPU without a node: `while (!queued_spin_trylock(lock)) cpu_relax();`. The trylock
/// fails on any non-zero word, so only a zero word is worth a compare-exchange.
pub(crate) async fn spin_on_trylock<P: Platform>(p: &P, w: &P::Word) {
    loop {
        p.spin_until(w, Until::eq(0), u64::MAX).await;
        if p.compare_exchange(w, 0, LOCKED_VAL).await.is_ok() {
            return;
        }
    }
}

/// `node->locked = 0; node->next = NULL` for this CPU's node.
pub(crate) async fn init_node<P: Platform>(p: &P) {
    let me = p.cpu();
    p.store(p.per_cpu(me, PerCpuSlot::QLocked), 0).await;
    p.store(p.per_cpu(me, PerCpuSlot::QNext), 0).await;
}

/// `WRITE_ONCE(prev->next, node)`: link this CPU's node behind the old tail's; returns `prev`.
pub(crate) async fn link_behind<P: Platform>(p: &P, old: u64) -> CpuId {
    let prev = decode_tail(old);
    p.store(p.per_cpu(prev, PerCpuSlot::QNext), p.cpu() as u64 + 1).await;
    prev
}

/// `next = READ_ONCE(node->next)` once head-ship arrived: the successor, if it linked already.
pub(crate) async fn successor<P: Platform>(p: &P) -> Option<CpuId> {
    let next = p.load(p.per_cpu(p.cpu(), PerCpuSlot::QNext)).await;
    next.checked_sub(1).map(|c| c as CpuId)
}

/// The queue head owns the lock word's `locked`/`pending` state as observed in `val` (both
/// clear, or the lock already taken by PV code): claim the lock and pass MCS head-ship on.
/// Returns the successor made queue head, if any.
///
/// `qspinlock.c` from `locked:` to `release:`: if this CPU is the tail, one `cmpxchg` takes the
/// lock and empties the queue (`n,0,0 → 0,0,1`); otherwise `set_locked`, wait for the successor
/// to link (`smp_cond_load_relaxed(&node->next, VAL)`) and `arch_mcs_spin_unlock_contended`.
pub(crate) async fn claim_and_pass<P: Platform>(p: &P, w: &P::Word, val: u64, next: Option<CpuId>) -> Option<CpuId> {
    if TAIL.get(val) << TAIL.shift == encode_tail(p.cpu()) && p.compare_exchange(w, val, LOCKED_VAL).await.is_ok() {
        return None;
    }
    set_locked(p, w).await;
    let next = match next {
        Some(n) => n,
        None => {
            let linked = p.spin_until(p.per_cpu(p.cpu(), PerCpuSlot::QNext), Until::eq(0).not(), u64::MAX).await;
            last_value(linked) as CpuId - 1
        }
    };
    p.store(p.per_cpu(next, PerCpuSlot::QLocked), 1).await;
    Some(next)
}

/// `queued_spin_trylock`: take the lock only if the whole word is 0 (no owner, no one pending
/// or queued).
pub(crate) async fn queued_spin_trylock<P: Platform>(p: &P, w: &P::Word) -> bool {
    p.load(w).await == 0 && p.compare_exchange(w, 0, LOCKED_VAL).await.is_ok()
}

pub struct QueuedSpinLock<P: Platform> {
    val: P::Word,
}

debug_by_name!(QueuedSpinLock<P>);

impl<P: Platform> QueuedSpinLock<P> {
    /// The pending-bit fast path of `queued_spin_lock_slowpath`, from the word `val` that the
    /// failed fast-path `cmpxchg` saw. True if this CPU took the lock through `pending`; false if
    /// it must queue.
    async fn pending(&self, p: &P, mut val: u64) -> bool {
        // 0,1,0 -> 0,0,1: wait (bounded) for a pending owner that is taking the lock.
        if val == PENDING_VAL {
            val = last_value(p.spin_until(&self.val, Until::eq(PENDING_VAL).not(), PENDING_LOOPS).await);
        }
        if val & !LOCKED.mask() != 0 {
            return false;
        }
        // `queued_fetch_set_pending_acquire` (x86 `btsl` then a read: one fetch_or here).
        let val = p.fetch_or(&self.val, PENDING_VAL).await;
        if val & !LOCKED.mask() != 0 {
            // A concurrent locker: undo our pending bit if we set it, and queue.
            if PENDING.get(val) == 0 {
                clear_pending(p, &self.val).await;
            }
            return false;
        }
        if LOCKED.get(val) != 0 {
            p.spin_until(&self.val, Until::field_eq(LOCKED, 0), u64::MAX).await;
        }
        // `clear_pending_set_locked` (0,1,0 -> 0,0,1): the generic `atomic_add(-_Q_PENDING_VAL +
        // _Q_LOCKED_VAL)`; x86 stores the `locked_pending` half-word, with the same effect.
        p.fetch_add_field(&self.val, VAL, LOCKED_VAL.wrapping_sub(PENDING_VAL)).await;
        true
    }

    /// The MCS queue of `queued_spin_lock_slowpath` (from `queue:`).
    async fn queue(&self, p: &P) {
        if !has_node(p) {
            return spin_on_trylock(p, &self.val).await;
        }
        init_node(p).await;
        // "We touched a (possibly) cold cacheline in the per-cpu queue node; attempt the
        // trylock once more in the hope someone let go while we weren't watching."
        if queued_spin_trylock(p, &self.val).await {
            return;
        }
        let old = xchg_tail(p, &self.val, encode_tail(p.cpu())).await;
        let mut next = None;
        if TAIL.get(old) != 0 {
            link_behind(p, old).await;
            // `arch_mcs_spin_lock_contended`: spin on our own node until head-ship arrives.
            p.spin_until(p.per_cpu(p.cpu(), PerCpuSlot::QLocked), Until::eq(0).not(), u64::MAX).await;
            next = successor(p).await;
        }
        // `atomic_cond_read_acquire(&lock->val, !(VAL & _Q_LOCKED_PENDING_MASK))`
        let free = Until::field_eq(LOCKED_PENDING, 0);
        let val = last_value(p.spin_until(&self.val, free, u64::MAX).await);
        claim_and_pass(p, &self.val, val, next).await;
    }
}

// SAFETY: mutual exclusion is the protocol above, checked by the interleaving tests and the
// `loom` models.
unsafe impl<P: Platform> RawSpinLock<P> for QueuedSpinLock<P> {
    const NAME: &'static str = "qspinlock";
    const FIFO: bool = false;
    type Contended = u64;
    type Waiters = Infallible;

    fn new(mem: &mut impl WordAlloc<P::Word>) -> Self {
        QueuedSpinLock { val: mem.word(0) }
    }

    /// `queued_spin_lock`: `cmpxchg(val, 0 → _Q_LOCKED_VAL)`; the word it saw if that failed.
    async unsafe fn lock_fast(&self, p: &P) -> Result<(), u64> {
        p.compare_exchange(&self.val, 0, LOCKED_VAL).await.map(drop)
    }

    /// `queued_spin_lock_slowpath(lock, val)`.
    async unsafe fn lock_slow(&self, p: &P, val: u64) {
        if !self.pending(p, val).await {
            self.queue(p).await;
        }
    }

    /// `queued_spin_unlock`: `smp_store_release(&lock->locked, 0)`, a byte store of zero.
    async unsafe fn unlock_fast(&self, p: &P) -> Result<(), Infallible> {
        p.fetch_and(&self.val, !LOCKED.mask()).await;
        Ok(())
    }

    async unsafe fn unlock_slow(&self, _: &P, waiters: Infallible) {
        match waiters {}
    }

    /// `queued_spin_trylock`.
    async fn try_lock(&self, p: &P) -> bool {
        queued_spin_trylock(p, &self.val).await
    }
}

#[cfg(not(vspin_loom))]
// SAFETY: the free lock, as `new` builds it.
unsafe impl ConstInit for QueuedSpinLock<Native> {
    const INIT: Self = QueuedSpinLock { val: Native::word(0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_name_cpus_and_leave_locked_and_pending_alone() {
        for cpu in [0, 1, 255, (1 << 14) - 2] {
            let t = encode_tail(cpu);
            assert_eq!(t & LOCKED_PENDING.mask(), 0);
            assert_eq!(t >> 32, 0, "the tail fits the 32-bit lock word");
            assert_eq!(decode_tail(t | PENDING_VAL | LOCKED_VAL), cpu);
        }
    }

    #[test]
    fn clear_pending_set_locked_is_one_add() {
        let w = TAIL.with(PENDING_VAL, 7);
        assert_eq!(VAL.add(w, LOCKED_VAL.wrapping_sub(PENDING_VAL)), TAIL.with(LOCKED_VAL, 7));
    }
}
