//! The native platform: the lock algorithms on real threads, with atomics and futexes, and the
//! OS scheduler playing the hypervisor.
//!
//! Every [`Platform`] primitive maps to what the kernel code it models would use on bare metal:
//!
//! | platform call | here |
//! |---|---|
//! | a shared word | an `AtomicU64` (a `loom` atomic under `--cfg vspin_loom`) |
//! | `fetch_add_field` (`xadd` on a sub-word) | `fetch_add` when the field reaches bit 63, else a CAS loop, so no carry leaks into the neighbouring fields |
//! | `spin_until` (`cpu_relax()` loop) | re-load, `std::hint::spin_loop()` (PAUSE), at most `max_pauses` times |
//! | `halt` / `kick` (HLT / `KVM_HC_KICK_CPU`) | `FUTEX_WAIT` / `FUTEX_WAKE` on the CPU's wake word (Linux only) |
//! | `yield_now` | `sched_yield` |
//! | CPU id, `per_cpu`, `cpumask` | a [`Machine`]: a registry that gives each thread a CPU id on first use, and that id's per-CPU words |
//! | `vcpu_is_preempted`, `slice_remaining` | unknown (`false`, `None`): the OS does not say |
//!
//! ## The machine
//!
//! A [`Machine`] is the kernel's per-CPU data: [`MAX_CPUS`] rows of per-CPU slots, one wake word
//! per CPU, the machine-wide CPU masks, and the registry of which CPU ids are taken. A thread
//! claims the lowest free id the first time a lock asks for its CPU (only the slow paths that
//! halt or queue on per-CPU nodes do) and gives it back when it exits, so ids are reused. Real code uses the one process-wide
//! [`MACHINE`] (the [`Native::default`] platform); `loom` models build a fresh machine per
//! execution.
//!
//! When more than [`MAX_CPUS`] threads hold ids at once, a thread that asks gets
//! [`OVERFLOW_CPU`] instead of panicking. Its per-CPU slots and mask bit live in an overflow row
//! that no unlock ever scans, and its `halt` is a `sched_yield` (a spurious return, which the
//! trait allows): it polls instead of sleeping, so it is never left waiting for a kick nobody
//! sends. It keeps that id until it exits: a slow path asks for its CPU more than once (to
//! publish where it waits, then to halt), and an id that changed in between would halt on a wake
//! word that nobody kicks.
//!
//! Such a thread has no queue node either, so in the three queued spinlocks it does what the
//! kernel's CPUs do when their nodes run out (`queued_spin_lock_slowpath` past `MAX_NODES`): it
//! spins on the trylock and never queues. In the qspinlock and the 4.2 PV one that waits for the
//! whole lock word to be zero (no holder, no pending bit, no queue); the 6.8 PV one's trylock
//! steals (`pv_hybrid_queued_unfair_trylock`), so it waits only for the holder and the pending
//! bit to clear. Under sustained contention the zero word may not come, and it starves: with
//! every id but two held by idle threads, two threads with ids and one without, a review
//! measured the one without at 1/25 to 1/3,400 of the others' acquisitions (2026-11-27, when
//! there were 1,024 ids; hence the 8,192 of [`MAX_CPUS`]). The ticket locks,
//! TAS and the preemptable locks treat it like any thread. A lock word does not say who may
//! take it, so it cannot be stolen safely past a queue head that is about to store `locked`.
//!
//! A lock's per-CPU words and hash entries are those of one machine: a lock must be used with
//! [`Native`] values of one [`Machine`] only (see [`RawSpinLock`](crate::RawSpinLock)'s safety
//! contract). The `mutex` adapters always use [`Native::default`].
//!
//! ## Halt and kick
//!
//! Each CPU's wake word is `IDLE`, `KICKED` (a kick not yet consumed) or `SLEEPING`. `halt` moves
//! `IDLE → SLEEPING` with a compare-exchange and `FUTEX_WAIT`s while the word is `SLEEPING`; a
//! `KICKED` word makes it return at once, so a kick sent before the halt is never lost (the PV
//! locks' "pickup" window between publishing the wait and halting). On return it swaps the word
//! back to `IDLE`, consuming the kick. `kick` swaps in `KICKED` and makes the `FUTEX_WAKE`
//! system call only if the target was `SLEEPING`, so kicking a running CPU costs one atomic.
//! A stale kick makes a later halt return early; the lock code treats that as the spurious
//! wake-up (any interrupt) that a halted vCPU also sees.
//!
//! ## Memory orderings
//!
//! The algorithms were written for the sequentially consistent memory of the simulator. Most
//! handshakes in them (waiter publishes its wait then sets a flag in the lock word; unlocker
//! updates the lock word then reads the flag and the per-CPU slots) go through read-modify-writes
//! of one word; the pvqspinlocks' "set my state halted, then re-check `locked`" against "set
//! `locked`, then read the state" spans two words (store buffering). So:
//! - read-modify-writes are `SeqCst`: on x86 every locked instruction is a full barrier anyway,
//!   so `SeqCst` costs the same as `AcqRel`, and a single total order keeps the reasoning that of
//!   the simulator;
//! - loads are `SeqCst`, so that a load after a read-modify-write of another word is in that
//!   total order (the two-word handshakes need it; an `Acquire` load is outside it, and Rust's
//!   model would let both sides read the old values). On x86 and AArch64 this is the same
//!   instruction as `Acquire` (`mov`, `ldar`);
//! - stores are `Release` (a test-and-set unlock publishes the critical section); a `SeqCst`
//!   store would be an `xchg`, a full barrier, on the uncontended path for no gain. Where an
//!   algorithm needs a store ordered before a later access to another word, it writes a `swap`
//!   (the kernel's `smp_store_mb`, which is that `xchg` on x86) or calls
//!   [`Platform::smp_mb`] (a `SeqCst` fence), as `pv_kick_node` does after handing over
//!   `locked`, where the kernel has `smp_mb__before_atomic()`.
//!
//! `loom` checks these orderings (see `tests/loom.rs`).
//!
//! ## No executor on the fast path
//!
//! The lock code is `async` for the simulator's sake. Here no operation ever waits: a spin, a
//! halt or a yield blocks the thread inside the call, and every future is `Ready` on its first
//! poll. [`block_on`] therefore polls once with a no-op waker; with the operations `#[inline]`
//! the compiler flattens the state machine into straight-line code.
//!
//! That holds only for a future whose every poll is inlined. A nested `async fn` is polled by a
//! function of its own, which the compiler may leave out of line; the enclosing future's state
//! then lives in memory, written before the call and read back after it, around an operation of
//! one atomic. A lock whose whole `lock` was one future paid that on every uncontended call
//! (10–15 ns instead of 5–7), so the lock adapters ([`crate::mutex`]) poll a lock's fast path
//! (`lock_fast`, `unlock_fast`: a few platform calls, no helper futures) inline and its slow path
//! in a separate, never-inlined function.
use crate::platform::{CpuId, CpuMask, Field, Nanos, PerCpuSlot, Platform, SpinOutcome, Until, PV_LOCK_HASH_WORDS_PER_CPU};
use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

