//! Pause-Loop Exiting window policies (`kernel-mechanisms.md` §4).
//!
//! The window is per vCPU, in TSC cycles. Stock KVM (`kvm`) grows it on every PLE exit
//! (`handle_pause` → `grow_ple_window`) and shrinks it whenever the vCPU thread is scheduled back
//! in (`kvm_sched_in` → `shrink_ple_window`); with the default `shrink = 0` that is a reset to
//! the base window. `fixed` keeps the base window (Xen's behaviour); `off` never exits.
use crate::scenario::{PleConfig, PlePolicy};

/// `__grow_ple_window`: multiply while the modifier is below the base, else add; clamp to max.
pub(crate) fn grow(cfg: &PleConfig, window: u64) -> u64 {
    match cfg.policy {
        PlePolicy::Kvm => {
            if cfg.grow < 1 {
                return cfg.window_cycles;
            }
            let w = if cfg.grow < cfg.window_cycles { window.saturating_mul(cfg.grow) } else { window.saturating_add(cfg.grow) };
            w.min(cfg.max_cycles)
        }
        PlePolicy::Fixed | PlePolicy::Off => window,
    }
}

/// `__shrink_ple_window`: divide while the modifier is below the base, else subtract; never
/// below the base; a zero modifier resets to the base.
pub(crate) fn shrink(cfg: &PleConfig, window: u64) -> u64 {
    match cfg.policy {
        PlePolicy::Kvm => {
            if cfg.shrink < 1 {
                return cfg.window_cycles;
            }
            let w = if cfg.shrink < cfg.window_cycles { window / cfg.shrink } else { window.saturating_sub(cfg.shrink) };
            w.max(cfg.window_cycles)
        }
        PlePolicy::Fixed | PlePolicy::Off => window,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stock_kvm_doubles_then_resets() {
        let cfg = PleConfig::default();
        let w = grow(&cfg, grow(&cfg, 4096));
        assert_eq!(w, 16384);
        assert_eq!(shrink(&cfg, w), 4096);
    }

    #[test]
    fn grow_is_additive_for_large_modifiers_and_clamped() {
        let cfg = PleConfig { grow: 5000, max_cycles: 12000, ..PleConfig::default() };
        assert_eq!(grow(&cfg, 4096), 9096);
        assert_eq!(grow(&cfg, 9096), 12000);
        let cfg = PleConfig { shrink: 2, ..PleConfig::default() };
        assert_eq!(shrink(&cfg, 16384), 8192);
        assert_eq!(shrink(&cfg, 6000), 4096);
    }

    #[test]
    fn fixed_never_changes() {
        let cfg = PleConfig { policy: PlePolicy::Fixed, ..PleConfig::default() };
        assert_eq!(grow(&cfg, 4096), 4096);
        assert_eq!(shrink(&cfg, 4096), 4096);
    }
}
