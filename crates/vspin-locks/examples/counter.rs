//! Threads incrementing a shared counter under several of the locks, on real threads, one thread
//! per core. (With more threads than cores the OS preempts holders and queued waiters and the
//! FIFO locks drop to thousands of acquisitions per second: see `vspin bench-locks` and
//! `docs/real-locks.md`.)
//!
//! ```sh
//! cargo run --release -p vspin-locks --example counter
//! ```
use std::sync::Arc;
use std::time::Instant;
use vspin_locks::mutex::{OTicketMutex, PvPreemptableTicketMutex, TasMutex, TicketMutex};

/// `threads` threads each add 1 to the counter `per_thread` times; prints how long it took.
fn count<R: lock_api::RawMutex + Send + Sync + 'static>(
    name: &str,
    counter: lock_api::Mutex<R, u64>,
    threads: u64,
    per_thread: u64,
) {
    let counter = Arc::new(counter);
    let t = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let counter = Arc::clone(&counter);
            std::thread::spawn(move || {
                for _ in 0..per_thread {
                    *counter.lock() += 1;
                }
            })
        })
        .collect();
    workers.into_iter().for_each(|w| w.join().unwrap());
    let total = *counter.lock();
    assert_eq!(total, threads * per_thread, "{name}: lost increments");
    println!("{name:<22} {total:>8} increments by {threads} threads in {:.1?}", t.elapsed());
}

fn main() {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    count("oticket", OTicketMutex::new(0), threads, 100_000);
    count("pv-preemptable-ticket", PvPreemptableTicketMutex::new(0), threads, 100_000);
    count("tas", TasMutex::new(0), threads, 100_000);
    count("ticket", TicketMutex::new(0), threads, 100_000);
}
