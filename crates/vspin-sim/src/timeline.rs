//! An optional timeline of a run, in the Chrome trace event format (opens in Perfetto or
//! `chrome://tracing`): one process per VM, one thread per vCPU, a slice for every interval a
//! vCPU spent computing (in or out of a critical section), waiting for a lock, in unlock or IPI
//! waits, in host work (exits, entries, switches), waiting to run (preempted) or halted, and
//! instants for lock acquisitions and releases, PLE exits and the ends of PLE epochs, kicks,
//! directed yields and host interruptions of a running vCPU. Only the requested window is
//! recorded, so long runs stay cheap.
use crate::engine::Time;
use crate::vcpu::{Act, Vcpu};
use serde::Serialize;

/// What the segment in progress of `vc` is, as its slice is named (`None`: not drawn, as a halt
/// is drawn from the host state). `first_lock`: the global index of its VM's lock 0.
pub(crate) fn segment_name(vc: &Vcpu, first_lock: u32) -> Option<String> {
    match (vc.host_work, vc.act, vc.held, vc.waiting) {
        (Some(_), ..) => Some("host work".to_string()),
        (None, Act::Compute { .. }, Some(l), _) => Some(format!("critical section, lock {}", l - first_lock)),
        (None, Act::Compute { .. }, None, _) => Some("compute".to_string()),
        (None, Act::Spin { .. } | Act::Delayed { .. }, _, Some(l)) => Some(format!("wait for lock {}", l - first_lock)),
        (None, Act::Spin { .. } | Act::Delayed { .. }, _, None) => Some("unlock / IPI wait".to_string()),
        _ => None,
    }
}

#[derive(Serialize)]
struct TraceEvent {
    name: String,
    ph: &'static str,
    /// Microseconds, as the format wants.
    ts: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    pid: u32,
    tid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<serde_json::Value>,
}

pub(crate) struct Timeline {
    from: Time,
    to: Time,
    events: Vec<TraceEvent>,
}

impl Timeline {
    pub(crate) fn new(from: Time, to: Time) -> Self {
        Timeline { from, to, events: Vec::new() }
    }

    /// A slice `[start, end)` on vCPU `tid` of VM `pid`, clipped to the window.
    pub(crate) fn slice(&mut self, pid: u32, tid: u32, name: &str, start: Time, end: Time) {
        let (s, e) = (start.max(self.from), end.min(self.to));
        if s < e {
            self.events.push(TraceEvent {
                name: name.to_string(),
                ph: "X",
                ts: s as f64 / 1e3,
                dur: Some((e - s) as f64 / 1e3),
                pid,
                tid,
                s: None,
                args: None,
            });
        }
    }

    /// A point event on a vCPU.
    pub(crate) fn instant(&mut self, pid: u32, tid: u32, name: String, at: Time) {
        if (self.from..self.to).contains(&at) {
            self.events.push(TraceEvent { name, ph: "i", ts: at as f64 / 1e3, dur: None, pid, tid, s: Some("t"), args: None });
        }
    }

    /// Names for the VMs (processes) and vCPUs (threads), then the JSON document.
    pub(crate) fn into_json(mut self, vms: &[(String, u32)]) -> String {
        for (pid, (name, vcpus)) in vms.iter().enumerate() {
            let meta = |name: &'static str, tid: u32, value: String| TraceEvent {
                name: name.into(),
                ph: "M",
                ts: 0.0,
                dur: None,
                pid: pid as u32,
                tid,
                s: None,
                args: Some(serde_json::json!({ "name": value })),
            };
            self.events.push(meta("process_name", 0, format!("VM {name}")));
            for v in 0..*vcpus {
                self.events.push(meta("thread_name", v, format!("vCPU {v}")));
            }
        }
        serde_json::to_string(&serde_json::json!({ "traceEvents": self.events, "displayTimeUnit": "ns" }))
            .expect("timeline serializes")
    }
}