#[cfg(vspin_loom)]
use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
#[cfg(not(vspin_loom))]
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// The most threads that hold a CPU id at once: 8,192, the x86-64 kernel's largest `NR_CPUS`
/// (`CONFIG_MAXSMP`). Each id costs its per-CPU words and wake word (256 bytes: two padded rows;
/// 2 MiB in all, zero bytes in `.bss`, so only the rows of ids in use are ever touched), and an
/// unlock that kicks a PV ticket lock's waiter scans `MAX_CPUS / 64` mask words (128 loads of
/// lines nobody writes unless a thread waits there). It was 1,024 until a review showed
/// threads beyond it starving in the queued spinlocks (see "The machine"); a thread-per-
/// connection server easily has more. The queued spinlocks' 14-bit tail bounds it at 16,383.
/// Under `loom` models, which run at most a few threads, the machine is kept tiny to keep
/// executions cheap.
#[cfg(not(vspin_loom))]
pub const MAX_CPUS: usize = 8192;
const _: () = assert!(MAX_CPUS < 1 << 14, "a queued spinlock's tail holds a CPU id + 1 in 14 bits");
#[cfg(vspin_loom)]
pub const MAX_CPUS: usize = 4;

/// Words of the PV qspinlock hash table: its kernel size for [`MAX_CPUS`] CPUs.
const PV_LOCK_HASH_WORDS: usize = PV_LOCK_HASH_WORDS_PER_CPU * MAX_CPUS;

