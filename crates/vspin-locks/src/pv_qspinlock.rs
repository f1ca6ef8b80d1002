//! Paravirtual queued spinlock (pvqspinlock) as in Linux 6.8: `kernel/locking/qspinlock.c`
//! compiled with `kernel/locking/qspinlock_paravirt.h` (`__pv_queued_spin_lock_slowpath`,
//! `__pv_queued_spin_unlock`), on KVM's `kvm_wait` / `kvm_kick_cpu` (`arch/x86/kernel/kvm.c`)
//! (`kernel-mechanisms.md` §2.2 – §2.5). The OTICKET paper (APSys'15, Figure 9) measured the
//! April 2015 patch series it cites as \[21\], which was merged for v4.2; that version had no lock
//! stealing and no early halt behind a halted predecessor, which later series added (the
//! paper's \[20\] is the first of them). This file models the 6.8 code quoted in the reference;
//! [`pv_qspinlock_v42`](crate::pv_qspinlock_v42) models the 4.2 one.
//!
//! The native [`qspinlock`](crate::qspinlock) with "halt instead of spinning":
//! - **No pending-bit path.** A contended CPU queues at once (`goto pv_queue`). Before it
//!   publishes its tail it may *steal* the lock (`pv_hybrid_queued_unfair_trylock`): it takes a
//!   free lock whenever `locked` and `pending` are clear, and keeps trying for as long as a queue
//!   exists whose head is not actively spinning (`pending` clear). So a preempted or halted queue
//!   never blocks running CPUs; the spinning queue head sets `pending` to stop stealers.
//! - **Queue nodes halt.** A queued CPU spins `SPIN_THRESHOLD` times on its node's `locked`,
//!   checking every 256 iterations whether its predecessor is still running; if the predecessor
//!   is halted or hashed it stops early. It then sets its state `vcpu_halted` and halts unless
//!   `locked` arrived (`pv_wait_node`).
//! - **The queue head halts.** It spins `SPIN_THRESHOLD` times for the lock with `pending` set;
//!   then it stores `lock → node` in a machine-wide hash table and sets `locked` to `_Q_SLOW_VAL`
//!   (if the lock was free meanwhile, the exchange took it), and halts while `locked` is
//!   `_Q_SLOW_VAL` (`pv_wait_head_or_lock`).
//! - **No kick on hand-off.** A new lock owner that passes head-ship to a *halted* successor does
//!   not wake it: it moves the successor to `vcpu_hashed`, sets `_Q_SLOW_VAL` and hashes the
//!   successor itself (`pv_kick_node`), so the successor sleeps on until the lock is free.
//! - **Unlock.** `cmpxchg(locked, 1 → 0)`; if `locked` was `_Q_SLOW_VAL`, look up and remove the
//!   hashed node, release the lock, and kick that one CPU (`__pv_queued_spin_unlock_slowpath`).
//!
//! ```text
//!  node state:  running ──spin 2^15 / prev not running──▶ halted ──(kvm_wait)──▶ HLT
//!                  ▲  ◀── cmpxchg halted→running on wake-up ──┘  │
//!                  │                     owner's pv_kick_node: halted→hashed, lock=SLOW, hash
//!                  │                                              ▼
//!  queue head:  running, pending=1, spin 2^15 ──▶ pending=0; hash(lock→me) once;
//!               xchg(locked, SLOW)==0 ? got it : state=hashed; HLT while locked==SLOW
//!                  ▲                                              │ unlock: unhash, locked=0,
//!                  └──────────────────── kick ◀───────────────────┘ kick(node.cpu)
//!  newcomer:    cmpxchg 0→1 ─fail─▶ init node ─▶ steal while a queue exists and pending==0
//!               ─▶ xchg_tail ─▶ (queue node | queue head) ─▶ claim, pass head-ship, pv_kick_node
//! ```
//!
//! **No lost wake-up.** `pv_wait(ptr, val)` is `kvm_wait`: halt only if `*ptr == val`, read with
//! interrupts off just before `sti; hlt`. Here it is a load then [`Platform::halt`], and a kick
//! that lands between the two is not lost, because the halt returns at once when the target's
//! `pv_unhalted` is set (KVM's `kvm_arch_vcpu_runnable`). Every waker changes `*ptr` *before* it
//! kicks, so a waiter either sees the change and does not halt, or halts and is kicked after:
//! - a queue head halts on `locked == _Q_SLOW_VAL`; the unlocker clears `locked` and then kicks
//!   the node it found in the hash, which is that head: the head hashed itself before setting
//!   `_Q_SLOW_VAL`, or `pv_kick_node` set `_Q_SLOW_VAL` and then hashed it, which is safe
//!   because the CPU that runs `pv_kick_node` holds the lock and is the one that will unlock it;
//!   and only one entry per lock exists (the owner unhashes before it releases);
//! - a queue node halts on `state == vcpu_halted`; its predecessor sets its `locked`, then (after
//!   a full barrier: `locked` is a plain store, `state` another word) either fails
//!   `cmpxchg(state, halted → hashed)` (the node is running and will see `locked` before
//!   halting) or succeeds and hashes it, which makes the unlock above kick it.
//!
//! A head that was kicked but lost the lock to a stealer never halts again: `locked` is then 1,
//! not `_Q_SLOW_VAL`, so its `pv_wait` returns at once and it spins until it gets the lock.
//!
//! **Modelled as in the kernel**, with these deviations: one MCS node per CPU (see
//! [`qspinlock`](crate::qspinlock), also for a CPU without one); the node's `cpu` is the CPU
//! itself, so hash entries name CPUs; the hash table has `4 × nr_cpus` entries (rounded down to a
//! power of two) without the kernel's one-page minimum, which only makes collisions rarer; KVM's
//! `vcpu_is_preempted` is not consulted (6.8's `qspinlock_paravirt.h` does not use it); and a
//! trylock beaten by a stealer in `pv_wait_head_or_lock` restarts its `SPIN_THRESHOLD` count (the
//! platform's spin does not report how many PAUSEs it used; such a race needs a steal in the
//! instant the head sees `locked == 0`).
//!
//! **Costs that differ** (a fidelity review, 2026-11-28): the platform has whole-word atomics
//! only. A sub-word store (`WRITE_ONCE` of `locked` or `pending`: `set_locked`, `clear_pending`,
//! `set_pending`, `pv_kick_node`'s `_Q_SLOW_VAL`, the slow unlock's release) is a locked
//! `fetch_and` or `fetch_or`, which has the same effect but costs `atomic_extra_ns` more than the
//! kernel's `mov`; and the unlock's byte `cmpxchg(locked, 1 → 0)` is a word CAS loop
//! (`cmpxchg_field`) whose first attempt expects the whole word to be 1, so under contention (a
//! tail or pending bit set) it fails and a second attempt releases: one more locked write to the
//! line per contended unlock than the kernel's one. Neither changes who halts, steals or kicks.
use crate::platform::{CpuId, Field, PerCpuSlot, Platform, RawSpinLock, SpinOutcome, Until, WordAlloc, PV_LOCK_HASH_WORDS_PER_CPU};
use crate::pv_ticket::SPIN_THRESHOLD;
use crate::qspinlock::{
    claim_and_pass, clear_pending, encode_tail, has_node, init_node, last_value, link_behind, queued_spin_trylock, successor,
    xchg_tail, LOCKED, LOCKED_PENDING, LOCKED_VAL, PENDING, PENDING_VAL, TAIL,
};
#[cfg(not(vspin_loom))]
use crate::{mutex::ConstInit, native::Native};

