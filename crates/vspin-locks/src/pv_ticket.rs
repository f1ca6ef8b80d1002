//! Paravirtual ticket lock: Linux 3.19 / 4.0 `arch_spin_lock` with KVM's `kvm_lock_spinning` and
//! `kvm_unlock_kick` (`kernel-mechanisms.md` §1.1, §1.3, §1.4).
//!
//! The plain ticket lock plus "halt after spinning, kick at unlock". Tickets advance by
//! `TICKET_LOCK_INC = 2` so that bit 0 of `head` is free for `TICKET_SLOWPATH_FLAG` (the v3.19
//! "fix memory corruption on unlock" layout: the flag lives in `head`). A waiter spins
//! `SPIN_THRESHOLD = 1 << 15` PAUSEs; then it publishes `(lock, want)` in its per-CPU
//! `klock_waiting`, joins `waiting_cpus`, sets the slow-path flag, re-checks `head` (the "pickup"
//! race) and halts. Unlock adds 2 to `head`; if the flag was set it scans `waiting_cpus` and kicks
//! exactly the CPU waiting for the next ticket. A woken CPU (kicked, or woken by any interrupt
//! since it halts with interrupts enabled) spins another 2^15 PAUSEs before it may halt again.
//!
//! This cures lock-holder preemption at small scale but creates the sleepy-spinlock anomaly
//! (OTICKET, APSys'15): with many waiters, the ones far from the head exhaust their threshold,
//! halt, and each hand-off then waits for a kick, a host wake-up and a VM entry.
//!
//! ```text
//!   lock:   t = xadd(tail, 2).tail
//!           ┌──────────────▶ spin ≤ 2^15 PAUSEs for head≈t ──yes──▶ HELD (clear flag if last)
//!           │                        │ exhausted
//!           │                        ▼
//!           │     klock_waiting[me] = (lock, t); waiting_cpus |= me; head |= SLOWPATH
//!           │     head≈t ? ──yes──────────────────────────────────▶ (back to spin: sees it)
//!           │        │ no
//!           │        ▼
//!           └── HALTED ◀── kick(next ticket) at unlock, or any interrupt (spurious)
//!
//!   unlock: old = xadd(head, 2); if old.head & SLOWPATH: kick CPU whose want == old.head+2
//! ```
use crate::platform::{CpuId, CpuMask, PerCpuSlot, Platform, RawSpinLock, SpinOutcome, Until, WordAlloc};
use crate::ticket::{served_at_once, HEAD, TAIL};
#[cfg(not(vspin_loom))]
use crate::{mutex::ConstInit, native::Native};

/// `SPIN_THRESHOLD` in `arch/x86/include/asm/spinlock.h` (Linux 3.12 – 4.1; unchanged in 6.8, where
/// the PV qspinlock uses it).
pub const SPIN_THRESHOLD: u64 = 1 << 15;
/// `__TICKET_LOCK_INC` with `CONFIG_PARAVIRT_SPINLOCKS`.
pub const TICKET_LOCK_INC: u64 = 2;
/// `TICKET_SLOWPATH_FLAG`: bit 0 of `head` (v3.19+ layout).
pub const TICKET_SLOWPATH_FLAG: u64 = 1;

/// `__tickets_equal`: equal ignoring the slow-path flag.
fn tickets_equal(a: u64, b: u64) -> bool {
    (a ^ b) & !TICKET_SLOWPATH_FLAG & HEAD.mask() == 0
}

/// `__ticket_check_and_clear_slowpath`: once the last waiter got the lock, clear the flag so
/// that later unlocks skip the kick scan. `seen` is the word in which the waiter found its turn.
/// The kernel's `cmpxchg` covers `head_tail` alone; bits of the word outside `head` and `tail`
/// (ITICKET keeps its threshold there) are expected as `seen` had them, so they do not make the
/// exchange fail for good (a change to them since only leaves the flag for the next holder).
pub(crate) async fn check_and_clear_slowpath<P: Platform>(p: &P, word: &P::Word, seen: u64) {
    let head = HEAD.get(seen);
    if head & TICKET_SLOWPATH_FLAG != 0 {
        let new_head = head & !TICKET_SLOWPATH_FLAG;
        let tail = (new_head + TICKET_LOCK_INC) & HEAD.mask();
        let old = TAIL.with(seen, tail);
        let new = TAIL.with(HEAD.with(seen, new_head), tail);
        let _ = p.compare_exchange(word, old, new).await;
    }
}

