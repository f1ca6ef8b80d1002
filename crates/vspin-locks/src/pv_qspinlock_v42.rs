//! Paravirtual queued spinlock (pvqspinlock) as first merged, in Linux 4.2:
//! `kernel/locking/qspinlock.c` (`__pv_queued_spin_lock_slowpath`) with
//! `kernel/locking/qspinlock_paravirt.h` (`pv_wait_node`, `pv_kick_node`, `pv_wait_head`,
//! `__pv_queued_spin_unlock`, `pv_hash` / `pv_unhash`), `queued_spin_trylock` of
//! `include/asm-generic/qspinlock.h`, `SPIN_THRESHOLD` of `arch/x86/include/asm/spinlock.h` and
//! KVM's `kvm_wait` / `kvm_kick_cpu` of `arch/x86/kernel/kvm.c`, as read in a Linux 4.2.8 stable
//! tree. This is Waiman Long's April 2015 series that the OTICKET paper (APSys'15) cites as \[21\]
//! and measures in Figure 9. `kernel-mechanisms.md` §2 quotes the 6.8 code of
//! [`pv_qspinlock`](crate::pv_qspinlock); this file is the version before the series that
//! followed (the first, July 2015, is the paper's \[20\]; merged from 4.3 on) changed the
//! protocol in three ways that matter under preemption:
//!
//! - **No lock stealing.** The only trylock is `queued_spin_trylock`: take the lock if the whole
//!   word is 0. While anyone is queued the tail is set, so no CPU can take the lock but the queue
//!   head: every CPU that queued is served in queue order, and a halted or preempted queue head
//!   stalls all of them. (6.8 lets newcomers take a free lock past a head that is not spinning.)
//! - **A halted successor is kicked at hand-off.** A new lock owner that passes head-ship to its
//!   successor swaps the successor's state to `vcpu_running` and kicks it if it was
//!   `vcpu_halted` (`pv_kick_node`); the successor then has to wake up (kick hypercall, host
//!   wake-up, VM entry) before it can even spin for the lock. (6.8 instead hashes the halted
//!   successor on its behalf, so that only the unlock kicks.)
//! - **Queue nodes spin a fixed `SPIN_THRESHOLD`.** There is no early halt behind a halted
//!   predecessor (6.8's `PV_PREV_CHECK_MASK`), and no `pending` bit is set by the queue head
//!   (6.8 sets it to stop stealers; here there are none).
//!
//! What stays: a contended CPU queues at once (no pending-bit path when `pv_enabled()`); the queue
//! head spins `SPIN_THRESHOLD` times for `locked == 0`, then hashes `lock → node` once, turns
//! `locked` from 1 to `_Q_SLOW_VAL` and halts while it reads `_Q_SLOW_VAL`; an unlock that finds
//! `_Q_SLOW_VAL` unhashes the node, releases the lock and kicks the head.
//!
//! So once waits in the queue outlast `SPIN_THRESHOLD` PAUSEs, queue nodes halt, and every
//! hand-off along the queue waits for one wake-up: the sleepy spinlock anomaly of the PV ticket
//! lock ([`pv_ticket`](crate::pv_ticket)), for the same reason (a strict order plus halting).
//!
//! ```text
//!  newcomer:   cmpxchg(val, 0 → 1) ─fail─▶ init node (running) ─▶ val == 0 ? cmpxchg(0 → 1)
//!              ─fail─▶ xchg_tail ─▶ (queue node, if there was a tail | queue head)
//!  queue node: spin 2^15 on node.locked ──▶ xchg(state, halted); locked ? : HLT while halted
//!                ▲                                                            │ kick / interrupt
//!                └──────────────────── state = running ◀──────────────────────┘
//!  queue head: spin 2^15 for locked == 0 ──▶ state = halted; once: hash(lock → me),
//!                ▲                           cmpxchg(locked, 1 → SLOW) saw 0 ? unhash, take it
//!                │                           HLT while locked == SLOW
//!                └── spin again ◀── kick (unlock) / interrupt
//!              locked == 0 ─▶ claim (tail == me ? cmpxchg(val → 1) : set_locked)
//!              ─▶ next.locked = 1; xchg(next.state, running) == halted ? kick(next)
//!  unlock:     cmpxchg(locked, 1 → 0); saw SLOW: unhash → cpu; locked = 0;
//!              state(cpu) == halted ? kick(cpu)
//! ```
//!
//! **No lost wake-up.** `pv_wait(ptr, val)` is `kvm_wait`: with interrupts off, halt only if
//! `*ptr == val`. Here it is a load then [`Platform::halt`], and a kick between the two is not
//! lost because the halt returns at once when the target's `pv_unhalted` is set (KVM's
//! `kvm_arch_vcpu_runnable`). Every waker changes `*ptr` before it kicks:
//! - a queue node halts on `state == vcpu_halted`, which it wrote (with a full barrier, an
//!   `xchg`) before re-reading `node.locked`; its predecessor writes `node.locked` and then
//!   swaps `state` to `vcpu_running`. Either the node sees `locked` and does not halt, or the
//!   swap sees `vcpu_halted` and kicks; a node that has not halted yet then reads `running` and
//!   does not halt;
//! - the queue head halts on `locked == _Q_SLOW_VAL`, set by its own `cmpxchg` after it hashed
//!   itself and after it wrote `vcpu_halted`; the unlocker that sees `_Q_SLOW_VAL` finds that
//!   entry (one per lock: only the head hashes, once, and the owner unhashes before it
//!   releases), clears `locked`, reads `vcpu_halted` and kicks. A late `pv_kick_node` of the
//!   head's predecessor may set the head's state back to `vcpu_running`, but it kicks the head
//!   as it does, and the head writes `vcpu_halted` again before it halts again.
//!
//! A kick for a node that has already moved on (the kernel's comment: "kicking people for no
//! reason is harmless") is a spurious wake-up: a woken node or head that finds no head-ship or a
//! held lock spins `SPIN_THRESHOLD` again before halting.
//!
//! **Modelled as in the kernel**, with the deviations of [`pv_qspinlock`](crate::pv_qspinlock):
//! one MCS node per CPU (see [`qspinlock`](crate::qspinlock)), hash entries naming CPUs, and the
//! hash table's `4 × nr_cpus` entries without the kernel's one-page minimum. A CPU without a node
//! (the native platform's overflow id) spins on `queued_spin_trylock` as later kernels do past
//! `MAX_NODES` (`kernel-mechanisms.md` §2.2); 4.2 itself had no such case.
use crate::platform::{CpuId, PerCpuSlot, Platform, RawSpinLock, SpinOutcome, Until, WordAlloc};
use crate::pv_qspinlock::{cmpxchg_field, pv_wait, LockHash, SLOW_VAL, VCPU_HALTED, VCPU_RUNNING};
use crate::pv_ticket::SPIN_THRESHOLD;
use crate::qspinlock::{
    claim_and_pass, encode_tail, has_node, init_node, last_value, link_behind, queued_spin_trylock, spin_on_trylock,
    xchg_tail, LOCKED, LOCKED_PENDING, LOCKED_VAL, TAIL,
};
#[cfg(not(vspin_loom))]
use crate::{mutex::ConstInit, native::Native};