/// `_Q_SLOW_VAL`: `locked` = 3 means "a queue head is hashed and halted: unlock must kick"
/// (the same value since Linux 4.2).
pub(crate) const SLOW_VAL: u64 = 3;
/// `PV_PREV_CHECK_MASK + 1`: a queue node checks its predecessor's state every 256 iterations.
const PREV_CHECK_PERIOD: u64 = 0xff + 1;
/// `enum vcpu_state` of `qspinlock_paravirt.h` (Linux 4.2 has the first two only).
pub(crate) const VCPU_RUNNING: u64 = 0;
pub(crate) const VCPU_HALTED: u64 = 1;
const VCPU_HASHED: u64 = 2;
/// `PV_HE_PER_LINE`: hash entries per 64-byte cache line (16-byte entries); probing starts at
/// the first entry of the line the hash names.
const PV_HE_PER_LINE: u64 = 4;
/// `GOLDEN_RATIO_64` of `include/linux/hash.h`, the multiplier of `hash_64` / `hash_ptr` since
/// Linux 4.7 (Linux 4.2 multiplies by `GOLDEN_RATIO_PRIME_64`, see
/// [`pv_qspinlock_v42`](crate::pv_qspinlock_v42)).
const GOLDEN_RATIO_64: u64 = 0x61c8_8646_80b5_83eb;