/// `kvm_lock_spinning(lock, want)` (arch/x86/kernel/kvm.c, v3.19). The kernel halts with
/// `safe_halt()` (interrupts on) or, for a lock taken with interrupts off, `halt()`; which one is
/// the platform's: the simulator's halt follows the guest's interrupt state, which its workload
/// sets per lock (`docs/calibration.md`, "PV-lock halt is `safe_halt`, or `halt` with
/// interrupts off"), and a futex wait has no such distinction.
pub(crate) async fn lock_spinning<P: Platform>(p: &P, word: &P::Word, want: u64) {
    let me = p.cpu();
    let w_lock = p.per_cpu(me, PerCpuSlot::PvWaitLock);
    let w_want = p.per_cpu(me, PerCpuSlot::PvWaitWant);
    p.store(w_lock, 0).await;
    p.store(w_want, want).await;
    p.store(w_lock, p.addr(word)).await;
    let mask = p.cpumask(CpuMask::PvWaiting, me / 64);
    p.fetch_or(mask, 1 << (me % 64)).await;
    // __ticket_enter_slowpath: set_bit(0, &lock->tickets.head)
    p.fetch_or(word, TICKET_SLOWPATH_FLAG).await;
    let head = HEAD.get(p.load(word).await);
    if !tickets_equal(head, want) {
        p.halt().await;
    }
    p.fetch_and(mask, !(1 << (me % 64))).await;
    p.store(w_lock, 0).await;
}

/// `kvm_unlock_kick(lock, ticket)`: kick exactly the CPU waiting for `ticket`.
pub(crate) async fn unlock_kick<P: Platform>(p: &P, word: &P::Word, ticket: u64) {
    let lock = p.addr(word);
    for chunk in 0..p.nr_cpus().div_ceil(64) {
        let mut waiting = p.load(p.cpumask(CpuMask::PvWaiting, chunk)).await;
        while waiting != 0 {
            let cpu: CpuId = chunk * 64 + waiting.trailing_zeros();
            waiting &= waiting - 1;
            if p.load(p.per_cpu(cpu, PerCpuSlot::PvWaitLock)).await == lock
                && p.load(p.per_cpu(cpu, PerCpuSlot::PvWaitWant)).await == ticket
            {
                p.kick(cpu).await;
                return;
            }
        }
    }
}

/// `arch_spin_unlock` with the PV key on adds [`TICKET_LOCK_INC`] to `head` (written out in each
/// lock's `unlock_fast`, as the `xadd` of [`served_at_once`]); this is its verdict on the old
/// word: `Ok` unless a waiter may be halted (the slow-path flag was set), else the old `head`,
/// flag cleared, for [`kick_next`].
pub(crate) fn kick_needed(old: u64) -> Result<(), u64> {
    let old_head = HEAD.get(old);
    if old_head & TICKET_SLOWPATH_FLAG == 0 {
        Ok(())
    } else {
        Err(old_head & !TICKET_SLOWPATH_FLAG)
    }
}

/// The slow path of a flagged unlock from `head`: kick the CPUs waiting for the next `wake`
/// tickets (1 in Linux, 4 in OTICKET).
pub(crate) async fn kick_next<P: Platform>(p: &P, word: &P::Word, head: u64, wake: u64) {
    for k in 1..=wake {
        unlock_kick(p, word, head.wrapping_add(k * TICKET_LOCK_INC) & HEAD.mask()).await;
    }
}

/// `arch_spin_trylock` with the PV key on: draw a ticket only if it is served at once; the
/// slow-path flag of a free lock is stale (no waiter is left to kick) and is cleared on the way.
pub(crate) async fn try_take_ticket<P: Platform>(p: &P, word: &P::Word) -> bool {
    let old = p.load(word).await;
    if !tickets_equal(HEAD.get(old), TAIL.get(old)) {
        return false;
    }
    let new = TAIL.add(old, TICKET_LOCK_INC) & !TICKET_SLOWPATH_FLAG;
    p.compare_exchange(word, old, new).await.is_ok()
}

/// The spin condition `__tickets_equal(head, want)`.
pub(crate) fn head_reaches(want: u64) -> Until {
    Until::masked_eq(HEAD.mask() & !TICKET_SLOWPATH_FLAG, want)
}

pub struct PvTicketLock<P: Platform> {
    head_tail: P::Word,
}

debug_by_name!(PvTicketLock<P>);

// SAFETY: mutual exclusion is the protocol above, checked by the interleaving tests and the
// `loom` models.
unsafe impl<P: Platform> RawSpinLock<P> for PvTicketLock<P> {
    const NAME: &'static str = "pv-ticket";
    const FIFO: bool = true;
    type Contended = u64;
    type Waiters = u64;

