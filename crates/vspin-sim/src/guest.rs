//! The guest side of a vCPU: the simulator's implementation of the lock [`Platform`], and the
//! mailbox through which suspended guest code talks to the simulator.
//!
//! Guest code (a workload loop calling lock algorithms) is one `async` future per vCPU. Every
//! `async` platform call places a [`Req`] in the thread's mailbox and suspends; the simulator
//! takes the request, advances simulated time as the request costs, writes the result back and
//! polls the future again. Bookkeeping that needs no answer ([`Note`], through
//! [`SimCpu::note`]) goes to a list of its own without suspending; the simulator applies a
//! poll's notes ([`take_notes`]) before the request that ended it. A future is never polled by
//! anything but the simulator, so no waker is needed.
use crate::memory::SimWord;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use vspin_locks::{CpuId, CpuMask, Field, Nanos, PerCpuSlot, Platform, SpinOutcome, Until, PV_LOCK_HASH_WORDS_PER_CPU};

#[derive(Clone, Copy, Debug)]
pub(crate) enum MemOp {
    Load,
    Store(u64),
    FetchAddField(Field, u64),
    FetchOr(u64),
    FetchAnd(u64),
    Swap(u64),
    Cas(u64, u64),
}

/// Bookkeeping the workload reports; it costs no simulated time and needs no answer, so guest
/// code does not suspend for it: a note waits in the thread's mailbox, and the simulator reads
/// the notes of a poll, in order, before the request that ends it ([`take_notes`]). Nothing
/// happens between a note and that request, so this is what handling each note at once would
/// do, without a poll of the nested lock futures per note (about half of all polls). What can
/// start host work is a request instead: [`Req::InterruptsOn`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Note {
    LockBegin(u32),
    LockAcquired(u32),
    LockRelease(u32),
    /// `local_irq_save` before a lock taken with interrupts off.
    InterruptsOff,
    /// A work unit is done. If that completes its VM's target, the vCPU halts for good and the
    /// request after the note is never carried out, as the guest is never polled again.
    WorkDone,
}

/// What guest code asks of the simulator.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Req {
    Mem(SimWord, MemOp),
    /// A PAUSE loop on a word until the condition holds or the PAUSE budget runs out; answered
    /// with the last value read and whether the condition held.
    Spin(SimWord, Until, u64),
    /// One PAUSE (`cpu_relax()`) with no memory access, between two attempts of a test-and-set
    /// loop: spinning time that PLE counts, as a PAUSE is.
    Relax,
    Halt,
    Kick(CpuId),
    Yield,
    /// Run for `Nanos`; in guest kernel mode if the flag is set (else user mode, unless a lock
    /// is held: a critical section is kernel code).
    Compute(Nanos, bool),
    /// Guest idle: halt until `Nanos` from now (timer) or an interrupt.
    Sleep(Nanos),
    /// Send a synchronous IPI (TLB shootdown) to `count` vCPUs starting at vCPU `start`, skipping
    /// the sender; acknowledgements decrement the sender's call-function word.
    Shootdown { start: u32, count: u32 },
    /// Wake the first sleeping vCPU from vCPU `start` on (a reschedule IPI that ends its sleep).
    WakePeer { start: u32 },
    /// Wake vCPU `CpuId` of the VM if it sleeps in guest idle (a futex wake of the thread
    /// blocked there); one not asleep yet needs no IPI.
    WakeVcpu(CpuId),
    /// Read the guest clock (answered with the simulated time, at no cost).
    Clock,
    /// Read the time left in the vCPU's slice from the LAS page (answered, when there is one,
    /// with the time and `ok`, after the read's cost).
    SliceRemaining,
    /// `local_irq_restore` after the unlock of a lock taken with interrupts off: IPIs that came
    /// meanwhile are taken now, which is host work.
    InterruptsOn,
}

/// The simulator's answer to a request. `value`: the word's value (a load's, the old one of a
/// read-modify-write, the last one a spin read) or, for [`Req::Clock`], the time; `ok`: whether
/// a compare-exchange succeeded or a spin's condition held. Other requests answer the default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Response {
    pub value: u64,
    pub ok: bool,
}

impl Response {
    pub(crate) const NONE: Response = Response { value: 0, ok: false };

    pub(crate) fn new(value: u64, ok: bool) -> Response {
        Response { value, ok }
    }
}

thread_local! {
    static REQUEST: Cell<Option<Req>> = const { Cell::new(None) };
    static RESPONSE: Cell<Response> = const { Cell::new(Response::NONE) };
    static NOTES: RefCell<Vec<Note>> = const { RefCell::new(Vec::new()) };
}

