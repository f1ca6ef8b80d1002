//! Strict gang scheduling, the policy of `hypervisor.scheduler = "gang"`: the co-scheduling
//! reference of the design brief. Run queues, context switches and the vCPU machinery are
//! `scheduler.rs`'s; this module decides who runs.
//!
//! The VMs are laid out in a matrix (Ousterhout, "Scheduling techniques for concurrent systems",
//! ICDCS 1982), one column per pCPU. Each VM goes into the first row where its vCPUs find
//! pCPUs of their own (the pCPUs its `pin` names, or the row's lowest free ones), so a VM's
//! vCPUs never share a pCPU and a row may hold several small VMs. The rows take turns:
//!
//! ```text
//!            pCPU 0   pCPU 1   pCPU 2   pCPU 3
//!   row 0    a.0      a.1      a.2      a.3      ◀── runs for slice_ms, then
//!   row 1    b.0      b.1      c.0      c.1          row 1, and so on round
//! ```
//!
//! - **Who runs**: on each pCPU, the vCPU of the running row, if it is runnable; otherwise the
//!   pCPU idles, even with vCPUs of other rows waiting (strict co-scheduling, as VMware ESX 2
//!   did: filling the gap with another VM's vCPU would run that VM partly, the very situation
//!   being excluded).
//! - **Turns**: every `slice_ms` the next row that has a runnable vCPU runs; a row whose vCPUs
//!   have all halted gives way at once, and a vCPU that wakes while the running row has none
//!   runnable brings the turn forward too. Every pCPU switches at the same instant.
//! - **Yields**: a PLE exit finds no vCPU of its VM to yield to (they all run), so directed
//!   yield is off (`scenario.rs`); a guest's `SCHEDOP_yield`-like yield changes nothing.
//!
//! So no vCPU is ever descheduled while a sibling runs: a lock holder or a waiter next in line
//! stops only together with every vCPU that could spin for it. What it costs is the idle pCPU
//! time of rows whose vCPUs halt, and a VM whose vCPUs all halt often runs little: its turn
//! ends each time, and comes back only when another turn ends or no other row can run. The
//! audit checks that only the running row's vCPUs run.
use crate::engine::{Event, Time};
use crate::scenario::{Pinning, VmConfig};
use crate::simulation::Sim;
use crate::vcpu::HostState;

/// The gang matrix and whose turn it is.
pub(crate) struct Gang {
    slice_ns: Time,
    /// Each VM's row.
    row_of_vm: Vec<u32>,
    rows: u32,
    /// Each VM's vCPUs' pCPUs.
    pub(crate) pcpu_of: Vec<Vec<u32>>,
    /// The row that runs now.
    running: u32,
    /// Generation of the pending end-of-turn event; older ones are stale.
    gen: u32,
}

impl Gang {
    /// Lay out `vms` over `pcpus` pCPUs, first fit in scenario order (validated: no VM has more
    /// vCPUs than pCPUs, none lists a pCPU twice).
    pub(crate) fn new(vms: &[VmConfig], pcpus: u32, slice_ms: u32) -> Gang {
        let mut used: Vec<Vec<bool>> = Vec::new();
        let (mut row_of_vm, mut pcpu_of) = (Vec::new(), Vec::new());
        for vm in vms {
            let mut r = 0;
            let slots = loop {
                if r == used.len() {
                    used.push(vec![false; pcpus as usize]);
                }
                let free = |p: &u32| !used[r][*p as usize];
                let slots: Vec<u32> = match &vm.pin {
                    Pinning::List(l) => l.iter().map(|&p| p as u32).collect(),
                    Pinning::Named(s) if s == "1:1" => (0..vm.vcpus).collect(),
                    Pinning::Named(_) => (0..pcpus).filter(free).take(vm.vcpus as usize).collect(),
                };
                if slots.len() == vm.vcpus as usize && slots.iter().all(free) {
                    break slots;
                }
                r += 1;
            };
            for &p in &slots {
                used[r][p as usize] = true;
            }
            row_of_vm.push(r as u32);
            pcpu_of.push(slots);
        }
        Gang { slice_ns: slice_ms as Time * 1_000_000, row_of_vm, rows: used.len() as u32, pcpu_of, running: 0, gen: 0 }
    }
}

impl Sim {
    fn gang(&self) -> &Gang {
        self.gang.as_ref().expect("gang scheduling runs only with its state")
    }

    fn gang_mut(&mut self) -> &mut Gang {
        self.gang.as_mut().expect("gang scheduling runs only with its state")
    }

