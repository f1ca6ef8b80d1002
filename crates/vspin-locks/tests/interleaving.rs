//! Property tests for every lock algorithm, independent of the simulator: CPUs are futures
//! interleaved at every platform call by a seeded random scheduler, which also freezes CPUs for
//! long stretches (preemption) and wakes halted CPUs spuriously (interrupts).
//!
//! Every fourth acquisition of a CPU starts with a few `try_lock`s, so that the trylock
//! protocols race with queued waiters here too.
//!
//! Checked: mutual exclusion; no lost wake-up (never are all unfinished CPUs halted); no PV
//! qspinlock hash entry left behind once every CPU is done; FIFO
//! hand-off for ticket locks always, and for preemptable locks when no CPU is frozen; ticket
//! wrap-around (lock words start a few tickets before the wrap: 24-bit tickets for the ticket
//! family, 8- and 16-bit ones for the preemptable locks);
//! queue order for qspinlocks (CPUs that joined the MCS queue acquire in the order they joined),
//! and for the Linux 4.2 PV qspinlock that no CPU takes the lock while others are queued unless
//! it queued itself (no lock stealing).
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use vspin_locks::*;

struct Machine {
    words: RefCell<Vec<u64>>,
    /// Word indices of per-CPU slots (`PerCpuSlot::COUNT` per CPU), of the CPU mask, then of the
    /// PV qspinlock hash table (`PV_LOCK_HASH_WORDS_PER_CPU` per CPU).
    slots: Vec<usize>,
    halted: RefCell<Vec<bool>>,
    pv_unhalted: RefCell<Vec<bool>>,
    /// CPUs in the order they took a ticket: an add to the lock word's upper field, or a
    /// compare-exchange that draws ticket 0 from a lock at rest at 0 (the preemptable locks).
    ticket_order: RefCell<Vec<u32>>,
    /// Adds to the lock word's upper field that wrapped it.
    tail_wraps: Cell<u32>,
    /// CPUs in the order they made themselves a qspinlock's queue tail (a CAS that writes their
    /// tail code, `cpu + 1` in bits 18.., over another), and which of them are still queued.
    queue_order: RefCell<Vec<u32>>,
    queued: RefCell<Vec<bool>>,
    halts: Cell<u32>,
    yields: Cell<u32>,
    /// Kicks each CPU has made.
    kicks: RefCell<Vec<u32>>,
    /// CPUs inside `unlock`.
    unlocking: Cell<u32>,
    slice_reads: Cell<u64>,
    clock: Cell<u64>,
    lock_word: Cell<usize>,
    nr: u32,
}

#[derive(Clone)]
struct Cpu {
    id: u32,
    m: Rc<Machine>,
}

/// Lets the scheduler switch CPUs before every platform call.
struct Preempt(bool);

impl Future for Preempt {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

async fn step() {
    Preempt(false).await
}

/// PAUSE iterations one scheduling step of a spinning CPU covers. Spinning reads change no
/// state, so coarser spin steps lose no interleaving of the operations that do, and let lock
/// timeouts (2^14 and 2^15 PAUSEs) expire within a test's run.
const PAUSES_PER_STEP: u64 = 512;

impl Cpu {
    fn rmw(&self, w: &usize, f: impl FnOnce(u64) -> u64) -> u64 {
        let mut words = self.m.words.borrow_mut();
        let old = words[*w];
        words[*w] = f(old);
        old
    }
}

impl Platform for Cpu {
    type Word = usize;

