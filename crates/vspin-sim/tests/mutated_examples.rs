//! Property test: the scenarios of `examples/`, with one to three values changed, either are
//! refused with an error or run to their end, accounting for every nanosecond of every vCPU.
//! Never a panic or a hang. The examples combine the features no other generator draws together
//! (APPLES, LAS, credit1, quotas, TLB flush modes, background threads), and a changed value is
//! one a scenario's author could write: a value another example gives some key of the same type,
//! a number scaled, or an edge (0, a huge number, an empty string).
use proptest::prelude::*;
use toml::Value;
use vspin_sim::scenario::{
    Credit1Pick, Credit1Yield, DirectedYieldKind, Durations, KernelVersion, LoadBalanceKind, LockKind, PauseCounter, PlePolicy, Preset, SchedulerKind,
    TlbFlush,
};
use vspin_sim::Scenario;

const EXAMPLES: &[&str] = &[
    include_str!("../../../examples/amd-host.toml"),
    include_str!("../../../examples/apples.toml"),
    include_str!("../../../examples/bulk-synchronous.toml"),
    include_str!("../../../examples/cpu-quota.toml"),
    include_str!("../../../examples/las-oltp.toml"),
    include_str!("../../../examples/modern-host-eevdf.toml"),
    include_str!("../../../examples/overcommit-2x.toml"),
    include_str!("../../../examples/ple-on-vs-off.toml"),
    include_str!("../../../examples/undercommitted.toml"),
    include_str!("../../../examples/xen-credit1.toml"),
];

/// A step into a table (by key) or a list (by index).
#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

/// Every value that is not a table or a list, with its path.
fn scalars(v: &Value, path: &mut Vec<Step>, out: &mut Vec<(Vec<Step>, Value)>) {
    match v {
        Value::Table(t) => {
            for (k, item) in t {
                path.push(Step::Key(k.clone()));
                scalars(item, path, out);
                path.pop();
            }
        }
        Value::Array(a) => {
            for (i, item) in a.iter().enumerate() {
                path.push(Step::Index(i));
                scalars(item, path, out);
                path.pop();
            }
        }
        other => out.push((path.clone(), other.clone())),
    }
}

fn slot<'a>(v: &'a mut Value, path: &[Step]) -> &'a mut Value {
    path.iter().fold(v, |v, step| match step {
        Step::Key(k) => &mut v[k.as_str()],
        Step::Index(i) => &mut v[*i],
    })
}

/// The names a key takes, where it takes names.
fn names(key: &str) -> Option<&'static [&'static str]> {
    Some(match key {
        "lock" => LockKind::NAMES,
        "preset" => Preset::NAMES,
        "scheduler" => SchedulerKind::NAMES,
        "kernel" => KernelVersion::NAMES,
        "policy" => PlePolicy::NAMES,
        "directed_yield" => DirectedYieldKind::NAMES,
        "load_balance" => LoadBalanceKind::NAMES,
        "tlb_flush" => TlbFlush::NAMES,
        "durations" => Durations::NAMES,
        "counter" => PauseCounter::NAMES,
        "yield" => Credit1Yield::NAMES,
        "pick" => Credit1Pick::NAMES,
        _ => return None,
    })
}

/// What replaces a value: another of the key's names, another example's value of the same type
/// (`pick` indexes them), the value scaled, or an edge.
fn replacement(key: Option<&str>, old: &Value, same_type: &[Value], how: u8, pick: usize) -> Value {
    const SCALES: [f64; 6] = [0.0, 0.01, 0.5, 2.0, 10.0, 1000.0];
    if let (Some(names), true) = (key.and_then(names), how % 4 != 3) {
        return Value::String(names[pick % names.len()].into());
    }
    match (how % 3, old) {
        (0, _) if !same_type.is_empty() => same_type[pick % same_type.len()].clone(),
        (1, Value::Integer(n)) => Value::Integer((*n as f64 * SCALES[pick % SCALES.len()]) as i64),
        (1, Value::Float(x)) => Value::Float(x * SCALES[pick % SCALES.len()]),
        (_, Value::Integer(_)) => Value::Integer([0, -1, 1, i64::MAX][pick % 4]),
        (_, Value::Float(_)) => Value::Float([0.0, -0.5, 1e-9, 1e300][pick % 4]),
        (_, Value::String(_)) => Value::String(["", "none", "1:1"][pick % 3].into()),
        (_, Value::Boolean(b)) => Value::Boolean(!b),
        (_, other) => other.clone(),
    }
}

fn mutated(example: usize, changes: &[(usize, u8, usize)]) -> String {
    let mut doc: Value = toml::from_str(EXAMPLES[example]).expect("an example parses");
    let all: Vec<Value> = EXAMPLES
        .iter()
        .flat_map(|text| {
            let mut out = Vec::new();
            scalars(&toml::from_str(text).expect("an example parses"), &mut Vec::new(), &mut out);
            out.into_iter().map(|(_, v)| v)
        })
        .collect();
    for &(which, how, pick) in changes {
        let mut leaves = Vec::new();
        scalars(&doc, &mut Vec::new(), &mut leaves);
        let (path, old) = &leaves[which % leaves.len()];
        let same_type: Vec<Value> = all.iter().filter(|v| v.same_type(old)).cloned().collect();
        let key = path.iter().rev().find_map(|s| match s {
            Step::Key(k) => Some(k.as_str()),
            Step::Index(_) => None,
        });
        *slot(&mut doc, path) = replacement(key, old, &same_type, how, pick);
    }
    // Short runs: the point is the combination, not the length (a changed duration stays short).
    let duration = doc["duration_ms"].as_float().or(doc["duration_ms"].as_integer().map(|n| n as f64));
    if duration.is_none_or(|d| d > 5.0) {
        doc["duration_ms"] = Value::Float(5.0);
    }
    toml::to_string(&doc).expect("a TOML value serializes")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn changed_examples_run_or_are_refused(
        example in 0..EXAMPLES.len(),
        changes in prop::collection::vec((any::<usize>(), any::<u8>(), any::<usize>()), 1..=3),
    ) {
        let text = mutated(example, &changes);
        let Ok(sc) = Scenario::from_toml(&text) else { return Ok(()) };
        let r = vspin_sim::run(&sc).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        let simulated = (r.simulated_ms * 1e6).round() as u64;
        for v in &r.vcpus {
            prop_assert_eq!(v.time.total(), simulated, "vCPU {}: {:?}\n{}", v.vcpu, v.time, text);
        }
    }
}
