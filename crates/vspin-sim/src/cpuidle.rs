//! Host idle states: what it costs to wake a pCPU that had nothing to run.
//!
//! When a pCPU's run queue empties (its vCPU halted in the guest), the host's cpuidle governor
//! puts it into a hardware C-state; the next wake-up pays that state's exit latency on top of the
//! scheduler trip (`wakeup_ns`, which already covers C1). Deeper states save power and cost more
//! to leave, so long halts make the next wake-up slower — one of the feedbacks behind the sleepy
//! spinlock anomaly on hosts that leave C-states enabled.
//!
//! The choice follows the `menu` governor in outline (`drivers/cpuidle/governors/menu.c`): the
//! deepest enabled state whose `target_residency` does not exceed the predicted idle time. The
//! prediction here is the pCPU's previous idle period, where `menu` combines recent intervals
//! with the next timer event (a simplification, documented in `docs/calibration.md`). A pCPU that
//! is woken in the same instant it went idle never entered a state and pays nothing.
//!
//! With no states configured (the default, as on hosts booted with deep C-states disabled, like
//! APPLES'), idle costs nothing beyond `wakeup_ns`.
use crate::engine::Time;
use crate::scenario::IdleState;

#[derive(Default)]
pub(crate) struct IdleGovernor {
    /// When the pCPU went idle; `None` while it runs something.
    since: Option<Time>,
    /// Exit latency of the state chosen at the last idle entry.
    exit_ns: u64,
    /// Length of the previous idle period: the prediction for the next one.
    last_idle_ns: u64,
}

impl IdleGovernor {
    /// The pCPU has nothing to run from `now` (no effect if it is idle already).
    pub(crate) fn enter(&mut self, now: Time, states: &[IdleState]) {
        if self.since.is_some() {
            return;
        }
        self.since = Some(now);
        self.exit_ns = states
            .iter()
            .filter(|s| s.residency_ns.round() as u64 <= self.last_idle_ns)
            .map(|s| s.exit_ns.round() as u64)
            .next_back()
            .unwrap_or(0);
    }

    /// The pCPU runs something again at `now`: the exit latency to pay.
    pub(crate) fn leave(&mut self, now: Time) -> u64 {
        match self.since.take() {
            Some(since) if now > since => {
                self.last_idle_ns = now - since;
                self.exit_ns
            }
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `nehalem_cstates` of `drivers/idle/intel_idle.c` beyond C1: C1E, C3, C6.
    fn nehalem() -> Vec<IdleState> {
        [(10_000.0, 20_000.0), (20_000.0, 80_000.0), (200_000.0, 800_000.0)]
            .map(|(exit_ns, residency_ns)| IdleState { exit_ns, residency_ns })
            .to_vec()
    }

    #[test]
    fn a_long_previous_idle_period_selects_a_deep_state() {
        let mut g = IdleGovernor::default();
        g.enter(0, &nehalem());
        assert_eq!(g.leave(1_000_000), 0, "no history: shallowest state");
        g.enter(2_000_000, &nehalem());
        assert_eq!(g.leave(2_500_000), 200_000, "predicted 1 ms ≥ C6 residency");
        g.enter(3_000_000, &nehalem());
        assert_eq!(g.leave(3_050_000), 20_000, "predicted 500 µs: C3");
        g.enter(4_000_000, &nehalem());
        assert_eq!(g.leave(4_000_000), 0, "never entered");
    }
}
