//! Threads incrementing a shared counter under several of the locks, on real threads: first one
//! thread per core, then four per core, where the OS preempts holders and queued waiters as a
//! hypervisor preempts vCPUs. The FIFO locks then fall to hundreds of increments a second, and
//! the paravirtual queued spinlock keeps millions (`docs/real-locks.md` has the measurements;
//! `vspin bench-locks` the full benchmark). On the 2-core development machine (2026-11-28, two
//! runs), at 8 threads: pv-qspinlock 10–11 M increments/s, tas 11–12 M, pv-preemptable-ticket
//! 750, oticket 120–190, ticket 140–160.
//!
//! ```sh
//! cargo run --release -p vspin-locks --example counter
//! ```
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use vspin_locks::lock_api::{Mutex, RawMutex};
use vspin_locks::mutex::{OTicketMutex, PvPreemptableTicketMutex, PvQueuedSpinMutex, TasMutex, TicketMutex};

/// One thread's count of its increments, on lines of its own (128 bytes: the adjacent-line
/// prefetcher pairs 64-byte lines) so that the threads' counting does not add false sharing to
/// the lock's own traffic.
#[repr(align(128))]
#[derive(Default)]
struct Count(AtomicU64);

/// `threads` threads add 1 to the counter, all starting together; prints the increments per
/// second over `window` after `warmup` (the first milliseconds, before the OS has preempted
/// anyone, run far faster than the steady state) and checks that no increment was lost.
fn count<R: RawMutex + Send + Sync + 'static>(
    name: &str,
    counter: Mutex<R, u64>,
    threads: usize,
    warmup: Duration,
    window: Duration,
) {
    let counter = Arc::new(counter);
    let counts: Arc<Vec<Count>> = Arc::new((0..threads).map(|_| Count::default()).collect());
    let start = Arc::new(Barrier::new(threads + 1));
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..threads)
        .map(|i| {
            let (counter, counts) = (Arc::clone(&counter), Arc::clone(&counts));
            let (start, stop) = (Arc::clone(&start), Arc::clone(&stop));
            std::thread::spawn(move || {
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    *counter.lock() += 1;
                    counts[i].0.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let total = || counts.iter().map(|c| c.0.load(Ordering::Relaxed)).sum::<u64>();
    start.wait();
    std::thread::sleep(warmup);
    let (before, t) = (total(), Instant::now());
    std::thread::sleep(window);
    let (after, elapsed) = (total(), t.elapsed().as_secs_f64());
    stop.store(true, Ordering::Relaxed);
    workers.into_iter().for_each(|w| w.join().unwrap());
    assert_eq!(*counter.lock(), total(), "{name}: lost increments");
    println!("{name:<22} {threads:>3} threads {:>14.0} increments/s", (after - before) as f64 / elapsed);
}

fn main() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (warmup, window) = (Duration::from_millis(100), Duration::from_millis(300));
    for threads in [cores, 4 * cores] {
        count("pv-qspinlock", PvQueuedSpinMutex::new(0), threads, warmup, window);
        count("tas", TasMutex::new(0), threads, warmup, window);
        count("pv-preemptable-ticket", PvPreemptableTicketMutex::new(0), threads, warmup, window);
        count("oticket", OTicketMutex::new(0), threads, warmup, window);
        count("ticket", TicketMutex::new(0), threads, warmup, window);
    }
}
