//! Simulate a scenario from Rust and print the result as JSON:
//! `cargo run --release -p vspin-sim --example run -- examples/overcommit-2x.toml`
fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: run SCENARIO.toml");
        std::process::exit(2);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {path}: {e}");
            std::process::exit(2);
        }
    };
    match vspin_sim::run_toml(&text) {
        Ok(r) => println!("{}", serde_json::to_string_pretty(&r).expect("results serialize")),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
