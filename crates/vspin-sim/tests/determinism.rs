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
fn a_different_seed_gives_a_different_run() {
    assert_ne!(json(&host(4, 2, 4, "ticket", "kvm", 1, 50)), json(&host(4, 2, 4, "ticket", "kvm", 2, 50)));
}
