//! The simulator's host cost table measured on this machine, for host mode: the benchmark's
//! threads as vCPUs of one VM, the OS scheduler as the hypervisor, a futex wait as the halt and a
//! futex wake as the kick (`docs/calibration.md`, "host mode").
//!
//! Each quantity is measured the way the simulator charges it, with the code the locks run where
//! there is one (the native platform's `spin_until`, `halt` and `kick`):
//!
//! | simulator parameter | measured here |
//! |---|---|
//! | `clock_ghz` | TSC ticks per ns over a 100 ms sleep |
//! | `l1_hit_ns` | one load of a pointer chase through 2 KiB (L1-resident) |
//! | `atomic_extra_ns` | one `lock xadd` on a line this CPU owns, in a loop of them (each waits for the one before: a locked instruction drains the store buffer), less `l1_hit_ns` |
//! | `pause_cycles` | one iteration of `Native::spin_until` (load, test, PAUSE) less `l1_hit_ns`, in TSC cycles: the simulator's spin iteration is `pause_cycles / clock_ghz + l1_hit_ns` |
//! | `transfer_same_socket_ns` | half a round trip of a cache line between two threads on CPUs 0 and 1, each waiting for the other's store |
//! | `context_switch_ns` | one hand-over between two threads pinned to CPU 0 that pass a turn with `sched_yield` (the syscall, `schedule()` and the switch) |
//! | `wakeup_ns` | `Native::kick` from CPU 0 to a thread halted in `Native::halt` on CPU 1 until that thread runs, after CPU 1 idled 20 µs, less `context_switch_ns` (the simulator charges a switch on every switch-in, the wake-up on top) |
//! | `idle_states` | the same after idle times up to 2 ms: the extra latency of a long idle (`exit_ns`), and the idle time from which it is paid (`residency_ns`) |
//! | `hypercall_ns` | the kicker's side of that kick (the `FUTEX_WAKE` system call): what the kicker pays in place of `KVM_HC_KICK_CPU` |
//! | `interruptions`, `background` | the gaps a running thread sees: one thread pinned to each CPU reads the TSC in a loop, and every gap longer than [`GAP_NS`] between two reads is one (the method of Linux's `osnoise` tracer); a gap across which the thread was switched out is a preemption by another task (`background`), any other an interruption; the rate per CPU of each gives its `interval_us`, the mean length its `burst_us` |
//!
//! Every figure is the median of its repeats; the spread (min, max) is reported so that a run on
//! a busy machine shows as one.
use serde::Serialize;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
use std::hint::black_box;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
use std::sync::{Arc, Barrier};
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
use std::time::{Duration, Instant};

/// One measured quantity: the median of its repeats and their range.
#[derive(Clone, Debug, Serialize)]
pub struct Measured {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub repeats: usize,
}

impl Measured {
    fn of(mut xs: Vec<f64>) -> Measured {
        xs.sort_by(f64::total_cmp);
        let n = xs.len();
        let median = if n % 2 == 1 { xs[n / 2] } else { (xs[n / 2 - 1] + xs[n / 2]) / 2.0 };
        Measured { median, min: xs[0], max: xs[n - 1], repeats: n }
    }
}

/// The host cost table of this machine (see the module docs for each method).
#[derive(Clone, Debug, Serialize)]
pub struct HostCosts {
    pub cpus: usize,
    pub clock_ghz: Measured,
    pub l1_hit_ns: Measured,
    /// One `lock xadd` on an owned line, ns (`atomic_extra_ns` is this less `l1_hit_ns`).
    pub atomic_ns: Measured,
    /// One `spin_until` iteration, ns (`pause_cycles` is derived from it).
    pub spin_iteration_ns: Measured,
    pub transfer_ns: Measured,
    pub context_switch_ns: Measured,
    /// Kick to run on a CPU that idled for each of [`IDLE_SCAN_US`], ns.
    pub wake_to_run_ns: Vec<IdleWake>,
    /// The shortest idle time after which a wake-up takes longer than halfway from the shortest
    /// idle's to the longest's: when the idle CPU enters a deeper state. `None` when the longest
    /// idle's wake-up is within 25% of the shortest's (no deeper state to speak of).
    pub deep_idle_after_ns: Option<f64>,
    /// The kicker's `FUTEX_WAKE` (after the shortest idle), ns.
    pub futex_wake_ns: Measured,
    /// Gaps in a running thread's progress that returned to it (interrupts; this machine's
    /// hypervisor, if it is a virtual machine), per CPU.
    pub interruptions: Gaps,
    /// Gaps in which another task ran (the thread was switched out and back), per CPU.
    pub preemptions: Gaps,
}