/// Take the request the last poll left in the mailbox.
pub(crate) fn take_request() -> Option<Req> {
    REQUEST.with(|r| r.take())
}

/// Move the notes left since the last call into `into` (which must be empty), in the order they
/// were made. The two buffers trade places, each keeping its capacity: no copy.
pub(crate) fn take_notes(into: &mut Vec<Note>) {
    debug_assert!(into.is_empty(), "the last poll's notes were not cleared");
    NOTES.with(|q| std::mem::swap(into, &mut q.borrow_mut()));
}

/// Answer the pending request before the next poll.
pub(crate) fn respond(response: Response) {
    RESPONSE.with(|r| r.set(response));
}

/// A submitted request: suspends on the first poll, returns the response on the second.
struct Submitted(bool);

impl Future for Submitted {
    type Output = Response;
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Response> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(RESPONSE.with(|r| r.get()))
        } else {
            Poll::Pending
        }
    }
}

/// Submit `req` and suspend until the simulator has answered it. The request goes to the
/// mailbox at once, not through the future's state: stored there and read back at its first
/// poll, it stalled on store forwarding (`docs/performance.md`). Always awaited at once.
fn call(req: Req) -> impl Future<Output = Response> {
    REQUEST.with(|r| r.set(Some(req)));
    Submitted(false)
}

/// Number of per-vCPU words the simulator keeps: the lock slots plus the call-function word.
pub(crate) const WORDS_PER_CPU: usize = PerCpuSlot::COUNT + 1;

/// Number of words a VM of `vcpus` vCPUs keeps for its guest: per-CPU data, CPU masks and the
/// PV qspinlock hash table.
pub(crate) fn vm_words(vcpus: u32) -> usize {
    vcpus as usize * (WORDS_PER_CPU + PV_LOCK_HASH_WORDS_PER_CPU) + CpuMask::COUNT * vcpus.div_ceil(64) as usize
}

/// A vCPU as guest code sees it.
#[derive(Clone)]
pub struct SimCpu {
    cpu: CpuId,
    nr_cpus: u32,
    /// Per-CPU words (`WORDS_PER_CPU` per vCPU), the VM's CPU-mask words, then its PV qspinlock
    /// hash table (`PV_LOCK_HASH_WORDS_PER_CPU` per vCPU): [`vm_words`] of them.
    words: Rc<[SimWord]>,
}

impl SimCpu {
    pub(crate) fn new(cpu: CpuId, nr_cpus: u32, words: Rc<[SimWord]>) -> Self {
        SimCpu { cpu, nr_cpus, words }
    }

    fn slot(&self, cpu: CpuId, i: usize) -> &SimWord {
        &self.words[cpu as usize * WORDS_PER_CPU + i]
    }

    /// The word a shootdown's targets decrement (`call_single_data`).
    pub(crate) fn call_function_word(&self) -> &SimWord {
        self.slot(self.cpu, PerCpuSlot::COUNT)
    }

    pub(crate) async fn compute(&self, ns: Nanos) {
        call(Req::Compute(ns, false)).await;
    }

    /// Guest kernel work outside any lock (a guest context switch).
    pub(crate) async fn kernel_compute(&self, ns: Nanos) {
        call(Req::Compute(ns, true)).await;
    }

    /// The guest's clock (`ktime_get`), in ns.
    pub(crate) async fn clock(&self) -> Nanos {
        call(Req::Clock).await.value
    }

    /// Guest idle for `ns`, or until a wake-up IPI; `Nanos::MAX` sleeps until one comes.
    pub(crate) async fn sleep(&self, ns: Nanos) {
        call(Req::Sleep(ns)).await;
    }

    pub(crate) fn note(&self, n: Note) {
        NOTES.with(|q| q.borrow_mut().push(n));
    }

    /// See [`Req::InterruptsOn`].
    pub(crate) async fn interrupts_on(&self) {
        call(Req::InterruptsOn).await;
    }

    /// `try_to_wake_up` of a thread sleeping on another vCPU: a reschedule IPI if one sleeps.
    pub(crate) async fn wake_peer(&self, start: u32) {
        call(Req::WakePeer { start }).await;
    }

    /// `try_to_wake_up` of the thread blocked on vCPU `cpu`: a reschedule IPI if it sleeps in
    /// guest idle there.
    pub(crate) async fn wake_vcpu(&self, cpu: CpuId) {
        call(Req::WakeVcpu(cpu)).await;
    }