/// Words per CPU mask.
const MASK_WORDS: usize = MAX_CPUS.div_ceil(64);

/// The CPU id of a thread that found every id taken (see the module docs).
pub const OVERFLOW_CPU: CpuId = CpuId::MAX;

/// Wake-word states (see the module docs).
const IDLE: u32 = 0;
const KICKED: u32 = 1;
const SLEEPING: u32 = 2;

/// One CPU's wake word, on cache lines of its own (see [`PerCpuRow`]). Under `loom` the futex
/// system calls are modelled with a mutex and a condition variable that give `FUTEX_WAIT` its
/// atomic "sleep only if the word still holds".
#[repr(align(128))]
struct WakeWord {
    state: AtomicU32,
    #[cfg(vspin_loom)]
    futex: (loom::sync::Mutex<()>, loom::sync::Condvar),
}

impl WakeWord {
    #[cfg(vspin_loom)]
    fn new() -> Self {
        WakeWord {
            state: AtomicU32::new(IDLE),
            futex: (loom::sync::Mutex::new(()), loom::sync::Condvar::new()),
        }
    }

    /// The initializer of the `static` machine's wake-word array: each element is a fresh copy.
    #[cfg(not(vspin_loom))]
    #[allow(clippy::declare_interior_mutable_const)]
    const IDLE: WakeWord = WakeWord { state: AtomicU32::new(IDLE) };

    fn halt(&self) {
        if self.state.compare_exchange(IDLE, SLEEPING, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            self.futex_wait(SLEEPING);
        }
        // A swap, not a store: a kick that lands between a spurious return and this point is
        // read here, so what the kicker wrote before it is seen (a plain store would overwrite
        // it unordered in Rust's memory model, and the 4.2 PV qspinlock's queue node could
        // then re-check a stale `locked` and halt for good; x86 and AArch64 order it anyway).
        self.state.swap(IDLE, Ordering::SeqCst);
    }

    fn kick(&self) {
        if self.state.swap(KICKED, Ordering::SeqCst) == SLEEPING {
            self.futex_wake();
        }
    }

    /// Sleep while the word holds `expected`; may return spuriously (signals).
    #[cfg(all(target_os = "linux", not(vspin_loom)))]
    fn futex_wait(&self, expected: u32) {
        // SAFETY: FUTEX_WAIT reads the aligned 32-bit word we pass; a null timeout waits forever.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.state.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                std::ptr::null::<libc::timespec>(),
            );
        }
    }

    #[cfg(all(target_os = "linux", not(vspin_loom)))]
    fn futex_wake(&self) {
        // SAFETY: FUTEX_WAKE only uses the word's address as a key.
        unsafe {
            libc::syscall(libc::SYS_futex, self.state.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1);
        }
    }

    /// Without futexes a halt is a yield: a spurious return, which the lock code tolerates.
    #[cfg(all(not(target_os = "linux"), not(vspin_loom)))]
    fn futex_wait(&self, _expected: u32) {
        std::thread::yield_now();
    }

    #[cfg(all(not(target_os = "linux"), not(vspin_loom)))]
    fn futex_wake(&self) {}

    #[cfg(vspin_loom)]
    fn futex_wait(&self, expected: u32) {
        let guard = self.futex.0.lock().unwrap();
        if self.state.load(Ordering::SeqCst) == expected {
            drop(self.futex.1.wait(guard).unwrap());
        }
    }

    #[cfg(vspin_loom)]
    fn futex_wake(&self) {
        let _guard = self.futex.0.lock().unwrap();
        self.futex.1.notify_one();
    }
}

