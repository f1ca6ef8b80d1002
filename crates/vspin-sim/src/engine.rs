//! The discrete-event core: a radix heap of events keyed by time, and seeded RNG streams.
//!
//! Events due at the same time pop in the order they were pushed, so a run is a pure function of
//! the scenario and seed. Cancellation is by generation counter: an entity bumps its generation when
//! its pending event becomes stale, and the stale event is dropped when popped (O(1) cancel).

/// Simulated time in nanoseconds.
pub type Time = u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The vCPU's current timed segment (compute, memory latency, exit handling) ends.
    SegmentEnd { vcpu: u32, gen: u32 },
    /// A spinning vCPU reaches its PAUSE budget or its PLE window.
    SpinCheck { vcpu: u32, gen: u32 },
    /// Host scheduler tick on a pCPU.
    Tick { pcpu: u32 },
    /// A pCPU's credit1 slice (or rate-limit) timer: `schedule()` is due (`credit1.rs`).
    SliceEnd { pcpu: u32, gen: u32 },
    /// credit1's accounting on the master pCPU, every slice (`credit1.rs`).
    CreditAccounting,
    /// A gang row's turn ends (`gang.rs`).
    GangTurn { gen: u32 },
    /// A VM's CPU quota is refilled (`bandwidth.rs`, the period timer).
    BandwidthPeriod { vm: u32 },
    /// A VM's returned quota is handed to its throttled pCPUs (`bandwidth.rs`, the slack timer).
    BandwidthSlack { vm: u32 },
    /// A pCPU's periodic load balancing is due (`load_balance.rs`).
    Balance { pcpu: u32 },
    /// A host interruption of a pCPU (`interruptions`).
    Interruption { pcpu: u32 },
    /// A halted vCPU's guest timer fires (idle sleep ends, or a tick interrupt while it waits in
    /// the PV lock slow path).
    GuestTimer { vcpu: u32, gen: u32 },
    /// A synchronous IPI is acknowledged by its target; stale once the target was descheduled
    /// before its handler ended (`Sim::ipi_acks`).
    IpiAck { from: u32, to: u32 },
    /// A vCPU switched out inside the exit handler of an IPI send or a kick: the handler ends,
    /// and delivers, before the switch takes effect (`Sim::send_handled`).
    SendHandled { vcpu: u32 },
    /// Periodic invariant audit.
    Audit,
    /// End of the simulated duration.
    End,
}

/// A queued event and the time it is due.
#[derive(Clone, Copy)]
struct Entry {
    at: Time,
    event: Event,
}

pub struct EventQueue {
    /// A radix heap (Ahuja, Mehlhorn, Orlin & Tarjan 1990): times only grow past the last one
    /// popped, so bucket `i > 0` holds the events whose highest bit of time that differs from
    /// `last` is bit `i - 1`, and bucket 0 those due at `last` itself. A push is an append; a pop
    /// takes the earliest event of the lowest non-empty bucket and spreads that bucket's others
    /// over lower buckets, each event moving down a few times in its life at most. Every move
    /// is an append in order, so events due at the same time stay in the order they were
    /// pushed: ties need no sequence number.
    buckets: Vec<Vec<Entry>>,
    /// Bit `i` set: bucket `i` is not empty.
    occupied: u128,
    last: Time,
    popped: u64,
}

impl Default for EventQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl EventQueue {
    pub fn new() -> Self {
        EventQueue { buckets: (0..65).map(|_| Vec::with_capacity(64)).collect(), occupied: 0, last: 0, popped: 0 }
    }

    fn bucket_of(&self, at: Time) -> usize {
        64 - (at ^ self.last).leading_zeros() as usize
    }

    pub fn push(&mut self, at: Time, ev: Event) {
        // One compare; a time before `last` would be misfiled, silently reordering the run.
        assert!(at >= self.last, "an event scheduled at {at} ns, before the last one popped");
        let b = self.bucket_of(at);
        self.buckets[b].push(Entry { at, event: ev });
        self.occupied |= 1 << b;
    }

