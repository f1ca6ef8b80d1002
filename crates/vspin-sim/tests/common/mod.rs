//! Scenario builders shared by the integration tests.
#![allow(dead_code)]
use vspin_sim::{RunResult, Scenario};

/// `vms` identical kernbench VMs of `vcpus` vCPUs pinned 1:1 on a host of `pcpus` cores.
pub fn host(pcpus: u32, vms: u32, vcpus: u32, lock: &str, ple: &str, seed: u64, duration_ms: u32) -> Scenario {
    let mut text = format!(
        "seed = {seed}\nduration_ms = {duration_ms}\n[host]\ncores_per_socket = {pcpus}\n[hypervisor]\nple = {{ policy = \"{ple}\" }}\n"
    );
    for i in 0..vms {
        text += &format!(
            "[[vm]]\nname = \"vm{i}\"\nvcpus = {vcpus}\npin = \"1:1\"\nlock = \"{lock}\"\nworkload = {{ preset = \"kernbench\" }}\n"
        );
    }
    Scenario::from_toml(&text).expect("valid scenario")
}

pub fn run(sc: &Scenario) -> RunResult {
    vspin_sim::run(sc).expect("no invariant violated")
}

/// Work units per second summed over VMs.
pub fn throughput(r: &RunResult) -> f64 {
    r.vms.iter().map(|v| v.throughput_per_s).sum()
}

/// Throughput summed over seeds 1..=n (a robust aggregate of a stochastic effect).
pub fn throughput_over_seeds(n: u64, make: impl Fn(u64) -> Scenario) -> f64 {
    (1..=n).map(|s| throughput(&run(&make(s)))).sum()
}