    fn new(mem: &mut impl WordAlloc<P::Word>) -> Self {
        PvTicketLock { head_tail: mem.word(0) }
    }

    async unsafe fn lock_fast(&self, p: &P) -> Result<(), u64> {
        served_at_once(p.fetch_add_field(&self.head_tail, TAIL, TICKET_LOCK_INC).await)
    }

    async unsafe fn lock_slow(&self, p: &P, old: u64) {
        let want = TAIL.get(old);
        loop {
            let seen = p.spin_until(&self.head_tail, head_reaches(want), SPIN_THRESHOLD).await;
            if let SpinOutcome::Satisfied(v) = seen {
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
        kick_next(p, &self.head_tail, head, 1).await;
    }

    async fn try_lock(&self, p: &P) -> bool {
        try_take_ticket(p, &self.head_tail).await
    }
}

#[cfg(not(vspin_loom))]
// SAFETY: the free lock, as `new` builds it.
unsafe impl ConstInit for PvTicketLock<Native> {
    const INIT: Self = PvTicketLock { head_tail: Native::word(0) };
}

#[cfg(all(test, not(vspin_loom)))]
mod tests {
    use super::*;
    use crate::native::{block_on, Native};
    use std::sync::atomic::Ordering;

    /// The flag may be cleared only when no ticket is drawn behind the new holder's; the tail
    /// that proves it is `head + INC` inside the ticket field (it used to be read from bits
    /// 16.., i.e. 0, so a lock whose tail had just wrapped to 0 lost the flag with waiters
    /// halted: a lost wake-up, found by the native stress test).
    #[test]
    fn the_slow_path_flag_is_cleared_only_without_waiters_behind() {
        let p = Native::default();
        let head = 0xff_fffa | TICKET_SLOWPATH_FLAG;
        let waiters_behind = Native::word(TAIL.with(head, 0)); // tickets 0xff_fffc, 0xff_fffe drawn
        block_on(check_and_clear_slowpath(&p, &waiters_behind, head));
        assert_eq!(waiters_behind.load(Ordering::Relaxed), TAIL.with(head, 0), "flag kept");
        let last = Native::word(TAIL.with(head, 0xff_fffc));
        block_on(check_and_clear_slowpath(&p, &last, head));
        assert_eq!(last.load(Ordering::Relaxed), TAIL.with(0xff_fffa, 0xff_fffc), "flag cleared");
    }

    /// ITICKET keeps its threshold in bits 32..40. A flag that could not be cleared while they
    /// were set made every later unlock take the kick path (found by `validate-locks`: ITICKET
    /// ran 15% below its siblings at 2 threads once one waiter had halted).
    #[test]
    fn bits_outside_head_and_tail_do_not_keep_the_flag_set() {
        let p = Native::default();
        let other = 1 << 32;
        let head = 0xff_fffa | TICKET_SLOWPATH_FLAG;
        let seen = TAIL.with(head, 0xff_fffc) | other;
        let last = Native::word(seen);
        block_on(check_and_clear_slowpath(&p, &last, seen));
        assert_eq!(last.load(Ordering::Relaxed), TAIL.with(0xff_fffa, 0xff_fffc) | other, "flag cleared, other bits kept");
    }

    /// A newcomer whose ticket equals the holder's is served at once: with the kernel's 16-bit
    /// tickets, 32,768 PV waiters (65,536 plain ones) behind a holder let the next thread in
    /// beside it (found by a review: sleeping waiters cost nothing, so that many threads can
    /// queue on one lock). Each `lock_fast` here draws a ticket and does not wait for it.
    #[test]
    fn more_waiters_than_sixteen_bit_tickets_hold_do_not_wrap_onto_the_holder() {
        let p = Native::default();
        let pv = PvTicketLock::<Native>::INIT;
        let plain = crate::ticket::TicketLock::<Native>::INIT;
        // SAFETY (of each `lock_fast` below): the abandoned tickets of these two locks, which
        // nothing else uses, are what the test counts; fewer than 2^23 of them.
        assert!(block_on(unsafe { pv.lock_fast(&p) }).is_ok() && block_on(unsafe { plain.lock_fast(&p) }).is_ok());
        for waiter in 1..=(1 << 16) + 2 {
            assert!(block_on(unsafe { pv.lock_fast(&p) }).is_err(), "PV waiter {waiter} served while the lock is held");
            assert!(block_on(unsafe { plain.lock_fast(&p) }).is_err(), "waiter {waiter} served while the lock is held");
        }
    }
}