/// `cmpxchg` on one field of `w` (a byte or half-word `cmpxchg` in the kernel), as a word CAS
/// loop: it fails only when the field differs from `old`, never because another field changed
/// meanwhile. `seen` is the word as last read; its field must equal `old`.
pub(crate) async fn cmpxchg_field<P: Platform>(p: &P, w: &P::Word, field: Field, old: u64, new: u64, mut seen: u64) -> Result<u64, u64> {
    debug_assert_eq!(field.get(seen), old);
    loop {
        match p.compare_exchange(w, seen, field.with(seen, new)).await {
            Ok(v) => return Ok(v),
            Err(v) if field.get(v) == old => seen = v,
            Err(v) => return Err(v),
        }
    }
}

/// `pv_wait(ptr, val)` = `kvm_wait`: halt only while the condition (`*ptr == val`) holds.
pub(crate) async fn pv_wait<P: Platform>(p: &P, w: &P::Word, still: Until) {
    if still.holds(p.load(w).await) {
        p.halt().await;
    }
}

/// The machine-wide `pv_lock_hash` table: open addressing over `lock`/`node` word pairs. Its
/// size, probing, `pv_hash` and `pv_unhash` are the same in Linux 4.2 and 6.8; only `hash_ptr`'s
/// multiplier changed.
pub(crate) struct LockHash {
    /// `pv_lock_hash_bits`.
    bits: u32,
    /// The 64-bit multiplier of `hash_ptr` (`hash_64`) in the kernel version modelled.
    golden_ratio: u64,
}

impl LockHash {
    pub(crate) fn of<P: Platform>(p: &P, golden_ratio: u64) -> Self {
        let entries = p.nr_cpus() * (PV_LOCK_HASH_WORDS_PER_CPU / 2) as u32;
        LockHash { bits: entries.ilog2(), golden_ratio }
    }

    /// `for_each_hash_entry` from `hash_ptr(lock, bits)`: the entries in probe order.
    fn probe(&self, lock: u64) -> impl Iterator<Item = u32> {
        let size = 1u64 << self.bits;
        let start = (lock.wrapping_mul(self.golden_ratio) >> (64 - self.bits)) & !(PV_HE_PER_LINE - 1);
        (0..size).map(move |offset| ((start + offset) & (size - 1)) as u32)
    }

    pub(crate) fn lock_of<P: Platform>(p: &P, entry: u32) -> &P::Word {
        p.pv_lock_hash(2 * entry)
    }

    fn node_of<P: Platform>(p: &P, entry: u32) -> &P::Word {
        p.pv_lock_hash(2 * entry + 1)
    }

    /// `pv_hash`: claim a free entry for `lock → cpu`; returns it (the kernel's `lp`).
    pub(crate) async fn hash<P: Platform>(&self, p: &P, lock: u64, cpu: CpuId) -> u32 {
        for entry in self.probe(lock) {
            if p.compare_exchange(Self::lock_of(p, entry), 0, lock).await.is_ok() {
                p.store(Self::node_of(p, entry), cpu as u64).await;
                return entry;
            }
        }
        // The kernel's BUG(): each lock has at most one entry and there are 4 per CPU.
        unreachable!("pv_hash: no free entry")
    }

    /// `pv_unhash`: find `lock`'s entry, free it, and return the hashed node's CPU.
    pub(crate) async fn unhash<P: Platform>(&self, p: &P, lock: u64) -> CpuId {
        for entry in self.probe(lock) {
            if p.load(Self::lock_of(p, entry)).await == lock {
                let cpu = p.load(Self::node_of(p, entry)).await;
                p.store(Self::lock_of(p, entry), 0).await;
                return cpu as CpuId;
            }
        }
        // The kernel's BUG(): an unlock that sees `_Q_SLOW_VAL` must find the entry.
        unreachable!("pv_unhash: lock not hashed")
    }
}

pub struct PvQueuedSpinLock<P: Platform> {
    val: P::Word,
}

debug_by_name!(PvQueuedSpinLock<P>);

