//! Pinning benchmark threads to CPUs (`Config::pin = "round-robin"`).
//!
//! Unpinned threads are what a program gets by default, and the OS scheduler migrates them: a
//! thread woken by a futex wake goes to an idle CPU if there is one. Pinned threads stay where a
//! hypervisor's 1:1-pinned vCPUs would, so the two placements separate what migration does from
//! what the lock does.

/// The CPUs this process may run on, in increasing order (its affinity mask, which a cgroup
/// cpuset or `taskset` may have narrowed).
#[cfg(target_os = "linux")]
pub(crate) fn allowed_cpus() -> Result<Vec<usize>, String> {
    // SAFETY: a zeroed cpu_set_t is the empty set; sched_getaffinity writes at most its size.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(format!("pin: cannot read this process's CPU affinity: {}", std::io::Error::last_os_error()));
        }
        set
    };
    // SAFETY: CPU_ISSET only reads the set, for indices below CPU_SETSIZE.
    let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect();
    if cpus.is_empty() {
        return Err("pin: this process's CPU affinity mask is empty".into());
    }
    Ok(cpus)
}

/// Pin the calling thread to `cpu`.
#[cfg(target_os = "linux")]
pub(crate) fn pin_to(cpu: usize) -> Result<(), String> {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET and sched_setaffinity only touch it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(format!("pin: cannot pin a thread to CPU {cpu}: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
const NOT_LINUX: &str = "pin: \"round-robin\" needs Linux (sched_setaffinity); use \"none\"";

#[cfg(not(target_os = "linux"))]
pub(crate) fn allowed_cpus() -> Result<Vec<usize>, String> {
    Err(NOT_LINUX.into())
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn pin_to(_cpu: usize) -> Result<(), String> {
    Err(NOT_LINUX.into())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_thread_pinned_to_an_allowed_cpu_runs_only_there() {
        let cpus = allowed_cpus().unwrap();
        let cpu = *cpus.last().unwrap();
        let seen = std::thread::spawn(move || {
            pin_to(cpu).unwrap();
            // SAFETY: sched_getcpu has no preconditions.
            (0..100).map(|_| unsafe { libc::sched_getcpu() }).collect::<Vec<_>>()
        })
        .join()
        .unwrap();
        assert!(seen.iter().all(|&c| c == cpu as i32), "ran on {seen:?}, pinned to {cpu}");
    }
}
