//! Same scenario and seed, same result, bit for bit.
mod common;
use common::*;
use vspin_sim::scenario::SchedulerKind;

fn json(sc: &vspin_sim::Scenario) -> String {
    serde_json::to_string(&run(sc)).unwrap()
}

#[test]
fn same_scenario_and_seed_give_byte_identical_json() {
    for lock in ["tas", "ticket", "pv-ticket"] {
        let mut sc = host(4, 2, 4, lock, "kvm", 42, 50);
        assert_eq!(json(&sc), json(&sc), "{lock}");
        for scheduler in [SchedulerKind::Eevdf, SchedulerKind::Eevdf618, SchedulerKind::Credit1] {
            sc.hypervisor.scheduler = scheduler;
            assert_eq!(json(&sc), json(&sc), "{lock}, {}", scheduler.name());
        }
    }
}

#[test]
fn apples_runs_are_byte_identical_too() {
    let mut sc = host(4, 2, 4, "ticket", "aple", 7, 50);
    sc.hypervisor.ple.aple = Some(vspin_sim::scenario::ApleConfig { epoch_exits: 20, ..Default::default() });
    sc.hypervisor.directed_yield = vspin_sim::scenario::DirectedYieldKind::Hvs;
    let first = json(&sc);
    assert_eq!(first, json(&sc));
    assert!(run(&sc).vms.iter().all(|vm| vm.ple_epochs > 2), "APLE moved its windows during the run");
}

#[test]
fn a_different_seed_gives_a_different_run() {
    assert_ne!(json(&host(4, 2, 4, "ticket", "kvm", 1, 50)), json(&host(4, 2, 4, "ticket", "kvm", 2, 50)));
}