    /// `smp_call_function_many(..., wait=1)`: IPI the targets and spin until all have run the
    /// handler.
    pub(crate) async fn shootdown(&self, start: u32, count: u32) {
        call(Req::Shootdown { start, count }).await;
        self.spin_until(self.call_function_word(), Until::eq(0), u64::MAX).await;
    }
}

impl Platform for SimCpu {
    type Word = SimWord;

    fn cpu(&self) -> CpuId {
        self.cpu
    }
    fn nr_cpus(&self) -> u32 {
        self.nr_cpus
    }
    fn addr(&self, w: &SimWord) -> u64 {
        // Never 0: the kernel uses a NULL lock pointer for "not waiting".
        (w.0 as u64 + 1) * 64
    }
    fn per_cpu(&self, cpu: CpuId, slot: PerCpuSlot) -> &SimWord {
        self.slot(cpu, slot as usize)
    }
    fn cpumask(&self, mask: CpuMask, chunk: u32) -> &SimWord {
        let chunks = self.nr_cpus.div_ceil(64) as usize;
        &self.words[self.nr_cpus as usize * WORDS_PER_CPU + mask as usize * chunks + chunk as usize]
    }
    fn pv_lock_hash(&self, i: u32) -> &SimWord {
        let masks = CpuMask::COUNT * self.nr_cpus.div_ceil(64) as usize;
        &self.words[self.nr_cpus as usize * WORDS_PER_CPU + masks + i as usize]
    }

    async fn load(&self, w: &SimWord) -> u64 {
        call(Req::Mem(*w, MemOp::Load)).await.value
    }
    async fn store(&self, w: &SimWord, v: u64) {
        call(Req::Mem(*w, MemOp::Store(v))).await;
    }
    async fn fetch_add_field(&self, w: &SimWord, field: Field, delta: u64) -> u64 {
        call(Req::Mem(*w, MemOp::FetchAddField(field, delta))).await.value
    }
    async fn fetch_or(&self, w: &SimWord, bits: u64) -> u64 {
        call(Req::Mem(*w, MemOp::FetchOr(bits))).await.value
    }
    async fn fetch_and(&self, w: &SimWord, bits: u64) -> u64 {
        call(Req::Mem(*w, MemOp::FetchAnd(bits))).await.value
    }
    async fn swap(&self, w: &SimWord, v: u64) -> u64 {
        call(Req::Mem(*w, MemOp::Swap(v))).await.value
    }
    async fn compare_exchange(&self, w: &SimWord, old: u64, new: u64) -> Result<u64, u64> {
        let Response { value, ok } = call(Req::Mem(*w, MemOp::Cas(old, new))).await;
        if ok {
            Ok(value)
        } else {
            Err(value)
        }
    }

    /// The model's memory is sequentially consistent: a barrier orders nothing more, and costs
    /// nothing (on x86 the locked instruction that follows every `smp_mb__before_atomic()` is it).
    fn smp_mb(&self) {}

    async fn spin_until(&self, w: &SimWord, until: Until, max_pauses: u64) -> SpinOutcome {
        match call(Req::Spin(*w, until, max_pauses)).await {
            Response { value, ok: true } => SpinOutcome::Satisfied(value),
            Response { value, ok: false } => SpinOutcome::Exhausted(value),
        }
    }

    async fn spin_test_and_set(&self, w: &SimWord, bits: u64, max_pauses: u64) -> SpinOutcome {
        let mut left = max_pauses;
        loop {
            let old = self.fetch_or(w, bits).await;
            if old & bits == 0 {
                return SpinOutcome::Satisfied(old);
            }
            if left == 0 {
                return SpinOutcome::Exhausted(old);
            }
            if left != u64::MAX {
                left -= 1;
            }
            call(Req::Relax).await;
        }
    }

    async fn halt(&self) {
        call(Req::Halt).await;
    }
    async fn kick(&self, cpu: CpuId) {
        call(Req::Kick(cpu)).await;
    }
    async fn yield_now(&self) {
        call(Req::Yield).await;
    }

    /// Linux 3.19's `struct kvm_steal_time` has no `preempted` field (`kernel-mechanisms.md`
    /// §3.1), so the guests modelled here cannot know.
    fn vcpu_is_preempted(&self, _cpu: CpuId) -> bool {
        false
    }
    /// `Some` only under `scheduler = "credit1"` with `las = true`, the one hypervisor modelled
    /// that publishes its slices.
    async fn slice_remaining(&self) -> Option<Nanos> {
        let Response { value, ok } = call(Req::SliceRemaining).await;
        ok.then_some(value)
    }
    async fn now(&self) -> Nanos {
        self.clock().await
    }
}