/// Gaps longer than [`GAP_NS`] in the progress of a thread that never blocks, watched on every
/// CPU at once for [`GAP_WATCH_MS`] per repeat. A gap is a preemption when the thread's count of
/// context switches (`getrusage(RUSAGE_THREAD)`) grew across it, else an interruption.
#[derive(Clone, Debug, Serialize)]
pub struct Gaps {
    /// Per second per CPU.
    pub per_s: Measured,
    /// Mean length, ns (0 in a repeat without any).
    pub mean_ns: Measured,
}

/// Wake-up latency after one idle time.
#[derive(Clone, Debug, Serialize)]
pub struct IdleWake {
    pub idle_us: u64,
    pub ns: Measured,
}

/// Idle times before a kick. Short ones find the CPU still polling or in a shallow state, long
/// ones in the deepest it has; the steps between are fine enough to place the change.
pub const IDLE_SCAN_US: [u64; 9] = [20, 50, 100, 150, 200, 300, 500, 1000, 2000];

/// A gap between two TSC reads longer than this is an interruption: a read takes about 10 ns, and
/// a cache miss or a TLB miss stays far below 1 µs (`osnoise`'s default threshold is 1 µs too).
pub const GAP_NS: f64 = 1_000.0;

/// How long each repeat of the interruption count watches, ms.
pub const GAP_WATCH_MS: u64 = 400;

/// Measure the host cost table. Needs Linux on x86_64 (futexes, the TSC) and two CPUs; takes
/// about five seconds.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub fn measure() -> Result<HostCosts, String> {
    let cpus = crate::cores();
    if cpus < 2 {
        return Err(format!("host costs: a cache-line transfer and a wake-up of an idle CPU need 2 CPUs; this process may use {cpus}"));
    }
    let repeats = 5;
    let series = |f: &dyn Fn() -> f64| Measured::of((0..repeats).map(|_| f()).collect());
    let clock_ghz = series(&tsc_ghz);
    let (interruptions, preemptions) = gaps(cpus, clock_ghz.median, repeats);
    let l1_hit_ns = series(&l1_hit_ns);
    let atomic_ns = series(&atomic_ns);
    let spin_iteration_ns = series(&spin_iteration_ns);
    let transfer_ns = series(&transfer_ns);
    let context_switch_ns = series(&context_switch_ns);
    let idles: Vec<Duration> = IDLE_SCAN_US.iter().map(|&us| Duration::from_micros(us)).collect();
    let runs: Vec<Vec<(f64, f64)>> = (0..repeats).map(|_| wake_to_run(&idles, 30)).collect();
    let wake_to_run_ns: Vec<IdleWake> = IDLE_SCAN_US
        .iter()
        .enumerate()
        .map(|(k, &idle_us)| IdleWake { idle_us, ns: Measured::of(runs.iter().map(|r| r[k].0).collect()) })
        .collect();
    let (short, long) = (wake_to_run_ns[0].ns.median, wake_to_run_ns[IDLE_SCAN_US.len() - 1].ns.median);
    let deep_idle_after_ns = (long > 1.25 * short)
        .then(|| wake_to_run_ns.iter().find(|w| w.ns.median > (short + long) / 2.0))
        .flatten()
        .map(|w| w.idle_us as f64 * 1000.0);
    Ok(HostCosts {
        cpus,
        clock_ghz,
        l1_hit_ns,
        atomic_ns,
        spin_iteration_ns,
        transfer_ns,
        context_switch_ns,
        wake_to_run_ns,
        deep_idle_after_ns,
        futex_wake_ns: Measured::of(runs.iter().map(|r| r[0].1).collect()),
        interruptions,
        preemptions,
    })
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
pub fn measure() -> Result<HostCosts, String> {
    Err("host costs: measured with futexes and the TSC, so only on Linux x86_64".into())
}