    fn cpu(&self) -> CpuId {
        self.id
    }
    fn nr_cpus(&self) -> u32 {
        self.m.nr
    }
    fn addr(&self, w: &usize) -> u64 {
        *w as u64 + 1
    }
    fn per_cpu(&self, cpu: CpuId, slot: PerCpuSlot) -> &usize {
        &self.m.slots[cpu as usize * PerCpuSlot::COUNT + slot as usize]
    }
    fn cpumask(&self, _mask: CpuMask, chunk: u32) -> &usize {
        &self.m.slots[self.m.nr as usize * PerCpuSlot::COUNT + chunk as usize]
    }
    fn pv_lock_hash(&self, i: u32) -> &usize {
        &self.m.slots[self.m.nr as usize * PerCpuSlot::COUNT + 1 + i as usize]
    }
    async fn load(&self, w: &usize) -> u64 {
        step().await;
        self.m.words.borrow()[*w]
    }
    async fn store(&self, w: &usize, v: u64) {
        step().await;
        self.rmw(w, |_| v);
    }
    async fn fetch_add_field(&self, w: &usize, field: Field, delta: u64) -> u64 {
        step().await;
        let old = self.rmw(w, |v| field.add(v, delta));
        if *w == self.m.lock_word.get() && field.shift > 0 {
            self.m.ticket_order.borrow_mut().push(self.id);
            self.m.tail_wraps.set(self.m.tail_wraps.get() + (field.get(old) + delta > field.mask()) as u32);
        }
        old
    }
    async fn fetch_or(&self, w: &usize, bits: u64) -> u64 {
        step().await;
        self.rmw(w, |v| v | bits)
    }
    async fn fetch_and(&self, w: &usize, bits: u64) -> u64 {
        step().await;
        self.rmw(w, |v| v & bits)
    }
    async fn swap(&self, w: &usize, v: u64) -> u64 {
        step().await;
        self.rmw(w, |_| v)
    }
    async fn compare_exchange(&self, w: &usize, old: u64, new: u64) -> Result<u64, u64> {
        step().await;
        let seen = self.rmw(w, |v| if v == old { new } else { v });
        let my_tail = (self.id as u64 + 1) << 18;
        let tail = |v: u64| v & 0xffff_0000;
        // A ticket drawn by a compare-exchange (a trylock, or the preemptable locks' fast path
        // from 0): it moves the ticket locks' `tail`, which lies in bits 40.. of each, to a word
        // other than 0 (the preemptable locks' return to rest at 0 draws nothing). No other
        // compare-exchange of a ticket lock changes those bits, and a qspinlock word has none.
        if *w == self.m.lock_word.get() && seen == old && new != 0 && new >> 40 != old >> 40 {
            self.m.ticket_order.borrow_mut().push(self.id);
        }
        if *w == self.m.lock_word.get() && seen == old && tail(new) == my_tail && tail(old) != my_tail {
            self.m.queue_order.borrow_mut().push(self.id);
            self.m.queued.borrow_mut()[self.id as usize] = true;
        }
        if seen == old {
            Ok(seen)
        } else {
            Err(seen)
        }
    }
    /// Every step here is sequentially consistent already.
    fn smp_mb(&self) {}
    async fn spin_until(&self, w: &usize, until: Until, max_pauses: u64) -> SpinOutcome {
        let mut left = max_pauses;
        loop {
            let v = self.load(w).await;
            if until.holds(v) {
                return SpinOutcome::Satisfied(v);
            }
            if left == 0 {
                return SpinOutcome::Exhausted(v);
            }
            left = left.saturating_sub(PAUSES_PER_STEP);
        }
    }
    async fn spin_test_and_set(&self, w: &usize, bits: u64, max_pauses: u64) -> SpinOutcome {
        let mut left = max_pauses;
        loop {
            let old = self.fetch_or(w, bits).await;
            if old & bits == 0 {
                return SpinOutcome::Satisfied(old);
            }
            if left == 0 {
                return SpinOutcome::Exhausted(old);
            }
            left = left.saturating_sub(PAUSES_PER_STEP);
        }
    }
    async fn halt(&self) {
        step().await;
        let me = self.id as usize;
        if std::mem::take(&mut self.m.pv_unhalted.borrow_mut()[me]) {
            return;
        }
        self.m.halted.borrow_mut()[me] = true;
        self.m.halts.set(self.m.halts.get() + 1);
        while self.m.halted.borrow()[me] {
            step().await;
        }
    }
    async fn kick(&self, cpu: CpuId) {
        step().await;
        self.m.kicks.borrow_mut()[self.id as usize] += 1;
        let c = cpu as usize;
        if !std::mem::take(&mut self.m.halted.borrow_mut()[c]) {
            self.m.pv_unhalted.borrow_mut()[c] = true;
        }
    }
    async fn yield_now(&self) {
        step().await;
        self.m.yields.set(self.m.yields.get() + 1);
    }
    fn vcpu_is_preempted(&self, _cpu: CpuId) -> bool {
        false
    }
    /// A slice page whose reading cycles through 0..64 clock ticks, so that the LAS lock both
    /// yields and takes the lock.
    async fn slice_remaining(&self) -> Option<Nanos> {
        step().await;
        let reads = self.m.slice_reads.get();
        self.m.slice_reads.set(reads + 1);
        Some(reads % 64)
    }
    /// One tick per reading.
    async fn now(&self) -> Nanos {
        step().await;
        self.m.clock.set(self.m.clock.get() + 1);
        self.m.clock.get()
    }
}

/// Allocates the lock word a few tickets before both ticket fields wrap.
struct NearWrap {
    m: Rc<Machine>,
    start: u64,
}

// SAFETY: each call pushes a word of its own. It holds `init | start`, against the letter of
// the trait's contract and on purpose: `start` moves a free ticket lock's `head` and `tail`
// together, to a free state that the lock's own acquisitions reach before their wrap.
unsafe impl WordAlloc<usize> for NearWrap {
    fn word(&mut self, init: u64) -> usize {
        let mut words = self.m.words.borrow_mut();
        words.push(init | self.start);
        self.m.lock_word.set(words.len() - 1);
        words.len() - 1
    }
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

struct Outcome {
    acquisitions: Vec<u32>,
    ticket_order: Vec<u32>,
    queue_order: Vec<u32>,
    /// Acquisitions by CPUs that had queued for them, in order.
    queued_acquisitions: Vec<u32>,
    /// Acquisitions by CPUs that had not queued, made while other CPUs were queued (lock
    /// stealing; in the native qspinlock also a `pending` CPU that got in before the queue).
    steals: u32,
    halts: u32,
    yields: u32,
    /// The most kicks one unlock made.
    max_kicks_per_unlock: u32,
    tail_wraps: u32,
    /// The lock word once every CPU is done.
    final_word: u64,
}

/// Checked whenever an unlock ends and no other CPU is inside one: the lock word and which
/// CPUs are halted (not kicked since they halted).
type QuietCheck = fn(word: u64, halted: &[bool]);

/// What [`run_with`] adds to [`run`].
#[derive(Default)]
struct Extras {
    /// Scheduling steps a holder spends inside the lock, besides the one every holder does.
    hold: u32,
    /// Every acquisition through `lock`, none through `try_lock`.
    lock_only: bool,
    quiet_check: Option<QuietCheck>,
}

/// Of every `TRY_EVERY` acquisitions of a CPU, the last starts with up to `TRIES` `try_lock`s
/// (with a scheduling step between) before it falls back to `lock`.
const TRY_EVERY: u32 = 4;
const TRIES: u32 = 8;

/// Run `cpus` CPUs each acquiring the lock `rounds` times. `freeze` enables random long
/// preemptions. Panics on a violated invariant.
fn run<L: RawSpinLock<Cpu> + 'static>(cpus: u32, rounds: u32, start: u64, seed: u64, freeze: bool) -> Outcome {
    run_with(cpus, rounds, start, seed, freeze, L::new, Extras::default())
}

/// [`run`] with the lock built by `make` (a lock's own constructor and settings), and the
/// `extras`.
fn run_with<L: RawSpinLock<Cpu> + 'static>(
    cpus: u32,
    rounds: u32,
    start: u64,
    seed: u64,
    freeze: bool,
    make: impl FnOnce(&mut NearWrap) -> L,
    extras: Extras,
) -> Outcome {
    let Extras { hold, lock_only, quiet_check } = extras;
    // At most 64 CPUs: one CPU-mask word.
    let words = cpus as usize * (PerCpuSlot::COUNT + PV_LOCK_HASH_WORDS_PER_CPU) + 1;
    let m = Rc::new(Machine {
        words: RefCell::new(vec![0; words]),
        slots: (0..words).collect(),
        halted: RefCell::new(vec![false; cpus as usize]),
        pv_unhalted: RefCell::new(vec![false; cpus as usize]),
        ticket_order: RefCell::new(Vec::new()),
        queue_order: RefCell::new(Vec::new()),
        queued: RefCell::new(vec![false; cpus as usize]),
        halts: Cell::new(0),
        yields: Cell::new(0),
        kicks: RefCell::new(vec![0; cpus as usize]),
        unlocking: Cell::new(0),
        slice_reads: Cell::new(0),
        clock: Cell::new(0),
        tail_wraps: Cell::new(0),
        lock_word: Cell::new(usize::MAX),
        nr: cpus,
    });
    let lock = Rc::new(make(&mut NearWrap { m: m.clone(), start }));
    let holder = Rc::new(Cell::new(None::<u32>));
    let acquisitions = Rc::new(RefCell::new(Vec::new()));
    let queued_acquisitions = Rc::new(RefCell::new(Vec::new()));
    let steals = Rc::new(Cell::new(0));
    let max_kicks = Rc::new(Cell::new(0));
    let mut tasks: Vec<Option<Pin<Box<dyn Future<Output = ()>>>>> = (0..cpus)
        .map(|id| {
            let (cpu, lock, holder, acq) = (Cpu { id, m: m.clone() }, lock.clone(), holder.clone(), acquisitions.clone());
            let (queued_acq, steals, max_kicks) = (queued_acquisitions.clone(), steals.clone(), max_kicks.clone());
            let task: Pin<Box<dyn Future<Output = ()>>> = Box::pin(async move {
                for round in 0..rounds {
                    let mut taken = false;
                    if !lock_only && round % TRY_EVERY == TRY_EVERY - 1 {
                        for _ in 0..TRIES {
                            taken = lock.try_lock(&cpu).await;
                            if taken {
                                break;
                            }
                            step().await;
                        }
                    }
                    if !taken {
                        lock.lock(&cpu).await;
                    }
                    assert_eq!(holder.replace(Some(id)), None, "mutual exclusion: CPU {id} entered a held lock");
                    acq.borrow_mut().push(id);
                    if std::mem::take(&mut cpu.m.queued.borrow_mut()[id as usize]) {
                        queued_acq.borrow_mut().push(id);
                    } else if cpu.m.queued.borrow().contains(&true) {
                        steals.set(steals.get() + 1);
                    }
                    for _ in 0..=hold {
                        step().await;
                    }
                    holder.set(None);
                    let kicks = cpu.m.kicks.borrow()[id as usize];
                    cpu.m.unlocking.set(cpu.m.unlocking.get() + 1);
                    // SAFETY: this CPU took the lock above.
                    unsafe { lock.unlock(&cpu).await };
                    cpu.m.unlocking.set(cpu.m.unlocking.get() - 1);
                    max_kicks.set(max_kicks.get().max(cpu.m.kicks.borrow()[id as usize] - kicks));
                    if let (Some(check), 0) = (quiet_check, cpu.m.unlocking.get()) {
                        check(cpu.m.words.borrow()[cpu.m.lock_word.get()], &cpu.m.halted.borrow());
                    }
                }
            });
            Some(task)
        })
        .collect();
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut frozen_until = vec![0u64; cpus as usize];
    let mut cx = Context::from_waker(Waker::noop());
    for now in 0u64.. {
        assert!(now < 5_000_000, "no progress: livelock");
        if tasks.iter().all(Option::is_none) {
            break;
        }
        if freeze && rng.below(2_000) == 0 {
            let c = rng.below(cpus as u64) as usize;
            frozen_until[c] = now + 1 + rng.below(5_000);
        }
        // Rare enough that a lost kick leaves every CPU halted before an interrupt rescues it.
        if rng.below(1_000_000) == 0 {
            let c = rng.below(cpus as u64) as usize;
            m.halted.borrow_mut()[c] = false; // a spurious wake-up (any interrupt)
        }
        let runnable: Vec<usize> = (0..cpus as usize)
            .filter(|&c| tasks[c].is_some() && !m.halted.borrow()[c] && frozen_until[c] <= now)
            .collect();
        if runnable.is_empty() {
            let live = (0..cpus as usize).filter(|&c| tasks[c].is_some());
            assert!(
                live.clone().any(|c| frozen_until[c] > now),
                "lost wake-up: every unfinished CPU is halted ({:?})",
                m.halted.borrow()
            );
            continue;
        }
        let c = runnable[rng.below(runnable.len() as u64) as usize];
        if tasks[c].as_mut().unwrap().as_mut().poll(&mut cx).is_ready() {
            tasks[c] = None;
        }
    }
    let acquisitions = acquisitions.take();
    assert_eq!(acquisitions.len(), (cpus * rounds) as usize);
    let final_word = m.words.borrow()[m.lock_word.get()];
    // A PV qspinlock entry (its `lock` word) outlives the wait that made it only by a bug: a
    // later unlock of the lock could find it and kick a CPU that is not waiting, while the
    // halted head goes unkicked. Other locks leave the table alone.
    for entry in 0..cpus as usize * PV_LOCK_HASH_WORDS_PER_CPU / 2 {
        let lock = m.words.borrow()[m.slots[cpus as usize * PerCpuSlot::COUNT + 1 + 2 * entry]];
        assert_eq!(lock, 0, "pv_lock_hash entry {entry} still names lock {lock:#x} with every CPU done");
    }
    Outcome {
        acquisitions,
        ticket_order: m.ticket_order.take(),
        queue_order: m.queue_order.take(),
        queued_acquisitions: queued_acquisitions.take(),
        steals: steals.get(),
        halts: m.halts.get(),
        yields: m.yields.get(),
        max_kicks_per_unlock: max_kicks.get(),
        tail_wraps: m.tail_wraps.get(),
        final_word,
    }
}

