//! The platform interface: everything a lock algorithm may do.
//!
//! A lock is written once against [`Platform`] and runs wherever the platform is implemented:
//! inside the simulator (`vspin-sim`, where every call costs simulated time, spinning is counted
//! by Pause-Loop Exiting and freezes while the vCPU is descheduled) and on real threads
//! ([`native`](crate::native): atomics, a PAUSE loop and futexes).
//!
//! The calls mirror the primitives the kernel code uses, so lock files read like the kernel code
//! they model (`xadd` → [`Platform::fetch_add_field`], `set_bit` → [`Platform::fetch_or`],
//! `cpu_relax()` loops → [`Platform::spin_until`], `halt()` → [`Platform::halt`],
//! `kvm_kick_cpu()` → [`Platform::kick`]).
//!
//! The operations are `async` so that the simulator can suspend a lock in the middle of its
//! algorithm, advance simulated time and resume it; see `docs/architecture.md` for why this was
//! preferred to hand-written state machines.
#![allow(async_fn_in_trait)]

/// A CPU as the lock code sees it: a guest vCPU index in the simulator, a registered thread on
/// real hardware.
pub type CpuId = u32;

/// Durations in nanoseconds.
pub type Nanos = u64;

/// A bit field inside a shared word, for the sub-word atomics that kernel locks use (the x86
/// ticket lock adds to its 16-bit `tail` with `xadd` without carrying into `head`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub shift: u32,
    pub bits: u32,
}

impl Field {
    pub const fn new(shift: u32, bits: u32) -> Self {
        Field { shift, bits }
    }

    /// The field's bits, unshifted.
    pub const fn mask(self) -> u64 {
        if self.bits >= 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        }
    }

    /// The field's value inside `word`.
    pub const fn get(self, word: u64) -> u64 {
        (word >> self.shift) & self.mask()
    }

    /// `word` with `delta` added to this field, wrapping inside the field (no carry out).
    pub const fn add(self, word: u64, delta: u64) -> u64 {
        let m = self.mask();
        let v = (self.get(word).wrapping_add(delta)) & m;
        (word & !(m << self.shift)) | (v << self.shift)
    }

    /// `word` with this field replaced by `value` (truncated to the field).
    pub const fn with(self, word: u64, value: u64) -> u64 {
        let m = self.mask();
        (word & !(m << self.shift)) | ((value & m) << self.shift)
    }
}

/// The condition a spin loop waits for: `(word & mask) == value`, or `!=` when negated.
///
/// Every kernel spin loop modelled here compares a masked word, so a condition is data rather
/// than a closure: the simulator evaluates it on each write to the word without resuming the lock
/// code, and a trace can show what a vCPU waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Until {
    mask: u64,
    value: u64,
    negate: bool,
}

impl Until {
    /// The whole word equals `value`.
    pub const fn eq(value: u64) -> Self {
        Until { mask: u64::MAX, value, negate: false }
    }

    /// The bits in `mask` equal those of `value`.
    pub const fn masked_eq(mask: u64, value: u64) -> Self {
        Until { mask, value: value & mask, negate: false }
    }

    /// A field equals `value`.
    pub const fn field_eq(field: Field, value: u64) -> Self {
        Until::masked_eq(field.mask() << field.shift, (value & field.mask()) << field.shift)
    }

    /// The opposite condition.
    pub const fn not(self) -> Self {
        Until { negate: !self.negate, ..self }
    }

    pub const fn holds(self, word: u64) -> bool {
        ((word & self.mask) == self.value) != self.negate
    }
}

/// How a bounded spin ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpinOutcome {
    /// The predicate held for this value of the word.
    Satisfied(u64),
    /// The PAUSE budget ran out; the word's last observed value.
    Exhausted(u64),
}

/// Per-CPU data the kernel's paravirtual locks keep (`DEFINE_PER_CPU`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PerCpuSlot {
    /// `klock_waiting.lock`: address of the lock this CPU waits for in the PV slow path (0: none).
    PvWaitLock = 0,
    /// `klock_waiting.want`: the ticket this CPU waits for.
    PvWaitWant = 1,
    /// qspinlock MCS node `next`: the successor's CPU + 1 (0: `NULL`).
    QNext = 2,
    /// qspinlock MCS node `locked`: set by the predecessor when this node becomes the queue head.
    QLocked = 3,
    /// PV qspinlock `pv_node.state`: `vcpu_running`, `vcpu_halted` or `vcpu_hashed`.
    QState = 4,
}

