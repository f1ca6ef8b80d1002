//! The guest lock of a VM, chosen by the scenario: one of the `vspin-locks` algorithms
//! instantiated on the simulator's platform.
use crate::guest::SimCpu;
use crate::memory::Memory;
use crate::scenario::{LockKind, VmConfig};
use vspin_locks::{
    ITicketLock, LasTasLock, LongerSpinningLock, OTicketLock, OpportunisticSpinLock, OpportunisticWakeupLock, PreemptableTicketLock,
    PvPreemptableTicketLock, PvQueuedSpinLock, PvQueuedSpinLockV42, PvTicketLock, QueuedSpinLock, RawSpinLock, TasLock, TasYieldLock,
    TicketLock,
};

/// Declares the enum of guest locks and forwards each call to the algorithm.
macro_rules! guest_locks {
    ($($kind:ident => $lock:ident),+ $(,)?) => {
        pub(crate) enum GuestLock {
            $($kind($lock<SimCpu>),)+
        }

        impl GuestLock {
            fn build(kind: LockKind, mem: &mut Memory) -> Self {
                match kind {
                    $(LockKind::$kind => GuestLock::$kind(RawSpinLock::new(mem)),)+
                }
            }

            /// Whether the algorithm promises FIFO hand-off (checked by the lock monitor).
            pub(crate) fn fifo(kind: LockKind) -> bool {
                match kind {
                    $(LockKind::$kind => <$lock<SimCpu> as RawSpinLock<SimCpu>>::FIFO,)+
                }
            }

            /// The algorithm's own name (`RawSpinLock::NAME`), which scenarios use too.
            #[cfg(test)]
            fn algorithm_name(kind: LockKind) -> &'static str {
                match kind {
                    $(LockKind::$kind => <$lock<SimCpu> as RawSpinLock<SimCpu>>::NAME,)+
                }
            }

            #[cfg(test)]
            const ALL: &[LockKind] = &[$(LockKind::$kind),+];

            pub(crate) async fn lock(&self, cpu: &SimCpu) {
                match self {
                    $(GuestLock::$kind(l) => l.lock(cpu).await,)+
                }
            }

            /// # Safety
            /// `cpu`'s guest thread holds the lock.
            pub(crate) async unsafe fn unlock(&self, cpu: &SimCpu) {
                match self {
                    // SAFETY: forwarded from the caller.
                    $(GuestLock::$kind(l) => unsafe { l.unlock(cpu).await },)+
                }
            }
        }
    };
}

impl GuestLock {
    /// The VM's lock, with the scenario's tuning applied (validated to fit the lock kind).
    pub(crate) fn new(vm: &VmConfig, mem: &mut Memory) -> Self {
        let kind = vm.lock.expect("validated: a VM whose workload takes locks names its lock");
        match Self::build(kind, mem) {
            GuestLock::PreemptableTicket(mut l) => {
                if let Some(t) = vm.timeout_unit_pauses {
                    l = l.with_timeout_unit(t);
                }
                GuestLock::PreemptableTicket(l)
            }
            GuestLock::PvPreemptableTicket(mut l) => {
                if let Some(t) = vm.timeout_unit_pauses {
                    l = l.with_timeout_unit(t);
                }
                if let Some(n) = vm.halt_after_attempts {
                    l = l.with_halt_after(n);
                }
                GuestLock::PvPreemptableTicket(l)
            }
            lock => lock,
        }
    }
}

guest_locks! {
    Tas => TasLock,
    TasYield => TasYieldLock,
    LasTas => LasTasLock,
    Ticket => TicketLock,
    PvTicket => PvTicketLock,
    PreemptableTicket => PreemptableTicketLock,
    PvPreemptableTicket => PvPreemptableTicketLock,
    Oticket => OTicketLock,
    OticketSpinOnly => OpportunisticSpinLock,
    OticketWakeupOnly => OpportunisticWakeupLock,
    LongerSpinning => LongerSpinningLock,
    Iticket => ITicketLock,
    Qspinlock => QueuedSpinLock,
    PvQspinlock => PvQueuedSpinLock,
    PvQspinlockV42 => PvQueuedSpinLockV42,
}

#[cfg(test)]
mod tests {
    use super::GuestLock;

    #[test]
    fn a_scenario_names_each_lock_by_the_algorithms_own_name() {
        for &kind in GuestLock::ALL {
            assert_eq!(kind.name(), GuestLock::algorithm_name(kind));
        }
    }
}
