//! # vspin-bench
//!
//! The vspin locks on real threads, against `std::sync::Mutex`, `parking_lot::Mutex` and
//! `spin::TicketMutex`, compared through one tiny trait ([`BenchLock`]) in the manner of
//! `parking_lot`'s benchmark crate.
//!
//! A contended run starts `T` threads that each loop
//! `{ lock; critical section of cs_ns; unlock; think for think_ns }`, lets them run `warmup_s`,
//! then counts each thread's acquisitions over the next `seconds` (from a snapshot of per-thread
//! counters at each end of that window, taken by the timing thread), and reports
//! - throughput: acquisitions per second, all threads together;
//! - fairness: the most acquisitions of one thread over the fewest (`None` when a thread never
//!   got the lock: starvation is not a finite ratio);
//! - the 99th percentile of the time `lock()` took, sampled on every `sample_every`-th
//!   acquisition into a per-thread log-linear histogram (16 sub-buckets per power of two, so
//!   values are within 1/16 below the truth), keeping clock reads off most iterations;
//! - where fairness comes from (on Linux, from each thread's CPU clock over the same window): the
//!   spread of the threads' CPU times, the spread of their acquisitions per second of their own
//!   CPU time, and the share of the cores the threads used together. The first says how
//!   unequally the threads got to run (how long each slept in the lock's slow path, and how the
//!   scheduler split the cores among the others), the second how unequally they acquired while
//!   running (`cpu_time`);
//! - each thread's acquisitions and CPU time in the window, for any other measure.
//!
//! The critical section and the think time are busy loops of increments (on the protected
//! counter and on a local) whose length in iterations is calibrated against the clock once per
//! run. With more threads than cores, the OS scheduler preempts lock holders and queued waiters,
//! as a hypervisor preempts vCPUs; that is the point of running at 2×–8× the core count.
//!
//! An uncontended measurement (one thread, `lock; counter += 1; unlock` in a loop) gives each
//! lock's fast-path cost in nanoseconds per pair.
//!
//! [`run_json`] takes and returns JSON (the Python `vspin bench-locks` command calls it).
//! [`host_costs`] measures this machine's costs for the simulator's host mode (`vspin
//! validate-locks`).
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use cpu_time::ThreadClock;
use vspin_locks::mutex::*;

mod cpu_time;
pub mod host_costs;
mod placement;

/// What the benchmark needs of a lock protecting a counter.
pub trait BenchLock: Send + Sync + 'static {
    fn new() -> Self;
    /// Run `f` on the counter with the lock held.
    fn with(&self, f: impl FnOnce(&mut u64));
}

impl<R: lock_api::RawMutex + Send + Sync + 'static> BenchLock for lock_api::Mutex<R, u64> {
    fn new() -> Self {
        lock_api::Mutex::new(0)
    }
    #[inline]
    fn with(&self, f: impl FnOnce(&mut u64)) {
        f(&mut self.lock())
    }
}