    pub fn pop(&mut self) -> Option<(Time, Event)> {
        if self.occupied == 0 {
            return None;
        }
        self.popped += 1;
        let b = self.occupied.trailing_zeros() as usize;
        if b == 0 {
            // Events due now, in the order pushed (rarely more than one).
            let Entry { at, event } = self.buckets[0].remove(0);
            if self.buckets[0].is_empty() {
                self.occupied &= !1;
            }
            return Some((at, event));
        }
        let mut bucket = std::mem::take(&mut self.buckets[b]);
        // The first of the earliest: `min_by_key` keeps the first of equal keys.
        let first = bucket.iter().enumerate().min_by_key(|(_, e)| e.at).map(|(i, _)| i).expect("occupied");
        let Entry { at, event } = bucket[first];
        self.last = at;
        self.occupied &= !(1 << b);
        for (i, e) in bucket.drain(..).enumerate() {
            if i != first {
                let to = self.bucket_of(e.at);
                self.buckets[to].push(e);
                self.occupied |= 1 << to;
            }
        }
        self.buckets[b] = bucket;
        Some((at, event))
    }

    /// Events processed so far (stale ones included).
    pub fn processed(&self) -> u64 {
        self.popped
    }
}

/// xoshiro256** seeded through SplitMix64: small, fast, and bit-identical across platforms and
/// dependency versions (a crate upgrade can never change a published result).
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    /// An independent stream for `entity` under the run's `seed`.
    pub fn stream(seed: u64, entity: u64) -> Self {
        let mut x = seed ^ entity.wrapping_mul(0xd1b5_4a32_d192_ed03);
        let s = [splitmix64(&mut x), splitmix64(&mut x), splitmix64(&mut x), splitmix64(&mut x)];
        Rng { s }
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Exponentially distributed with the given mean, rounded to whole nanoseconds (at least 1).
    /// `libm`'s logarithm is the same pure-Rust code on every platform, unlike the system's, so
    /// results are bit-identical across machines.
    pub fn exp_ns(&mut self, mean_ns: f64) -> u64 {
        let u = 1.0 - self.uniform();
        ((-libm::log(u) * mean_ns).round() as u64).max(1)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_times_pop_in_insertion_order() {
        let mut q = EventQueue::new();
        q.push(5, Event::Audit);
        q.push(5, Event::End);
        q.push(1, Event::Tick { pcpu: 0 });
        assert_eq!(q.pop(), Some((1, Event::Tick { pcpu: 0 })));
        assert_eq!(q.pop(), Some((5, Event::Audit)));
        assert_eq!(q.pop(), Some((5, Event::End)));
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn pops_in_time_order() {
        let mut q = EventQueue::new();
        let mut r = Rng::stream(3, 3);
        let times: Vec<u64> = (0..1000).map(|_| r.below(500)).collect();
        for &t in &times {
            q.push(t, Event::Audit);
        }
        let mut sorted = times.clone();
        sorted.sort();
        let popped: Vec<u64> = std::iter::from_fn(|| q.pop().map(|(t, _)| t)).collect();
        assert_eq!(popped, sorted);
    }

    #[test]
    fn interleaved_pushes_and_pops_come_out_in_time_then_insertion_order() {
        // A handler pops one event and pushes a few, often the next one due: the radix heap's
        // refiling of a bucket must keep the order a plain sort gives.
        let mut q = EventQueue::new();
        let mut r = Rng::stream(5, 5);
        let mut pending: Vec<(u64, u64)> = Vec::new();
        let (mut now, mut seq) = (0u64, 0u64);
        for _ in 0..20_000 {
            for _ in 0..r.below(3) {
                let at = now + r.below(4);
                seq += 1;
                q.push(at, Event::Tick { pcpu: seq as u32 });
                pending.push((at, seq));
            }
            pending.sort();
            match q.pop() {
                Some((t, Event::Tick { pcpu })) => {
                    assert_eq!((t, pcpu as u64), pending.remove(0));
                    now = t;
                }
                other => assert!(pending.is_empty(), "{other:?} with {} pending", pending.len()),
            }
        }
    }

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a: Vec<u64> = (0..4).map(|_| Rng::stream(7, 1).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(Rng::stream(7, 1).next_u64(), Rng::stream(7, 2).next_u64());
    }

    #[test]
    fn exponential_mean_is_close() {
        let mut r = Rng::stream(1, 1);
        let n = 100_000;
        let mean = (0..n).map(|_| r.exp_ns(1000.0)).sum::<u64>() as f64 / n as f64;
        assert!((mean - 1000.0).abs() < 20.0, "mean {mean}");
    }
}
