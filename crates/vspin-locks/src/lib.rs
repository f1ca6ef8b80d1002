//! # vspin-locks
//!
//! Guest spinlock algorithms of the vspin seeds, each written once against the [`Platform`]
//! interface and run both inside the `vspin-sim` simulator and (later) on real threads.
//!
//! One algorithm per file, each opening with a protocol description and a state diagram:
//! - [`tas`]: test-and-set, Linux's `virt_spin_lock` (no PV locks, unfair).
//! - [`ticket`]: the plain x86 ticket lock (FIFO).
//! - [`pv_ticket`]: the paravirtual ticket lock of Linux 3.19/4.0 with KVM kick (FIFO, halts).
//! - [`oticket`]: OTICKET (APSys'15) and its design alternatives: distance-based spinning and
//!   early wake-ups on top of the PV ticket lock (FIFO, halts).
//! - [`iticket`]: ITICKET, the PV ticket lock with a per-lock threshold doubled at every
//!   slow-path entry (an OTICKET-paper alternative; FIFO, halts).
//! - [`preemptable_ticket`]: the preemptable ticket lock of VEE'13 (FIFO until a waiter times
//!   out, then timed-out waiters may overtake a preempted one).
//! - [`pv_preemptable_ticket`]: its paravirtual variant (halts after timing out; unlock wakes all).
//! - [`qspinlock`]: the native queued spinlock of Linux 4.2+ (6.8 code): pending bit, then an
//!   MCS queue of per-CPU nodes (FIFO among queued waiters only).
//! - [`pv_qspinlock`]: its paravirtual variant of Linux 6.8 (lock stealing, halting queue nodes
//!   and head, a lock → node hash so that unlock kicks exactly the halted queue head).
//!
//! A lock is used through [`RawSpinLock`]:
//! ```text
//! let lock = TicketLock::<MyPlatform>::new(&mut words);
//! lock.lock(&cpu).await;   // critical section
//! lock.unlock(&cpu).await;
//! ```
pub mod iticket;
pub mod oticket;
pub mod platform;
pub mod preemptable_ticket;
pub mod pv_preemptable_ticket;
pub mod pv_qspinlock;
pub mod pv_ticket;
pub mod qspinlock;
pub mod tas;
pub mod ticket;

pub use platform::{
    CpuId, CpuMask, Field, Nanos, PerCpuSlot, Platform, RawSpinLock, SpinOutcome, Until, WordAlloc, PV_LOCK_HASH_WORDS_PER_CPU,
};
pub use iticket::ITicketLock;
pub use oticket::{LongerSpinningLock, OTicketLock, OpportunisticSpinLock, OpportunisticWakeupLock};
pub use preemptable_ticket::PreemptableTicketLock;
pub use pv_preemptable_ticket::PvPreemptableTicketLock;
pub use pv_qspinlock::PvQueuedSpinLock;
pub use pv_ticket::PvTicketLock;
pub use qspinlock::QueuedSpinLock;
pub use tas::TasLock;
pub use ticket::TicketLock;