impl BenchLock for std::sync::Mutex<u64> {
    fn new() -> Self {
        std::sync::Mutex::new(0)
    }
    #[inline]
    fn with(&self, f: impl FnOnce(&mut u64)) {
        f(&mut self.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }
}

impl BenchLock for spin::mutex::TicketMutex<u64> {
    fn new() -> Self {
        spin::mutex::TicketMutex::new(0)
    }
    #[inline]
    fn with(&self, f: impl FnOnce(&mut u64)) {
        f(&mut self.lock())
    }
}

/// Every lock the benchmark knows, by name: the vspin algorithms (their simulator names), then
/// the baselines.
pub const LOCKS: &[&str] = &[
    "tas",
    "tas-yield",
    "las-tas",
    "ticket",
    "pv-ticket",
    "oticket",
    "oticket-spin-only",
    "oticket-wakeup-only",
    "longer-spinning",
    "iticket",
    "preemptable-ticket",
    "pv-preemptable-ticket",
    "qspinlock",
    "pv-qspinlock",
    "pv-qspinlock-v4.2",
    "std",
    "parking_lot",
    "spin-ticket",
];

/// Call `$f::<lock type>($args)` for the lock named `$name` (one of [`LOCKS`]).
macro_rules! with_lock {
    ($name:expr, $f:ident($($args:expr),*)) => {
        match $name {
            "tas" => $f::<TasMutex<u64>>($($args),*),
            "tas-yield" => $f::<TasYieldMutex<u64>>($($args),*),
            "las-tas" => $f::<LasTasMutex<u64>>($($args),*),
            "ticket" => $f::<TicketMutex<u64>>($($args),*),
            "pv-ticket" => $f::<PvTicketMutex<u64>>($($args),*),
            "oticket" => $f::<OTicketMutex<u64>>($($args),*),
            "oticket-spin-only" => $f::<OpportunisticSpinMutex<u64>>($($args),*),
            "oticket-wakeup-only" => $f::<OpportunisticWakeupMutex<u64>>($($args),*),
            "longer-spinning" => $f::<LongerSpinningMutex<u64>>($($args),*),
            "iticket" => $f::<ITicketMutex<u64>>($($args),*),
            "preemptable-ticket" => $f::<PreemptableTicketMutex<u64>>($($args),*),
            "pv-preemptable-ticket" => $f::<PvPreemptableTicketMutex<u64>>($($args),*),
            "qspinlock" => $f::<QueuedSpinMutex<u64>>($($args),*),
            "pv-qspinlock" => $f::<PvQueuedSpinMutex<u64>>($($args),*),
            "pv-qspinlock-v4.2" => $f::<PvQueuedSpinV42Mutex<u64>>($($args),*),
            "std" => $f::<std::sync::Mutex<u64>>($($args),*),
            "parking_lot" => $f::<parking_lot::Mutex<u64>>($($args),*),
            "spin-ticket" => $f::<spin::mutex::TicketMutex<u64>>($($args),*),
            other => unreachable!("lock {other:?} passed validation"),
        }
    };
}

/// A benchmark run. Every field has a default, so `{}` is a valid configuration.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Thread counts to run each lock at (default 1, cores, 2×, 4× and 8× cores).
    pub threads: Vec<usize>,
    /// Seconds per (lock, thread count).
    pub seconds: f64,
    /// Seconds the threads run before the measured `seconds` start (0: from the start). Under
    /// oversubscription a FIFO lock runs at full speed until the first preemption catches a
    /// thread in its queue, then collapses; a warm-up leaves that start out.
    pub warmup_s: f64,
    /// Critical-section length.
    pub cs_ns: u64,
    /// Time between an unlock and the next lock.
    pub think_ns: u64,
    /// Locks to measure (default: all of [`LOCKS`]).
    pub locks: Vec<String>,
    /// Time `lock()` on every n-th acquisition.
    pub sample_every: u64,
    /// Also measure each lock alone on one thread.
    pub uncontended: bool,
    /// Where the threads run: `"none"`, wherever the OS scheduler puts them (it migrates them);
    /// `"round-robin"`, thread `i` pinned to the `i`-th CPU this process may use, modulo their
    /// number (as vCPUs pinned 1:1 by a hypervisor). See [`PINS`].
    pub pin: String,
}

/// The most threads one point may run: 128 per core of a large server, far past any
/// oversubscription the benchmark is for, and few enough that every OS spawns them.
pub const MAX_THREADS: usize = 4096;

/// The longest a window or warm-up may last: an hour, so that a mistyped `1e9` is refused, not
/// run for decades.
pub const MAX_SECONDS: f64 = 3600.0;

/// Seconds the threads run before the window opens, unless told otherwise (see `Config::default`).
pub const DEFAULT_WARMUP_S: f64 = 0.2;

/// The values of [`Config::pin`].
pub const PINS: [&str; 2] = ["none", "round-robin"];

impl Default for Config {
    fn default() -> Self {
        let c = cores();
        let mut threads = vec![1, c, 2 * c, 4 * c, 8 * c];
        threads.dedup();
        Config {
            threads,
            seconds: 1.0,
            // With more threads than cores a FIFO lock runs at full speed from the start until the
            // first preemption catches a thread in its queue, a few milliseconds that a one-second
            // window without a warm-up counts (the ticket lock at 8 threads on 2 cores: 21 k – 76 k
            // acquisitions a second without, 45 – 51 with 0.2 s).
            warmup_s: DEFAULT_WARMUP_S,
            cs_ns: 100,
            think_ns: 200,
            locks: LOCKS.iter().map(|s| s.to_string()).collect(),
            sample_every: 8,
            uncontended: true,
            pin: "none".into(),
        }
    }
}

