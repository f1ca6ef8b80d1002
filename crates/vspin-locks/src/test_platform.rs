//! A one-CPU platform for unit tests that records what a lock asks of it.
//!
//! Single-threaded: nothing changes a word while the lock code spins, so a spin reads the word
//! once and is `Satisfied` or `Exhausted` at once (an unbounded spin that would never end
//! panics instead). Every call the unit tests want to see (compare-exchanges, bounded spins'
//! PAUSE budgets, kicks, yields, halts) is appended to [`Recorder::log`], so a test can state
//! what one lock operation did without timing it or running threads.
use crate::platform::{CpuId, CpuMask, Field, Nanos, PerCpuSlot, Platform, SpinOutcome, Until, PV_LOCK_HASH_WORDS_PER_CPU};
use std::cell::{Cell, RefCell};

/// A platform call, as recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    CompareExchange,
    /// A `spin_until` and its PAUSE budget.
    Spin(u64),
    /// A `spin_test_and_set` and its PAUSE budget.
    TestAndSet(u64),
    Kick(CpuId),
    Yield,
    Halt,
}

pub(crate) struct Recorder {
    cpu: CpuId,
    nr_cpus: u32,
    per_cpu: Vec<Cell<u64>>,
    mask: Vec<Cell<u64>>,
    hash: Vec<Cell<u64>>,
    /// What `slice_remaining` reads.
    pub(crate) slice: Option<Nanos>,
    clock: Cell<Nanos>,
    log: RefCell<Vec<Call>>,
}

impl Recorder {
    /// CPU `cpu` of a machine of `nr_cpus`, all shared words 0.
    pub(crate) fn new(cpu: CpuId, nr_cpus: u32) -> Self {
        let n = nr_cpus as usize;
        Recorder {
            cpu,
            nr_cpus,
            per_cpu: (0..n * PerCpuSlot::COUNT).map(|_| Cell::new(0)).collect(),
            mask: (0..n.div_ceil(64) * CpuMask::COUNT).map(|_| Cell::new(0)).collect(),
            hash: (0..n * PV_LOCK_HASH_WORDS_PER_CPU).map(|_| Cell::new(0)).collect(),
            slice: None,
            clock: Cell::new(0),
            log: RefCell::new(Vec::new()),
        }
    }

    pub(crate) fn calls(&self) -> Vec<Call> {
        self.log.borrow().clone()
    }

    fn record(&self, call: Call) {
        self.log.borrow_mut().push(call);
    }

    fn rmw(w: &Cell<u64>, f: impl FnOnce(u64) -> u64) -> u64 {
        let old = w.get();
        w.set(f(old));
        old
    }
}

impl Platform for Recorder {
    type Word = Cell<u64>;

    fn cpu(&self) -> CpuId {
        self.cpu
    }
    fn nr_cpus(&self) -> u32 {
        self.nr_cpus
    }
    fn addr(&self, word: &Cell<u64>) -> u64 {
        word as *const Cell<u64> as u64
    }
    fn per_cpu(&self, cpu: CpuId, slot: PerCpuSlot) -> &Cell<u64> {
        &self.per_cpu[cpu as usize * PerCpuSlot::COUNT + slot as usize]
    }
    fn cpumask(&self, mask: CpuMask, chunk: u32) -> &Cell<u64> {
        &self.mask[mask as usize * self.nr_cpus.div_ceil(64) as usize + chunk as usize]
    }
    fn pv_lock_hash(&self, i: u32) -> &Cell<u64> {
        &self.hash[i as usize]
    }
    async fn load(&self, w: &Cell<u64>) -> u64 {
        w.get()
    }
    async fn store(&self, w: &Cell<u64>, v: u64) {
        w.set(v);
    }
    async fn fetch_add_field(&self, w: &Cell<u64>, field: Field, delta: u64) -> u64 {
        Self::rmw(w, |v| field.add(v, delta))
    }
    async fn fetch_or(&self, w: &Cell<u64>, bits: u64) -> u64 {
        Self::rmw(w, |v| v | bits)
    }
    async fn fetch_and(&self, w: &Cell<u64>, bits: u64) -> u64 {
        Self::rmw(w, |v| v & bits)
    }
    async fn swap(&self, w: &Cell<u64>, v: u64) -> u64 {
        w.replace(v)
    }
    async fn compare_exchange(&self, w: &Cell<u64>, old: u64, new: u64) -> Result<u64, u64> {
        self.record(Call::CompareExchange);
        let seen = w.get();
        if seen == old {
            w.set(new);
            Ok(seen)
        } else {
            Err(seen)
        }
    }
    fn smp_mb(&self) {}
    async fn spin_until(&self, w: &Cell<u64>, until: Until, max_pauses: u64) -> SpinOutcome {
        self.record(Call::Spin(max_pauses));
        let v = w.get();
        if until.holds(v) {
            SpinOutcome::Satisfied(v)
        } else {
            assert_ne!(max_pauses, u64::MAX, "an unbounded spin on {v:#x}, which nothing else will change");
            SpinOutcome::Exhausted(v)
        }
    }
    async fn spin_test_and_set(&self, w: &Cell<u64>, bits: u64, max_pauses: u64) -> SpinOutcome {
        self.record(Call::TestAndSet(max_pauses));
        let old = Self::rmw(w, |v| v | bits);
        if old & bits == 0 {
            SpinOutcome::Satisfied(old)
        } else {
            assert_ne!(max_pauses, u64::MAX, "an unbounded test-and-set on {old:#x}, which nothing else will clear");
            SpinOutcome::Exhausted(old)
        }
    }
    async fn halt(&self) {
        self.record(Call::Halt);
    }
    async fn kick(&self, cpu: CpuId) {
        self.record(Call::Kick(cpu));
    }
    async fn yield_now(&self) {
        self.record(Call::Yield);
    }
    fn vcpu_is_preempted(&self, _cpu: CpuId) -> bool {
        false
    }
    async fn slice_remaining(&self) -> Option<Nanos> {
        self.slice
    }
    /// One nanosecond per reading.
    async fn now(&self) -> Nanos {
        self.clock.set(self.clock.get() + 1);
        self.clock.get()
    }
}