impl<P: Platform> PvQueuedSpinLock<P> {
    /// `pv_hybrid_queued_unfair_trylock` (`queued_spin_trylock` in the PV slow path): steal the
    /// lock whenever `locked` and `pending` are clear; keep trying while waiters are queued but
    /// the queue head is not spinning (`pending` clear).
    async fn hybrid_queued_unfair_trylock(&self, p: &P) -> bool {
        let mut val = p.load(&self.val).await;
        loop {
            if LOCKED_PENDING.get(val) == 0 && cmpxchg_field(p, &self.val, LOCKED, 0, LOCKED_VAL, val).await.is_ok() {
                return true;
            }
            if TAIL.get(val) == 0 || PENDING.get(val) != 0 {
                return false;
            }
            // `cpu_relax(); val = atomic_read(&lock->val)`: re-reads of an unchanged word decide
            // the same, so spin until it changes.
            val = last_value(p.spin_until(&self.val, Until::eq(val).not(), u64::MAX).await);
        }
    }

    /// `pv_wait_node(node, prev)`: wait for head-ship (`node->locked`), halting after
    /// `SPIN_THRESHOLD` iterations, or earlier once `prev` is not running.
    async fn wait_node(&self, p: &P, prev: CpuId) {
        let me = p.cpu();
        let locked = p.per_cpu(me, PerCpuSlot::QLocked);
        let state = p.per_cpu(me, PerCpuSlot::QState);
        let head_ship = Until::eq(0).not();
        loop {
            // The spin loop's first iteration reads `node->locked`, then (as every 256th does)
            // `pv_wait_early` reads the predecessor's state; the others only PAUSE and re-read.
            if p.load(locked).await != 0 {
                return;
            }
            for _ in 0..SPIN_THRESHOLD / PREV_CHECK_PERIOD {
                if p.load(p.per_cpu(prev, PerCpuSlot::QState)).await != VCPU_RUNNING {
                    break;
                }
                if let SpinOutcome::Satisfied(_) = p.spin_until(locked, head_ship, PREV_CHECK_PERIOD).await {
                    return;
                }
            }
            // `smp_store_mb(pn->state, vcpu_halted)`, then halt unless head-ship arrived. A plain
            // store could still sit in the store buffer when `locked` is read: the owner's
            // `pv_kick_node` would then see `vcpu_running` and not hash us, and we would halt
            // with nobody to kick us (pairs with its `smp_mb` and compare-exchange on the state).
            // `smp_store_mb` is a store and a full barrier (`asm-generic/barrier.h`; one `xchg`
            // on x86): here the swap of the x86 code and the generic `smp_mb()`. The swap alone is
            // that barrier in C++20's model, where the owner's failed exchange and our load are
            // both `SeqCst`; but `loom` models `SeqCst` accesses as acquire/release, and with three
            // preemptions it found this node halting while the owner read it running (2026-11-27,
            // `LOOM_MAX_PREEMPTIONS=3`). The fence makes the handshake one that loom checks, and
            // costs a fence only on the way to a halt (nothing in the simulator).
            p.swap(state, VCPU_HALTED).await;
            p.smp_mb();
            if p.load(locked).await == 0 {
                pv_wait(p, state, Until::eq(VCPU_HALTED)).await;
            }
            // Back to running, unless `pv_kick_node` made us `vcpu_hashed`: keep that, so that
            // `pv_wait_head_or_lock` does not hash the lock a second time. A wake-up without
            // head-ship (spurious) spins again rather than halting at once.
            let _ = p.compare_exchange(state, VCPU_HALTED, VCPU_RUNNING).await;
        }
    }

    /// `trylock_clear_pending` in a `SPIN_THRESHOLD` loop: wait for `locked == 0`, then
    /// `cmpxchg(locked_pending, _Q_PENDING_VAL → _Q_LOCKED_VAL)`. True if the lock was taken.
    async fn spin_trylock_clear_pending(&self, p: &P) -> bool {
        loop {
            match p.spin_until(&self.val, Until::field_eq(LOCKED, 0), SPIN_THRESHOLD).await {
                SpinOutcome::Exhausted(_) => return false,
                // Only the queue head sets and clears `pending` in the PV lock: it is still set,
                // so the exchange fails only if a stealer set `locked` in between.
                SpinOutcome::Satisfied(v) => {
                    if cmpxchg_field(p, &self.val, LOCKED_PENDING, PENDING_VAL, LOCKED_VAL, v).await.is_ok() {
                        return true;
                    }
                }
            }
        }
    }