/// `GOLDEN_RATIO_PRIME_64` of Linux 4.2's `include/linux/hash.h` (`2^63 + 2^61 - 2^57 + 2^54 -
/// 2^51 - 2^18 + 1`): `hash_64`, hence `hash_ptr`, multiplies by it (as a shift-and-add
/// sequence where multiplication is slow).
const GOLDEN_RATIO_PRIME_64: u64 = 0x9e37_ffff_fffc_0001;

pub struct PvQueuedSpinLockV42<P: Platform> {
    val: P::Word,
}

debug_by_name!(PvQueuedSpinLockV42<P>);

impl<P: Platform> PvQueuedSpinLockV42<P> {
    /// `pv_wait_node(node)`: spin `SPIN_THRESHOLD` times for head-ship (`node->locked`), then
    /// mark this node halted and halt until kicked; a wake-up without head-ship spins again.
    async fn wait_node(&self, p: &P) {
        let me = p.cpu();
        let locked = p.per_cpu(me, PerCpuSlot::QLocked);
        let state = p.per_cpu(me, PerCpuSlot::QState);
        loop {
            if let SpinOutcome::Satisfied(_) = p.spin_until(locked, Until::eq(0).not(), SPIN_THRESHOLD).await {
                return;
            }
            // `smp_store_mb(pn->state, vcpu_halted)`, an `xchg` on x86: the state must be visible
            // before `node->locked` is read again (pairs with the swap in `pv_kick_node`).
            p.swap(state, VCPU_HALTED).await;
            if p.load(locked).await == 0 {
                pv_wait(p, state, Until::eq(VCPU_HALTED)).await;
            }
            // "Reset the vCPU state to avoid unncessary CPU kicking".
            p.store(state, VCPU_RUNNING).await;
        }
    }