impl PerCpuSlot {
    pub const COUNT: usize = 5;
}

/// Machine-wide CPU masks (`cpumask_t`), stored as words of 64 CPUs each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuMask {
    /// `waiting_cpus`: CPUs halted (or about to halt) in the PV ticket slow path.
    PvWaiting = 0,
}

impl CpuMask {
    pub const COUNT: usize = 1;
}

/// Words per CPU of the PV qspinlock's machine-wide lock → node hash table (`pv_lock_hash`):
/// `__pv_init_lock_hash` allocates 4 entries per possible CPU, and an entry is two words
/// (`lock`, `node`).
pub const PV_LOCK_HASH_WORDS_PER_CPU: usize = 4 * 2;

/// Creates shared words when a lock is built.
///
/// # Safety
/// `word(init)` must return a word that holds `init` and that nothing else reads or writes: the
/// lock built from it starts free, and its mutual exclusion (see [`RawSpinLock`]) holds only from
/// that state.
pub unsafe trait WordAlloc<W> {
    fn word(&mut self, init: u64) -> W;
}

/// What a lock algorithm may do. One value per CPU (the simulator hands each vCPU its own).
pub trait Platform {
    /// A 64-bit shared memory word.
    type Word;

    /// This CPU: below [`Platform::nr_cpus`], except that the native platform gives threads
    /// beyond its CPU ids [`OVERFLOW_CPU`](crate::native::OVERFLOW_CPU) (`CpuId::MAX`), whose
    /// per-CPU data all of them share.
    fn cpu(&self) -> CpuId;
    /// How many CPUs the machine (guest) has.
    fn nr_cpus(&self) -> u32;
    /// A stable identity of `word`, as the kernel uses a lock's address.
    fn addr(&self, word: &Self::Word) -> u64;
    /// Per-CPU data of `cpu`.
    fn per_cpu(&self, cpu: CpuId, slot: PerCpuSlot) -> &Self::Word;
    /// Word `chunk` (CPUs `64*chunk ..`) of a machine-wide CPU mask.
    fn cpumask(&self, mask: CpuMask, chunk: u32) -> &Self::Word;
    /// Word `i` (`< PV_LOCK_HASH_WORDS_PER_CPU * nr_cpus`) of the PV qspinlock hash table.
    fn pv_lock_hash(&self, i: u32) -> &Self::Word;

    async fn load(&self, w: &Self::Word) -> u64;
    async fn store(&self, w: &Self::Word, v: u64);
    /// Atomic add to one field of the word, returning the whole old word (`xadd` on a sub-word).
    async fn fetch_add_field(&self, w: &Self::Word, field: Field, delta: u64) -> u64;
    /// Atomic OR (`set_bit`), returning the old word.
    async fn fetch_or(&self, w: &Self::Word, bits: u64) -> u64;
    /// Atomic AND (`clear_bit` with the complement), returning the old word.
    async fn fetch_and(&self, w: &Self::Word, bits: u64) -> u64;
    async fn swap(&self, w: &Self::Word, v: u64) -> u64;
    async fn compare_exchange(&self, w: &Self::Word, old: u64, new: u64) -> Result<u64, u64>;
    /// `smp_mb()`: every access before it is ordered before every access after it, on any word.
    /// Needed where a plain store must be seen before a later access to *another* word is made
    /// (a store-buffering handshake); a handshake through read-modify-writes of one word needs
    /// none. Free in the simulator, whose memory is sequentially consistent, as the kernel's
    /// `smp_mb__before_atomic()` is free on x86, where the locked instruction after it is the
    /// barrier.
    fn smp_mb(&self);

    /// A `cpu_relax()` loop: read `w`, and while `until` does not hold, PAUSE and read again, at
    /// most `max_pauses` times. `u64::MAX` means spin until it holds.
    async fn spin_until(&self, w: &Self::Word, until: Until, max_pauses: u64) -> SpinOutcome;

    /// A test-and-set loop with no read-only test between attempts, as the preemptable ticket
    /// lock patches compete (`for (;;) { if (xchg(&lock->lock, 1) == 0) break; cpu_relax(); }`):
    /// set `bits` with a locked read-modify-write and, while they were already set, PAUSE and try
    /// again, at most `max_pauses` times (`u64::MAX`: until this CPU sets them). `Satisfied(old)`
    /// when this call set them, else `Exhausted(old)`. Unlike [`spin_until`](Self::spin_until),
    /// every attempt is a write: with several CPUs attempting, the line moves to each in turn, so
    /// an attempt can stall longer than PLE's `ple_gap` and keep the loop from counting as one.
    async fn spin_test_and_set(&self, w: &Self::Word, bits: u64, max_pauses: u64) -> SpinOutcome;