/// One CPU's per-CPU words, on cache lines no other CPU's words share, as the kernel's are: each
/// CPU's per-CPU area is its own memory, and the qspinlock nodes are `DEFINE_PER_CPU_ALIGNED`.
/// Packed (40 bytes a row), two CPUs' MCS nodes shared a line, so a queued waiter's writes to
/// its node took the line from its neighbour; the simulator, whose words are lines of their own,
/// never paid that. 128 bytes rather than 64: x86's spatial prefetcher fetches lines in pairs
/// (the padding of crossbeam's `CachePadded`).
#[repr(align(128))]
struct PerCpuRow([AtomicU64; PerCpuSlot::COUNT]);

/// The kernel's per-CPU data for threads: CPU-id registry, per-CPU slots, wake words, CPU masks.
pub struct Machine {
    per_cpu: [PerCpuRow; MAX_CPUS],
    wake: [WakeWord; MAX_CPUS],
    masks: [[AtomicU64; MASK_WORDS]; CpuMask::COUNT],
    /// Bit `i` set: CPU id `i` belongs to a live thread.
    taken: [AtomicU64; MASK_WORDS],
    /// Per-CPU slots and mask word of [`OVERFLOW_CPU`], shared by all overflow threads.
    overflow_slots: PerCpuRow,
    overflow_mask: AtomicU64,
    /// The PV qspinlock's lock → node hash table (`pv_lock_hash`).
    pv_lock_hash: [AtomicU64; PV_LOCK_HASH_WORDS],
    /// The complement of the cap on bounded spins, in pauses (0: not cut), so that a machine
    /// that cuts nothing is all zero bytes and a `static` one takes no room in the binary.
    spin_cut: u64,
    /// CPU ids never handed out (0: none), so that a test reaches the overflow paths with few
    /// threads.
    withheld_ids: usize,
}

/// The process-wide machine that [`Native::default`] runs on.
#[cfg(not(vspin_loom))]
pub static MACHINE: Machine = Machine::new();

