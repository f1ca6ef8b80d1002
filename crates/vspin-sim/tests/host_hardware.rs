//! Host hardware effects: SMT siblings share a core, and a pCPU left idle in a deep C-state wakes
//! slowly (the OTICKET reproduction relies on both); a locked instruction costs what the host's
//! cost table says (host mode measures it).
mod common;
use common::run;
use vspin_sim::Scenario;

fn hog_scenario(vcpus: u32, threads_per_core: u32) -> Scenario {
    Scenario::from_toml(&format!(
        r#"
        duration_ms = 50
        [host]
        cores_per_socket = 2
        threads_per_core = {threads_per_core}
        smt_core_throughput = 1.2
        [[vm]]
        name = "hog"
        vcpus = {vcpus}
        pin = "1:1"
        lock = "ticket"
        workload = {{ preset = "cpu-hog", think_ns = 10000 }}
        "#
    ))
    .unwrap()
}

#[test]
fn smt_siblings_share_one_core_throughput() {
    // Two hogs on the two threads of core 0 (pCPUs 0 and 2 in Linux order) vs two hogs on two cores.
    let mut siblings = hog_scenario(2, 2);
    siblings.vms[0].pin = vspin_sim::scenario::Pinning::List(vec![0, 2]);
    let apart = hog_scenario(2, 2);
    let (shared, separate) = (run(&siblings).vms[0].throughput_per_s, run(&apart).vms[0].throughput_per_s);
    let ratio = shared / separate;
    assert!((ratio - 0.6).abs() < 0.03, "siblings deliver {ratio:.3} of two cores' work (model: 1.2 / 2)");
}

#[test]
fn deep_idle_states_slow_pv_lock_hand_offs() {
    let scenario = |idle: &str| {
        Scenario::from_toml(&format!(
            r#"
            duration_ms = 100
            [host]
            cores_per_socket = 8
            idle_states = [{idle}]
            [hypervisor]
            ple = {{ policy = "off" }}
            [[vm]]
            name = "guest"
            vcpus = 8
            pin = "1:1"
            lock = "pv-ticket"
            workload = {{ preset = "kernbench", locks = 1, cs_ns = 30000, think_ns = 20000 }}
            "#
        ))
        .unwrap()
    };
    let shallow = run(&scenario(""));
    let deep = run(&scenario("{ exit_ns = 200000, residency_ns = 800 }"));
    assert!(shallow.totals.kicks > 0, "the scenario must reach the PV slow path");
    let (s, d) = (shallow.vms[0].throughput_per_s, deep.vms[0].throughput_per_s);
    assert!(d < 0.8 * s, "with a 200 µs C-state exit {d:.0}/s vs {s:.0}/s without");
}

fn not_overcommitted(background: &str) -> Scenario {
    Scenario::from_toml(&format!(
        r#"
        duration_ms = 300
        [host]
        cores_per_socket = 8
        {background}
        [hypervisor]
        ple = {{ policy = "off" }}
        [[vm]]
        name = "a"
        vcpus = 8
        pin = "1:1"
        lock = "ticket"
        workload = {{ preset = "kernbench" }}
        "#
    ))
    .unwrap()
}

/// With one vCPU per pCPU, only host threads can preempt a vCPU: without them no lock holder or
/// waiter is ever preempted; with them, waking threads preempt vCPUs and take their share.
#[test]
fn host_background_threads_preempt_vcpus_of_a_host_that_is_not_overcommitted() {
    let quiet = run(&not_overcommitted(""));
    assert_eq!(quiet.totals.lhp_events + quiet.totals.lwp_events, 0, "{:?}", quiet.totals);
    let busy = run(&not_overcommitted("background = { interval_us = 2000, burst_us = 200 }"));
    assert_eq!(busy.vms.len(), 1, "host threads are not a VM of the results");
    assert_eq!(busy.vcpus.len(), 8);
    assert!(busy.totals.lhp_events + busy.totals.lwp_events > 0, "{:?}", busy.totals);
    let waiting = |r: &vspin_sim::RunResult| r.vms[0].time.waiting_ns as f64 / (8.0 * r.simulated_ms * 1e6);
    // Bursts of 200 µs every ~2.2 ms take about 9% of each pCPU.
    assert!((0.04..0.15).contains(&waiting(&busy)), "vCPUs waited {:.3} of their time", waiting(&busy));
    assert_eq!(waiting(&quiet), 0.0);
}

/// Interruptions take their share of a pCPU from the vCPU running on it without a scheduling
/// decision: the vCPU spends that time in exits and is never switched out for them.
#[test]
fn host_interruptions_stop_the_running_vcpu_in_place() {
    let quiet = run(&not_overcommitted(""));
    let interrupted = run(&not_overcommitted("interruptions = { interval_us = 100, burst_us = 10 }"));
    let share = |r: &vspin_sim::RunResult, f: fn(&vspin_sim::metrics::TimeBreakdown) -> u64| {
        f(&r.vms[0].time) as f64 / (8.0 * r.simulated_ms * 1e6)
    };
    // One 10 µs interruption every 100 µs on average: 10% of each pCPU.
    let exits = share(&interrupted, |t| t.exit_ns) - share(&quiet, |t| t.exit_ns);
    assert!((0.08..0.12).contains(&exits), "interruptions took {exits:.3} of the vCPUs' time");
    assert_eq!(share(&interrupted, |t| t.waiting_ns), 0.0, "an interrupted vCPU keeps its pCPU");
    let t = &interrupted.totals;
    assert_eq!(t.lhp_events + t.lwp_events, 0, "an interrupted holder or waiter is not preempted: {t:?}");
    let (a, b) = (interrupted.vms[0].throughput_per_s, quiet.vms[0].throughput_per_s);
    assert!(a < 0.95 * b, "interrupted vCPUs work less: {a:.0}/s against {b:.0}/s");
}

