//! Measure this machine's host cost table for the simulator's host mode and print it as JSON
//! (`vspin validate-locks` turns it into a scenario; `docs/calibration.md`, "host mode").
//!
//! ```sh
//! cargo run --release -p vspin-bench --example host_costs
//! ```
fn main() {
    match vspin_bench::host_costs::measure_json() {
        Ok(costs) => println!("{costs}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