fn assert_fifo(o: &Outcome) {
    assert_eq!(o.acquisitions, o.ticket_order, "acquisitions out of ticket order");
}

/// A PV ticket lock (pv-ticket, OTICKET and its variants, ITICKET) at rest: `head == tail` and
/// the slow-path flag (bit 0 of `head`) clear, as the last waiter to take the lock clears it
/// (`__ticket_check_and_clear_slowpath`). A flag left set sends every later unlock to scan for
/// waiters to kick. ITICKET's threshold, in bits 24..40, is not looked at.
fn assert_pv_ticket_at_rest(o: &Outcome) {
    let (head, tail) = (o.final_word & 0xff_ffff, o.final_word >> 40);
    assert!(head == tail && head & 1 == 0, "word {:#x} not at rest (flag {})", o.final_word, head & 1);
}

/// A preemptable ticket lock at rest: `head == tail`, and no other bit set (not `locked`, not
/// the slow-path bit, no carry of `head` left in the spare bits above it).
fn assert_preemptable_at_rest<const BITS: u32>(o: &Outcome) {
    let (head, tail) = (o.final_word & ((1 << BITS) - 1), o.final_word >> (64 - BITS));
    assert_eq!((head, o.final_word & !(head | tail << (64 - BITS))), (tail, 0), "word {:#x} not at rest", o.final_word);
}