impl Config {
    /// Reject what cannot be run, naming the field and what it allows.
    pub fn validate(&self) -> Result<(), String> {
        if self.threads.is_empty() || self.threads.iter().any(|&t| t == 0 || t > MAX_THREADS) {
            return Err(format!("threads: every count must be 1..={MAX_THREADS}, got {:?}", self.threads));
        }
        if !(self.seconds > 0.0 && self.seconds <= MAX_SECONDS) {
            return Err(format!("seconds: must be a number in (0, {MAX_SECONDS}], got {}", self.seconds));
        }
        if !(self.warmup_s >= 0.0 && self.warmup_s <= MAX_SECONDS) {
            return Err(format!("warmup_s: must be a number in [0, {MAX_SECONDS}], got {}", self.warmup_s));
        }
        if self.sample_every == 0 {
            return Err("sample_every: must be at least 1".into());
        }
        if self.locks.is_empty() {
            return Err(format!("locks: name at least one of {}", LOCKS.join(", ")));
        }
        for lock in &self.locks {
            if !LOCKS.contains(&lock.as_str()) {
                return Err(format!("locks: unknown lock {lock:?}; allowed: {}", LOCKS.join(", ")));
            }
        }
        if !PINS.contains(&self.pin.as_str()) {
            return Err(format!("pin: unknown placement {:?}; allowed: {}", self.pin, PINS.join(", ")));
        }
        Ok(())
    }
}

/// One (lock, thread count) measurement.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub lock: String,
    pub threads: usize,
    pub ops_per_sec: f64,
    /// Most over fewest acquisitions of one thread; `None` if a thread never acquired.
    pub fairness_max_min: Option<f64>,
    /// `None` if no acquisition was sampled.
    pub p99_acquire_ns: Option<u64>,
    /// Most over least CPU time of one thread in the window; `None` where threads' CPU clocks
    /// cannot be read (not Linux) or a thread ran not at all.
    pub cpu_time_max_min: Option<f64>,
    /// Most over fewest acquisitions per second of the thread's own CPU time: the lock's
    /// fairness to the threads while they run, how unequally they ran taken out. `None` as for
    /// `cpu_time_max_min`, or when a thread never got the lock.
    pub acquisitions_per_cpu_s_max_min: Option<f64>,
    /// The threads' CPU time together over the window times the CPUs they may run on (the
    /// process's affinity, as host mode's pCPUs are; a CPU quota is not taken out, so under one
    /// this is at most quota / period over those CPUs): below 1 when a lock leaves CPUs idle
    /// while its threads sleep. `None` where CPU clocks cannot be read.
    pub cpu_busy: Option<f64>,
    /// Each thread's acquisitions in the window, in the order the threads were started, so that
    /// any other measure of fairness can be computed from the report.
    pub thread_acquisitions: Vec<u64>,
    /// Each thread's CPU time in the window, ns, in the same order; `None` where CPU clocks
    /// cannot be read.
    pub thread_cpu_ns: Option<Vec<u64>>,
}

#[derive(Clone, Debug, Serialize)]
pub struct MachineInfo {
    pub cores: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub machine: MachineInfo,
    pub config: Config,
    pub results: Vec<Row>,
    /// Lock + unlock on one thread, nanoseconds per pair.
    pub uncontended_ns: BTreeMap<String, f64>,
    /// The busy loops' calibration: ns per iteration (their lengths follow from it).
    pub ns_per_iteration: f64,
    /// The busy loops' jitter: the coefficient of variation of one thread's critical section
    /// plus think time, run alone (see `Work::loop_cv`); host mode simulates loops this jittery.
    pub loop_cv: f64,
}

