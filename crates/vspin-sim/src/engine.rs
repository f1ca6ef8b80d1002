//! The discrete-event core: a timing wheel of near events in front of a heap of far ones, and
//! seeded RNG streams.
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

/// A queued event, the time it is due and its place in push order (which breaks ties).
#[derive(Clone, Copy)]
struct Entry {
    at: Time,
    seq: u64,
    event: Event,
}

impl Entry {
    fn key(&self) -> (Time, u64) {
        (self.at, self.seq)
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

/// The wheel's slot width, as a power of two: 32 ns.
const SLOT_SHIFT: u32 = 5;
/// Slots in the wheel: with 32 ns each, a horizon of 32.77 µs from the start of the clock's slot.
const SLOTS: usize = 1024;
const SLOT_WORDS: usize = SLOTS / 64;

/// The simulation's future events.
///
/// Most events are due soon: over the standard benchmark scenario (`docs/performance.md`) 60
/// are queued (median), and the median push is 4.6 µs ahead of the clock, 96% within 17.7 µs.
/// Those within the wheel's horizon go into a slot by time (a push is an append) and pop by a
/// scan of the slots' occupancy bits from the clock's slot on; a slot holds a 32 ns range, so it
/// rarely holds more than one event. The rest (host ticks, slices, long sleeps) wait in a binary
/// heap ordered by (time, push number).
///
/// Why the order is exact: a near event is due before the clock's slot plus `SLOTS` when pushed,
/// and the clock never passes a queued event, so every event in the wheel lies within one
/// revolution of the clock's slot and the first occupied slot from there holds the earliest.
/// Within a slot events keep push order, and the earliest is the first of the smallest time.
/// Since the clock only moves forward, once a time is within the horizon every later push due
/// then goes to the wheel: a far event is pushed before every near event due at the same time,
/// and a pop that takes the earlier of the two candidates by (time, push number) keeps that
/// order.
///
/// Measured against the radix heap it replaced, replaying the standard scenario's 5.6 M pushes
/// and pops: 0.056 s against 0.124 s (`docs/performance.md`, "The event queue as a timing wheel").
pub struct EventQueue {
    slots: Box<[Vec<Entry>]>,
    /// Bit `s % 64` of word `s / 64` set: slot `s` is not empty.
    occupied: [u64; SLOT_WORDS],
    far: std::collections::BinaryHeap<std::cmp::Reverse<Entry>>,
    /// The time of the last event popped: the clock.
    last: Time,
    pushed: u64,
    popped: u64,
}

impl Default for EventQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl EventQueue {
    pub fn new() -> Self {
        EventQueue {
            slots: (0..SLOTS).map(|_| Vec::new()).collect(),
            occupied: [0; SLOT_WORDS],
            far: std::collections::BinaryHeap::new(),
            last: 0,
            pushed: 0,
            popped: 0,
        }
    }

    pub fn push(&mut self, at: Time, ev: Event) {
        // One compare; a time before `last` would be misfiled, silently reordering the run.
        assert!(at >= self.last, "an event scheduled at {at} ns, before the last one popped");
        let entry = Entry { at, seq: self.pushed, event: ev };
        self.pushed += 1;
        if (at >> SLOT_SHIFT) - (self.last >> SLOT_SHIFT) < SLOTS as u64 {
            let s = (at >> SLOT_SHIFT) as usize % SLOTS;
            self.slots[s].push(entry);
            self.occupied[s / 64] |= 1 << (s % 64);
        } else {
            self.far.push(std::cmp::Reverse(entry));
        }
    }

    /// The first occupied slot from the clock's, going round once.
    fn first_near_slot(&self) -> Option<usize> {
        let start = (self.last >> SLOT_SHIFT) as usize % SLOTS;
        let (word, bit) = (start / 64, start % 64);
        let ahead = self.occupied[word] & (!0 << bit);
        if ahead != 0 {
            return Some(word * 64 + ahead.trailing_zeros() as usize);
        }
        for k in 1..SLOT_WORDS {
            let w = (word + k) % SLOT_WORDS;
            if self.occupied[w] != 0 {
                return Some(w * 64 + self.occupied[w].trailing_zeros() as usize);
            }
        }
        // The clock's own word again, its bits before the clock's slot: the horizon's far end.
        let behind = self.occupied[word] & !(!0 << bit);
        (behind != 0).then(|| word * 64 + behind.trailing_zeros() as usize)
    }

    pub fn pop(&mut self) -> Option<(Time, Event)> {
        let near = self.first_near_slot().map(|s| {
            let slot = &self.slots[s];
            // The first of the earliest: later entries of an equal time were pushed later.
            let i = (1..slot.len()).fold(0, |i, j| if slot[j].at < slot[i].at { j } else { i });
            (s, i)
        });
        let far_first = match (near, self.far.peek()) {
            (None, None) => return None,
            (None, Some(_)) => true,
            (Some(_), None) => false,
            (Some((s, i)), Some(std::cmp::Reverse(f))) => f.key() < self.slots[s][i].key(),
        };
        let entry = if far_first {
            self.far.pop().expect("peeked").0
        } else {
            let (s, i) = near.expect("matched");
            let slot = &mut self.slots[s];
            // Usually the slot's only entry: `pop` then, where `remove` calls `memmove`.
            let entry = if i + 1 == slot.len() { slot.pop().expect("found") } else { slot.remove(i) };
            if slot.is_empty() {
                self.occupied[s / 64] &= !(1 << (s % 64));
            }
            entry
        };
        self.last = entry.at;
        self.popped += 1;
        Some((entry.at, entry.event))
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

    /// After each pop, push up to two events, each `ahead` ns after the clock, and check every
    /// pop against a sort by (time, push number).
    fn pops_match_a_sort(seed: u64, mut ahead: impl FnMut(&mut Rng) -> u64) {
        let mut q = EventQueue::new();
        let mut r = Rng::stream(seed, seed);
        let mut pending: Vec<(u64, u64)> = Vec::new();
        let (mut now, mut seq) = (0u64, 0u64);
        for _ in 0..20_000 {
            for _ in 0..r.below(3) {
                let at = now + ahead(&mut r);
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
    fn interleaved_pushes_and_pops_come_out_in_time_then_insertion_order() {
        // A handler pops one event and pushes a few, often the next one due: the wheel's slots
        // must keep the order a plain sort gives.
        pops_match_a_sort(5, |r| r.below(4));
    }

    #[test]
    fn a_far_event_and_a_near_one_due_together_pop_in_push_order() {
        // Pushed 100 µs ahead, the first waits in the far heap; once the clock is 90 µs on, the
        // second, due at the same time, goes into the wheel. The first must still come first.
        let mut q = EventQueue::new();
        q.push(100_000, Event::Tick { pcpu: 1 });
        q.push(90_000, Event::Audit);
        assert_eq!(q.pop(), Some((90_000, Event::Audit)));
        q.push(100_000, Event::Tick { pcpu: 2 });
        q.push(99_999, Event::Tick { pcpu: 3 });
        assert_eq!(q.pop(), Some((99_999, Event::Tick { pcpu: 3 })));
        assert_eq!(q.pop(), Some((100_000, Event::Tick { pcpu: 1 })));
        assert_eq!(q.pop(), Some((100_000, Event::Tick { pcpu: 2 })));
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn events_near_and_far_come_out_in_time_then_insertion_order() {
        // Times from the clock's own slot to several horizons ahead, with ties between the two
        // structures and across a revolution of the wheel.
        pops_match_a_sort(9, |r| match r.below(4) {
            0 => r.below(64),
            1 => r.below(40_000),
            2 => (r.below(8) + 1) * 32_768 - 16 + r.below(32),
            _ => r.below(200_000) / 1_000 * 1_000,
        });
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