    fn row_of(&self, v: u32) -> u32 {
        self.gang().row_of_vm[self.vcpus[v as usize].vm as usize]
    }

    /// Whether some vCPU of row `r` can run (is not halted).
    fn row_runnable(&self, r: u32) -> bool {
        self.vcpus.iter().any(|vc| self.gang().row_of_vm[vc.vm as usize] == r && vc.host != HostState::Blocked)
    }

    /// The first turn's end.
    pub(crate) fn start_gang_turns(&mut self) {
        if self.gang.is_some() {
            self.arm_gang_turn();
        }
    }

    /// `schedule()` on `p`: the running row's vCPU on `p` if it can run, else idle.
    pub(crate) fn gang_schedule(&mut self, p: u32) {
        // The run so far counts as the vCPU's CPU time (`sum_exec`), which PLE epochs divide by.
        self.update_curr(p);
        let row = self.gang().running;
        let rq = &self.pcpus[p as usize];
        let prev = rq.curr;
        let next = rq.curr.into_iter().chain(rq.queued.iter().copied()).find(|&v| self.row_of(v) == row);
        self.pcpus[p as usize].need_resched = false;
        if next != prev {
            self.switch_to(p, prev, next);
        }
        if self.pcpus[p as usize].curr.is_none() {
            let now = self.now;
            self.pcpus[p as usize].idle.enter(now, &self.idle_states);
            if !self.row_runnable(row) {
                self.next_turn(false);
            }
        }
    }

    /// A halted vCPU `v` wakes: queued on its pCPU, and run at once if its row is running; if
    /// the running row has nothing to run, the turn passes now.
    pub(crate) fn gang_wake(&mut self, v: u32) {
        let p = self.vcpus[v as usize].pcpu;
        self.pcpus[p as usize].queued.push(v);
        let row = self.gang().running;
        if self.row_of(v) == row {
            self.gang_schedule(p);
        } else if !self.row_runnable(row) {
            self.next_turn(false);
        }
    }

    /// The turn of generation `gen` ends.
    pub(crate) fn gang_turn_ends(&mut self, gen: u32) {
        if self.gang().gen == gen {
            self.next_turn(true);
        }
    }

    /// The next row with a runnable vCPU, round from the running one, runs on every pCPU for a
    /// new slice. At a slice's end the running row may run again when no other can; early (the
    /// running row has halted), nothing changes when no row can run.
    fn next_turn(&mut self, slice_ended: bool) {
        let (rows, running) = (self.gang().rows, self.gang().running);
        let last = if slice_ended { rows } else { rows - 1 };
        let Some(next) = (1..=last).map(|i| (running + i) % rows).find(|&r| self.row_runnable(r)) else {
            if slice_ended {
                self.arm_gang_turn();
            }
            return;
        };
        self.gang_mut().running = next;
        self.arm_gang_turn();
        for p in 0..self.pcpus.len() as u32 {
            self.gang_schedule(p);
        }
    }

    fn arm_gang_turn(&mut self) {
        let now = self.now;
        let g = self.gang_mut();
        g.gen = g.gen.wrapping_add(1);
        let (at, gen) = (now + g.slice_ns, g.gen);
        self.q.push(at, Event::GangTurn { gen });
    }

