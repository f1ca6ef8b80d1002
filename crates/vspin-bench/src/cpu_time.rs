//! How much CPU time each benchmark thread got, read from the timing thread.
//!
//! With more threads than cores, a thread's acquisitions are its CPU time times the rate at which
//! it acquires while it runs. The two come apart only when measured apart: a thread asleep in a
//! lock's slow path runs not at all, and the scheduler pays a sleeper back little of what it
//! missed (EEVDF keeps at most about two slices of lag), so a lock whose waiters sleep unequally
//! spreads its threads' CPU times, and with them their acquisitions, while every running thread
//! acquires at about one rate. Each thread's clock is read through `pthread_getcpuclockid` from
//! the timing thread, so the workers' loop is untouched.

/// One thread's CPU-time clock.
#[derive(Clone, Copy)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) struct ThreadClock(#[cfg(target_os = "linux")] libc::clockid_t);

impl ThreadClock {
    /// The clock of the thread behind `handle`, or `None` where the platform has none (not
    /// Linux) or the call fails.
    #[cfg(target_os = "linux")]
    pub(crate) fn of<T>(handle: &std::thread::JoinHandle<T>) -> Option<Self> {
        use std::os::unix::thread::JoinHandleExt;
        let mut clock: libc::clockid_t = 0;
        // SAFETY: the handle's thread is not joined yet, so its pthread_t is live; the call
        // writes one clockid_t. The clock names the thread's id, which the kernel could hand to
        // another thread once this one exits; the benchmark's workers exit only after the
        // window's last read (they run until `stop`, or go home before any read).
        let rc = unsafe { libc::pthread_getcpuclockid(handle.as_pthread_t(), &mut clock) };
        (rc == 0).then_some(ThreadClock(clock))
    }

    #[cfg(not(target_os = "linux"))]
    pub(crate) fn of<T>(_handle: &std::thread::JoinHandle<T>) -> Option<Self> {
        None
    }

    /// The thread's CPU time so far, in nanoseconds.
    #[cfg(target_os = "linux")]
    pub(crate) fn read(self) -> Option<u64> {
        let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes one timespec.
        let rc = unsafe { libc::clock_gettime(self.0, &mut t) };
        (rc == 0).then(|| t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64)
    }

    #[cfg(not(target_os = "linux"))]
    pub(crate) fn read(self) -> Option<u64> {
        None
    }
}

/// The CPU time of every thread, or `None` if any clock is missing or unreadable.
pub(crate) fn read_all(clocks: &Option<Vec<ThreadClock>>) -> Option<Vec<u64>> {
    clocks.as_ref()?.iter().map(|c| c.read()).collect()
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::ThreadClock;
    use std::sync::mpsc;

    /// This thread's CPU time, read from inside it.
    fn own_cpu_ns() -> u64 {
        let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes one timespec.
        assert_eq!(unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) }, 0);
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    }

    #[test]
    fn the_timing_thread_reads_what_each_worker_ran_and_not_what_it_slept() {
        const BUSY_NS: u64 = 30_000_000;
        let (spun, spun_rx) = mpsc::channel::<()>();
        let (release, released) = mpsc::channel::<()>();
        let busy = std::thread::spawn(move || {
            let mut x = 0u64;
            while own_cpu_ns() < BUSY_NS {
                x = std::hint::black_box(x + 1);
            }
            spun.send(()).unwrap();
            released.recv().ok();
        });
        let (release_sleeper, sleeper_released) = mpsc::channel::<()>();
        let sleeper = std::thread::spawn(move || {
            sleeper_released.recv().ok();
        });
        let (b, s) = (ThreadClock::of(&busy).expect("clock"), ThreadClock::of(&sleeper).expect("clock"));
        spun_rx.recv().unwrap();
        let (busy_ns, sleeper_ns) = (b.read().expect("read"), s.read().expect("read"));
        release.send(()).unwrap();
        release_sleeper.send(()).unwrap();
        busy.join().unwrap();
        sleeper.join().unwrap();
        assert!(busy_ns >= BUSY_NS, "a thread that ran {BUSY_NS} ns read as {busy_ns} ns");
        assert!(sleeper_ns < BUSY_NS / 4, "a thread blocked on a channel read as {sleeper_ns} ns");
    }
}