fn assert_queue_order(o: &Outcome) {
    assert!(!o.queue_order.is_empty(), "no CPU ever queued: the MCS queue was not exercised");
    assert_eq!(o.queued_acquisitions, o.queue_order, "queued CPUs acquired out of queue order");
}

/// Near the wrap point of the ticket family's 24-bit tickets: head = tail = 0xff_fff0 (also
/// even, as PV tickets need); `head` is the lowest field and `tail` the highest of the word.
const WRAP24: u64 = 0xff_fff0 << 40 | 0xff_fff0;
/// Near the wrap point of the preemptable locks' 16-bit tickets.
const WRAP16: u64 = 0xfff0 << 48 | 0xfff0;
/// Near the wrap point of 8-bit tickets.
const WRAP8: u64 = 0xf0 << 56 | 0xf0;

#[test]
fn tas_keeps_mutual_exclusion() {
    for seed in 1..=8 {
        assert_eq!(run::<TasLock<Cpu>>(4, 60, 0, seed, true).yields, 0, "virt_spin_lock's waiters never yield");
    }
}

#[test]
fn las_tas_keeps_mutual_exclusion_while_it_yields_for_short_slices() {
    for seed in 1..=8 {
        run::<LasTasLock<Cpu>>(4, 60, 0, seed, true);
    }
}