    /// `pv_kick_node(next)`, after head-ship passed to `next`: wake it if it halted.
    async fn kick_node(&self, p: &P, next: CpuId) {
        if p.swap(p.per_cpu(next, PerCpuSlot::QState), VCPU_RUNNING).await == VCPU_HALTED {
            p.kick(next).await;
        }
    }

    /// `pv_wait_head(lock, node)`: the queue head spins `SPIN_THRESHOLD` times for `locked == 0`;
    /// then it hashes itself (once) and halts while `locked == _Q_SLOW_VAL`. Returns once
    /// `locked` is 0 (the lock is free, and only this head may take it).
    async fn wait_head(&self, p: &P, hash: &LockHash) {
        let me = p.cpu();
        // `lp`: whether this head is in the hash table already.
        let mut hashed = false;
        loop {
            let seen = match p.spin_until(&self.val, Until::field_eq(LOCKED, 0), SPIN_THRESHOLD).await {
                SpinOutcome::Satisfied(_) => return,
                SpinOutcome::Exhausted(v) => v,
            };
            // 4.2 writes this with `WRITE_ONCE`; from the second round on no atomic follows before
            // `pv_wait` reads `locked`, so on x86 the unlocker may clear `locked`, read the state
            // as not yet halted and skip the kick while this head halts on the old `_Q_SLOW_VAL`.
            // A guest is rescued by its next timer interrupt, a futex wait is not: a swap (a full
            // barrier) closes the window. The protocol is otherwise unchanged.
            p.swap(p.per_cpu(me, PerCpuSlot::QState), VCPU_HALTED).await;
            if !hashed {
                hashed = true;
                let entry = hash.hash(p, p.addr(&self.val), me).await;
                // Hash before `_Q_SLOW_VAL`, so that an unlocker that sees it finds the entry.
                // Only this head sets `_Q_SLOW_VAL`, so `locked` was 1 when the spin gave up.
                if cmpxchg_field(p, &self.val, LOCKED, LOCKED_VAL, SLOW_VAL, seen).await.is_err() {
                    // "The lock is free and _Q_SLOW_VAL has never been set. Therefore we need to
                    // unhash before getting the lock."
                    p.store(LockHash::lock_of(p, entry), 0).await;
                    return;
                }
            }
            pv_wait(p, &self.val, Until::field_eq(LOCKED, SLOW_VAL)).await;
            // Woken with the lock free (kicked at unlock), or spuriously: spin again.
        }
    }
}

// SAFETY: mutual exclusion is the protocol above, checked by the interleaving tests and the
// `loom` models.
unsafe impl<P: Platform> RawSpinLock<P> for PvQueuedSpinLockV42<P> {
    const NAME: &'static str = "pv-qspinlock-v4.2";
    /// Every CPU that queued is served in queue order and none is overtaken once queued, but a
    /// CPU between its failed fast-path `cmpxchg` and its `xchg_tail` can be overtaken by a
    /// later arrival that finds the lock free, as in the native [`qspinlock`](crate::qspinlock).
    const FIFO: bool = false;
    type Contended = ();
    type Waiters = u64;

    fn new(mem: &mut impl WordAlloc<P::Word>) -> Self {
        PvQueuedSpinLockV42 { val: mem.word(0) }
    }

    /// `queued_spin_lock`: `cmpxchg(val, 0 → _Q_LOCKED_VAL)`.
    async unsafe fn lock_fast(&self, p: &P) -> Result<(), ()> {
        match p.compare_exchange(&self.val, 0, LOCKED_VAL).await {
            Ok(_) => Ok(()),
            Err(_) => Err(()),
        }
    }