/// [`measure`] as JSON.
pub fn measure_json() -> Result<String, String> {
    Ok(serde_json::to_string(&measure()?).expect("host costs serialize"))
}

/// Pin the calling thread to `cpu`.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET and sched_setaffinity only touch it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        let rc = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        assert_eq!(rc, 0, "sched_setaffinity to CPU {cpu}: {}", std::io::Error::last_os_error());
    }
}

/// Run `f` on a new thread pinned to `cpu`.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn on_cpu<T: Send + 'static>(cpu: usize, f: impl FnOnce() -> T + Send + 'static) -> std::thread::JoinHandle<T> {
    std::thread::spawn(move || {
        pin_to(cpu);
        f()
    })
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn tsc_ghz() -> f64 {
    // SAFETY: RDTSC has no preconditions on x86_64.
    let tsc = || unsafe { core::arch::x86_64::_rdtsc() };
    let (t0, c0) = (Instant::now(), tsc());
    std::thread::sleep(Duration::from_millis(100));
    let (c1, t1) = (tsc(), Instant::now());
    (c1 - c0) as f64 / (t1 - t0).as_nanos() as f64
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn l1_hit_ns() -> f64 {
    // A random cyclic permutation of 256 slots (2 KiB): each load's address is the previous
    // load's value, so loads cannot overlap, and the prefetcher cannot guess the next one.
    let n = 256;
    let mut order: Vec<usize> = (0..n).collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for i in (1..n).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        order.swap(i, (seed % (i as u64 + 1)) as usize);
    }
    let mut next = vec![0usize; n];
    for k in 0..n {
        next[order[k]] = order[(k + 1) % n];
    }
    let steps = 20_000_000;
    let mut at = 0;
    let t = Instant::now();
    for _ in 0..steps {
        at = next[black_box(at)];
    }
    black_box(at);
    t.elapsed().as_nanos() as f64 / steps as f64
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn atomic_ns() -> f64 {
    let word = AtomicU64::new(0);
    let steps = 20_000_000;
    let t = Instant::now();
    for _ in 0..steps {
        black_box(&word).fetch_add(1, Ordering::SeqCst);
    }
    black_box(word.load(Ordering::Relaxed));
    t.elapsed().as_nanos() as f64 / steps as f64
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn spin_iteration_ns() -> f64 {
    use vspin_locks::native::{block_on, Native};
    use vspin_locks::{Platform, Until};
    let word = AtomicU64::new(0);
    let pauses = 2_000_000;
    let p = Native::default();
    let t = Instant::now();
    block_on(p.spin_until(&word, Until::eq(1), pauses));
    t.elapsed().as_nanos() as f64 / pauses as f64
}

/// Cache line ping-pong between CPUs 0 and 1: each side waits for the other's store, then
/// stores; one hand-over moves the line once.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn transfer_ns() -> f64 {
    #[repr(align(128))]
    struct Line(AtomicU64);
    let line = Arc::new(Line(AtomicU64::new(0)));
    let rounds = 200_000u64;
    let start = Arc::new(Barrier::new(2));
    let side = |cpu: usize, parity: u64| {
        let (line, start) = (line.clone(), start.clone());
        on_cpu(cpu, move || {
            start.wait();
            let t = Instant::now();
            for i in 0..rounds {
                let mine = 2 * i + parity;
                while line.0.load(Ordering::Acquire) != mine {
                    std::hint::spin_loop();
                }
                line.0.store(mine + 1, Ordering::Release);
            }
            t.elapsed()
        })
    };
    let (a, b) = (side(0, 0), side(1, 1));
    let elapsed = a.join().unwrap().max(b.join().unwrap());
    elapsed.as_nanos() as f64 / (2 * rounds) as f64
}

/// Two threads pinned to CPU 0 pass a turn back and forth, each `sched_yield`ing until it is
/// theirs: one hand-over is one yield and one switch.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn context_switch_ns() -> f64 {
    let turn = Arc::new(AtomicU64::new(0));
    let rounds = 20_000u64;
    let start = Arc::new(Barrier::new(2));
    let side = |parity: u64| {
        let (turn, start) = (turn.clone(), start.clone());
        on_cpu(0, move || {
            start.wait();
            let t = Instant::now();
            for i in 0..rounds {
                while turn.load(Ordering::Acquire) != 2 * i + parity {
                    std::thread::yield_now();
                }
                turn.store(2 * i + parity + 1, Ordering::Release);
            }
            t.elapsed()
        })
    };
    let (a, b) = (side(0), side(1));
    let elapsed = a.join().unwrap().max(b.join().unwrap());
    elapsed.as_nanos() as f64 / (2 * rounds) as f64
}