/// Behind a frozen holder its waiters exhaust `LONG_SPIN_COUNT` PAUSEs and yield.
#[test]
fn tas_yield_keeps_mutual_exclusion_and_yields_behind_a_preempted_holder() {
    let mut yields = 0;
    for seed in 1..=8 {
        yields += run::<TasYieldLock<Cpu>>(4, 60, 0, seed, true).yields;
    }
    assert!(yields > 0, "no waiter ever yielded");
}

#[test]
fn ticket_is_fifo_across_the_wrap() {
    for seed in 1..=8 {
        assert_fifo(&run::<TicketLock<Cpu>>(4, 60, WRAP24, seed, true));
    }
}

#[test]
fn pv_ticket_is_fifo_across_the_wrap_and_loses_no_wakeup() {
    let mut halts = 0;
    for seed in 1..=8 {
        let o = run::<PvTicketLock<Cpu>>(4, 60, WRAP24, seed, true);
        assert_fifo(&o);
        assert_pv_ticket_at_rest(&o);
        assert!(o.max_kicks_per_unlock <= 1, "an unlock kicked {} waiters", o.max_kicks_per_unlock);
        halts += o.halts;
    }
    assert!(halts > 0, "no waiter ever halted: the slow path was not exercised");
}

/// Whether both widths of a preemptable lock wrapped their tickets in some run: an idle lock
/// rests at 0, so tickets wrap only within a contention episode, and the tests must reach one.
fn assert_wrapped(runs: &[(Outcome, Outcome)]) {
    let wraps = |narrow: bool| runs.iter().map(|(w, n)| if narrow { n.tail_wraps } else { w.tail_wraps }).sum::<u32>();
    assert!(wraps(false) > 0 && wraps(true) > 0, "tickets never wrapped (16-bit: {}, 8-bit: {})", wraps(false), wraps(true));
}

