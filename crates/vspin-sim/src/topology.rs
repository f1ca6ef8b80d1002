//! Host topology: which socket a pCPU sits on, which pCPUs are SMT siblings of one core, and
//! how siblings share that core's throughput.
//!
//! # Numbering
//! pCPUs are numbered as Linux enumerates x86 processors on the multi-socket Intel hosts of the
//! seeds: first one hardware thread of every core, socket by socket (pCPUs `0 .. cores`), then
//! the second thread of every core in the same order, and so on. So on the OTICKET host (8
//! sockets × 10 cores × 2 threads) pCPU 7 and pCPU 87 are siblings, and a VM pinned 1:1 uses a
//! whole core per vCPU up to 80 vCPUs and only then doubles up on cores — which is how the seed's
//! "80 vCPUs (all physical CPUs assigned) … 160 vCPUs (all hardware threads assigned)" reads.
//!
//! # Throughput sharing
//! A core running `k` busy threads delivers `1 + (smt_core_throughput − 1)·(k − 1)/(t − 1)` times
//! the work of one thread alone (`t` threads per core), shared equally, so each busy thread runs
//! at that divided by `k`. "Busy" means executing instructions that compete for the core: guest
//! computation, critical sections and hypervisor work. A thread spinning with PAUSE or idle does
//! not compete: PAUSE exists precisely to give the pipeline to the sibling (Intel SDM, PAUSE).
//!
//! The slowdown is fixed when a computation starts, from the siblings' state at that moment,
//! rather than re-timed whenever a sibling changes state. Segments are micro-seconds long, far
//! shorter than the periods over which a sibling's activity changes, so the mean slowdown is the
//! same while the event count stays that of a machine without SMT (a modelling choice; see
//! `docs/calibration.md` for `smt_core_throughput`).
use crate::scenario::HostConfig;

pub(crate) struct Topology {
    socket_of: Vec<u32>,
    /// The other hardware threads of each pCPU's core.
    siblings: Vec<Vec<u32>>,
    /// Slow-down factor of a computation by number of busy siblings (index 0: none).
    stretch: Vec<f64>,
}

impl Topology {
    pub(crate) fn new(h: &HostConfig) -> Topology {
        let cores = h.sockets * h.cores_per_socket;
        let t = h.threads_per_core;
        let n = cores * t;
        let socket_of = (0..n).map(|p| (p % cores) / h.cores_per_socket).collect();
        let siblings = (0..n).map(|p| (0..t).map(|k| p % cores + k * cores).filter(|&q| q != p).collect()).collect();
        let stretch = (1..=t)
            .map(|busy| {
                let core = if t == 1 { 1.0 } else { 1.0 + (h.smt_core_throughput - 1.0) * (busy - 1) as f64 / (t - 1) as f64 };
                busy as f64 / core
            })
            .collect();
        Topology { socket_of, siblings, stretch }
    }

    pub(crate) fn socket_of(&self) -> Vec<u32> {
        self.socket_of.clone()
    }

    pub(crate) fn siblings(&self, pcpu: u32) -> &[u32] {
        &self.siblings[pcpu as usize]
    }

    /// How much longer a computation takes while `busy_siblings` other threads of its core are
    /// busy (1.0 without SMT).
    pub(crate) fn stretch(&self, busy_siblings: usize) -> f64 {
        self.stretch[busy_siblings]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(sockets: u32, cores: u32, threads: u32, smt: f64) -> HostConfig {
        let text = format!("sockets = {sockets}\ncores_per_socket = {cores}\nthreads_per_core = {threads}\nsmt_core_throughput = {smt}");
        toml::from_str(&text).unwrap()
    }

    #[test]
    fn siblings_follow_linux_enumeration() {
        let t = Topology::new(&host(8, 10, 2, 1.2));
        assert_eq!(t.siblings(7), &[87]);
        assert_eq!(t.siblings(87), &[7]);
        assert_eq!(t.socket_of[9], 0);
        assert_eq!(t.socket_of[10], 1);
        assert_eq!(t.socket_of[89], 0);
        assert_eq!(t.socket_of[159], 7);
    }

    #[test]
    fn two_busy_siblings_share_the_core_throughput() {
        let t = Topology::new(&host(1, 4, 2, 1.2));
        assert_eq!(t.stretch(0), 1.0);
        // Two threads deliver 1.2 cores of work: each runs at 0.6.
        assert!((t.stretch(1) - 2.0 / 1.2).abs() < 1e-12);
        let single = Topology::new(&host(1, 4, 1, 1.2));
        assert!(single.siblings(0).is_empty());
    }
}