    /// `__pv_queued_spin_lock_slowpath` (`qspinlock.c`: `pv_enabled()` jumps straight to
    /// `queue:`).
    async unsafe fn lock_slow(&self, p: &P, (): ()) {
        if !has_node(p) {
            return spin_on_trylock(p, &self.val).await;
        }
        let me = p.cpu();
        init_node(p).await;
        // `pv_init_node`: `pn->cpu` is this CPU (implicit: node = CPU), state running.
        p.store(p.per_cpu(me, PerCpuSlot::QState), VCPU_RUNNING).await;
        if queued_spin_trylock(p, &self.val).await {
            return;
        }
        let old = xchg_tail(p, &self.val, encode_tail(me)).await;
        if TAIL.get(old) != 0 {
            link_behind(p, old).await;
            // Returns with `node->locked` seen set, so `arch_mcs_spin_lock_contended` would not
            // spin.
            self.wait_node(p).await;
        }
        let hash = LockHash::of(p, GOLDEN_RATIO_PRIME_64);
        self.wait_head(p, &hash).await;
        // `while ((val = smp_load_acquire(&lock->val.counter)) & _Q_LOCKED_PENDING_MASK)`: no one
        // sets `pending` in the PV slow path and only this head may set `locked` now, so this
        // reads the word once.
        let val = last_value(p.spin_until(&self.val, Until::field_eq(LOCKED_PENDING, 0), u64::MAX).await);
        // 4.2 reads `node->next` only after claiming the lock (6.8 reads it ahead, to prefetch).
        if let Some(next) = claim_and_pass(p, &self.val, val, None).await {
            self.kick_node(p, next).await;
        }
    }

    /// `__pv_queued_spin_unlock`: `cmpxchg(locked, 1 → 0)`; the word seen if `locked` was
    /// `_Q_SLOW_VAL`.
    async unsafe fn unlock_fast(&self, p: &P) -> Result<(), u64> {
        cmpxchg_field(p, &self.val, LOCKED, LOCKED_VAL, 0, LOCKED_VAL).await.map(drop)
    }

    /// `locked` was `_Q_SLOW_VAL`: look up and remove the hashed head, release the lock, and
    /// kick the head if it is halted.
    async unsafe fn unlock_slow(&self, p: &P, seen: u64) {
        // The kernel WARNs about a corrupted lock and returns; here that is a bug to report.
        assert_eq!(LOCKED.get(seen), SLOW_VAL, "pvqspinlock: lock has corrupted value {seen:#x}");
        let cpu = LockHash::of(p, GOLDEN_RATIO_PRIME_64).unhash(p, p.addr(&self.val)).await;
        // `smp_store_release(&l->locked, 0)`.
        p.fetch_and(&self.val, !(LOCKED.mask() << LOCKED.shift)).await;
        if p.load(p.per_cpu(cpu, PerCpuSlot::QState)).await == VCPU_HALTED {
            p.kick(cpu).await;
        }
    }

    /// `queued_spin_trylock` (`arch_spin_trylock`).
    async fn try_lock(&self, p: &P) -> bool {
        queued_spin_trylock(p, &self.val).await
    }
}

#[cfg(not(vspin_loom))]
// SAFETY: the free lock, as `new` builds it.
unsafe impl ConstInit for PvQueuedSpinLockV42<Native> {
    const INIT: Self = PvQueuedSpinLockV42 { val: Native::word(0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Linux 4.2's `hash_64` without `CONFIG_ARCH_HAS_FAST_MULTIPLIER`: the shift-and-add
    /// sequence that the constant's comment spells out.
    fn hash_64_shift_add(val: u64) -> u64 {
        let (mut hash, mut n) = (val, val);
        n <<= 18;
        hash = hash.wrapping_sub(n);
        n <<= 33;
        hash = hash.wrapping_sub(n);
        n <<= 3;
        hash = hash.wrapping_add(n);
        n <<= 3;
        hash = hash.wrapping_sub(n);
        n <<= 4;
        hash = hash.wrapping_add(n);
        n <<= 2;
        hash.wrapping_add(n)
    }

    #[test]
    fn golden_ratio_prime_is_the_shift_add_hash_of_linux_4_2() {
        for v in [1, 64, 0xdead_bee0, u64::MAX, 0x1234_5678_9abc_def0] {
            assert_eq!(v.wrapping_mul(GOLDEN_RATIO_PRIME_64), hash_64_shift_add(v));
        }
    }
}