#[test]
fn preemptable_ticket_is_fifo_without_preemption() {
    let mut runs = Vec::new();
    for seed in 1..=8 {
        let (wide, narrow) = (run::<PreemptableTicketLock<Cpu>>(4, 60, WRAP16, seed, false), run::<PreemptableTicketLock<Cpu, 8>>(4, 100, WRAP8, seed, false));
        assert_fifo(&wide);
        assert_fifo(&narrow);
        assert_preemptable_at_rest::<16>(&wide);
        assert_preemptable_at_rest::<8>(&narrow);
        runs.push((wide, narrow));
    }
    assert_wrapped(&runs);
}

#[test]
fn preemptable_ticket_overtakes_preempted_waiters_safely_across_the_wrap() {
    let mut overtakes = 0;
    let mut runs = Vec::new();
    for seed in 1..=8 {
        let (wide, narrow) = (run::<PreemptableTicketLock<Cpu>>(4, 80, WRAP16, seed, true), run::<PreemptableTicketLock<Cpu, 8>>(4, 100, WRAP8, seed, true));
        assert_preemptable_at_rest::<16>(&wide);
        assert_preemptable_at_rest::<8>(&narrow);
        for o in [&wide, &narrow] {
            overtakes += (o.acquisitions != o.ticket_order) as u32;
        }
        runs.push((wide, narrow));
    }
    assert!(overtakes > 0, "preemption never made a waiter time out: the test does not exercise timeouts");
    assert_wrapped(&runs);
}

#[test]
fn pv_preemptable_ticket_loses_no_wakeup_across_the_wrap() {
    let mut halts = 0;
    let mut runs = Vec::new();
    for seed in 1..=8 {
        let (wide, narrow) = (run::<PvPreemptableTicketLock<Cpu>>(4, 80, WRAP16, seed, true), run::<PvPreemptableTicketLock<Cpu, 8>>(4, 100, WRAP8, seed, true));
        assert_preemptable_at_rest::<16>(&wide);
        assert_preemptable_at_rest::<8>(&narrow);
        halts += wide.halts + narrow.halts;
        assert_fifo(&run::<PvPreemptableTicketLock<Cpu, 8>>(3, 100, WRAP8, seed, false));
        runs.push((wide, narrow));
    }
    assert!(halts > 0, "no waiter ever halted: the slow path was not exercised");
    assert_wrapped(&runs);
}

/// Between unlocks, a PV preemptable waiter that is halted and not yet kicked must have the
/// slow-path bit (bit `2·BITS + 1`) set, or no unlock will kick it: a waiter joins the waiting
/// mask before it sets the bit, and an unlock clears the bit before it scans the mask, so a
/// waiter whose bit an unlock clears is kicked by that unlock.
fn halted_waiters_have_the_slow_path_bit<const BITS: u32>(word: u64, halted: &[bool]) {
    let slowpath = 1u64 << (2 * BITS + 1);
    assert!(
        word & slowpath != 0 || !halted.contains(&true),
        "CPUs {halted:?} halted with the slow-path bit clear in {word:#x}: no unlock will kick them"
    );
}

