//! The host scheduler policies time-share a pCPU as their kernels do (`kernel-mechanisms.md`
//! §7): CFS gives each of two busy threads its slice of the scheduling period, EEVDF a base slice,
//! and both notice the end of a slice only at a scheduler tick.
use vspin_sim::Scenario;

/// Two CPU-bound vCPUs sharing one pCPU for one second, host tick 1 ms: host context switches.
fn switches(scheduler: &str) -> u64 {
    let text = format!(
        "duration_ms = 1000\n[host]\ncores_per_socket = 1\nhz = 1000\n[hypervisor]\nscheduler = \"{scheduler}\"\n\
         [[vm]]\nname = \"hogs\"\nvcpus = 2\npin = [0, 0]\nlock = \"ticket\"\nworkload = {{ preset = \"cpu-hog\" }}\n"
    );
    let r = vspin_sim::run(&Scenario::from_toml(&text).unwrap()).unwrap();
    r.totals.context_switches
}

#[test]
fn cfs_switches_two_busy_vcpus_at_the_first_tick_past_half_the_latency() {
    // One CPU: latency 6 ms, two threads: slice 3 ms; `ran > ideal` first holds at the 4 ms tick.
    let n = switches("cfs");
    assert!((240..=260).contains(&n), "{n} switches; expected about 1000 ms / 4 ms = 250");
}

#[test]
fn eevdf_switches_two_busy_vcpus_at_the_first_tick_past_each_base_slice() {
    // One CPU: base slice 0.75 ms; the deadline has passed at the next 1 ms tick.
    let n = switches("eevdf");
    assert!((970..=1010).contains(&n), "{n} switches; expected about 1000 ms / 1 ms = 1000");
}