    /// Paravirtual wait (`halt()` / `futex_wait`): block until kicked. May return spuriously:
    /// in a guest, at an interrupt if the lock was taken with interrupts on (`safe_halt`); one
    /// taken with them off halts until the kick alone, so no protocol may count on a spurious
    /// return to recover a lost kick.
    async fn halt(&self);
    /// Paravirtual wake of `cpu` (`KVM_HC_KICK_CPU` / `futex_wake`).
    async fn kick(&self, cpu: CpuId);
    /// Give up the CPU (`SCHEDOP_yield` / `sched_yield`).
    async fn yield_now(&self);

    /// Whether `cpu` is runnable but descheduled (KVM steal-time `preempted`); false if unknown.
    fn vcpu_is_preempted(&self, cpu: CpuId) -> bool;
    /// Time left in this CPU's current slice, read from the page a locking-aware hypervisor
    /// shares with the guest (LAS); `None` where no such page exists.
    async fn slice_remaining(&self) -> Option<Nanos>;
    /// The CPU's clock (`rdtsc` scaled to ns): only differences between two readings mean
    /// anything.
    async fn now(&self) -> Nanos;
}

/// A spinlock algorithm. `lock`/`unlock` take the calling CPU's platform value.
///
/// Each operation is written in two parts, as the kernel splits `queued_spin_lock` from
/// `queued_spin_lock_slowpath`: a fast path, the few atomics an uncontended call makes, and a
/// slow path that goes on from where the fast path stopped (waiting, queueing, halting,
/// kicking). [`RawSpinLock::lock`] and [`RawSpinLock::unlock`] run one after the other, so the
/// simulator sees the same operations in the same order as from one function; the split lets the
/// native adapters (`mutex`) inline the fast path and keep the slow path's larger future out of
/// line, so that it costs the uncontended path nothing.
///
/// # Safety
/// An implementation promises mutual exclusion. A caller *holds* the lock from a `lock_fast`
/// that returned `Ok`, a `lock_slow` that returned or a `try_lock` that returned `true`, until
/// it calls `unlock_fast`. The promise: at most one caller holds the lock at a time, the
/// acquiring access is ordered before the holder's accesses and the releasing one after them,
/// from every state that safe code can give a value of the type (its constructors, `new` with a
/// conforming [`WordAlloc`], and its methods called as below), provided that
/// - every future these methods return runs to completion (on the native platform each one
///   completes at its first poll);
/// - the `unsafe` methods are called as their Safety sections say;
/// - each CPU calls with its own platform value, all of one machine (on real threads, `Native`
///   values on one [`Machine`](crate::native::Machine): a lock's per-CPU words and hash entries
///   are that machine's), of a [`Platform`] implementation that does what its docs say.
///
/// The `lock_api` adapters (`mutex`) rest on this promise, and call the four methods of the two
/// paths directly: the provided [`lock`](Self::lock) and [`unlock`](Self::unlock) must not be
/// overridden. The algorithms of this crate make the promise, and the interleaving tests and
/// `loom` models check it.
///
/// `lock_fast` is `unsafe` to call because an `Err` holds a place in the lock's queue (a ticket)
/// that every later waiter waits for: dropped, 2^24 − 1 of them would bring a ticket lock's
/// tickets round to the holder's. Unlock is `unsafe`, as `lock_api::RawMutex::unlock` is: an
/// unlock by a CPU that does not hold the lock (a head moved past a waiting ticket, a queue node
/// freed early) can let two later callers in together, and nothing in a lock word records who
/// holds it.
///
/// So a "lock" that always succeeds needs an `unsafe impl`, and cannot reach a
/// `lock_api::Mutex` from safe code:
/// ```compile_fail,E0200
/// use std::sync::atomic::AtomicU64;
/// use vspin_locks::{native::Native, RawSpinLock, WordAlloc};
///
/// struct AlwaysFree;
/// impl RawSpinLock<Native> for AlwaysFree {
///     const NAME: &'static str = "always-free";
///     const FIFO: bool = false;
///     type Contended = ();
///     type Waiters = ();
///     fn new(_: &mut impl WordAlloc<AtomicU64>) -> Self { AlwaysFree }
///     async unsafe fn lock_fast(&self, _: &Native) -> Result<(), ()> { Ok(()) }
///     async unsafe fn lock_slow(&self, _: &Native, (): ()) {}
///     async unsafe fn unlock_fast(&self, _: &Native) -> Result<(), ()> { Ok(()) }
///     async unsafe fn unlock_slow(&self, _: &Native, (): ()) {}
///     async fn try_lock(&self, _: &Native) -> bool { true }
/// }
/// ```
pub unsafe trait RawSpinLock<P: Platform>: Sized {
    /// Name used in scenarios and reports.
    const NAME: &'static str;
    /// Whether waiters acquire in arrival order when no waiter times out (checked by the simulator).
    const FIFO: bool;
    /// What [`RawSpinLock::lock_fast`] leaves to [`RawSpinLock::lock_slow`] (the word it saw).
    type Contended;
    /// What [`RawSpinLock::unlock_fast`] leaves to [`RawSpinLock::unlock_slow`] (`Infallible`
    /// for a lock whose unlock never wakes anyone).
    type Waiters;