    /// Audit: only the running row's vCPUs run.
    pub(crate) fn audit_gang(&mut self) {
        let Some(g) = &self.gang else { return };
        for p in 0..self.pcpus.len() {
            if let Some(v) = self.pcpus[p].curr.filter(|&v| g.row_of_vm[self.vcpus[v as usize].vm as usize] != g.running) {
                let msg = format!("gang: {} runs on pCPU {p} outside its row's turn (at {} ns)", self.name_vcpu(v), self.now);
                self.violations.push(msg);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Gang;
    use crate::scenario::Scenario;
    use crate::simulation::test_host::host;
    use crate::vcpu::HostState;

    fn layout(pcpus: u32, vms: &str) -> Gang {
        let sc = Scenario::from_toml(&format!(
            "duration_ms = 1\n[host]\ncores_per_socket = {pcpus}\n[hypervisor]\nscheduler = \"gang\"\n{vms}"
        ))
        .unwrap();
        Gang::new(&sc.vms, pcpus, 6)
    }

    fn vm(name: &str, vcpus: u32, pin: &str) -> String {
        format!("[[vm]]\nname = \"{name}\"\nvcpus = {vcpus}\npin = {pin}\nlock = \"ticket\"\nworkload = {{ preset = \"cpu-hog\" }}\n")
    }

    #[test]
    fn vms_fill_rows_first_fit_each_vcpu_on_a_pcpu_of_its_own() {
        let g = layout(4, &(vm("a", 4, "\"none\"") + &vm("b", 2, "\"none\"") + &vm("c", 2, "\"none\"") + &vm("d", 3, "\"1:1\"")));
        assert_eq!(g.row_of_vm, vec![0, 1, 1, 2]);
        assert_eq!(g.pcpu_of, vec![vec![0, 1, 2, 3], vec![0, 1], vec![2, 3], vec![0, 1, 2]]);
        assert_eq!(g.rows, 3);
    }

    #[test]
    fn a_pinned_vm_takes_the_first_row_where_its_pcpus_are_free() {
        let g = layout(4, &(vm("a", 2, "[2, 3]") + &vm("b", 2, "\"1:1\"") + &vm("c", 2, "[3, 0]")));
        assert_eq!(g.row_of_vm, vec![0, 0, 1]);
        assert_eq!(g.pcpu_of[2], vec![3, 0]);
    }

    /// VMs `a` and `b`, two vCPUs each, on the two pCPUs of `test_host`: rows 0 and 1.
    fn two_rows() -> crate::simulation::Sim {
        let mut s = host("scheduler = \"gang\"", false, &(vm("a", 2, "\"none\"") + &vm("b", 2, "\"none\"")));
        for p in 0..2 {
            s.pcpus[p].curr = None;
            s.pcpus[p].queued.clear();
        }
        for v in 0..4u32 {
            s.vcpus[v as usize].host = HostState::Runnable;
            s.pcpus[(v % 2) as usize].queued.push(v);
        }
        s
    }

    /// Running vCPU `v` halts, as at the end of its HLT exit (no segment in progress).
    fn halt(s: &mut crate::simulation::Sim, v: u32) {
        s.vcpus[v as usize].active = false;
        s.block(v);
    }

    #[test]
    fn the_running_row_runs_on_every_pcpu_and_the_turn_passes_to_the_next() {
        let mut s = two_rows();
        s.gang_schedule(0);
        s.gang_schedule(1);
        assert_eq!((s.pcpus[0].curr, s.pcpus[1].curr), (Some(0), Some(1)), "VM a's row first");
        let gen = s.gang().gen;
        s.gang_turn_ends(gen);
        assert_eq!((s.pcpus[0].curr, s.pcpus[1].curr), (Some(2), Some(3)), "then VM b's, on both pCPUs at once");
        assert!(s.vcpus[0].preempted && s.vcpus[1].preempted);
        s.audit_gang();
        assert!(s.violations.is_empty(), "{:?}", s.violations);
    }

    #[test]
    fn a_stale_turn_end_changes_nothing() {
        let mut s = two_rows();
        s.gang_schedule(0);
        s.gang_schedule(1);
        let stale = s.gang().gen;
        halt(&mut s, 0);
        halt(&mut s, 1);
        assert_eq!(s.gang().running, 1, "VM a halted: b's turn came early, with a new turn end");
        s.wake(0);
        s.gang_turn_ends(stale);
        assert_eq!((s.gang().running, s.pcpus[0].curr), (1, Some(2)), "the old turn end is not b's");
    }

    #[test]
    fn a_halted_vcpu_leaves_its_pcpu_idle_while_its_row_runs() {
        let mut s = two_rows();
        s.gang_schedule(0);
        s.gang_schedule(1);
        halt(&mut s, 1);
        assert_eq!(s.pcpus[1].curr, None, "VM b's vCPU 3 waits for its row, though pCPU 1 idles");
        assert_eq!(s.pcpus[0].curr, Some(0));
    }

    #[test]
    fn a_row_whose_vcpus_all_halt_gives_way_at_once_and_a_wake_brings_its_turn_back() {
        let mut s = two_rows();
        s.gang_schedule(0);
        s.gang_schedule(1);
        halt(&mut s, 0);
        halt(&mut s, 1);
        assert_eq!((s.pcpus[0].curr, s.pcpus[1].curr), (Some(2), Some(3)), "VM b runs as soon as a has halted");
        halt(&mut s, 2);
        halt(&mut s, 3);
        assert_eq!((s.pcpus[0].curr, s.pcpus[1].curr), (None, None), "nothing can run");
        s.wake(1);
        assert_eq!((s.gang().running, s.pcpus[1].curr), (0, Some(1)), "a's wake brings its turn");
    }
}
