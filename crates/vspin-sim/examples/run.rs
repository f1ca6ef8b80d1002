//! `cargo run --release -p vspin-sim --example run -- SCENARIO.toml [lock]`: print a run's JSON.
fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: run SCENARIO.toml [lock]");
    let mut text = std::fs::read_to_string(&path).expect("readable scenario");
    if let Some(lock) = args.next() {
        text = text.replace("lock = \"ticket\"", &format!("lock = \"{lock}\""));
    }
    match vspin_sim::run_toml(&text) {
        Ok(r) => println!("{}", serde_json::to_string_pretty(&r).unwrap()),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
