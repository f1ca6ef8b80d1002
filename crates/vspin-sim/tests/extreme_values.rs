//! Property test: a scenario with values at the edges of their documented ranges
//! (`docs/scenario.md`) either is refused with an error or runs to its end keeping every
//! invariant. Never a panic, an overflow or a hang: a 2^63-cycle PLE gap at 0.1 GHz once sent
//! the threshold search into an endless loop, and a window of 2^64 − 1 cycles (which the Python
//! front's TOML reader takes) wrapped the spin deadline past the clock; the PLE keys now stop at
//! 32 bits, as KVM's do.
use proptest::prelude::*;
use vspin_sim::Scenario;

/// `(table, key, values)`: each value is written as given, so integers stay integers.
const EDGES: &[(&str, &str, &[&str])] = &[
    ("host", "clock_ghz", &["0.1", "100.0"]),
    ("host", "hz", &["10", "10000"]),
    ("host", "smt_core_throughput", &["1.0", "2.0"]),
    ("host", "idle_states", &["[{ exit_ns = 0.0, residency_ns = 0.0 }]", "[{ exit_ns = 3.6e12, residency_ns = 1.0 }]"]),
    ("host", "background", &["{ interval_us = 1.0, burst_us = 1e-3 }", "{ interval_us = 3.6e9, burst_us = 3.6e9 }"]),
    ("host", "interruptions", &["{ interval_us = 1.0, burst_us = 1e-3 }", "{ interval_us = 3.6e9, burst_us = 3.6e9 }"]),
    ("host.costs", "pause_cycles", &["1.0", "1000000.0"]),
    ("host.costs", "l1_hit_ns", &["0.0", "3.6e12"]),
    ("host.costs", "atomic_extra_ns", &["0.0", "3.6e12"]),
    ("host.costs", "transfer_same_socket_ns", &["0.0", "3.6e12"]),
    ("host.costs", "transfer_cross_socket_ns", &["0.0", "3.6e12"]),
    ("host.costs", "vm_exit_ns", &["0.0", "3.6e12"]),
    ("host.costs", "vm_entry_ns", &["0.0", "3.6e12"]),
    ("host.costs", "hypercall_ns", &["0.0", "3.6e12"]),
    ("host.costs", "ipi_send_ns", &["0.0", "3.6e12"]),
    ("host.costs", "wakeup_ns", &["0.0", "3.6e12"]),
    ("host.costs", "context_switch_ns", &["0.0", "3.6e12"]),
    ("hypervisor.ple", "window_cycles", &["1", "4294967295"]),
    ("hypervisor.ple", "grow", &["0", "4294967295"]),
    ("hypervisor.ple", "shrink", &["0", "4294967295"]),
    ("hypervisor.ple", "max_cycles", &["4294967295"]),
    ("hypervisor.ple", "gap_cycles", &["1", "4294967295"]),
    ("hypervisor.halt_poll", "max_ns", &["1", "3600000000000"]),
    ("hypervisor.halt_poll", "grow", &["0", "4294967295"]),
    ("hypervisor.halt_poll", "grow_start_ns", &["0", "4294967295"]),
    ("hypervisor.halt_poll", "shrink", &["0", "4294967295"]),
    ("workload", "think_ns", &["1.0", "3.6e12"]),
    ("workload", "cs_ns", &["1.0", "3.6e12"]),
    ("workload", "cs_long_probability", &["1.0"]),
    ("workload", "cs_long_ns", &["1.0", "3.6e12"]),
    ("workload", "locks", &["1", "65536"]),
    ("workload", "zipf_s", &["0.0", "1e300"]),
    ("workload", "block_probability", &["1.0"]),
    ("workload", "block_ns", &["1.0", "3.6e12"]),
    ("workload", "shootdown_probability", &["1.0"]),
    ("workload", "wake_probability", &["1.0"]),
    ("workload", "irqs_off_share", &["0.0", "1.0"]),
    ("workload", "threads_per_vcpu", &["4096"]),
    ("vm", "work_units", &["1", "9223372036854775807"]),
    ("vm", "guest_hz", &["10", "10000"]),
];

fn scenario() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec!["tas", "ticket", "pv-ticket", "pv-preemptable-ticket", "oticket", "iticket", "pv-qspinlock", "pv-qspinlock-v4.2"]),
        prop::sample::select(vec!["off", "fixed", "kvm"]),
        prop::sample::select(vec!["cfs", "eevdf", "eevdf-6.18"]),
        prop::sample::select(vec!["kernbench", "hackbench", "dbench", "cpu-hog"]),
        (1u32..=4, any::<bool>(), 1u64..1000),
        prop::collection::vec((0..EDGES.len(), 0usize..2), 1..=3),
    )
        .prop_map(|(lock, ple, scheduler, preset, (vcpus, pinned, seed), edges)| {
            let set = |table: &str| -> String {
                let mut lines = String::new();
                for &(i, pick) in &edges {
                    let (t, key, values) = EDGES[i];
                    if t == table && !lines.contains(&format!("{key} =")) {
                        lines += &format!("{key} = {}\n", values[pick % values.len()]);
                    }
                }
                lines
            };
            let workload: Vec<String> = set("workload").lines().map(str::to_string).collect();
            let pin = if pinned { format!("{:?}", vec![0; vcpus as usize]) } else { "\"none\"".into() };
            format!(
                "seed = {seed}\nduration_ms = 1\n[host]\ncores_per_socket = 2\n{}[host.costs]\n{}\
                 [hypervisor]\nscheduler = \"{scheduler}\"\n[hypervisor.ple]\npolicy = \"{ple}\"\n{}\
                 [hypervisor.halt_poll]\n{}[[vm]]\nname = \"a\"\nvcpus = {vcpus}\npin = {pin}\nlock = \"{lock}\"\n{}\
                 workload = {{ preset = \"{preset}\"{} }}\n",
                set("host"),
                set("host.costs"),
                set("hypervisor.ple"),
                set("hypervisor.halt_poll"),
                set("vm"),
                workload.iter().map(|l| format!(", {l}")).collect::<String>(),
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn values_at_the_edges_of_their_ranges_run_or_are_refused(text in scenario()) {
        let Ok(sc) = Scenario::from_toml(&text) else {
            // Refused with an error (a combination the ranges alone do not rule out, such as a
            // window above the default maximum): that is the other allowed outcome.
            return Ok(());
        };
        let r = vspin_sim::run(&sc).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        let simulated = (r.simulated_ms * 1e6).round() as u64;
        prop_assert!(simulated <= 1_000_000, "ran past its 1 ms: {} ns\n{}", simulated, text);
        for v in &r.vcpus {
            prop_assert_eq!(v.time.total(), simulated, "vCPU {}: {:?}\n{}", v.vcpu, v.time, text);
        }
    }
}