    fn new(mem: &mut impl WordAlloc<P::Word>) -> Self;

    /// The uncontended attempt of `lock`: `Ok` if it took the lock, else what the slow path needs.
    ///
    /// # Safety
    /// An `Err` may hold a place in the lock's queue (a ticket): the caller passes it to
    /// [`lock_slow`](Self::lock_slow).
    async unsafe fn lock_fast(&self, p: &P) -> Result<(), Self::Contended>;
    /// The rest of `lock` after a failed fast path: returns holding the lock.
    ///
    /// # Safety
    /// `contended` is what this CPU's own `lock_fast` on this lock just returned, used once: a
    /// made-up one can name a ticket another waiter holds.
    async unsafe fn lock_slow(&self, p: &P, contended: Self::Contended);
    /// Release the lock: `Ok` if no waiter needs waking, else what the slow path needs.
    ///
    /// # Safety
    /// The caller holds the lock (see the trait's docs).
    async unsafe fn unlock_fast(&self, p: &P) -> Result<(), Self::Waiters>;
    /// The rest of `unlock` when the fast path saw waiters to wake.
    ///
    /// # Safety
    /// `waiters` is what this caller's `unlock_fast` on this lock just returned, used once.
    async unsafe fn unlock_slow(&self, p: &P, waiters: Self::Waiters);

    /// Acquire: the fast path, then the slow path if it failed. Not meant to be overridden.
    async fn lock(&self, p: &P) {
        // SAFETY: an `Err` goes to the slow path, once.
        if let Err(contended) = unsafe { self.lock_fast(p).await } {
            // SAFETY: `contended` is our own fast path's, used once.
            unsafe { self.lock_slow(p, contended).await };
        }
    }

    /// Release: the fast path, then the slow path if it saw waiters. Not meant to be overridden.
    ///
    /// # Safety
    /// The caller holds the lock.
    async unsafe fn unlock(&self, p: &P) {
        // SAFETY: the caller holds the lock; `waiters` is our own fast path's, used once.
        unsafe {
            if let Err(waiters) = self.unlock_fast(p).await {
                self.unlock_slow(p, waiters).await;
            }
        }
    }

    /// Take the lock if that needs no waiting (`arch_spin_trylock`): true if taken. The
    /// `lock_api` adapters build `Mutex::try_lock` on it.
    async fn try_lock(&self, p: &P) -> bool;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_compare_masked_words() {
        let head = Field::new(0, 16);
        assert!(Until::field_eq(head, 7).holds(0x0009_0007));
        assert!(!Until::field_eq(head, 7).holds(0x0007_0009));
        assert!(Until::masked_eq(0xfffe, 6).holds(7), "flag bit ignored");
        assert!(Until::eq(0).not().holds(1) && !Until::eq(0).not().holds(0));
    }

    #[test]
    fn field_add_wraps_inside_the_field_only() {
        let tail = Field::new(16, 16);
        let head = Field::new(0, 16);
        let w = tail.with(head.with(0, 0xffff), 0xffff);
        let w2 = tail.add(w, 1);
        assert_eq!(tail.get(w2), 0);
        assert_eq!(head.get(w2), 0xffff, "no carry into head");
        let w3 = head.add(w2, 2);
        assert_eq!(head.get(w3), 1);
        assert_eq!(tail.get(w3), 0, "no carry into tail");
        assert_eq!(w3 >> 32, 0, "nothing escapes the 32-bit lock word");
    }
}