/// Cores available to this process.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Run the benchmark.
pub fn run(config: &Config) -> Result<Report, String> {
    config.validate()?;
    let work = Work::calibrate();
    let loop_cv = work.loop_cv(config.cs_ns, config.think_ns);
    let mut uncontended_ns = BTreeMap::new();
    let mut results = Vec::new();
    for lock in &config.locks {
        if config.uncontended {
            uncontended_ns.insert(lock.clone(), with_lock!(lock.as_str(), uncontended()));
        }
        for &threads in &config.threads {
            results.push(with_lock!(lock.as_str(), contended(lock, threads, config, &work))?);
        }
    }
    let ns_per_iteration = work.ns_per_iteration;
    Ok(Report { machine: MachineInfo { cores: cores() }, config: config.clone(), results, uncontended_ns, ns_per_iteration, loop_cv })
}

/// Run a JSON [`Config`]; the report as JSON, or an error naming the bad field.
pub fn run_json(config: &str) -> Result<String, String> {
    let config: Config = serde_json::from_str(config).map_err(|e| format!("bench config: {e}"))?;
    let report = run(&config)?;
    Ok(serde_json::to_string(&report).expect("reports serialize"))
}

/// Busy-loop lengths, in iterations, for the configured nanoseconds.
struct Work {
    ns_per_iteration: f64,
}

impl Work {
    /// The fastest batch of 2M iterations over 200 ms. One batch alone, or seven, were as much as
    /// 40% slow when the run started on a CPU that had been idle (its clock still ramping up) or
    /// shared, and that cut every critical section short for the whole run.
    fn calibrate() -> Self {
        let n = 2_000_000;
        let mut x = 0u64;
        let start = Instant::now();
        let mut ns_per_iteration = f64::INFINITY;
        while start.elapsed() < Duration::from_millis(200) {
            let t = Instant::now();
            spin(&mut x, n);
            ns_per_iteration = ns_per_iteration.min(t.elapsed().as_nanos() as f64 / n as f64);
        }
        Work { ns_per_iteration }
    }

    fn iterations(&self, ns: u64) -> u64 {
        (ns as f64 / self.ns_per_iteration).round() as u64
    }

    /// The coefficient of variation of one iteration's work (the critical section's loop, then the
    /// think time's), each iteration timed alone on this thread: the median over
    /// [`JITTER_WINDOWS`] windows of [`JITTER_SAMPLES`] iterations, since one window can fall on
    /// a moment when the machine (a virtual one, shared) runs the loop slower throughout. An
    /// iteration longer than twice the window's median was interrupted: host mode simulates
    /// interruptions apart (the cost table's `interruptions`), so it is left out. What remains is
    /// the loops' own variation (frequency, caches, the sibling thread), a few percent on the
    /// development machines, plus the clock's resolution (10 ns on them: about 1.4% of a 300 ns
    /// iteration).
    fn loop_cv(&self, cs_ns: u64, think_ns: u64) -> f64 {
        let (cs, think) = (self.iterations(cs_ns).max(1), self.iterations(think_ns));
        let mut x = 0u64;
        let deadline = Instant::now() + Duration::from_millis(200);
        let mut cvs: Vec<f64> = (0..JITTER_WINDOWS)
            .map_while(|_| {
                let mut lengths = Vec::with_capacity(JITTER_SAMPLES);
                let mut before = Instant::now();
                while lengths.len() < JITTER_SAMPLES && before < deadline {
                    spin(&mut x, cs);
                    spin(&mut x, think);
                    let after = Instant::now();
                    lengths.push((after - before).as_nanos() as f64);
                    before = after;
                }
                (!lengths.is_empty()).then(|| trimmed_cv(lengths))
            })
            .collect();
        black_box(x);
        cvs.sort_by(f64::total_cmp);
        cvs[cvs.len() / 2]
    }
}

/// The coefficient of variation of `lengths` without those longer than twice their median.
fn trimmed_cv(mut lengths: Vec<f64>) -> f64 {
    lengths.sort_by(f64::total_cmp);
    let median = lengths[lengths.len() / 2];
    lengths.retain(|&l| l <= 2.0 * median);
    let n = lengths.len() as f64;
    let mean = lengths.iter().sum::<f64>() / n;
    (lengths.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / n).sqrt() / mean
}

/// Windows timed for [`Work::loop_cv`], within 200 ms.
const JITTER_WINDOWS: usize = 9;
/// Iterations per window of [`Work::loop_cv`].
const JITTER_SAMPLES: usize = 20_000;