/// Waiters that time out at once and halt after one failed attempt at `locked` put several
/// CPUs in `wait` around every unlock. An unlock that kicked the waiting mask before clearing
/// the slow-path bit would miss a waiter that joins the mask after the scan and halts, and then
/// clear the bit that waiter set, leaving it halted with no kick to come (the mutation audit's
/// finding; with the default thresholds all CPUs are rarely halted at once, so the lost-wake-up
/// check alone did not see it).
#[test]
fn pv_preemptable_ticket_unlock_leaves_no_halted_waiter_unkicked_and_unflagged() {
    let mut halts = 0;
    for seed in 1..=8 {
        let wide = |mem: &mut NearWrap| PvPreemptableTicketLock::<Cpu>::new(mem).with_halt_after(0).with_timeout_unit(1);
        let narrow = |mem: &mut NearWrap| PvPreemptableTicketLock::<Cpu, 8>::new(mem).with_halt_after(0).with_timeout_unit(1);
        let o = run_with(4, 40, WRAP16, seed, true, wide, Extras { quiet_check: Some(halted_waiters_have_the_slow_path_bit::<16>), ..Extras::default() });
        assert_preemptable_at_rest::<16>(&o);
        halts += o.halts;
        let o = run_with(4, 40, WRAP8, seed, true, narrow, Extras { quiet_check: Some(halted_waiters_have_the_slow_path_bit::<8>), ..Extras::default() });
        assert_preemptable_at_rest::<8>(&o);
        halts += o.halts;
    }
    assert!(halts > 0, "no waiter ever halted: the slow path was not exercised");
}

#[test]
fn oticket_and_its_variants_are_fifo_across_the_wrap_and_lose_no_wakeup() {
    for seed in 1..=8 {
        for o in [
            run::<OTicketLock<Cpu>>(4, 60, WRAP24, seed, true),
            run::<OpportunisticSpinLock<Cpu>>(4, 60, WRAP24, seed, true),
            run::<OpportunisticWakeupLock<Cpu>>(4, 60, WRAP24, seed, true),
            run::<LongerSpinningLock<Cpu>>(4, 60, WRAP24, seed, true),
            run::<ITicketLock<Cpu>>(4, 60, WRAP24, seed, true),
        ] {
            assert_fifo(&o);
            assert_pv_ticket_at_rest(&o);
        }
    }
}

/// Without trylocks, which clear a stale flag on their way in, only the last waiter to take the
/// lock clears the slow-path flag: left set, it sends every later unlock to scan for waiters to
/// kick (the mutation audit's finding: pv-ticket's waiter never cleared it, and no test saw).
#[test]
fn pv_ticket_locks_clear_the_slow_path_flag_once_no_waiter_is_left() {
    fn lock_only<L: RawSpinLock<Cpu> + 'static>(seed: u64) -> Outcome {
        let o = run_with(4, 60, WRAP24, seed, true, L::new, Extras { lock_only: true, ..Extras::default() });
        assert_fifo(&o);
        assert_pv_ticket_at_rest(&o);
        o
    }
    let mut halts = 0;
    for seed in 1..=8 {
        halts += lock_only::<PvTicketLock<Cpu>>(seed).halts;
        lock_only::<OTicketLock<Cpu>>(seed);
        lock_only::<OpportunisticWakeupLock<Cpu>>(seed);
        lock_only::<ITicketLock<Cpu>>(seed);
    }
    assert!(halts > 0, "no pv-ticket waiter ever halted: the flag was never set");
}

#[test]
fn oticket_far_waiters_halt_and_are_woken_early() {
    // Only waiters at least TICKET_QUEUE_WAIT (18) tickets from the head spin as little as
    // 2^15 PAUSEs, so the queue must be deeper than that for anyone to halt.
    let (mut halts, mut max_kicks) = (0, 0);
    for seed in 1..=4 {
        let o = run::<OTicketLock<Cpu>>(20, 8, WRAP24, seed, true);
        assert_fifo(&o);
        assert_pv_ticket_at_rest(&o);
        halts += o.halts;
        max_kicks = max_kicks.max(o.max_kicks_per_unlock);
    }
    assert!(halts > 0, "no waiter ever halted: the slow path was not exercised");
    assert!(max_kicks > 1, "no unlock woke more than one waiter early");
}

// qspinlocks have no counter that wraps (the tail names a CPU), so they start from 0.

#[test]
fn qspinlock_serves_its_queue_in_order_and_never_halts() {
    for seed in 1..=8 {
        let o = run::<QueuedSpinLock<Cpu>>(5, 60, 0, seed, true);
        assert_queue_order(&o);
        assert_eq!(o.halts, 0);
    }
}