impl Machine {
    /// An empty machine: no CPU id taken, every slot, mask and wake word zero. It is 2.5 MiB
    /// (the rows of [`MAX_CPUS`] CPUs): make it a `static`, as [`MACHINE`] is (this is a `const
    /// fn`, and the all-zero `static` costs the binary nothing), not a value on a thread's stack,
    /// which a debug build may overflow. For that reason it has no `Default`, which would
    /// return one by value.
    #[cfg(not(vspin_loom))]
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        Machine {
            per_cpu: [const { PerCpuRow([const { AtomicU64::new(0) }; PerCpuSlot::COUNT]) }; MAX_CPUS],
            wake: [const { WakeWord::IDLE }; MAX_CPUS],
            masks: [const { [const { AtomicU64::new(0) }; MASK_WORDS] }; CpuMask::COUNT],
            taken: [const { AtomicU64::new(0) }; MASK_WORDS],
            overflow_slots: PerCpuRow([const { AtomicU64::new(0) }; PerCpuSlot::COUNT]),
            overflow_mask: AtomicU64::new(0),
            pv_lock_hash: [const { AtomicU64::new(0) }; PV_LOCK_HASH_WORDS],
            spin_cut: 0,
            withheld_ids: 0,
        }
    }

    /// An empty machine (loom atomics cannot be built in a `const fn`).
    #[cfg(vspin_loom)]
    pub fn new() -> Self {
        use std::array::from_fn;
        Machine {
            per_cpu: from_fn(|_| PerCpuRow(from_fn(|_| AtomicU64::new(0)))),
            wake: from_fn(|_| WakeWord::new()),
            masks: from_fn(|_| from_fn(|_| AtomicU64::new(0))),
            taken: from_fn(|_| AtomicU64::new(0)),
            overflow_slots: PerCpuRow(from_fn(|_| AtomicU64::new(0))),
            overflow_mask: AtomicU64::new(0),
            pv_lock_hash: from_fn(|_| AtomicU64::new(0)),
            spin_cut: 0,
            withheld_ids: 0,
        }
    }

    /// Cut every bounded spin to at most `pauses` PAUSEs; unbounded spins (`u64::MAX`) stay
    /// unbounded. The algorithms only need a bounded spin to end, not to last its kernel length
    /// (2^15 PAUSEs and more), so this drives their halting slow paths within a `loom` model's
    /// budget or a short stress test.
    pub const fn with_spin_cap(mut self, pauses: u64) -> Self {
        self.spin_cut = !pauses;
        self
    }

    /// Hand out only CPU ids below `ids` (at most [`MAX_CPUS`]); threads beyond get
    /// [`OVERFLOW_CPU`], so that a `loom` model of three threads reaches the overflow paths.
    pub const fn with_cpu_ids(mut self, ids: usize) -> Self {
        assert!(ids <= MAX_CPUS, "more CPU ids than the machine has");
        self.withheld_ids = MAX_CPUS - ids;
        self
    }

    /// The most PAUSEs a bounded spin may take (`u64::MAX`: not cut).
    #[inline]
    fn spin_cap(&self) -> u64 {
        !self.spin_cut
    }

    /// Claim the lowest free CPU id, or `None` if all [`MAX_CPUS`] are taken.
    fn claim(&self) -> Option<CpuId> {
        let ids = MAX_CPUS - self.withheld_ids;
        for (chunk, word) in self.taken.iter().enumerate() {
            let mut seen = word.load(Ordering::Acquire);
            while seen != u64::MAX {
                let bit = (!seen).trailing_zeros() as usize;
                if chunk * 64 + bit >= ids {
                    break;
                }
                seen = word.fetch_or(1 << bit, Ordering::SeqCst);
                if seen & 1 << bit == 0 {
                    return Some((chunk * 64 + bit) as CpuId);
                }
            }
        }
        None
    }

    /// Give a thread's id back. A pending kick is cleared, so the next owner's first halt does not
    /// return at once; a kick still in flight (sent to the old owner, landing after this) can
    /// still reach the next owner, as a spurious wake-up, which every halt allows.
    fn release(&self, cpu: CpuId) {
        self.wake[cpu as usize].state.store(IDLE, Ordering::Release);
        self.taken[cpu as usize / 64].fetch_and(!(1 << (cpu % 64)), Ordering::SeqCst);
    }

    /// The calling thread's CPU id on this machine, claimed on first use. Nothing here
    /// allocates or borrows, so a lock may guard a global allocator: its slow path may run
    /// inside the allocation that a registry growing on the heap would make.
    fn current_cpu(&'static self) -> CpuId {
        REGISTRATIONS
            .try_with(|r| {
                let mine = |slot: &Cell<Option<(&'static Machine, CpuId)>>| slot.get().filter(|&(m, _)| std::ptr::eq(m, self));
                if let Some((_, cpu)) = r.0.iter().find_map(mine) {
                    return cpu;
                }
                // A thread that uses more machines than it has slots runs as an overflow thread
                // on the rest, without an id to give back.
                let Some(free) = r.0.iter().find(|slot| slot.get().is_none()) else { return OVERFLOW_CPU };
                let cpu = self.claim().unwrap_or(OVERFLOW_CPU);
                free.set(Some((self, cpu)));
                cpu
            })
            // The thread is exiting and its registrations are gone.
            .unwrap_or(OVERFLOW_CPU)
    }
}

/// The most machines a thread holds CPU ids on: real code uses one ([`MACHINE`]); tests add a
/// few of their own.
const MACHINES_PER_THREAD: usize = 8;

