//! A corpus of bad scenarios, each near-valid with exactly one defect, and the error each must
//! give. Every file in `tests/bad_scenarios/` starts with a line
//!
//! ```text
//! # expect: <field path> | <substring of the message>
//! ```
//!
//! (`# expect: | <substring>` when the field is empty, e.g. for TOML syntax errors). The test
//! parses every file with [`Scenario::from_toml`] and checks that it is rejected with exactly that
//! field and a message (as displayed, `field: message`) containing that substring.
use std::fs;
use std::path::{Path, PathBuf};

use vspin_sim::Scenario;

fn toml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

/// The `(field, substring)` of a file's `# expect:` first line.
fn expectation(text: &str) -> Option<(String, String)> {
    let first = text.lines().next()?;
    let rest = first.strip_prefix("# expect:")?;
    let (field, substring) = rest.split_once('|')?;
    let substring = substring.trim();
    if substring.is_empty() {
        return None;
    }
    Some((field.trim().to_string(), substring.to_string()))
}

#[test]
fn every_bad_scenario_is_rejected_with_a_clear_error() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bad_scenarios");
    let files = toml_files(&dir);
    assert!(files.len() >= 20, "expected a corpus of bad scenarios in {}, found {} files", dir.display(), files.len());
    let mut failures = Vec::new();
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let Some((field, substring)) = expectation(&text) else {
            failures.push(format!("{name}: first line must be `# expect: <field path> | <substring>`"));
            continue;
        };
        let outcome = std::panic::catch_unwind(|| Scenario::from_toml(&text));
        match outcome {
            Err(_) => failures.push(format!("{name}: Scenario::from_toml panicked")),
            Ok(Ok(_)) => failures.push(format!("{name}: accepted, expected `{field}` error containing {substring:?}")),
            Ok(Err(err)) => {
                let shown = err.to_string();
                if err.field != field || !shown.contains(&substring) {
                    failures.push(format!(
                        "{name}: expected field {field:?} with message containing {substring:?}, got field {:?}, error {shown:?}",
                        err.field
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} bad scenarios mismatched:\n  {}", failures.len(), files.len(), failures.join("\n  "));
}

#[test]
fn examples_are_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let files = toml_files(&dir);
    assert!(!files.is_empty(), "no examples found in {}", dir.display());
    let mut failures = Vec::new();
    for path in &files {
        let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        if let Err(err) = Scenario::from_toml(&text) {
            failures.push(format!("{}: {err}", path.display()));
        }
    }
    assert!(failures.is_empty(), "examples rejected:\n  {}", failures.join("\n  "));
}

#[test]
fn a_fixed_window_is_not_held_to_max_cycles_which_only_growth_uses() {
    // `docs/scenario.md`: under "fixed" `max_cycles` is kept, not refused; the window never grows.
    let text = "duration_ms = 1\n[host]\ncores_per_socket = 2\n[hypervisor]\n\
                ple = { policy = \"fixed\", window_cycles = 2000000000 }\n\
                [[vm]]\nname = \"a\"\nvcpus = 2\nlock = \"ticket\"\nworkload = { preset = \"kernbench\" }\n";
    Scenario::from_toml(text).expect("a fixed window above the default max_cycles");
    let kvm = text.replace("\"fixed\"", "\"kvm\"");
    let err = Scenario::from_toml(&kvm).expect_err("a growing window above its max");
    assert_eq!(err.field, "hypervisor.ple.max_cycles");
}
