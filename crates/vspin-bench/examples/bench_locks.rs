//! Run the lock benchmark from Rust and print the JSON report (the Python `vspin bench-locks`
//! prints a table and draws the plot). The one optional argument is a JSON configuration:
//!
//! ```sh
//! cargo run --release -p vspin-bench --example bench_locks -- '{"threads": [1, 2, 8], "seconds": 1}'
//! ```
fn main() {
    let config = std::env::args().nth(1).unwrap_or_else(|| "{}".into());
    match vspin_bench::run_json(&config) {
        Ok(report) => println!("{report}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