/// The CPU ids this thread holds (one per machine it used); given back when the thread exits.
/// A fixed array of cells, not a growing `Vec`: see `current_cpu`.
struct Registrations([Cell<Option<(&'static Machine, CpuId)>>; MACHINES_PER_THREAD]);

impl Drop for Registrations {
    fn drop(&mut self) {
        for (machine, cpu) in self.0.iter().filter_map(Cell::get).filter(|&(_, cpu)| cpu != OVERFLOW_CPU) {
            machine.release(cpu);
        }
    }
}

#[cfg(not(vspin_loom))]
std::thread_local! {
    static REGISTRATIONS: Registrations = const { Registrations([const { Cell::new(None) }; MACHINES_PER_THREAD]) };
}
#[cfg(vspin_loom)]
loom::thread_local! {
    static REGISTRATIONS: Registrations = Registrations([const { Cell::new(None) }; MACHINES_PER_THREAD]);
}

/// One PAUSE of a spin loop; under `loom` a yield, so that the model runs the thread being
/// waited for.
#[inline(always)]
fn pause() {
    #[cfg(vspin_loom)]
    loom::thread::yield_now();
    #[cfg(not(vspin_loom))]
    std::hint::spin_loop();
}

/// Run a native platform future to completion. It is always `Ready` on the first poll (see the
/// module docs), so this is a single poll with a no-op waker and no executor.
///
/// # Panics
/// If `future` is not `Ready` on its first poll: it is for the [`Native`] platform's
/// operations and the locks built on them, not for futures that wait on anything else.
#[inline(always)]
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => unreachable!("a native platform operation never suspends"),
    }
}

/// The lock [`Platform`] on real threads: a handle on a [`Machine`]. It is the same value on
/// every thread; which CPU is calling is looked up in the thread's registration when a lock asks.
#[derive(Clone, Copy)]
pub struct Native {
    machine: &'static Machine,
}

impl Native {
    /// The platform on `machine` (a fresh one per `loom` execution, a `static` one elsewhere: see
    /// [`Machine::new`]). Every CPU using a lock must use the same machine: a PV waiter published in one
    /// machine's slots is not found by an unlock scanning another's, and a queued lock's `tail`
    /// names a node of the machine it was encoded in.
    pub const fn on(machine: &'static Machine) -> Self {
        Native { machine }
    }

    /// A shared word of this platform, in a `const` context (locks in `static`s, `INIT`).
    #[cfg(not(vspin_loom))]
    pub const fn word(init: u64) -> AtomicU64 {
        AtomicU64::new(init)
    }
}

/// The platform on the process-wide [`MACHINE`].
#[cfg(not(vspin_loom))]
impl Default for Native {
    #[inline(always)]
    fn default() -> Self {
        Native::on(&MACHINE)
    }
}

impl Platform for Native {
    type Word = AtomicU64;

    #[inline]
    fn cpu(&self) -> CpuId {
        self.machine.current_cpu()
    }

    #[inline]
    fn nr_cpus(&self) -> u32 {
        MAX_CPUS as u32
    }

    #[inline]
    fn addr(&self, word: &AtomicU64) -> u64 {
        word as *const AtomicU64 as u64
    }

    #[inline]
    fn per_cpu(&self, cpu: CpuId, slot: PerCpuSlot) -> &AtomicU64 {
        match self.machine.per_cpu.get(cpu as usize) {
            Some(row) => &row.0[slot as usize],
            None => &self.machine.overflow_slots.0[slot as usize],
        }
    }

    #[inline]
    fn pv_lock_hash(&self, i: u32) -> &AtomicU64 {
        &self.machine.pv_lock_hash[i as usize]
    }

    #[inline]
    fn cpumask(&self, mask: CpuMask, chunk: u32) -> &AtomicU64 {
        self.machine.masks[mask as usize].get(chunk as usize).unwrap_or(&self.machine.overflow_mask)
    }

    #[inline]
    async fn load(&self, w: &AtomicU64) -> u64 {
        w.load(Ordering::SeqCst)
    }

    #[inline]
    async fn store(&self, w: &AtomicU64, v: u64) {
        w.store(v, Ordering::Release)
    }

    #[inline]
    async fn fetch_add_field(&self, w: &AtomicU64, field: Field, delta: u64) -> u64 {
        if field.shift + field.bits >= 64 {
            // The carry out of the field leaves the word: nothing to protect.
            return w.fetch_add(delta << field.shift, Ordering::SeqCst);
        }
        let mut old = w.load(Ordering::Relaxed);
        loop {
            match w.compare_exchange_weak(old, field.add(old, delta), Ordering::SeqCst, Ordering::Relaxed) {
                Ok(old) => return old,
                Err(seen) => old = seen,
            }
        }
    }

    #[inline]
    async fn fetch_or(&self, w: &AtomicU64, bits: u64) -> u64 {
        w.fetch_or(bits, Ordering::SeqCst)
    }

    #[inline]
    async fn fetch_and(&self, w: &AtomicU64, bits: u64) -> u64 {
        w.fetch_and(bits, Ordering::SeqCst)
    }

    #[inline]
    async fn swap(&self, w: &AtomicU64, v: u64) -> u64 {
        w.swap(v, Ordering::SeqCst)
    }

    #[inline]
    async fn compare_exchange(&self, w: &AtomicU64, old: u64, new: u64) -> Result<u64, u64> {
        w.compare_exchange(old, new, Ordering::SeqCst, Ordering::SeqCst)
    }

    #[inline]
    fn smp_mb(&self) {
        fence(Ordering::SeqCst);
    }

    #[inline]
    async fn spin_until(&self, w: &AtomicU64, until: Until, max_pauses: u64) -> SpinOutcome {
        let mut left = if max_pauses == u64::MAX { u64::MAX } else { max_pauses.min(self.machine.spin_cap()) };
        loop {
            let v = w.load(Ordering::SeqCst);
            if until.holds(v) {
                return SpinOutcome::Satisfied(v);
            }
            if left == 0 {
                return SpinOutcome::Exhausted(v);
            }
            if left != u64::MAX {
                left -= 1;
            }
            pause();
        }
    }

    #[inline]
    async fn spin_test_and_set(&self, w: &AtomicU64, bits: u64, max_pauses: u64) -> SpinOutcome {
        let mut left = if max_pauses == u64::MAX { u64::MAX } else { max_pauses.min(self.machine.spin_cap()) };
        loop {
            let old = w.fetch_or(bits, Ordering::SeqCst);
            if old & bits == 0 {
                return SpinOutcome::Satisfied(old);
            }
            if left == 0 {
                return SpinOutcome::Exhausted(old);
            }
            if left != u64::MAX {
                left -= 1;
            }
            pause();
        }
    }

    async fn halt(&self) {
        match self.machine.wake.get(self.cpu() as usize) {
            Some(wake) => wake.halt(),
            None => yield_thread(),
        }
    }

    async fn kick(&self, cpu: CpuId) {
        if let Some(wake) = self.machine.wake.get(cpu as usize) {
            wake.kick();
        }
    }

    async fn yield_now(&self) {
        yield_thread();
    }

    #[inline]
    fn vcpu_is_preempted(&self, _cpu: CpuId) -> bool {
        false
    }

    /// No operating system tells a thread when its time slice ends.
    #[inline]
    async fn slice_remaining(&self) -> Option<Nanos> {
        None
    }

    async fn now(&self) -> Nanos {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        START.get_or_init(std::time::Instant::now).elapsed().as_nanos() as Nanos
    }
}

/// `sched_yield`, or a model step under `loom`.
fn yield_thread() {
    #[cfg(vspin_loom)]
    loom::thread::yield_now();
    #[cfg(not(vspin_loom))]
    std::thread::yield_now();
}

#[cfg(all(test, not(vspin_loom)))]
mod tests {
    use super::*;

    #[test]
    fn sub_word_add_does_not_carry_into_the_next_field() {
        let p = Native::default();
        let w = AtomicU64::new(0xab_ffff_0000);
        let old = block_on(p.fetch_add_field(&w, Field::new(16, 16), 1));
        assert_eq!(old, 0xab_ffff_0000);
        assert_eq!(w.load(Ordering::Relaxed), 0xab_0000_0000, "the tail wrapped; bits 32.. kept");
        block_on(p.fetch_add_field(&w, Field::new(32, 32), 1));
        assert_eq!(w.load(Ordering::Relaxed), 0xac_0000_0000);
    }

    #[test]
    fn a_kick_before_the_halt_is_not_lost() {
        static M: Machine = Machine::new();
        let p = Native::on(&M);
        block_on(p.kick(p.cpu()));
        block_on(p.halt()); // returns at once: the kick is pending
        // The kick races with the waiter's halt: either order must end the halt.
        for _ in 0..100 {
            let (tx, rx) = std::sync::mpsc::channel();
            let waiter = std::thread::spawn(move || {
                tx.send(p.cpu()).unwrap();
                block_on(p.halt());
            });
            block_on(p.kick(rx.recv().unwrap()));
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !waiter.is_finished() {
                assert!(std::time::Instant::now() < deadline, "lost kick: the waiter still sleeps");
                std::thread::yield_now();
            }
        }
    }

    #[test]
    fn ids_are_given_back_when_threads_exit() {
        static M: Machine = Machine::new();
        let p = Native::on(&M);
        let first = std::thread::spawn(move || p.cpu()).join().unwrap();
        let second = std::thread::spawn(move || p.cpu()).join().unwrap();
        assert_eq!(first, second, "the exited thread's id is reused");
    }

    /// Mark every CPU id of `machine` taken, as if [`MAX_CPUS`] threads held one.
    fn take_every_id(machine: &Machine) {
        for word in &machine.taken {
            word.store(u64::MAX, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_full_machine_hands_out_the_overflow_id() {
        static M: Machine = Machine::new();
        take_every_id(&M);
        let p = Native::on(&M);
        assert_eq!(p.cpu(), OVERFLOW_CPU);
        block_on(p.halt()); // a yield, not a sleep nobody would end
        assert!(std::ptr::eq(p.per_cpu(OVERFLOW_CPU, PerCpuSlot::PvWaitLock), &M.overflow_slots.0[0]));
    }

    #[test]
    fn an_overflow_thread_keeps_its_id_when_one_frees_up() {
        // It may have published OVERFLOW_CPU as where it waits; halting on a real id's wake word
        // now would wait for a kick sent to the overflow id, which never comes.
        static M: Machine = Machine::new();
        take_every_id(&M);
        let p = Native::on(&M);
        std::thread::spawn(move || {
            assert_eq!(p.cpu(), OVERFLOW_CPU);
            M.release(0);
            assert_eq!(p.cpu(), OVERFLOW_CPU);
        })
        .join()
        .unwrap();
        assert_eq!(M.taken[0].load(Ordering::Relaxed) & 1, 0, "its exit gives back no id it did not hold");
    }

    /// Threads without a CPU id of their own cannot queue in a queued spinlock (one shared node,
    /// an unencodable tail); they must still exclude each other and the one thread that queues.
    fn queued_lock_with_one_free_id<L: crate::RawSpinLock<Native> + crate::mutex::ConstInit + Sync + 'static>(
        machine: &'static Machine,
    ) {
        take_every_id(machine);
        machine.taken[0].store(u64::MAX - 1, Ordering::Relaxed);
        static COUNT: AtomicU64 = AtomicU64::new(0);
        COUNT.store(0, Ordering::Relaxed);
        let lock: &'static L = Box::leak(Box::new(L::INIT));
        let p = Native::on(machine);
        let (threads, rounds) = (4, 20_000);
        // Every thread holds its id until all have one, so at most one gets a real id.
        let all_have_ids: &'static std::sync::Barrier = Box::leak(Box::new(std::sync::Barrier::new(threads)));
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                std::thread::spawn(move || {
                    let id = p.cpu();
                    all_have_ids.wait();
                    for _ in 0..rounds {
                        block_on(lock.lock(&p));
                        // A load and a store, not an atomic add: a lost update if two are inside.
                        let v = COUNT.load(Ordering::Relaxed);
                        std::hint::spin_loop();
                        COUNT.store(v + 1, Ordering::Relaxed);
                        // SAFETY: this thread took the lock above.
                        block_on(unsafe { lock.unlock(&p) });
                    }
                    id
                })
            })
            .collect();
        // A broken queue hangs rather than losing updates: fail instead.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !workers.iter().all(|w| w.is_finished()) {
            assert!(std::time::Instant::now() < deadline, "{}: threads still waiting for the lock", L::NAME);
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let ids: Vec<CpuId> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        assert_eq!(ids.iter().filter(|&&id| id == OVERFLOW_CPU).count(), threads - 1, "{ids:?}");
        assert_eq!(COUNT.load(Ordering::Relaxed), threads as u64 * rounds, "{}: lost updates", L::NAME);
    }

    #[test]
    fn queued_spinlocks_without_a_node_spin_on_the_trylock() {
        static Q: Machine = Machine::new();
        queued_lock_with_one_free_id::<crate::QueuedSpinLock<Native>>(&Q);
        static PV: Machine = Machine::new().with_spin_cap(4);
        queued_lock_with_one_free_id::<crate::PvQueuedSpinLock<Native>>(&PV);
        static PV42: Machine = Machine::new().with_spin_cap(4);
        queued_lock_with_one_free_id::<crate::PvQueuedSpinLockV42<Native>>(&PV42);
    }
}