/// Kick-to-run latency of a thread halted (futex wait) on CPU 1 after CPU 1 idled for each of
/// `idles`, kicked from CPU 0; and what the kick call cost the kicker. Medians over `rounds`.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn wake_to_run(idles: &[Duration], rounds: u64) -> Vec<(f64, f64)> {
    use vspin_locks::native::{block_on, Machine, Native};
    use vspin_locks::Platform;
    static MACHINE: Machine = Machine::new();
    let p = Native::on(&MACHINE);
    let base = Instant::now();
    let now = move || base.elapsed().as_nanos() as u64;
    let total = rounds * idles.len() as u64;
    // Round `i` of the waiter: 2i+1 = about to halt, 2i+2 = woke; then its wake time and CPU id.
    let state = Arc::new((AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(u64::MAX)));
    let waiter = {
        let state = state.clone();
        on_cpu(1, move || {
            state.2.store(p.cpu() as u64, Ordering::Release);
            for i in 0..total {
                state.0.store(2 * i + 1, Ordering::Release);
                block_on(p.halt());
                state.1.store(now(), Ordering::Release);
                state.0.store(2 * i + 2, Ordering::Release);
            }
        })
    };
    let idles = idles.to_vec();
    let kicker = on_cpu(0, move || {
        let mut i = 0;
        idles
            .iter()
            .map(|&idle| {
                let (mut latency, mut call) = (Vec::new(), Vec::new());
                for _ in 0..rounds {
                    while state.0.load(Ordering::Acquire) < 2 * i + 1 {
                        std::thread::yield_now();
                    }
                    // Spin rather than sleep: the idle time is then exact, and only CPU 1 idles.
                    let t = Instant::now();
                    while t.elapsed() < idle {
                        std::hint::spin_loop();
                    }
                    let cpu = state.2.load(Ordering::Acquire) as u32;
                    let t0 = now();
                    block_on(p.kick(cpu));
                    let t1 = now();
                    // `>=`: the waiter may already have announced its next halt; its wake time
                    // stays until the next kick.
                    while state.0.load(Ordering::Acquire) < 2 * i + 2 {
                        std::hint::spin_loop();
                    }
                    latency.push((state.1.load(Ordering::Acquire) - t0) as f64);
                    call.push((t1 - t0) as f64);
                    i += 1;
                }
                (Measured::of(latency).median, Measured::of(call).median)
            })
            .collect()
    });
    waiter.join().unwrap();
    kicker.join().unwrap()
}

/// The thread's context switches so far, voluntary and not.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn context_switches() -> i64 {
    // SAFETY: getrusage writes only the struct it is given.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut usage);
        usage.ru_nvcsw + usage.ru_nivcsw
    }
}