#[test]
fn pv_qspinlock_serves_its_queue_in_order_and_loses_no_wakeup() {
    let (mut halts, mut steals) = (0, 0);
    for seed in 1..=8 {
        let o = run::<PvQueuedSpinLock<Cpu>>(5, 60, 0, seed, true);
        assert_queue_order(&o);
        halts += o.halts;
        steals += o.steals;
    }
    assert!(halts > 0, "no waiter ever halted: the slow path was not exercised");
    // Linux 6.8's hybrid unfair trylock; the 4.2 lock below must show none.
    assert!(steals > 0, "no CPU ever took the lock past queued ones: stealing was not exercised");
}

#[test]
fn pv_qspinlock_v42_serves_its_queue_in_order_lets_no_one_steal_and_loses_no_wakeup() {
    let mut halts = 0;
    for seed in 1..=8 {
        let o = run::<PvQueuedSpinLockV42<Cpu>>(5, 60, 0, seed, true);
        assert_queue_order(&o);
        assert_eq!(o.steals, 0, "a CPU that did not queue took the lock while others were queued");
        halts += o.halts;
    }
    assert!(halts > 0, "no waiter ever halted: the slow path was not exercised");
}

/// Many short runs of few CPUs reach the races of the pending path that long runs of five
/// rarely do: a CPU that read the lock held by one owner alone (0,0,1) sets `pending` only after
/// a queue has formed and its head has seen the lock free. The `fetch_or` that sets `pending`
/// must then see the tail and back off to the queue; if it looked at `pending` only, it would
/// take the lock beside the head (the mutation audit's finding, caught here in well under a
/// second).
#[test]
fn qspinlock_pending_path_backs_off_to_a_queue_that_formed_meanwhile() {
    let mut queued = 0;
    for seed in 1..=2000 {
        queued += run::<QueuedSpinLock<Cpu>>(3, 3, 0, seed, true).queue_order.len();
    }
    assert!(queued > 0, "no CPU ever queued");
}

/// The PV queued locks in the same short runs, which are cheap: a queue forming while a CPU
/// is between its failed fast path and its `xchg_tail`, and the head's `pending` there (6.8).
#[test]
fn pv_qspinlocks_keep_mutual_exclusion_in_many_short_runs() {
    for seed in 1..=2000 {
        run::<PvQueuedSpinLock<Cpu>>(3, 3, 0, seed, true);
        assert_eq!(run::<PvQueuedSpinLockV42<Cpu>>(3, 3, 0, seed, true).steals, 0, "a CPU stole past the v4.2 queue");
    }
}

/// Steps a holder stays inside: about the 64 scheduling steps of a `SPIN_THRESHOLD` spin
/// (2^15 PAUSEs at `PAUSES_PER_STEP`), so that a PV qspinlock head gives up spinning while the
/// lock is held, and the holder often releases it within the few steps the head then takes to
/// hash itself and mark the lock `_Q_SLOW_VAL`.
const HOLD_ABOUT_A_SPIN_THRESHOLD: u32 = 60;

/// A PV queue head that gives up spinning hashes itself and may then find the lock already
/// free: it takes it, and must take its hash entry out again. Left in, the entry is found by a
/// later unlock, which kicks this CPU rather than the halted head of the moment (the mutation
/// audit's finding for the v4.2 lock, and here for 6.8's: the kick goes astray and every CPU
/// ends up halted, or the entry is still there when the run ends).
/// Critical sections as long as the head's spin reach that window in nearly every run; with
/// the default one-step sections only freezes reach it, in 3 runs of 3000 of 5 CPUs.
#[test]
fn pv_qspinlock_head_that_finds_the_lock_free_after_hashing_leaves_no_entry() {
    let (mut halts, mut halts_v42) = (0, 0);
    for seed in 1..=50 {
        let extras = || Extras { hold: HOLD_ABOUT_A_SPIN_THRESHOLD, ..Extras::default() };
        halts_v42 += run_with(3, 10, 0, seed, true, PvQueuedSpinLockV42::<Cpu>::new, extras()).halts;
        halts += run_with(3, 10, 0, seed, true, PvQueuedSpinLock::<Cpu>::new, extras()).halts;
    }
    assert!(halts > 0 && halts_v42 > 0, "no waiter ever halted: the slow path was not exercised");
}
