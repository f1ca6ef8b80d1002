//! # vspin-sim
//!
//! A deterministic discrete-event simulator of a virtualized host, built to study spinlocks
//! under vCPU preemption. A [`Scenario`] describes the host (pCPUs and a cost table), the
//! hypervisor (CFS, EEVDF, Xen credit1 or gang scheduling; Pause-Loop Exiting; directed yield;
//! CPU quotas) and the VMs (vCPUs,
//! pinning, guest lock, workload); [`run`] simulates it and returns a [`RunResult`].
//!
//! ```
//! let scenario = vspin_sim::Scenario::from_toml(r#"
//!     duration_ms = 5
//!     [host]
//!     cores_per_socket = 2
//!     [[vm]]
//!     name = "guest"
//!     vcpus = 2
//!     pin = "1:1"
//!     lock = "pv-ticket"
//!     workload = { preset = "kernbench" }
//! "#).unwrap();
//! let result = vspin_sim::run(&scenario).unwrap();
//! assert!(result.vms[0].counters.acquisitions > 0);
//! ```
//!
//! How a scenario flows through the modules (see `docs/architecture.md`):
//! [`scenario`] (parse, validate) → `simulation` (build host, event loop over [`engine`]) →
//! vCPUs run guest code (`workload` calling `vspin-locks` algorithms through `guest`'s
//! platform) whose memory operations go through [`memory`] (a write re-reads the word's
//! spinners: `spin`), whose halts and kicks go to KVM's `halt`, whose pause loops reach PLE
//! exits in `spin` (window policy in `ple`, candidate search in `directed_yield`; under credit1
//! a yield), all on the
//! host's `scheduler` → the `monitor` checks invariants → [`metrics`].
pub mod engine;
pub mod memory;
pub mod metrics;
pub mod scenario;

mod bandwidth;
mod cpuidle;
mod credit1;
mod directed_yield;
mod eevdf;
mod gang;
mod guest;
mod halt;
mod interruptions;
mod ipi;
mod load_balance;
mod locks;
mod monitor;
mod ple;
mod scheduler;
mod simulation;
mod spin;
mod timeline;
mod topology;
mod vcpu;
mod workload;

pub use metrics::RunResult;
pub use scenario::{Scenario, ScenarioError};
pub use simulation::InvariantViolation;

/// Simulate a validated scenario.
pub fn run(scenario: &Scenario) -> Result<RunResult, InvariantViolation> {
    simulation::Sim::new(scenario).run()
}

/// Simulate a scenario and also return its timeline between `from_ns` and `to_ns` as Chrome
/// trace JSON (open it in Perfetto).
pub fn run_with_timeline(scenario: &Scenario, from_ns: u64, to_ns: u64) -> Result<(RunResult, String), InvariantViolation> {
    simulation::Sim::new(scenario).with_timeline(from_ns, to_ns).run_traced()
}

/// Parse, validate and simulate a TOML scenario; errors are human-readable.
pub fn run_toml(text: &str) -> Result<RunResult, String> {
    let sc = Scenario::from_toml(text).map_err(|e| e.to_string())?;
    run(&sc).map_err(|e| e.to_string())
}