/// `n` dependent increments the compiler cannot fold. Never inlined: inlined, its code (and so
/// its speed) depended on the caller, and a critical section calibrated at 1000 ns took 600 ns
/// inside `contended` and differed from lock to lock; one out-of-line copy runs at the speed
/// `Work::calibrate` measured.
#[inline(never)]
fn spin(x: &mut u64, n: u64) {
    for _ in 0..n {
        *x = black_box(*x).wrapping_add(1);
    }
}

fn uncontended<L: BenchLock>() -> f64 {
    let lock = L::new();
    let batch = 100_000;
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..batch {
            black_box(&lock).with(|c| *c += 1);
        }
        best = best.min(t.elapsed().as_nanos() as f64 / batch as f64);
    }
    best
}

/// Throughput, fairness, p99 acquisition latency and CPU shares of `threads` threads on one
/// lock, over `config.seconds` after `config.warmup_s`.
fn contended<L: BenchLock>(name: &str, threads: usize, config: &Config, work: &Work) -> Result<Row, String> {
    /// One thread's acquisitions so far, on its own cache line.
    #[repr(align(128))]
    struct Count(AtomicU64);
    let lock = Arc::new(L::new());
    let stop = Arc::new(AtomicBool::new(false));
    // `lock()` latencies are sampled only inside the measured window, as the counts are.
    let recording = Arc::new(AtomicBool::new(false));
    let counts: Arc<Vec<Count>> = Arc::new((0..threads).map(|_| Count(AtomicU64::new(0))).collect());
    let gate = Arc::new(Gate::default());
    let (cs, think) = (work.iterations(config.cs_ns).max(1), work.iterations(config.think_ns));
    let every = config.sample_every;
    let cpus = if config.pin == "round-robin" { placement::allowed_cpus()? } else { Vec::new() };
    let cpus_allowed = placement::allowed_cpus().map_or_else(|_| cores(), |c| c.len());
    let mut workers = Vec::with_capacity(threads);
    for i in 0..threads {
        let (lock, stop, recording, counts, opened) =
            (lock.clone(), stop.clone(), recording.clone(), counts.clone(), gate.clone());
        let cpu = (!cpus.is_empty()).then(|| cpus[i % cpus.len()]);
        let spawned = std::thread::Builder::new().spawn(move || {
            // Every thread passes the gate, pinned or not, so a failure cannot hang the run.
            let pinned = cpu.map_or(Ok(()), placement::pin_to);
            let mut histogram = Histogram::default();
            let mut local = 0u64;
            let mut n = 0u64;
            if !opened.wait() {
                return Ok(histogram);
            }
            pinned?;
            while !stop.load(Ordering::Relaxed) {
                let t0 = (n % every == 0 && recording.load(Ordering::Relaxed)).then(Instant::now);
                lock.with(|counter| {
                    if let Some(t0) = t0 {
                        histogram.record(t0.elapsed());
                    }
                    spin(counter, cs);
                });
                n += 1;
                counts[i].0.store(n, Ordering::Relaxed);
                spin(&mut local, think);
            }
            Ok::<_, String>(histogram)
        });
        match spawned {
            Ok(w) => workers.push(w),
            Err(e) => {
                // The OS refused a thread (a process or memory limit): release those already
                // waiting, and say so.
                gate.open(false);
                for w in workers {
                    let _ = w.join();
                }
                return Err(format!("threads: the OS would not start thread {} of {threads}: {e}", i + 1));
            }
        }
    }
    let snapshot = || counts.iter().map(|c| c.0.load(Ordering::Relaxed)).collect::<Vec<u64>>();
    let clocks: Option<Vec<ThreadClock>> = workers.iter().map(ThreadClock::of).collect();
    gate.open(true);
    if config.warmup_s > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(config.warmup_s));
    }
    // The window starts when this thread runs again, which with more threads than cores may be
    // milliseconds after the workers started: counting from their start (as this benchmark once
    // did) credited a FIFO lock's full-speed start to a window that had not begun.
    recording.store(true, Ordering::Relaxed);
    // The CPU clocks are read inside the wall-clock window, so the threads' CPU time cannot
    // exceed the window times the CPUs.
    let (t, before, cpu_before) = (Instant::now(), snapshot(), cpu_time::read_all(&clocks));
    std::thread::sleep(Duration::from_secs_f64(config.seconds));
    let (after, cpu_after, elapsed) = (snapshot(), cpu_time::read_all(&clocks), t.elapsed().as_secs_f64());
    recording.store(false, Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    let mut histogram = Histogram::default();
    for w in workers {
        histogram.merge(&w.join().expect("bench thread")?);
    }
    let counts: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    let cpu_ns: Option<Vec<u64>> = cpu_before.zip(cpu_after).map(|(b, a)| a.iter().zip(&b).map(|(a, b)| a - b).collect());
    let rates: Option<Vec<f64>> = cpu_ns.as_ref().filter(|ns| ns.iter().all(|&n| n > 0)).map(|ns| {
        counts.iter().zip(ns).map(|(&c, &n)| c as f64 / (n as f64 * 1e-9)).collect()
    });
    Ok(Row {
        lock: name.to_string(),
        threads,
        ops_per_sec: counts.iter().sum::<u64>() as f64 / elapsed,
        fairness_max_min: spread(counts.iter().map(|&c| c as f64)),
        p99_acquire_ns: histogram.quantile(0.99),
        cpu_time_max_min: cpu_ns.as_ref().and_then(|ns| spread(ns.iter().map(|&n| n as f64))),
        acquisitions_per_cpu_s_max_min: rates.and_then(|r| spread(r.into_iter())),
        cpu_busy: cpu_ns.as_ref().map(|ns| ns.iter().sum::<u64>() as f64 * 1e-9 / (elapsed * cpus_allowed as f64)),
        thread_acquisitions: counts,
        thread_cpu_ns: cpu_ns,
    })
}