    /// `pv_wait_head_or_lock`: the queue head spins for the lock with `pending` set, then hashes
    /// itself (once) and halts while `locked == _Q_SLOW_VAL`. Returns the lock word, lock taken.
    async fn wait_head_or_lock(&self, p: &P, hash: &LockHash) -> u64 {
        let me = p.cpu();
        let state = p.per_cpu(me, PerCpuSlot::QState);
        // `lp`: whether this node is in the hash table already (`pv_kick_node` put it there).
        let mut hashed = p.load(state).await == VCPU_HASHED;
        loop {
            // For the successor's `pv_wait_early`.
            p.store(state, VCPU_RUNNING).await;
            // `set_pending`: `WRITE_ONCE(lock->pending, 1)`; `pending` is 0 or 1, so an OR.
            p.fetch_or(&self.val, PENDING_VAL).await;
            if self.spin_trylock_clear_pending(p).await {
                break;
            }
            clear_pending(p, &self.val).await;
            if !hashed {
                hashed = true;
                let lock = p.addr(&self.val);
                let entry = hash.hash(p, lock, me).await;
                // Hash before `_Q_SLOW_VAL`, so that an unlocker that sees it finds the entry.
                // `xchg(&lock->locked, _Q_SLOW_VAL)`: `locked` is 0 or 1 here (only this head
                // or `pv_kick_node` for it set 3), so an OR of 3 is the exchange.
                let old = p.fetch_or(&self.val, SLOW_VAL).await;
                if LOCKED.get(old) == 0 {
                    // The lock was free and is ours: back to `_Q_LOCKED_VAL`, unhash.
                    p.fetch_and(&self.val, !(SLOW_VAL & !LOCKED_VAL)).await;
                    p.store(LockHash::lock_of(p, entry), 0).await;
                    break;
                }
            }
            p.store(state, VCPU_HASHED).await;
            pv_wait(p, &self.val, Until::field_eq(LOCKED, SLOW_VAL)).await;
            // Woken with the lock free, or stolen meanwhile: spin again.
        }
        p.load(&self.val).await | LOCKED_VAL
    }

    /// `pv_kick_node(lock, next)`, after head-ship passed to `next`: if `next` is halted, do
    /// not wake it; make it `vcpu_hashed` and hash it, so that our unlock kicks it.
    async fn kick_node(&self, p: &P, hash: &LockHash, next: CpuId) {
        // `smp_mb__before_atomic()`: our store of `next->locked` must be seen before we read its
        // state, or both sides could miss the other's write (it reads `locked` as 0 and halts,
        // we read `vcpu_running` and do not hash it): a lost wake-up.
        p.smp_mb();
        if p.compare_exchange(p.per_cpu(next, PerCpuSlot::QState), VCPU_HALTED, VCPU_HASHED).await.is_err() {
            return;
        }
        // `WRITE_ONCE(lock->locked, _Q_SLOW_VAL)`: we hold the lock, `locked` is 1.
        let old = p.fetch_or(&self.val, SLOW_VAL).await;
        debug_assert_eq!(LOCKED.get(old), LOCKED_VAL);
        hash.hash(p, p.addr(&self.val), next).await;
    }
}

// SAFETY: mutual exclusion is the protocol above, checked by the interleaving tests and the
// `loom` models.
unsafe impl<P: Platform> RawSpinLock<P> for PvQueuedSpinLock<P> {
    const NAME: &'static str = "pv-qspinlock";
    /// Stealing lets late arrivals overtake, and queued waiters are FIFO only among themselves.
    const FIFO: bool = false;
    type Contended = ();
    type Waiters = u64;

    fn new(mem: &mut impl WordAlloc<P::Word>) -> Self {
        PvQueuedSpinLock { val: mem.word(0) }
    }

    /// `queued_spin_lock`: `cmpxchg(val, 0 → _Q_LOCKED_VAL)`.
    async unsafe fn lock_fast(&self, p: &P) -> Result<(), ()> {
        match p.compare_exchange(&self.val, 0, LOCKED_VAL).await {
            Ok(_) => Ok(()),
            Err(_) => Err(()),
        }
    }

