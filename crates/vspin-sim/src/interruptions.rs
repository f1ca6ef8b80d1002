//! Host interruptions (`scenario::Interruptions`): time a pCPU spends away from its task with no
//! scheduler involved — interrupt handlers, and on a host that is itself a virtual machine, the
//! exits its own hypervisor handles.
//!
//! Why they are not `background` threads: a background thread is a task, so each of its bursts
//! ends in a pick that may switch in another of the pCPU's tasks. Measured on a Linux 6.18
//! virtual machine (`docs/validation.md`, "The measured gaps do not start it"), 1–4% of the gaps
//! a spinning thread sees are another task running; the rest return to the thread they
//! interrupted. Those still matter to the scheduler: the kernel charges an interrupt to the task
//! it interrupts unless `CONFIG_IRQ_TIME_ACCOUNTING` is set, and a hypervisor's exits unless it
//! reports them as steal time (`update_rq_clock_task` subtracts both only then), so the task's
//! vruntime advances while its work does not, which shifts its lag against the pCPU's other tasks.
//!
//! Model: each pCPU has its own random stream; interruptions arrive after exponential intervals
//! and last exponential lengths. The running vCPU, if any, gets the length as host work in front
//! of its guest activity: the host work path already stops its guest (a spinner sees a write
//! only when it resumes), charges the time as exit time and to its vruntime, and restarts its
//! PAUSE loop count for PLE (a VM entry follows every exit).
use crate::engine::{Event, Rng};
use crate::scenario::Interruptions;
use crate::simulation::Sim;
use crate::vcpu::{After, HostState, HostWork};

/// The interruption process of every pCPU.
pub(crate) struct HostInterruptions {
    interval_ns: f64,
    burst_ns: f64,
    /// One stream per pCPU, so that adding a pCPU does not change the others' interruptions.
    rngs: Vec<Rng>,
}

/// Random streams of the pCPUs' interruptions are numbered from here, above every vCPU's.
const STREAM_BASE: u64 = 1 << 32;

impl HostInterruptions {
    pub(crate) fn new(config: &Interruptions, pcpus: u32, seed: u64) -> Self {
        HostInterruptions {
            interval_ns: config.interval_us * 1e3,
            burst_ns: config.burst_us * 1e3,
            rngs: (0..pcpus).map(|p| Rng::stream(seed, STREAM_BASE + p as u64)).collect(),
        }
    }
}

impl Sim {
    /// Queue every pCPU's first interruption.
    pub(crate) fn start_interruptions(&mut self) {
        let Some(hi) = self.interruptions.as_mut() else { return };
        for (p, rng) in hi.rngs.iter_mut().enumerate() {
            self.q.push(self.now + rng.exp_ns(hi.interval_ns), Event::Interruption { pcpu: p as u32 });
        }
    }

    /// pCPU `p` is interrupted: its running vCPU, if any, stops for the interruption's length.
    pub(crate) fn host_interruption(&mut self, p: u32) {
        let hi = self.interruptions.as_mut().expect("interruption events come only from a configured process");
        let rng = &mut hi.rngs[p as usize];
        let length = rng.exp_ns(hi.burst_ns);
        let next = self.now + rng.exp_ns(hi.interval_ns);
        self.q.push(next, Event::Interruption { pcpu: p });
        let Some(v) = self.pcpus[p as usize].curr else { return };
        let vc = &self.vcpus[v as usize];
        if vc.host != HostState::Running || !vc.active {
            return;
        }
        self.trace_instant(v, || "interrupted".into());
        self.stop_segment(v);
        let vc = &mut self.vcpus[v as usize];
        match vc.host_work.as_mut() {
            Some(hw) => hw.remaining += length,
            None => vc.host_work = Some(HostWork { remaining: length, after: After::Nothing }),
        }
        self.run_vcpu(v);
    }
}