/// The largest value over the smallest; `None` when the smallest is zero (starvation is not a
/// finite ratio).
fn spread(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (min, max) = values.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    (min > 0.0 && min.is_finite()).then(|| max / min)
}

/// Where the workers wait until all are spawned: then the gate opens, to run or (when the OS
/// refused one of them) to go home.
#[derive(Default)]
struct Gate {
    state: Mutex<Option<bool>>,
    opened: Condvar,
}

impl Gate {
    fn open(&self, run: bool) {
        *self.state.lock().expect("gate") = Some(run);
        self.opened.notify_all();
    }

    /// Wait for the gate to open; whether to run.
    fn wait(&self) -> bool {
        let state = self.opened.wait_while(self.state.lock().expect("gate"), |s| s.is_none()).expect("gate");
        state.expect("opened")
    }
}

/// Log-linear histogram of nanoseconds: exact below 16, then 16 buckets per power of two.
struct Histogram {
    buckets: Vec<u64>,
}

const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;

impl Default for Histogram {
    fn default() -> Self {
        Histogram { buckets: vec![0; (64 - SUB_BITS as usize + 1) * SUB as usize] }
    }
}

impl Histogram {
    fn index(ns: u64) -> usize {
        if ns < SUB {
            return ns as usize;
        }
        let log = 63 - ns.leading_zeros();
        let sub = (ns >> (log - SUB_BITS)) & (SUB - 1);
        ((log - SUB_BITS + 1) as u64 * SUB + sub) as usize
    }

    /// The smallest value of bucket `i`.
    fn floor(i: usize) -> u64 {
        let (i, sub) = (i as u64 / SUB, i as u64 % SUB);
        if i == 0 {
            sub
        } else {
            (SUB + sub) << (i - 1)
        }
    }

    fn record(&mut self, d: Duration) {
        self.buckets[Self::index(d.as_nanos().min(u64::MAX as u128) as u64)] += 1;
    }

    fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
    }

    fn quantile(&self, q: f64) -> Option<u64> {
        let total: u64 = self.buckets.iter().sum();
        let rank = ((total as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if n > 0 && seen >= rank {
                return Some(Self::floor(i));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_opened_to_go_home_sends_its_waiters_home() {
        for run in [true, false] {
            let gate = Arc::new(Gate::default());
            let waiters: Vec<_> = (0..3).map(|_| { let g = gate.clone(); std::thread::spawn(move || g.wait()) }).collect();
            gate.open(run);
            assert!(waiters.into_iter().all(|w| w.join().unwrap() == run));
        }
    }

    #[test]
    fn histogram_buckets_are_within_a_sixteenth() {
        for ns in [0, 1, 15, 16, 17, 31, 32, 33, 1000, 123_456_789, u64::MAX] {
            let floor = Histogram::floor(Histogram::index(ns));
            assert!(floor <= ns && ns - floor <= ns / 16, "{ns} in bucket from {floor}");
        }
        let mut h = Histogram::default();
        (1..=100).for_each(|ns| h.record(Duration::from_nanos(ns)));
        assert_eq!(h.quantile(0.99), Some(96), "99 falls in the bucket 96..100");
        assert_eq!(Histogram::default().quantile(0.99), None);
    }

    #[test]
    fn the_loops_jitter_leaves_interruptions_out() {
        // 300 ± 30 ns: a CV of 0.1; counted, the 5 µs interruption would make it 0.5.
        let mut lengths: Vec<f64> = (0..1000).map(|i| if i % 2 == 0 { 270.0 } else { 330.0 }).collect();
        lengths.push(5000.0);
        assert!((trimmed_cv(lengths) - 0.1).abs() < 1e-9);
    }

    #[test]
    fn bad_configs_name_the_field() {
        let bad = |json: &str| run_json(json).unwrap_err();
        assert!(bad(r#"{"locks": ["nope"]}"#).contains("locks: unknown lock \"nope\"; allowed: tas, tas-yield, las-tas, ticket"));
        assert!(bad(r#"{"threads": [0]}"#).starts_with("threads"));
        assert!(bad(r#"{"seconds": -1}"#).starts_with("seconds"));
        assert!(bad(r#"{"warmup_s": -0.5}"#).starts_with("warmup_s"));
        assert!(bad(r#"{"threads": [2, 100000]}"#).starts_with("threads: every count must be 1..=4096"));
        assert!(bad(r#"{"seconds": 1e9}"#).starts_with("seconds: must be a number in (0, 3600]"));
        assert!(bad(r#"{"warmup_s": 1e9}"#).starts_with("warmup_s"));
        assert!(bad(r#"{"thread": [1]}"#).contains("unknown field `thread`"));
        assert_eq!(bad(r#"{"pin": "1:1"}"#), "pin: unknown placement \"1:1\"; allowed: none, round-robin");
    }

    #[test]
    fn every_lock_runs_and_reports_plausible_numbers() {
        let config = Config { threads: vec![1, 2], seconds: 0.02, warmup_s: 0.0, uncontended: true, ..Config::default() };
        let report = run(&config).unwrap();
        assert_eq!(report.results.len(), LOCKS.len() * 2);
        for row in &report.results {
            assert!(row.ops_per_sec > 0.0, "{row:?}");
            assert_eq!(row.thread_acquisitions.len(), row.threads, "{row:?}");
            if cfg!(target_os = "linux") {
                // The threads cannot use more than the CPUs they may run on (1% over: the CPU
                // clocks and the wall clock tick from different sources, which NTP may slew).
                let busy = row.cpu_busy.expect("Linux reads thread CPU clocks");
                assert!(busy > 0.0 && busy <= 1.01, "{row:?}");
                assert_eq!(row.thread_cpu_ns.as_ref().map(Vec::len), Some(row.threads), "{row:?}");
                if row.threads == 1 {
                    assert_eq!(row.cpu_time_max_min, Some(1.0), "{row:?}");
                    assert_eq!(row.acquisitions_per_cpu_s_max_min, Some(1.0), "{row:?}");
                }
            }
        }
        assert!(report.uncontended_ns.values().all(|&ns| ns > 0.0 && ns < 10_000.0));
    }

    #[test]
    fn pinned_threads_run_every_lock() {
        // As many threads as CPUs: oversubscribed, a FIFO lock may make no acquisition in 20 ms.
        let threads = vec![cores()];
        let config = Config { threads, seconds: 0.02, warmup_s: 0.0, uncontended: false, pin: "round-robin".into(), ..Config::default() };
        let report = run(&config).unwrap();
        assert!(report.results.iter().all(|row| row.ops_per_sec > 0.0), "{:?}", report.results);
    }
}
