//! The guest lock of a VM, chosen by the scenario: one of the `vspin-locks` algorithms
//! instantiated on the simulator's platform.
use crate::guest::SimCpu;
use crate::memory::Memory;
use crate::scenario::LockKind;
use vspin_locks::{PvTicketLock, RawSpinLock, TasLock, TicketLock};

pub(crate) enum GuestLock {
    Tas(TasLock<SimCpu>),
    Ticket(TicketLock<SimCpu>),
    PvTicket(PvTicketLock<SimCpu>),
}

impl GuestLock {
    pub(crate) fn new(kind: LockKind, mem: &mut Memory) -> Self {
        match kind {
            LockKind::Tas => GuestLock::Tas(RawSpinLock::new(mem)),
            LockKind::Ticket => GuestLock::Ticket(RawSpinLock::new(mem)),
            LockKind::PvTicket => GuestLock::PvTicket(RawSpinLock::new(mem)),
        }
    }

    /// Whether the algorithm promises FIFO hand-off (checked by the lock monitor).
    pub(crate) fn fifo(kind: LockKind) -> bool {
        match kind {
            LockKind::Tas => <TasLock<SimCpu> as RawSpinLock<SimCpu>>::FIFO,
            LockKind::Ticket => <TicketLock<SimCpu> as RawSpinLock<SimCpu>>::FIFO,
            LockKind::PvTicket => <PvTicketLock<SimCpu> as RawSpinLock<SimCpu>>::FIFO,
        }
    }

    pub(crate) async fn lock(&self, cpu: &SimCpu) {
        match self {
            GuestLock::Tas(l) => l.lock(cpu).await,
            GuestLock::Ticket(l) => l.lock(cpu).await,
            GuestLock::PvTicket(l) => l.lock(cpu).await,
        }
    }

    pub(crate) async fn unlock(&self, cpu: &SimCpu) {
        match self {
            GuestLock::Tas(l) => l.unlock(cpu).await,
            GuestLock::Ticket(l) => l.unlock(cpu).await,
            GuestLock::PvTicket(l) => l.unlock(cpu).await,
        }
    }
}