/// Watch every CPU at once for gaps, `repeats` times: (interruptions, preemptions), see [`Gaps`].
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn gaps(cpus: usize, tsc_ghz: f64, repeats: usize) -> (Gaps, Gaps) {
    // Per CPU: count and summed TSC ticks of the interruptions, then of the preemptions.
    type Counts = [(u64, u64); 2];
    let gap_ticks = (GAP_NS * tsc_ghz) as u64;
    let watch_ticks = (GAP_WATCH_MS as f64 * 1e6 * tsc_ghz) as u64;
    let (mut rates, mut means) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    for _ in 0..repeats {
        let start = Arc::new(Barrier::new(cpus));
        let watchers: Vec<_> = (0..cpus)
            .map(|cpu| {
                let start = start.clone();
                on_cpu(cpu, move || {
                    // SAFETY: RDTSC has no preconditions on x86_64.
                    let tsc = || unsafe { core::arch::x86_64::_rdtsc() };
                    start.wait();
                    let mut counts: Counts = [(0, 0); 2];
                    let mut switches = context_switches();
                    let first = tsc();
                    let mut last = first;
                    while last - first < watch_ticks {
                        let now = tsc();
                        let gap = now.saturating_sub(last);
                        last = now;
                        if gap > gap_ticks {
                            let before = switches;
                            switches = context_switches();
                            let kind = &mut counts[usize::from(switches != before)];
                            kind.0 += 1;
                            kind.1 += gap;
                            // The system call is not a gap of the thread's.
                            last = tsc();
                        }
                    }
                    counts
                })
            })
            .collect();
        let mut total: Counts = [(0, 0); 2];
        for w in watchers {
            for (t, c) in total.iter_mut().zip(w.join().unwrap()) {
                *t = (t.0 + c.0, t.1 + c.1);
            }
        }
        let cpu_seconds = cpus as f64 * GAP_WATCH_MS as f64 / 1000.0;
        for (k, (count, ticks)) in total.into_iter().enumerate() {
            rates[k].push(count as f64 / cpu_seconds);
            means[k].push(if count == 0 { 0.0 } else { ticks as f64 / tsc_ghz / count as f64 });
        }
    }
    let [ri, rp] = rates;
    let [mi, mp] = means;
    (Gaps { per_s: Measured::of(ri), mean_ns: Measured::of(mi) }, Gaps { per_s: Measured::of(rp), mean_ns: Measured::of(mp) })
}

#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn medians_and_ranges() {
        let m = Measured::of(vec![3.0, 1.0, 2.0, 10.0]);
        assert_eq!((m.median, m.min, m.max, m.repeats), (2.5, 1.0, 10.0, 4));
    }

    #[test]
    fn costs_are_positive_and_ordered() {
        if crate::cores() < 2 {
            assert!(measure().unwrap_err().contains("2 CPUs"));
            return;
        }
        let c = measure().unwrap();
        let wakes = c.wake_to_run_ns.iter().map(|w| &w.ns);
        for m in [&c.clock_ghz, &c.l1_hit_ns, &c.atomic_ns, &c.spin_iteration_ns, &c.transfer_ns, &c.context_switch_ns].into_iter().chain(wakes) {
            assert!(m.min > 0.0 && m.min <= m.median && m.median <= m.max, "{c:?}");
        }
        assert_eq!(c.wake_to_run_ns.len(), IDLE_SCAN_US.len());
        assert!(c.l1_hit_ns.median < c.transfer_ns.median, "{c:?}");
        // A busy CPU takes timer ticks, so five watches see some interruption; each gap is
        // longer than the threshold that defines it.
        let (i, p) = (&c.interruptions, &c.preemptions);
        assert!(i.per_s.max > 0.0 && i.mean_ns.max > GAP_NS, "{c:?}");
        assert!(p.per_s.max == 0.0 || p.mean_ns.max > GAP_NS, "{c:?}");
    }
}