/// A lock benchmark's loop (hold 100 ns, think 200 ns, one TAS lock) on `vcpus` vCPUs, one per
/// pCPU, 10 ms; `durations` are the workload keys that say how the lengths vary.
fn benchmark_loop(vcpus: u32, durations: &str) -> Scenario {
    Scenario::from_toml(&format!(
        r#"
        duration_ms = 10
        [host]
        cores_per_socket = {vcpus}
        [[vm]]
        name = "bench"
        vcpus = {vcpus}
        pin = "1:1"
        lock = "tas"
        workload = {{ preset = "kernbench", locks = 1, think_ns = 200, cs_ns = 100, block_probability = 0.0,
                      shootdown_probability = 0.0, {durations} }}
        "#
    ))
    .unwrap()
}

#[test]
fn fixed_durations_make_an_uncontended_loop_exactly_periodic() {
    let acquisitions = |durations: &str| run(&benchmark_loop(1, durations)).totals.acquisitions as f64;
    let fixed = acquisitions(r#"durations = "fixed""#);
    // 300 ns of work per iteration plus the lock's L1 hits: a little under 10 ms / 300 ns.
    let period = 10e6 / fixed;
    assert!((300.0..310.0).contains(&period), "{period:.1} ns per iteration");
    assert_eq!(fixed, acquisitions(r#"durations = "fixed""#));
    let exponential = acquisitions(r#"durations = "exponential""#);
    assert!((exponential / fixed - 1.0).abs() < 0.05, "same means: {exponential} vs {fixed}");
    assert_ne!(exponential, fixed);
}

#[test]
fn jitter_breaks_the_lockstep_of_fixed_loops() {
    // Two threads, each on its own pCPU. With exact lengths their phases lock: here every
    // acquisition but the first waits the same ~200 ns (with host mode's costs the lock-step is
    // one where none waits). With the few percent of jitter that real busy loops have
    // (`vspin bench-locks`' `loop_cv`) the phases drift, and waits of both kinds are common.
    // Acquisitions per wait bucket, as shares.
    let shares = |jitter: f64| -> Vec<f64> {
        let r = run(&benchmark_loop(2, &format!(r#"durations = "fixed", jitter = {jitter}"#)));
        let buckets = &r.vms[0].lock_waits;
        let total: u64 = buckets.iter().map(|b| b.acquisitions).sum();
        buckets.iter().map(|b| b.acquisitions as f64 / total as f64).collect()
    };
    let exact = shares(0.0);
    assert!(exact.iter().any(|&s| s > 0.999), "exact loops repeat one wait: {exact:?}");
    let jittered = shares(0.05);
    assert!(jittered.iter().filter(|&&s| s > 0.05).count() >= 2, "jittered loops vary: {jittered:?}");
}

#[test]
fn each_locked_instruction_costs_the_atomic_extra() {
    // One vCPU alone: an uncontended TAS lock makes one locked instruction per acquisition
    // (`xchg`; the unlock is a plain store), a ticket lock two (`xadd` tail, `add` head).
    let ns_per_acquisition = |lock: &str, extra: u32| {
        let sc = Scenario::from_toml(&format!(
            r#"
            duration_ms = 10
            [host]
            cores_per_socket = 1
            costs = {{ atomic_extra_ns = {extra} }}
            [[vm]]
            name = "g"
            vcpus = 1
            pin = "1:1"
            lock = "{lock}"
            workload = {{ preset = "kernbench", durations = "fixed", think_ns = 500, cs_ns = 100, block_probability = 0.0, shootdown_probability = 0.0 }}
            "#
        ))
        .unwrap();
        1e9 / run(&sc).vms[0].throughput_per_s
    };
    for (lock, locked_per_acquisition) in [("tas", 1.0), ("ticket", 2.0)] {
        let extra = ns_per_acquisition(lock, 20) - ns_per_acquisition(lock, 0);
        assert!((extra - 20.0 * locked_per_acquisition).abs() < 1.0, "{lock}: {extra:.2} ns more per acquisition");
    }
}

#[test]
fn an_uncontended_vcpu_is_useful_exactly_for_its_think_time_and_critical_sections() {
    // `docs/results.md`: useful time is think time and critical sections; the atomics and the
    // memory latency they wait for are spinning (a latency absorbed by the computation after
    // it included). One vCPU alone: nothing else can be useful.
    let sc = Scenario::from_toml(
        r#"
        duration_ms = 10
        [host]
        cores_per_socket = 1
        [[vm]]
        name = "g"
        vcpus = 1
        pin = "1:1"
        lock = "tas"
        workload = { preset = "kernbench", durations = "fixed", think_ns = 200, cs_ns = 100, cs_long_probability = 0.0,
                     block_probability = 0.0, shootdown_probability = 0.0 }
        "#,
    )
    .unwrap();
    let r = run(&sc);
    let (t, n) = (&r.vcpus[0].time, r.totals.acquisitions);
    // Within one iteration of n × (200 + 100) ns: the run ends inside one.
    let work = n * 300;
    assert!((work - 300..=work + 300).contains(&t.useful_ns), "useful {} ns for {n} acquisitions", t.useful_ns);
    assert!(t.spin_ns >= n, "each acquisition's xchg waits at least an L1 hit: {} ns", t.spin_ns);
}
