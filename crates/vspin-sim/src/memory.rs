//! Shared memory words with a cache-coherence cost model.
//!
//! Each word is its own cache line with MESI-like state: an exclusive owner or a set of sharers
//! (pCPUs, since caches belong to physical CPUs). A read by a sharer is an L1 hit; any other read
//! fetches the line from its owner (within or across sockets) and joins the sharers. A write by a
//! non-exclusive CPU fetches the line and invalidates all sharers.
//!
//! Transfers of one line are serialized: a transfer starts when the line's previous transfer
//! completes (`busy_until`). So when an unlock invalidates N spinners, their re-reads complete one
//! after another and the next ticket holder sees its turn after, on average, N/2 transfers: the
//! hand-off cost of a ticket lock grows with the number of spinners ("Non-scalable locks are
//! dangerous", Boyd-Wickizer et al., OLS 2012), while a lock whose waiters spin on separate
//! lines pays one transfer. The memory effect of an operation is applied when it is issued (it is
//! linearized at issue); the latency is what the issuing CPU waits.
use crate::engine::Time;
use vspin_locks::WordAlloc;

/// The simulator's shared word: an index into [`Memory`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimWord(pub u32);

/// Bitset of pCPUs (the host is limited to 256 hardware threads).
#[derive(Clone, Copy, Default, Debug)]
struct CpuSet([u64; 4]);

impl CpuSet {
    fn contains(&self, c: u32) -> bool {
        self.0[(c / 64) as usize] & (1 << (c % 64)) != 0
    }
    fn insert(&mut self, c: u32) {
        self.0[(c / 64) as usize] |= 1 << (c % 64);
    }
    /// Make `c` the only member, in place: a set built on the stack and copied in is read back
    /// with wide loads right after its narrow stores, which stalls on store forwarding.
    fn set_only(&mut self, c: u32) {
        self.0 = [0; 4];
        self.insert(c);
    }
    fn is_only(&self, c: u32) -> bool {
        let (word, bit) = ((c / 64) as usize, 1 << (c % 64));
        self.0.iter().enumerate().all(|(i, &x)| x == if i == word { bit } else { 0 })
    }
}

struct Line {
    value: u64,
    /// pCPUs holding a valid copy; exactly one when held exclusively.
    sharers: CpuSet,
    exclusive: bool,
    /// Last pCPU to write the line (the source of the next transfer), `u32::MAX` if memory.
    owner: u32,
    busy_until: Time,
    /// Number of writes so far: lets a spinner tell whether its last read is still current.
    version: u64,
}

/// Latencies of the coherence model, in ns.
#[derive(Clone, Copy, Debug)]
pub struct MemoryCosts {
    pub hit_ns: u64,
    pub same_socket_ns: u64,
    pub cross_socket_ns: u64,
}

pub struct Memory {
    lines: Vec<Line>,
    costs: MemoryCosts,
    /// Socket of each pCPU.
    socket_of: Vec<u32>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

impl Memory {
    pub fn new(costs: MemoryCosts, socket_of: Vec<u32>) -> Self {
        Memory { lines: Vec::new(), costs, socket_of }
    }

    /// Number of words allocated.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    pub fn value(&self, w: SimWord) -> u64 {
        self.lines[w.0 as usize].value
    }

    /// Write `v` (the access cost is charged separately by [`Memory::access`]).
    pub fn set(&mut self, w: SimWord, v: u64) {
        let line = &mut self.lines[w.0 as usize];
        line.value = v;
        line.version += 1;
    }

    /// Writes to `w` so far.
    pub fn version(&self, w: SimWord) -> u64 {
        self.lines[w.0 as usize].version
    }

    /// Charge an access by `pcpu` at `now`; returns when it completes.
    pub fn access(&mut self, w: SimWord, pcpu: u32, kind: Access, now: Time) -> Time {
        let costs = self.costs;
        let line = &mut self.lines[w.0 as usize];
        let hit = match kind {
            Access::Read => line.sharers.contains(pcpu),
            Access::Write => line.exclusive && line.sharers.is_only(pcpu),
        };
        if hit {
            return now + costs.hit_ns;
        }
        // A line never written comes from memory; its cost is taken as an on-socket transfer.
        let remote = line.owner != u32::MAX && self.socket_of[line.owner as usize] != self.socket_of[pcpu as usize];
        let latency = if remote { costs.cross_socket_ns } else { costs.same_socket_ns };
        let done = now.max(line.busy_until) + latency;
        line.busy_until = done;
        match kind {
            Access::Read => {
                line.sharers.insert(pcpu);
                line.exclusive = false;
            }
            Access::Write => {
                line.sharers.set_only(pcpu);
                line.exclusive = true;
                line.owner = pcpu;
            }
        }
        done
    }
}

// SAFETY: each call appends a line of its own, holding `init`.
unsafe impl WordAlloc<SimWord> for Memory {
    fn word(&mut self, init: u64) -> SimWord {
        self.lines.push(Line {
            value: init,
            sharers: CpuSet::default(),
            exclusive: false,
            owner: u32::MAX,
            busy_until: 0,
            version: 0,
        });
        SimWord(self.lines.len() as u32 - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem() -> Memory {
        Memory::new(MemoryCosts { hit_ns: 1, same_socket_ns: 50, cross_socket_ns: 130 }, vec![0, 0, 1, 1])
    }

    #[test]
    fn rereads_hit_and_writes_invalidate() {
        let mut m = mem();
        let w = m.word(0);
        assert_eq!(m.access(w, 0, Access::Write, 0), 50);
        assert_eq!(m.access(w, 0, Access::Read, 100), 101, "owner re-read hits");
        assert_eq!(m.access(w, 1, Access::Read, 200), 250, "same-socket transfer");
        assert_eq!(m.access(w, 1, Access::Read, 300), 301);
        assert_eq!(m.access(w, 2, Access::Write, 400), 530, "cross-socket transfer");
        assert_eq!(m.access(w, 1, Access::Read, 600), 730, "invalidated copy misses");
    }

    #[test]
    fn a_write_to_a_shared_line_invalidates_the_other_copies() {
        // MESI: a line in Shared state is written only after a read-for-ownership that removes
        // every other copy, so the writer pays an upgrade and the other reader misses next.
        let mut m = mem();
        let w = m.word(0);
        m.access(w, 0, Access::Write, 0);
        m.access(w, 0, Access::Read, 100);
        m.access(w, 1, Access::Read, 200);
        assert_eq!(m.access(w, 0, Access::Write, 300), 350, "the writer's copy is shared, not exclusive");
        assert_eq!(m.access(w, 1, Access::Read, 400), 450, "the other reader's copy was invalidated");
        assert_eq!(m.access(w, 0, Access::Read, 500), 501, "the writer keeps its copy");
    }

    #[test]
    fn transfers_of_one_line_serialize() {
        let mut m = mem();
        let w = m.word(0);
        m.access(w, 0, Access::Write, 0);
        let a = m.access(w, 1, Access::Read, 100);
        let b = m.access(w, 2, Access::Read, 100);
        let c = m.access(w, 3, Access::Read, 100);
        assert_eq!((a, b, c), (150, 280, 410));
    }
}
