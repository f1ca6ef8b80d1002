//! Threads incrementing a shared counter under several of the locks, on real threads: first one
//! thread per core, then four per core, where the OS preempts holders and queued waiters as a
//! hypervisor preempts vCPUs. The FIFO locks then fall to hundreds of increments a second, and
//! the paravirtual queued spinlock keeps millions (`docs/real-locks.md` has the measurements;
//! `vspin bench-locks` the full benchmark).
//!
//! ```sh
//! cargo run --release -p vspin-locks --example counter
//! ```
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use vspin_locks::lock_api::{Mutex, RawMutex};
use vspin_locks::mutex::{OTicketMutex, PvPreemptableTicketMutex, PvQueuedSpinMutex, TasMutex, TicketMutex};

/// `threads` threads add 1 to the counter for `window`, all starting together; prints the
/// increments per second and checks that none was lost.
fn count<R: RawMutex + Send + Sync + 'static>(name: &str, counter: Mutex<R, u64>, threads: usize, window: Duration) {
    let counter = Arc::new(counter);
    let start = Arc::new(Barrier::new(threads + 1));
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (counter, start, stop) = (Arc::clone(&counter), Arc::clone(&start), Arc::clone(&stop));
            std::thread::spawn(move || {
                start.wait();
                let mut mine = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    *counter.lock() += 1;
                    mine += 1;
                }
                mine
            })
        })
        .collect();
    start.wait();
    let t = Instant::now();
    std::thread::sleep(window);
    stop.store(true, Ordering::Relaxed);
    let done: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    let elapsed = t.elapsed().as_secs_f64();
    assert_eq!(*counter.lock(), done, "{name}: lost increments");
    println!("{name:<22} {threads:>3} threads {:>14.0} increments/s", done as f64 / elapsed);
}

fn main() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let window = Duration::from_millis(300);
    for threads in [cores, 4 * cores] {
        count("pv-qspinlock", PvQueuedSpinMutex::new(0), threads, window);
        count("tas", TasMutex::new(0), threads, window);
        count("pv-preemptable-ticket", PvPreemptableTicketMutex::new(0), threads, window);
        count("oticket", OTicketMutex::new(0), threads, window);
        count("ticket", TicketMutex::new(0), threads, window);
    }
}