    /// `__pv_queued_spin_lock_slowpath` (`qspinlock.c` from `pv_queue:`).
    async unsafe fn lock_slow(&self, p: &P, (): ()) {
        if !has_node(p) {
            // `while (!queued_spin_trylock(lock)) cpu_relax();`, where the PV slow path's
            // `queued_spin_trylock` is the hybrid unfair trylock; it can only succeed once
            // `locked` and `pending` are clear.
            while !self.hybrid_queued_unfair_trylock(p).await {
                p.spin_until(&self.val, Until::field_eq(LOCKED_PENDING, 0), u64::MAX).await;
            }
            return;
        }
        let me = p.cpu();
        init_node(p).await;
        // `pv_init_node`: `pn->cpu` is this CPU (implicit: node = CPU), state running.
        p.store(p.per_cpu(me, PerCpuSlot::QState), VCPU_RUNNING).await;
        if self.hybrid_queued_unfair_trylock(p).await {
            return;
        }
        let old = xchg_tail(p, &self.val, encode_tail(me)).await;
        let mut next = None;
        if TAIL.get(old) != 0 {
            let prev = link_behind(p, old).await;
            // Returns with `node->locked` seen set, so `arch_mcs_spin_lock_contended` would
            // not spin.
            self.wait_node(p, prev).await;
            next = successor(p).await;
        }
        let hash = LockHash::of(p, GOLDEN_RATIO_64);
        let val = self.wait_head_or_lock(p, &hash).await;
        if let Some(next) = claim_and_pass(p, &self.val, val, next).await {
            self.kick_node(p, &hash, next).await;
        }
    }

    /// `__pv_queued_spin_unlock`: `cmpxchg(locked, 1 → 0)`; the word seen if `locked` was
    /// `_Q_SLOW_VAL`.
    async unsafe fn unlock_fast(&self, p: &P) -> Result<(), u64> {
        cmpxchg_field(p, &self.val, LOCKED, LOCKED_VAL, 0, LOCKED_VAL).await.map(drop)
    }

    /// `__pv_queued_spin_unlock_slowpath`: a halted queue head is hashed; unhash it, release
    /// the lock and kick it.
    async unsafe fn unlock_slow(&self, p: &P, seen: u64) {
        // The kernel WARNs about a corrupted lock and returns; here that is a bug to report.
        assert_eq!(LOCKED.get(seen), SLOW_VAL, "pvqspinlock: lock has corrupted value {seen:#x}");
        let cpu = LockHash::of(p, GOLDEN_RATIO_64).unhash(p, p.addr(&self.val)).await;
        // `smp_store_release(&lock->locked, 0)`, then kick the (likely) halted head.
        p.fetch_and(&self.val, !(LOCKED.mask() << LOCKED.shift)).await;
        p.kick(cpu).await;
    }

    /// `arch_spin_trylock` is the generic `queued_spin_trylock` (the PV slow path's unfair
    /// variant is defined for `qspinlock.c` only).
    async fn try_lock(&self, p: &P) -> bool {
        queued_spin_trylock(p, &self.val).await
    }
}

#[cfg(not(vspin_loom))]
// SAFETY: the free lock, as `new` builds it.
unsafe impl ConstInit for PvQueuedSpinLock<Native> {
    const INIT: Self = PvQueuedSpinLock { val: Native::word(0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_probes_every_entry_once_from_a_line_start() {
        let h = LockHash { bits: 5, golden_ratio: GOLDEN_RATIO_64 };
        for lock in [64, 128, 0xdead_bee0] {
            let order: Vec<u32> = h.probe(lock).collect();
            assert_eq!(order[0] as u64 % PV_HE_PER_LINE, 0);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..32).collect::<Vec<_>>());
        }
    }

    #[test]
    fn slow_val_and_locked_val_differ_in_one_bit_only() {
        // The exchange to `_Q_SLOW_VAL` and back to `_Q_LOCKED_VAL` are done as OR / AND.
        assert_eq!(SLOW_VAL | LOCKED_VAL, SLOW_VAL);
        assert_eq!(SLOW_VAL & !(SLOW_VAL & !LOCKED_VAL), LOCKED_VAL);
        assert!(SLOW_VAL <= LOCKED.mask() && PENDING_VAL > LOCKED.mask());
    }
}
