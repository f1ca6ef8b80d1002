//! `hypervisor.kernel`: a KVM host's Linux release sets the defaults that its version decides
//! (the scheduler, the directed-yield candidate search, the PLE policy and cap, halt polling),
//! and a key the scenario gives explicitly wins over the release.
mod common;

use vspin_sim::scenario::{DirectedYieldKind, PlePolicy, SchedulerKind};
use vspin_sim::Scenario;

/// A VM of `vcpus` vCPUs (over-committed past 2) on a 2-core host.
fn scenario_of(vcpus: u32, hypervisor: &str) -> Result<Scenario, String> {
    let text = format!(
        "seed = 3\nduration_ms = 20\n[host]\ncores_per_socket = 2\n[hypervisor]\n{hypervisor}\n\
         [[vm]]\nname = \"a\"\nvcpus = {vcpus}\nlock = \"pv-ticket\"\nworkload = {{ preset = \"kernbench\" }}\n"
    );
    Scenario::from_toml(&text).map_err(|e| e.to_string())
}

fn parse(hypervisor: &str) -> Scenario {
    scenario_of(4, hypervisor).unwrap_or_else(|e| panic!("{hypervisor:?} refused: {e}"))
}

/// The keys a release decides, as parsed.
fn decided(sc: &Scenario) -> (SchedulerKind, DirectedYieldKind, PlePolicy, u64, u64, u64) {
    let hv = &sc.hypervisor;
    (hv.scheduler, hv.directed_yield, hv.ple.policy, hv.ple.max_cycles, hv.halt_poll.max_ns, hv.halt_poll.shrink)
}

#[test]
fn each_release_sets_its_scheduler_candidate_search_ple_and_halt_polling() {
    use DirectedYieldKind as Dy;
    let int_max_half = (i32::MAX / 2) as u64;
    let uint_max = u32::MAX as u64;
    let expected = [
        ("3.5", (SchedulerKind::Cfs, Dy::Kvm35, PlePolicy::Fixed, int_max_half, 0, 0)),
        ("3.18", (SchedulerKind::Cfs, Dy::Kvm, PlePolicy::Kvm, int_max_half, 0, 0)),
        ("6.8", (SchedulerKind::Eevdf, Dy::Kvm68, PlePolicy::Kvm, uint_max, 200_000, 0)),
        ("6.18", (SchedulerKind::Eevdf618, Dy::Kvm618, PlePolicy::Kvm, uint_max, 200_000, 2)),
    ];
    for (release, values) in expected {
        assert_eq!(decided(&parse(&format!("kernel = {release:?}"))), values, "kernel = {release:?}");
    }
}

#[test]
fn a_release_may_be_written_as_the_number_toml_reads_unquoted() {
    for release in ["3.5", "3.18", "6.8", "6.18"] {
        assert_eq!(decided(&parse(&format!("kernel = {release}"))), decided(&parse(&format!("kernel = {release:?}"))), "{release}");
    }
}

#[test]
fn a_host_without_a_release_is_3_18() {
    assert_eq!(decided(&parse("")), decided(&parse("kernel = \"3.18\"")));
}

#[test]
fn keys_given_explicitly_win_over_the_release() {
    let sc = parse("kernel = \"6.18\"\nscheduler = \"cfs\"\nhalt_poll = { max_ns = 0 }\nple = { policy = \"off\" }");
    assert_eq!(
        decided(&sc),
        (SchedulerKind::Cfs, DirectedYieldKind::Kvm618, PlePolicy::Off, u32::MAX as u64, 0, 2),
        "the given scheduler, poll and policy; the release's candidate search, cap and shrink"
    );
}

#[test]
fn a_release_is_refused_under_xen_and_gang() {
    for scheduler in ["credit1", "gang"] {
        let e = scenario_of(2, &format!("kernel = \"6.8\"\nscheduler = {scheduler:?}")).expect_err("a Linux release under a non-Linux scheduler");
        assert!(e.starts_with("hypervisor.kernel:") && e.contains(scheduler), "{e}");
    }
}

#[test]
fn a_release_runs_as_its_keys_spelled_out() {
    let spelled_out = "scheduler = \"eevdf-6.18\"\ndirected_yield = \"kvm-6.18\"\n\
                       ple = { max_cycles = 4294967295 }\nhalt_poll = { max_ns = 200000, shrink = 2 }";
    let by_release = serde_json::to_string(&common::run(&parse("kernel = \"6.18\""))).unwrap();
    assert_eq!(by_release, serde_json::to_string(&common::run(&parse(spelled_out))).unwrap());
}

#[test]
fn a_release_is_validated_with_its_own_defaults() {
    // 3.18's cap is 1073741823 cycles; 6.8's, 4294967295, admits this base window.
    let sc = parse("kernel = \"6.8\"\nple = { window_cycles = 3000000000 }");
    assert_eq!(sc.hypervisor.ple.max_cycles, u32::MAX as u64);
    let e = scenario_of(4, "kernel = \"3.18\"\nple = { window_cycles = 3000000000 }").expect_err("above 3.18's cap");
    assert!(e.contains("default 1073741823"), "{e}");
}

#[test]
fn a_3_x_release_on_amd_counts_pauses_with_no_threshold_and_no_growth() {
    use vspin_sim::scenario::PauseCounter;
    for release in ["3.5", "3.18"] {
        let ple = parse(&format!("kernel = {release:?}\nple = {{ counter = \"amd\" }}")).hypervisor.ple;
        assert_eq!((ple.counter, ple.policy, ple.gap_cycles), (PauseCounter::Amd, PlePolicy::Fixed, 0), "{release}");
    }
    let ple = parse("kernel = \"6.8\"\nple = { counter = \"amd\" }").hypervisor.ple;
    assert_eq!((ple.policy, ple.gap_cycles), (PlePolicy::Kvm, 128), "6.8's dynamic pause filter");
    // Asking for growth on a 3.x host leaves the threshold the dynamic filter needs.
    let ple = parse("kernel = \"3.18\"\nple = { counter = \"amd\", policy = \"kvm\", grow = 4 }").hypervisor.ple;
    assert_eq!((ple.policy, ple.gap_cycles, ple.grow), (PlePolicy::Kvm, 128, 4));
}

#[test]
fn growing_a_release_s_fixed_window_needs_the_policy_said() {
    let e = scenario_of(4, "kernel = \"3.5\"\nple = { grow = 4 }").expect_err("3.5's window is fixed");
    assert!(e.starts_with("hypervisor.ple.grow:") && e.contains("policy = \"kvm\""), "{e}");
    assert_eq!(parse("kernel = \"3.5\"\nple = { policy = \"kvm\", grow = 4 }").hypervisor.ple.grow, 4);
}
