//! Scenarios: the TOML description of a host, its hypervisor, its VMs and their workloads.
//!
//! Parsing rejects unknown keys and wrong types, naming the field path (`vm[1].lock`) and the
//! allowed values; [`Scenario::validate`] then rejects impossible values (zero pCPUs, pinning to a
//! pCPU that does not exist, negative durations, ...). Every default is documented in
//! `docs/calibration.md`.
use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::RangeInclusive;

/// A scenario error: the field path and what is wrong with it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioError {
    pub field: String,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

impl std::error::Error for ScenarioError {}

/// Deserialize a kebab-case name into an enum, so that any wrong input (another name, a
/// number, a table) is answered with the list of allowed names.
macro_rules! named_values {
    ($ty:ident { $($name:literal => $variant:ident),+ $(,)? }) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl serde::de::Visitor<'_> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        write!(f, "one of {}", [$(concat!("\"", $name, "\"")),+].join(", "))
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$ty, E> {
                        match v {
                            $($name => Ok($ty::$variant),)+
                            other => Err(E::invalid_value(serde::de::Unexpected::Str(other), &self)),
                        }
                    }
                }
                d.deserialize_str(V)
            }
        }

        impl $ty {
            /// Every name a scenario may give.
            pub const NAMES: &'static [&'static str] = &[$($name),+];

            /// The name a scenario gives this value.
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                }
            }
        }
    };
}

named_values!(SchedulerKind { "cfs" => Cfs, "eevdf" => Eevdf, "eevdf-6.18" => Eevdf618, "credit1" => Credit1, "gang" => Gang });
named_values!(Credit1Yield { "stock" => Stock, "patched" => Patched });
named_values!(Credit1Pick { "stock" => Stock, "patched" => Patched });
named_values!(DirectedYieldKind {
    "off" => Off,
    "kvm-3.5" => Kvm35,
    "kvm" => Kvm,
    "kvm-6.8" => Kvm68,
    "kvm-6.18" => Kvm618,
    "hvs" => Hvs,
    "hvs-cpth-r" => HvsCpthR,
    "hvs-cpth-l" => HvsCpthL,
    "hvs-cch" => HvsCch,
});
named_values!(LoadBalanceKind { "newidle" => Newidle, "periodic" => Periodic });
named_values!(PlePolicy { "off" => Off, "fixed" => Fixed, "kvm" => Kvm, "aple" => Aple });
named_values!(PauseCounter { "intel" => Intel, "amd" => Amd });
named_values!(LockKind {
    "tas" => Tas,
    "tas-yield" => TasYield,
    "las-tas" => LasTas,
    "ticket" => Ticket,
    "pv-ticket" => PvTicket,
    "preemptable-ticket" => PreemptableTicket,
    "pv-preemptable-ticket" => PvPreemptableTicket,
    "oticket" => Oticket,
    "oticket-spin-only" => OticketSpinOnly,
    "oticket-wakeup-only" => OticketWakeupOnly,
    "longer-spinning" => LongerSpinning,
    "iticket" => Iticket,
    "qspinlock" => Qspinlock,
    "pv-qspinlock" => PvQspinlock,
    "pv-qspinlock-v4.2" => PvQspinlockV42,
});
named_values!(Durations { "exponential" => Exponential, "fixed" => Fixed });
named_values!(TlbFlush { "ipi" => Ipi, "kvm-pv" => KvmPv, "xen-pv" => XenPv });
named_values!(IpiSend { "x2apic-physical" => X2apicPhysical, "multicast" => Multicast });
named_values!(Preset {
    "kernbench" => Kernbench,
    "hackbench" => Hackbench,
    "ebizzy" => Ebizzy,
    "dvdstore" => Dvdstore,
    "cpu-hog" => CpuHog,
    "lkc" => Lkc,
    "exim" => Exim,
    "metis" => Metis,
    "dbench" => Dbench,
});

fn err(field: impl Into<String>, message: impl Into<String>) -> ScenarioError {
    ScenarioError { field: field.into(), message: message.into() }
}

/// A release whose window is fixed refuses the keys that adapt it unless the scenario asks for
/// the `kvm` policy: ignored, they would mislead. (The other counter's cap is refused later, as
/// that counter's.)
fn refuse_adapting_a_fixed_window(kernel: Option<KernelVersion>, counter: PauseCounter, is_given: &dyn Fn(&[&str]) -> bool) -> Result<(), ScenarioError> {
    let cap = if counter == PauseCounter::Amd { "max_pauses" } else { "max_cycles" };
    let Some(key) = ["grow", "shrink", cap].into_iter().find(|k| is_given(&["ple", k])) else { return Ok(()) };
    let (release, unnamed) = match kernel {
        Some(k) => (k.name(), ""),
        None => ("3.18", "; a host without `kernel` has 3.18's defaults"),
    };
    let on_amd = if counter == PauseCounter::Amd { " on AMD" } else { "" };
    let msg = format!(
        "adapts the window, which Linux {release}'s PLE{on_amd} does not (a fixed window{unnamed}); set ple.policy = \"kvm\" to adapt it, or leave the key out"
    );
    Err(err(format!("hypervisor.ple.{key}"), msg))
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default = "default_name")]
    pub name: String,
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Simulated time limit. A run ends earlier when every VM with a `work_units` target is done.
    pub duration_ms: f64,
    pub host: HostConfig,
    #[serde(default)]
    pub hypervisor: HypervisorConfig,
    #[serde(rename = "vm")]
    pub vms: Vec<VmConfig>,
    /// What the run records beyond the standard results (off by default: each grows with the
    /// simulated time or with the number of locks).
    #[serde(default)]
    pub record: RecordConfig,
}

/// Optional records of a run (`[record]`). Each grows with the run or with the scenario's lock
/// count, so none is on by default; the standard results stay small.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RecordConfig {
    /// Every PLE epoch of every VM: when it ended, its inefficiency and the mean window of the
    /// VM's vCPUs (the trace of APPLES' Figs. 11 and 12; `VmResult::ple_epoch_trace`).
    pub ple_epochs: bool,
    /// Each guest lock's own waits and holds (`VmResult::locks`); the VM's totals are always
    /// reported (`lock_waits`, `lock_holds`).
    pub locks: bool,
}

fn default_name() -> String {
    "scenario".into()
}
fn default_seed() -> u64 {
    1
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    #[serde(default = "one")]
    pub sockets: u32,
    pub cores_per_socket: u32,
    #[serde(default = "one")]
    pub threads_per_core: u32,
    /// Work a core delivers with all its SMT threads busy, relative to one thread alone (see
    /// `topology`).
    #[serde(default = "default_smt_core_throughput")]
    pub smt_core_throughput: f64,
    #[serde(default = "default_clock")]
    pub clock_ghz: f64,
    /// Host scheduler tick rate (`CONFIG_HZ`).
    #[serde(default = "default_hz")]
    pub hz: u32,
    #[serde(default)]
    pub costs: Costs,
    /// Hardware idle states beyond C1, shallowest first (`cpuidle`); empty: idle costs only
    /// `costs.wakeup_ns`.
    #[serde(default)]
    pub idle_states: Vec<IdleState>,
    /// Host threads competing with the vCPUs for every pCPU; absent: the vCPUs are the host's
    /// only tasks.
    #[serde(default)]
    pub background: Option<Background>,
    /// Interruptions of whatever runs on a pCPU that no scheduler sees; absent: none.
    #[serde(default)]
    pub interruptions: Option<Interruptions>,
}

/// Host background activity: one host thread pinned to each pCPU (the QEMU I/O thread, vhost,
/// kworkers, RCU and softirq threads, folded into one) that sleeps for an exponentially
/// distributed interval of mean `interval_us`, then runs a burst of mean `burst_us` as a CFS
/// task. A waking thread preempts a vCPU when its vruntime lead allows (`check_preempt_wakeup`),
/// which is how a vCPU is preempted on a host that is not over-committed.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Background {
    pub interval_us: f64,
    pub burst_us: f64,
}

/// Interruptions that take a pCPU from the task running on it without a scheduling decision:
/// interrupt handlers (the timer tick among them) and, when the host is itself a virtual
/// machine, the exits its own hypervisor handles. Each pCPU is interrupted after exponentially
/// distributed intervals of mean `interval_us`, for exponentially distributed lengths of mean
/// `burst_us`. The task interrupted is charged the time (its vruntime advances, as on a kernel
/// without `CONFIG_IRQ_TIME_ACCOUNTING` and without steal time) but makes no progress, and
/// comes back without a pick: unlike `background`, an interruption never reorders the tasks of a
/// pCPU. A vCPU interrupted leaves guest mode, so its PAUSE loop starts anew for PLE. An idle
/// pCPU's interruptions cost nothing.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Interruptions {
    pub interval_us: f64,
    pub burst_us: f64,
}

/// One host C-state: its exit latency and the idle time that justifies entering it
/// (`struct cpuidle_state` `exit_latency`, `target_residency`), in ns.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct IdleState {
    pub exit_ns: f64,
    pub residency_ns: f64,
}

fn one() -> u32 {
    1
}
fn default_smt_core_throughput() -> f64 {
    1.2
}
fn default_clock() -> f64 {
    2.4
}
fn default_hz() -> u32 {
    250
}

/// The host cost table (ns unless named in cycles). Sources: `docs/calibration.md`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Costs {
    pub pause_cycles: f64,
    pub l1_hit_ns: f64,
    /// What a locked read-modify-write (`lock xadd`, `xchg`, `lock cmpxchg`, `lock or/and`)
    /// costs beyond `l1_hit_ns` or a transfer. Default 0: the seeds' hosts give no figure, so
    /// their scenarios charge an atomic as the access alone; host mode measures it.
    pub atomic_extra_ns: f64,
    pub transfer_same_socket_ns: f64,
    pub transfer_cross_socket_ns: f64,
    pub vm_exit_ns: f64,
    pub vm_entry_ns: f64,
    pub hypercall_ns: f64,
    pub ipi_send_ns: f64,
    pub wakeup_ns: f64,
    pub context_switch_ns: f64,
}

impl Default for Costs {
    fn default() -> Self {
        Costs {
            pause_cycles: 10.0,
            l1_hit_ns: 1.5,
            atomic_extra_ns: 0.0,
            transfer_same_socket_ns: 50.0,
            transfer_cross_socket_ns: 130.0,
            vm_exit_ns: 250.0,
            vm_entry_ns: 250.0,
            hypercall_ns: 300.0,
            ipi_send_ns: 300.0,
            wakeup_ns: 3000.0,
            context_switch_ns: 1500.0,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HypervisorConfig {
    /// The Linux release of a KVM host: the defaults of the keys its version decides
    /// ([`KernelVersion::defaults`]); keys given explicitly win. Absent: 3.18, the seeds' host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelVersion>,
    #[serde(default)]
    pub scheduler: SchedulerKind,
    #[serde(default)]
    pub ple: PleConfig,
    #[serde(default)]
    pub directed_yield: DirectedYieldKind,
    #[serde(default)]
    pub load_balance: LoadBalanceKind,
    #[serde(default)]
    pub halt_poll: HaltPollConfig,
    /// Posted interrupts (Intel APICv, AMD AVIC): an IPI reaches a vCPU in guest mode without a
    /// VM exit (`ipi.rs`). Off by default: the seeds' Sandy Bridge and Westmere hosts have none.
    #[serde(default)]
    pub posted_interrupts: bool,
    /// Xen credit1's settings; only with `scheduler = "credit1"`.
    #[serde(default)]
    pub credit1: Option<Credit1Config>,
    /// Gang scheduling's settings; only with `scheduler = "gang"`.
    #[serde(default)]
    pub gang: Option<GangConfig>,
}

/// Strict gang scheduling (`gang.rs`): each VM's vCPUs run all at once or not at all.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct GangConfig {
    /// How long each row of the gang matrix runs before the next (ms). The default, 12 ms, is
    /// the slice a CFS host of 8 or more pCPUs gives each of two vCPUs sharing a pCPU
    /// (`sched_latency` 24 ms ÷ 2), so that a gang host differs from the 2×-over-committed CFS
    /// host it is compared with in who runs together, not in how often the pCPUs switch
    /// (`docs/calibration.md`).
    pub slice_ms: u32,
}

impl Default for GangConfig {
    fn default() -> Self {
        GangConfig { slice_ms: 12 }
    }
}

/// Xen credit1 (`credit1.rs`, `kernel-mechanisms.md` §6). The defaults are Xen 4.1's, the first
/// release with the yield patch of the `xen-yield` seed and the last before the rate limit.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Credit1Config {
    /// What `SCHEDOP_yield` does: `"stock"`, re-insert the vCPU by priority, which nearly always
    /// picks it again (Xen before 4.1); `"patched"`, put it behind one lower-priority vCPU
    /// (George Dunlap's patch, commit 5fc9f5ef6c, in Xen since 4.1).
    #[serde(rename = "yield")]
    pub yield_: Credit1Yield,
    /// `sched_credit_tslice_ms`: the time slice, and three accounting ticks per slice.
    pub tslice_ms: u32,
    /// `sched_ratelimit_us`: a vCPU scheduled less than this long ago keeps its pCPU at
    /// `schedule()`, even when it yields (as in Xen 4.2–4.7). 0: none (before Xen 4.2).
    pub ratelimit_us: u32,
    /// The Locking-Aware Scheduler (LAS seed): the end of each vCPU's slice is published to its
    /// guest (`slice_remaining`, read by the `las-tas` lock), and a guest's `SCHEDOP_yield`
    /// earns back the credits of the slice it gives up.
    pub las: bool,
    /// Where `csched_cpu_pick` places a vCPU: `"stock"`, by idle neighbours only, which on a
    /// host without SMT or sockets never moves a running vCPU; `"patched"`, the `xen-yield`
    /// seed's "pick" patch: away from a pCPU that holds another vCPU of its VM, if some pCPU
    /// holds none (`credit1.rs`, "Keeping a VM's vCPUs apart"). Never upstream.
    pub pick: Credit1Pick,
    /// The seed's "push" patch: every accounting period, a vCPU queued on a pCPU that holds
    /// another vCPU of its VM moves to a pCPU that holds none. Never upstream.
    pub push: bool,
}

impl Default for Credit1Config {
    fn default() -> Self {
        Credit1Config {
            yield_: Credit1Yield::Patched,
            tslice_ms: 30,
            ratelimit_us: 0,
            las: false,
            pick: Credit1Pick::Stock,
            push: false,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Credit1Yield {
    Stock,
    #[default]
    Patched,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Credit1Pick {
    #[default]
    Stock,
    Patched,
}

/// KVM halt polling (`kvm_vcpu_halt`, `kernel-mechanisms.md` §5.5): after an HLT exit the vCPU
/// thread polls for a wake-up instead of blocking, while nothing else wants its pCPU. Absent
/// from the seeds' 3.18/3.19 hosts, hence off (`max_ns = 0`) by default; a Linux 6.8 host has
/// `max_ns = 200000`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HaltPollConfig {
    /// `halt_poll_ns`: the longest poll; 0 turns polling off.
    pub max_ns: u64,
    /// `halt_poll_ns_grow`: the multiplier when a short halt outlasted the poll.
    pub grow: u64,
    /// `halt_poll_ns_grow_start`: the first poll after none, and the smallest kept.
    pub grow_start_ns: u64,
    /// `halt_poll_ns_shrink`: the divisor after a halt longer than `max_ns`; 0 resets to none.
    pub shrink: u64,
}

impl Default for HaltPollConfig {
    fn default() -> Self {
        // L6.8 `virt/kvm/kvm_main.c` defaults, with polling off as in L3.18/L3.19.
        HaltPollConfig { max_ns: 0, grow: 2, grow_start_ns: 10_000, shrink: 0 }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SchedulerKind {
    /// Linux CFS as in v3.18/3.19 (the KVM host of the seeds).
    #[default]
    Cfs,
    /// Linux EEVDF as in v6.8 (`kernel-mechanisms.md` §7.2): the host scheduler since v6.6.
    Eevdf,
    /// Linux EEVDF as in v6.18: v6.8's, plus delayed dequeue, the 0.70 ms base slice, the
    /// forfeiting yield, `PICK_BUDDY` and the relative deadline of a migrated thread (`eevdf.rs`).
    Eevdf618,
    /// Xen's credit1 (`credit1.rs`): credits, BOOST/UNDER/OVER priorities, a 30 ms slice, work
    /// stealing; a PLE exit yields (`SCHEDOP_yield`) instead of searching for a candidate.
    Credit1,
    /// Strict gang scheduling (`gang.rs`): the VMs take turns in rows, each running all its
    /// vCPUs at once on pCPUs of their own; the reference with no lock-holder or lock-waiter
    /// preemption while a sibling runs.
    Gang,
}

impl SchedulerKind {
    /// Either EEVDF: eligibility, virtual deadlines and lag (`eevdf.rs`) rather than CFS.
    pub fn is_eevdf(self) -> bool {
        matches!(self, SchedulerKind::Eevdf | SchedulerKind::Eevdf618)
    }
}

/// A KVM host's Linux release, for the defaults that changed between the releases the seeds
/// and `kernel-mechanisms.md` describe. The model has one CFS (3.18's) for 3.5 and 3.18.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum KernelVersion {
    /// Linux 3.5, the VEE'13 seed's host: `kvm_vcpu_on_spin` without the spin-loop filter, and a
    /// fixed PLE window (grow and shrink came with 3.18).
    #[serde(rename = "3.5")]
    V3_5,
    /// Linux 3.18/3.19, the other seeds' host, and every key's default.
    #[serde(rename = "3.18")]
    V3_18,
    /// Linux 6.8: EEVDF, 6.8's candidate search and kick yield, halt polling, `ple_window_max =
    /// UINT_MAX`.
    #[serde(rename = "6.8")]
    V6_8,
    /// Linux 6.18: 6.8's, with 6.18's EEVDF and candidate loop, and halt polling that halves
    /// (`halt_poll_ns_shrink = 2`, since 6.12).
    #[serde(rename = "6.18")]
    V6_18,
}

impl KernelVersion {
    /// Every release a scenario may give.
    pub const NAMES: &'static [&'static str] = &["3.5", "3.18", "6.8", "6.18"];
    const ALL: [KernelVersion; 4] = [KernelVersion::V3_5, KernelVersion::V3_18, KernelVersion::V6_8, KernelVersion::V6_18];

    /// The name a scenario gives this release.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// A release is a name, as the others (`"6.8"`), but TOML and `--set` read an unquoted `6.8` as
/// a number; one that prints as a release's name is taken for it (`6.10` would print as `6.1`,
/// which is none, so nothing is taken for another release).
impl<'de> Deserialize<'de> for KernelVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = KernelVersion;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "one of {}", KernelVersion::NAMES.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", "))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<KernelVersion, E> {
                KernelVersion::ALL.into_iter().find(|k| k.name() == v).ok_or_else(|| E::invalid_value(serde::de::Unexpected::Str(v), &self))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<KernelVersion, E> {
                let name = v.to_string();
                KernelVersion::ALL.into_iter().find(|k| k.name() == name).ok_or_else(|| E::invalid_value(serde::de::Unexpected::Float(v), &self))
            }
        }
        d.deserialize_any(V)
    }
}

/// What a [`KernelVersion`] sets, where the scenario leaves the key out.
pub struct KernelDefaults {
    pub scheduler: SchedulerKind,
    pub directed_yield: DirectedYieldKind,
    pub ple_policy: PlePolicy,
    pub ple_max_cycles: u64,
    pub halt_poll_max_ns: u64,
    pub halt_poll_shrink: u64,
}

impl KernelVersion {
    /// The release's defaults (`kernel-mechanisms.md`: §4.1 for `ple_window_max`, §5 for the
    /// candidate search, §5.5 for halt polling, §7 for the scheduler).
    pub fn defaults(self) -> KernelDefaults {
        let v3 = KernelDefaults {
            scheduler: SchedulerKind::Cfs,
            directed_yield: DirectedYieldKind::Kvm,
            ple_policy: PlePolicy::Kvm,
            ple_max_cycles: (i32::MAX / 2) as u64,
            halt_poll_max_ns: 0,
            halt_poll_shrink: 0,
        };
        let v6 = KernelDefaults {
            scheduler: SchedulerKind::Eevdf,
            directed_yield: DirectedYieldKind::Kvm68,
            ple_max_cycles: u32::MAX as u64,
            halt_poll_max_ns: 200_000,
            ..v3
        };
        match self {
            KernelVersion::V3_5 => KernelDefaults { directed_yield: DirectedYieldKind::Kvm35, ple_policy: PlePolicy::Fixed, ..v3 },
            KernelVersion::V3_18 => v3,
            KernelVersion::V6_8 => v6,
            KernelVersion::V6_18 => KernelDefaults { scheduler: SchedulerKind::Eevdf618, directed_yield: DirectedYieldKind::Kvm618, halt_poll_shrink: 2, ..v6 },
        }
    }
}

/// How the host moves runnable unpinned vCPUs between pCPUs (`load_balance.rs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoadBalanceKind {
    /// Only a pCPU that goes idle pulls (`idle_balance`): the model before periodic balancing
    /// existed (up to 2026-11-25), kept to compare with and to re-run older results.
    Newidle,
    /// `idle_balance` plus the periodic balancing of every pCPU over its scheduling domains
    /// (`rebalance_domains`), as Linux does.
    #[default]
    Periodic,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DirectedYieldKind {
    /// No candidate search: a PLE exit only costs the exit.
    Off,
    /// `kvm_vcpu_on_spin` of Linux 3.5, the VEE'13 seed's host: no spin-loop eligibility filter
    /// (`dy_eligible` is later), so a vCPU that yielded from a spin loop is as good a candidate
    /// as a preempted holder.
    #[serde(rename = "kvm-3.5")]
    Kvm35,
    /// `kvm_vcpu_on_spin` of Linux 3.18 (`kernel-mechanisms.md` §5.1).
    #[default]
    Kvm,
    /// `kvm_vcpu_on_spin` of Linux 6.8 (§5.2): woken vCPUs are candidates, vCPUs preempted in
    /// guest user mode are not.
    #[serde(rename = "kvm-6.8")]
    Kvm68,
    /// `kvm_vcpu_on_spin` of Linux 6.18.2 (§5.3): 6.8's candidates in one wrap-around loop that
    /// records the loop offset, not the vCPU, as the last boosted one.
    #[serde(rename = "kvm-6.18")]
    Kvm618,
    /// APPLES' Heuristic-based vCPU Scheduling (`directed_yield.rs`, the TPDS'17 seed §3.2) on
    /// Linux 3.19: instead of the scan, the vCPU preempted at its slice's end most recently
    /// (resource-waiters, newest first), then those that yielded from a PLE exit (lock-waiters,
    /// oldest first), then those boosted before and preempted since ("yielded", oldest first).
    Hvs,
    /// HVS with resource-waiters oldest first (the seed's CPTH-R, Fig. 13).
    HvsCpthR,
    /// HVS with lock-waiters newest first (CPTH-L).
    HvsCpthL,
    /// HVS with lock-waiters before resource-waiters (CCH).
    HvsCch,
}

impl DirectedYieldKind {
    /// KVM since 5.13: 6.8's candidate filters, and the kick hypercall's `kvm_sched_yield`.
    pub(crate) fn is_modern(self) -> bool {
        matches!(self, DirectedYieldKind::Kvm68 | DirectedYieldKind::Kvm618)
    }

    /// One of APPLES' ranked selections (HVS and its three variants).
    pub(crate) fn is_hvs(self) -> bool {
        matches!(self, DirectedYieldKind::Hvs | DirectedYieldKind::HvsCpthR | DirectedYieldKind::HvsCpthL | DirectedYieldKind::HvsCch)
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PleConfig {
    pub policy: PlePolicy,
    /// Base window (`ple_window`), TSC cycles; Intel only.
    pub window_cycles: u64,
    /// `ple_window_grow`: multiplier if below the base window, else an addend.
    pub grow: u64,
    /// `ple_window_shrink`: 0 resets to the base window on sched-in.
    pub shrink: u64,
    /// `ple_window_max`, cycles.
    pub max_cycles: u64,
    /// `ple_gap`: a longer stall between two PAUSEs starts a new loop, cycles. On AMD,
    /// `pause_filter_thresh`; 0 there is Linux 3.x KVM, which sets no threshold.
    pub gap_cycles: u64,
    /// AMD: the base count (`pause_filter_count`, 3000) and the most it grows to
    /// (`pause_filter_count_max`, 65535), in PAUSE instructions.
    pub window_pauses: Option<u64>,
    pub max_pauses: Option<u64>,
    /// APLE's settings; only with `policy = "aple"` (absent there: the seed's).
    pub aple: Option<ApleConfig>,
    /// What the CPU counts: TSC cycles (Intel PLE) or PAUSE instructions (AMD's pause filter).
    pub counter: PauseCounter,
    /// Intel's window grows as 3.x `vmx.c` computes it, in `int` (`hypervisor.kernel` 3.5 or
    /// 3.18, or none given); since 4.18 (`x86.h`) it is computed in 64 bits. Not a key: the
    /// release decides it.
    #[serde(skip)]
    pub int_arithmetic: bool,
}

/// AMD's pause filter count and its maximum in KVM (`KVM_SVM_DEFAULT_PLE_WINDOW`, `USHRT_MAX`;
/// `kernel-mechanisms.md` §4.4); the count is a 16-bit VMCB field.
pub const AMD_PAUSE_FILTER_COUNT: u64 = 3000;
pub const AMD_PAUSE_FILTER_MAX: u64 = 65535;

impl PleConfig {
    /// The base window in the counter's unit: TSC cycles (Intel) or PAUSEs (AMD).
    pub(crate) fn base_window(&self) -> u64 {
        match self.counter {
            PauseCounter::Intel => self.window_cycles,
            PauseCounter::Amd => self.window_pauses.unwrap_or(AMD_PAUSE_FILTER_COUNT),
        }
    }

    /// The largest window stock KVM grows to, in the counter's unit.
    pub(crate) fn max_window(&self) -> u64 {
        match self.counter {
            PauseCounter::Intel => self.max_cycles,
            PauseCounter::Amd => self.max_pauses.unwrap_or(AMD_PAUSE_FILTER_MAX),
        }
    }
}

/// APPLES' Adaptive Pause-Loop Exiting (`ple.rs`, the TPDS'17 seed §3.1, Algorithm 1). The
/// defaults are the seed's evaluation settings (§4.2).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApleConfig {
    /// `T0`: the desired window a VM starts with, cycles.
    pub initial_cycles: u64,
    /// `Tl`: the smallest window tried, cycles (KVM's default window).
    pub min_cycles: u64,
    /// `Tu`: the largest window tried, cycles.
    pub max_cycles: u64,
    /// `δ`: the step between the three windows of a round, cycles.
    pub step_cycles: u64,
    /// PLE exits of the VM per epoch, the unit over which inefficiency is measured.
    pub epoch_exits: u32,
}

impl Default for ApleConfig {
    fn default() -> Self {
        ApleConfig { initial_cycles: 8192, min_cycles: 4096, max_cycles: 32768, step_cycles: 1024, epoch_exits: 1000 }
    }
}

impl Default for PleConfig {
    fn default() -> Self {
        // KVM 3.18/3.19 vmx.c defaults (kernel-mechanisms.md §4.1).
        PleConfig {
            policy: PlePolicy::Kvm,
            counter: PauseCounter::Intel,
            window_cycles: 4096,
            grow: 2,
            shrink: 0,
            max_cycles: (i32::MAX / 2) as u64,
            gap_cycles: 128,
            window_pauses: None,
            max_pauses: None,
            aple: None,
            int_arithmetic: true,
        }
    }
}

impl PleConfig {
    /// APLE's settings: the given ones, else the seed's.
    pub fn aple_settings(&self) -> ApleConfig {
        self.aple.clone().unwrap_or_default()
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlePolicy {
    /// No pause-loop exits (`KVM_X86_DISABLE_EXITS_PAUSE`, or a CPU without PLE).
    Off,
    /// The base window, never changed (Xen's behaviour).
    Fixed,
    /// Stock KVM: grow on every PLE exit, shrink on sched-in (§4.3).
    #[default]
    Kvm,
    /// APPLES' APLE: one window per VM, moved by `aple.step_cycles` towards whichever of three
    /// windows tried one epoch each had the lowest inefficiency (`ple.rs`).
    Aple,
}

/// What the CPU counts towards a pause-loop exit (`kernel-mechanisms.md` §4.1, §4.4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PauseCounter {
    /// Intel VMX Pause-Loop Exiting: TSC cycles since the loop's first PAUSE (`window_cycles`);
    /// a gap of more than `ple_gap` cycles between two PAUSEs starts a new loop.
    #[default]
    Intel,
    /// AMD SVM pause filter: PAUSE instructions (`window_pauses`, a 16-bit count reloaded at
    /// VMRUN); with a threshold (`gap_cycles` > 0, `pause_filter_thresh`) a gap of more than that
    /// many cycles between two PAUSEs reloads it, without one (Linux 3.x KVM) nothing does.
    Amd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LockKind {
    Tas,
    TasYield,
    LasTas,
    Ticket,
    PvTicket,
    PreemptableTicket,
    PvPreemptableTicket,
    Oticket,
    OticketSpinOnly,
    OticketWakeupOnly,
    LongerSpinning,
    Iticket,
    Qspinlock,
    PvQspinlock,
    PvQspinlockV42,
}

/// Where a VM's vCPUs may run.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(untagged)]
pub enum Pinning {
    Named(String),
    /// One pCPU index per vCPU. Signed, so that a negative entry reaches validation, which names
    /// it, instead of failing the whole list's parse.
    List(Vec<i64>),
}

/// By hand rather than `untagged`, so that a bad entry of a list is named by its position
/// (`pin: entry 3 ...`) instead of the whole value being refused as none of the forms.
impl<'de> Deserialize<'de> for Pinning {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const FORMS: &str = "\"1:1\" (vCPU i on pCPU i), \"none\" (any pCPU), or a list of pCPU indices, one per vCPU";
        struct Forms;
        impl<'de> serde::de::Visitor<'de> for Forms {
            type Value = Pinning;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(FORMS)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Pinning, E> {
                Ok(Pinning::Named(v.to_string()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Pinning, A::Error> {
                let mut list = Vec::new();
                while let Some(pcpu) = seq.next_element::<i64>()? {
                    list.push(pcpu);
                }
                Ok(Pinning::List(list))
            }
        }
        d.deserialize_any(Forms)
    }
}

impl Default for Pinning {
    fn default() -> Self {
        Pinning::Named("none".into())
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VmConfig {
    pub name: String,
    pub vcpus: u32,
    #[serde(default)]
    pub pin: Pinning,
    /// The guest spinlock; required when the workload takes locks, and may be left out for one
    /// that takes none (`cpu-hog`), where it would change nothing.
    #[serde(default)]
    pub lock: Option<LockKind>,
    pub workload: WorkloadConfig,
    /// Work to complete; the VM's completion time is when it is done. Absent: run for the duration.
    #[serde(default)]
    pub work_units: Option<u64>,
    /// Guest timer tick rate; a vCPU halted in the PV lock slow path wakes at its ticks, which all
    /// the VM's vCPUs share (`halt::guest_tick_phase`).
    #[serde(default = "default_hz")]
    pub guest_hz: u32,
    /// `t` of the preemptable ticket locks: PAUSE iterations of timeout per queue position
    /// (default: the authors' `TIMEOUT_UNIT`, 16384).
    #[serde(default)]
    pub timeout_unit_pauses: Option<u64>,
    /// The PV preemptable ticket lock's failed attempts before a timed-out waiter halts
    /// (default 2^15, the PV ticket lock's `SPIN_THRESHOLD`; the paper gives no count).
    #[serde(default)]
    pub halt_after_attempts: Option<u64>,
    /// How the guest kernel flushes other vCPUs' TLBs (`ipi.rs`).
    #[serde(default)]
    pub tlb_flush: TlbFlush,
    /// How the guest sends one IPI to several vCPUs (`ipi.rs`); default [`VmConfig::ipi_send`].
    #[serde(default)]
    pub ipi_send: Option<IpiSend>,
    /// A CPU quota on the VM's vCPU threads, as cgroup v2's `cpu.max` (`bandwidth.rs`).
    #[serde(default)]
    pub cpu_max: Option<CpuMax>,
}

impl VmConfig {
    /// How the guest sends an IPI to several vCPUs: as given, else multicast for a guest with
    /// KVM's paravirtual TLB flush (Linux 4.16 and later; 4.19 added the PV send-IPI, and a 6.8
    /// guest on a host of 4.19 or later has both), else one ICR write per target (Linux 3.x).
    pub fn ipi_send(&self) -> IpiSend {
        self.ipi_send.unwrap_or(match self.tlb_flush {
            TlbFlush::KvmPv => IpiSend::Multicast,
            TlbFlush::Ipi | TlbFlush::XenPv => IpiSend::X2apicPhysical,
        })
    }
}

/// cgroup v2's `cpu.max` of a VM ("`quota_us period_us`"): its vCPU threads together may run
/// `quota_us` of CPU time in each `period_us`, enforced by CFS bandwidth control.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CpuMax {
    pub quota_us: u64,
    /// The kernel's default period is 100 ms.
    #[serde(default = "default_cpu_max_period_us")]
    pub period_us: u64,
}

fn default_cpu_max_period_us() -> u64 {
    100_000
}

/// Work units per thread between two barriers.
pub const BARRIER_EVERY: std::ops::RangeInclusive<u32> = 1..=1_000_000_000;

/// `tg_set_cfs_bandwidth`'s bounds: a period of 1 ms to 1 s (`min_cfs_quota_period`,
/// `max_cfs_quota_period`) and a quota of at least 1 ms; quotas above the host's whole capacity
/// are allowed, as the kernel allows them, and then never throttle. The upper bound on the quota
/// is this project's (1,000 s).
pub const CPU_MAX_PERIOD_US: std::ops::RangeInclusive<u64> = 1_000..=1_000_000;
pub const CPU_MAX_QUOTA_US: std::ops::RangeInclusive<u64> = 1_000..=1_000_000_000;

/// How a guest flushes the TLBs of its other vCPUs, the synchronous IPI of the workloads'
/// shootdowns (`ipi.rs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TlbFlush {
    /// Linux 3.x's `native_flush_tlb_others` / `smp_call_function_many`: an IPI to every
    /// target, and the sender spins until each has run its handler, however long a target
    /// waits for a pCPU.
    #[default]
    Ipi,
    /// A Linux 6.8 guest's paravirtual flush on KVM (`kvm_flush_tlb_multi`, with
    /// `KVM_FEATURE_PV_TLB_FLUSH`; `kernel-mechanisms.md` §3.3): a target preempted while
    /// runnable gets `KVM_VCPU_FLUSH_TLB` in its steal-time page instead of an IPI, and flushes
    /// at its next VM entry; one in guest idle is in lazy TLB mode and is skipped; the rest are
    /// sent IPIs as with `ipi`.
    KvmPv,
    /// A Xen PV guest (XenLinux 2.6.18): `flush_tlb_mm` is the `MMUEXT_TLB_FLUSH_MULTI`
    /// hypercall, and Xen flushes the pCPUs where the targets' state is loaded, with host IPIs
    /// its own handler answers; no target vCPU has to run.
    XenPv,
}

/// How a guest sends one IPI to several vCPUs: what a shootdown's sender pays (`ipi.rs`). An
/// IPI to one vCPU (a reschedule IPI) costs one exit either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IpiSend {
    /// One ICR write per target, each an MSR-write exit in which KVM delivers that one IPI:
    /// Linux 3.x on QEMU/KVM with x2APIC in the vCPU's CPUID and no interrupt remapping, where
    /// `enable_IR_x2apic` calls `x2apic_force_phys()` because `hypervisor_x2apic_available()` is
    /// true (read in 3.5's and 3.19's `apic.c`), and `__x2apic_send_IPI_mask` writes the ICR once
    /// per CPU of the mask with interrupts off (`local_irq_save`). So the targets receive their
    /// IPIs one exit apart, and IPIs that reach the sender meanwhile wait for the loop's end.
    X2apicPhysical,
    /// One exit for every target: KVM's paravirtual send-IPI hypercall (`kvm_send_ipi_mask`,
    /// `KVM_HC_SEND_IPI`, Linux 4.19 and later guests such as 6.8's), or one ICR write with a
    /// logical destination mask (xAPIC flat mode, up to 8 CPUs: the Windows guests of the
    /// `xen-yield` seed, through Viridian's ICR MSR under Xen).
    Multicast,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    Kernbench,
    Hackbench,
    Ebizzy,
    Dvdstore,
    CpuHog,
    Lkc,
    Exim,
    Metis,
    Dbench,
}

/// A workload: a preset, with any of its parameters overridden.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadConfig {
    pub preset: Preset,
    pub think_ns: Option<f64>,
    pub cs_ns: Option<f64>,
    pub cs_long_probability: Option<f64>,
    pub cs_long_ns: Option<f64>,
    pub locks: Option<u32>,
    pub zipf_s: Option<f64>,
    pub block_probability: Option<f64>,
    pub block_ns: Option<f64>,
    pub shootdown_probability: Option<f64>,
    pub shootdown_targets: Option<u32>,
    pub wake_probability: Option<f64>,
    /// Share of the locks taken with interrupts off (`workload::Profile::irqs_off`).
    pub irqs_off_share: Option<f64>,
    pub threads_per_vcpu: Option<u32>,
    /// How think times and critical sections are drawn from `think_ns`, `cs_ns`, `cs_long_ns`.
    pub durations: Option<Durations>,
    /// With fixed durations, the coefficient of variation of each length (0 to 0.5).
    pub jitter: Option<f64>,
    /// Work units each thread does between two barriers of all the VM's threads (a
    /// bulk-synchronous program's phase); absent: no barriers (`workload::Barrier`).
    pub barrier_every: Option<u32>,
}

impl WorkloadConfig {
    /// How many locks the guest threads take: none for `cpu-hog` unless its `locks` is given,
    /// and one more for a barrier (its futex's hash-bucket lock).
    fn lock_count(&self) -> u32 {
        crate::workload::Profile::new(self, 1, 0).locks + self.barrier_every.is_some() as u32
    }
}

/// How a workload's think times and critical sections vary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Durations {
    /// Exponentially distributed with the given means (the presets: kernel work varies).
    #[default]
    Exponential,
    /// Exactly the given lengths (a benchmark's calibrated busy loops).
    Fixed,
}

impl Scenario {
    /// Parse and validate a TOML scenario.
    pub fn from_toml(text: &str) -> Result<Scenario, ScenarioError> {
        let de = toml::Deserializer::parse(text).map_err(|e| err("", format!("TOML syntax: {e}")))?;
        let mut sc = Self::from_deserializer(de)?;
        let given: serde_json::Value = toml::from_str(text).map_err(|e| err("", format!("TOML syntax: {e}")))?;
        sc.tables_given_as_tables(&given)?;
        sc.kernel_defaults(&given)?;
        sc.validate()?;
        sc.ple_settings(&given)?;
        sc.xen_settings(&given)?;
        Ok(sc)
    }

    /// Parse and validate a scenario given as JSON (the same structure as the TOML file).
    pub fn from_json(text: &str) -> Result<Scenario, ScenarioError> {
        let mut de = serde_json::Deserializer::from_str(text);
        let mut sc = Self::from_deserializer(&mut de)?;
        let given: serde_json::Value = serde_json::from_str(text).map_err(|e| err("", e.to_string()))?;
        sc.tables_given_as_tables(&given)?;
        sc.kernel_defaults(&given)?;
        sc.validate()?;
        sc.ple_settings(&given)?;
        sc.xen_settings(&given)?;
        Ok(sc)
    }

    /// serde reads a table from a list of its values in field order (`ple = ["fixed", 1]` as
    /// `{ policy = "fixed", window_cycles = 1 }`), which no reader of a scenario would guess:
    /// refuse a list wherever the parsed scenario has a table.
    fn tables_given_as_tables(&self, given: &serde_json::Value) -> Result<(), ScenarioError> {
        use serde_json::Value;
        fn first_list_for_a_table(given: &Value, parsed: &Value, path: String) -> Option<String> {
            match (given, parsed) {
                (Value::Array(_), Value::Object(_)) => Some(path),
                (Value::Object(g), Value::Object(p)) => g.iter().find_map(|(k, v)| {
                    let sub = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                    first_list_for_a_table(v, p.get(k)?, sub)
                }),
                (Value::Array(g), Value::Array(p)) => {
                    g.iter().zip(p).enumerate().find_map(|(i, (g, p))| first_list_for_a_table(g, p, format!("{path}[{i}]")))
                }
                _ => None,
            }
        }
        let parsed = serde_json::to_value(self).expect("a scenario serializes");
        match first_list_for_a_table(given, &parsed, String::new()) {
            Some(path) => {
                let msg = format!("expected a table, found a list (to set one of its keys, name it: {path}.<key>; keys in docs/scenario.md)");
                Err(err(path, msg))
            }
            None => Ok(()),
        }
    }

    fn from_deserializer<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Scenario, ScenarioError>
    where
        D::Error: fmt::Display,
    {
        let sc: Scenario = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let mut path = if path == "." { String::new() } else { path };
            let mut msg = plain_message(&e.into_inner().to_string());
            if let (Some(at), Some(range)) = (msg.find("expected a whole number"), whole_number_range(&path)) {
                msg = format!("{}expected a whole number, allowed {range}", &msg[..at]);
            }
            const MAP_FOR_LIST: &str = "invalid type: map, expected a list";
            if msg.starts_with(MAP_FOR_LIST) {
                let hint = format!("{MAP_FOR_LIST} (a list of tables is written [[{path}]] in TOML, once per entry)");
                msg = msg.replacen(MAP_FOR_LIST, &hint, 1);
            } else if msg.starts_with("invalid type: map, expected") && path.ends_with(']') {
                // A list entry is a table where a value belongs: `[[x]]` written for `[x]`. A TOML
                // header names no index (`[vm.workload]` is the last VM's), so the hint names none.
                let parent = &path[..path.rfind('[').unwrap_or(path.len())];
                let header: String = parent.split('.').map(|key| key.split('[').next().unwrap_or(key)).collect::<Vec<_>>().join(".");
                if is_table(&header) {
                    // serde read the table from the list, its first field from the entry: what it
                    // expected there says nothing to the user. A TOML error's position stays.
                    let position = msg.rfind(" (line ").map_or("", |at| &msg[at..]);
                    msg = format!("a table, but `[[{header}]]` makes it a list of tables: write `[{header}]`, with single brackets{position}");
                    path = parent.to_string();
                } else {
                    msg = format!("{msg}; found a table in a list (if `[[{header}]]` was meant as the table `[{header}]`, use single brackets)");
                }
            }
            if let Some(at) = msg.find("expected a table").filter(|_| !path.is_empty()) {
                let phrase = if msg[at..].starts_with("expected a table, found a list") { "expected a table, found a list" } else { "expected a table" };
                let hint = format!("{phrase} (to set one of its keys, name it: {path}.<key>; keys in docs/scenario.md)");
                msg = msg.replacen(phrase, &hint, 1);
            }
            if let Some(home) = msg.strip_prefix("unknown field `").and_then(|m| m.split('`').next()).and_then(|key| outer_table_of(&path, key)) {
                msg = format!("{msg}; TOML puts every key after a [[vm]] header into that VM: {home}");
            }
            if let Some(missing) = msg.strip_prefix("missing field `").and_then(|m| m.split('`').next()) {
                path = if path.is_empty() { missing.to_string() } else { format!("{path}.{missing}") };
                if let Some(allowed) = required_field(&path) {
                    // Before the "(line L, column C)" of a TOML error.
                    let end = "missing field `".len() + missing.len() + 1;
                    msg = format!("{}; {allowed}{}", &msg[..end], &msg[end..]);
                }
            }
            err(path, msg)
        })?;
        Ok(sc)
    }

    /// Hardware threads of the host (valid once [`Scenario::validate`] passed).
    pub fn pcpus(&self) -> u32 {
        self.host.sockets * self.host.cores_per_socket * self.host.threads_per_core
    }

    /// Semantic checks, each naming the field and the allowed values.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        if self.name.trim().is_empty() {
            return Err(err("name", "must be non-empty (not only spaces); it names the run in summaries and stores"));
        }
        printable("name", &self.name)?;
        positive("duration_ms", self.duration_ms)?;
        if self.duration_ms < 1e-6 {
            return Err(err("duration_ms", format!("{} is out of range; allowed 1e-6 (one nanosecond) ..= 3600000", shown(self.duration_ms))));
        }
        if self.duration_ms > 3_600_000.0 {
            return Err(err("duration_ms", format!("{} is out of range; allowed up to 3600000 (one simulated hour)", shown(self.duration_ms))));
        }
        let h = &self.host;
        for (f, v) in [("sockets", h.sockets), ("cores_per_socket", h.cores_per_socket), ("threads_per_core", h.threads_per_core)] {
            if !TOPOLOGY_COUNT.contains(&v) {
                return Err(err(format!("host.{f}"), format!("{v} is out of range; allowed {TOPOLOGY_COUNT:?}")));
            }
        }
        let threads = h.sockets as u64 * h.cores_per_socket as u64 * h.threads_per_core as u64;
        if threads > 256 {
            return Err(err("host", format!("sockets × cores_per_socket × threads_per_core = {threads} hardware threads; at most 256 are supported")));
        }
        let smt = h.smt_core_throughput;
        // Irrelevant with one thread per core, but a bad value is still an error, not ignored.
        let smt_max = h.threads_per_core.max(2) as f64;
        if !(smt.is_finite() && (1.0..=smt_max).contains(&smt)) {
            return Err(err(
                "host.smt_core_throughput",
                format!("{} is out of range; allowed 1.0 ..= {smt_max} (threads_per_core, at least 2)", shown(smt)),
            ));
        }
        if !(h.clock_ghz.is_finite() && (0.1..=100.0).contains(&h.clock_ghz)) {
            return Err(err("host.clock_ghz", format!("{} is out of range; allowed 0.1 ..= 100 (GHz)", shown(h.clock_ghz))));
        }
        let mut prev_residency = 0.0;
        for (i, s) in h.idle_states.iter().enumerate() {
            time(&format!("host.idle_states[{i}].exit_ns"), s.exit_ns, 1.0, non_negative)?;
            time(&format!("host.idle_states[{i}].residency_ns"), s.residency_ns, 1.0, non_negative)?;
            if s.residency_ns < prev_residency {
                return Err(err(
                    format!("host.idle_states[{i}].residency_ns"),
                    format!("{} is below the previous state's {prev_residency}; list states shallowest first", s.residency_ns),
                ));
            }
            prev_residency = s.residency_ns;
        }
        let bursts = [("background", h.background.as_ref().map(|b| (b.interval_us, b.burst_us))),
                      ("interruptions", h.interruptions.as_ref().map(|i| (i.interval_us, i.burst_us)))];
        for (table, given) in bursts {
            if let Some((interval_us, burst_us)) = given {
                let at = |f: &str| format!("host.{table}.{f}");
                time(&at("interval_us"), interval_us, 1e3, positive)?;
                if interval_us < MIN_BURST_INTERVAL_US {
                    let msg = format!("{} is out of range; allowed at least {MIN_BURST_INTERVAL_US} (µs; a pCPU interrupted more often than once a microsecond does nothing else)", shown(interval_us));
                    return Err(err(at("interval_us"), msg));
                }
                time(&at("burst_us"), burst_us, 1e3, positive)?;
                if burst_us < 1e-3 {
                    // Each burst is drawn and rounded to whole ns, at least 1: a shorter mean would
                    // run as 1 ns whatever it says.
                    let msg = format!("{} is below 1 ns, the simulator's resolution; allowed at least 0.001 (µs)", shown(burst_us));
                    return Err(err(at("burst_us"), msg));
                }
            }
        }
        if !TICK_HZ.contains(&h.hz) {
            return Err(err("host.hz", format!("{} is out of range; allowed {TICK_HZ:?}", h.hz)));
        }
        let c = &h.costs;
        for (f, v) in [
            ("l1_hit_ns", c.l1_hit_ns),
            ("atomic_extra_ns", c.atomic_extra_ns),
            ("transfer_same_socket_ns", c.transfer_same_socket_ns),
            ("transfer_cross_socket_ns", c.transfer_cross_socket_ns),
            ("vm_exit_ns", c.vm_exit_ns),
            ("vm_entry_ns", c.vm_entry_ns),
            ("hypercall_ns", c.hypercall_ns),
            ("ipi_send_ns", c.ipi_send_ns),
            ("wakeup_ns", c.wakeup_ns),
            ("context_switch_ns", c.context_switch_ns),
        ] {
            // Measured costs (`vspin validate-locks`) may be fractions of a ns: each is rounded.
            time(&format!("host.costs.{f}"), v, 1.0, non_negative)?;
        }
        positive("host.costs.pause_cycles", c.pause_cycles)?;
        if c.pause_cycles > 1e6 {
            return Err(err("host.costs.pause_cycles", format!("{} is out of range; allowed up to 1000000 (cycles)", shown(c.pause_cycles))));
        }
        let ple = &self.hypervisor.ple;
        // KVM's `ple_window`, `ple_window_grow`, `_shrink`, `_max` and `ple_gap` are `unsigned
        // int` module parameters, and the VMCS's PLE_Window and PLE_Gap fields 32 bits. Beyond
        // them a window in ns would overflow the simulator's clock.
        for (key, value) in [("window_cycles", ple.window_cycles), ("grow", ple.grow), ("shrink", ple.shrink), ("max_cycles", ple.max_cycles), ("gap_cycles", ple.gap_cycles)] {
            if value > u32::MAX as u64 {
                let msg = format!("{value} is out of range; allowed 0..={} (KVM's PLE parameters and the VMCS fields are 32 bits)", u32::MAX);
                return Err(err(format!("hypervisor.ple.{key}"), msg));
            }
        }
        if ple.policy != PlePolicy::Off && ple.counter == PauseCounter::Intel && ple.gap_cycles == 0 {
            // KVM's `vmx_secondary_exec_control` and Xen's `vmx_init_vmcs_config` both clear
            // SECONDARY_EXEC_PAUSE_LOOP_EXITING when `ple_gap` is 0.
            let msg = format!(
                "0 turns Intel's Pause-Loop Exiting off (KVM's and Xen's vmx code clear it without a gap), which policy = {:?} contradicts; allowed 1..={} (default 128), or policy = \"off\"",
                ple.policy.name(),
                u32::MAX
            );
            return Err(err("hypervisor.ple.gap_cycles", msg));
        }
        if matches!(ple.policy, PlePolicy::Fixed | PlePolicy::Kvm) && ple.counter == PauseCounter::Intel {
            if ple.window_cycles == 0 {
                return Err(err("hypervisor.ple.window_cycles", "must be at least 1 when the policy is \"fixed\" or \"kvm\""));
            }
            // A fixed window never grows, so its `max_cycles` is kept, not checked.
            if ple.policy == PlePolicy::Kvm && ple.max_cycles < ple.window_cycles {
                // Either key may be the one the user set: say what to change in both.
                let msg = format!(
                    "{} must be at least window_cycles ({}): a \"kvm\" window grows from window_cycles up to max_cycles (default {}); raise max_cycles (up to {}) or lower window_cycles",
                    ple.max_cycles,
                    ple.window_cycles,
                    self.hypervisor.kernel.map_or(PleConfig::default().max_cycles, |k| k.defaults().ple_max_cycles),
                    u32::MAX
                );
                return Err(err("hypervisor.ple.max_cycles", msg));
            }
        }
        self.validate_pause_filter()?;
        self.validate_aple()?;
        self.validate_credit1()?;
        self.validate_gang()?;
        if self.hypervisor.halt_poll.max_ns as f64 > MAX_TIME_NS {
            let max = self.hypervisor.halt_poll.max_ns;
            return Err(err("hypervisor.halt_poll.max_ns", format!("{max} is out of range; allowed 0..={MAX_TIME_NS:e} (one simulated hour)")));
        }
        let hp = &self.hypervisor.halt_poll;
        for (key, value) in [("grow", hp.grow), ("grow_start_ns", hp.grow_start_ns), ("shrink", hp.shrink)] {
            if value > u32::MAX as u64 {
                let msg = format!("{value} is out of range; allowed 0..={} (KVM's halt_poll_ns_{} is an unsigned int)", u32::MAX, key.trim_end_matches("_ns"));
                return Err(err(format!("hypervisor.halt_poll.{key}"), msg));
            }
        }
        if self.vms.is_empty() {
            return Err(err("vm", "at least one [[vm]] is required"));
        }
        // Each VM's own count first, so that one VM's typo is named as its field.
        if let Some(i) = self.vms.iter().position(|vm| !TOPOLOGY_COUNT.contains(&vm.vcpus)) {
            return Err(err(format!("vm[{i}].vcpus"), format!("{} is out of range; allowed {TOPOLOGY_COUNT:?}", self.vms[i].vcpus)));
        }
        let vcpus: u64 = self.vms.iter().map(|vm| vm.vcpus as u64).sum();
        if vcpus > MAX_VCPUS {
            return Err(err("vm", format!("{vcpus} vCPUs in all; at most {MAX_VCPUS} are supported (16 per hardware thread of the largest host)")));
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, vm) in self.vms.iter().enumerate() {
            let at = |f: &str| format!("vm[{i}].{f}");
            if vm.name.trim().is_empty() {
                return Err(err(at("name"), format!("{:?} must be non-empty (not only spaces)", vm.name)));
            }
            if vm.name == "host" && self.host.background.is_some() {
                return Err(err(at("name"), "\"host\" is the name of the host's own threads (host.background) in the timeline; choose another name"));
            }
            if vm.name == "*" {
                return Err(err(at("name"), "\"*\" is reserved: in a setting's path (--set 'vm.*.lock=tas') it means every VM; choose another name"));
            }
            printable(&at("name"), &vm.name)?;
            if !names.insert(vm.name.as_str()) {
                let first = self.vms.iter().position(|other| other.name == vm.name).unwrap_or(i);
                return Err(err(at("name"), format!("{:?} is already the name of vm[{first}]; VM names must be unique", vm.name)));
            }
            if !TICK_HZ.contains(&vm.guest_hz) {
                return Err(err(at("guest_hz"), format!("{} is out of range; allowed {TICK_HZ:?}", vm.guest_hz)));
            }
            if vm.work_units == Some(0) {
                return Err(err(at("work_units"), "must be at least 1 (or absent to run for the duration)"));
            }
            // The preemptable locks' tunings: PAUSE or attempt counts, each for the locks it exists in.
            use LockKind::{PreemptableTicket, PvPreemptableTicket};
            for (key, value, locks) in [
                ("timeout_unit_pauses", vm.timeout_unit_pauses, &[PreemptableTicket, PvPreemptableTicket][..]),
                ("halt_after_attempts", vm.halt_after_attempts, &[PvPreemptableTicket][..]),
            ] {
                let Some(n) = value else { continue };
                if !vm.lock.is_some_and(|l| locks.contains(&l)) {
                    let names = locks.iter().map(|l| format!("{:?}", l.name())).collect::<Vec<_>>().join(" or ");
                    let given = vm.lock.map_or("but the VM names no lock".to_string(), |l| format!("not {:?}", l.name()));
                    return Err(err(at(key), format!("applies only to lock = {names}, {given}")));
                }
                if !TIMEOUT_UNIT_PAUSES.contains(&n) {
                    return Err(err(at(key), format!("{n} is out of range; allowed {TIMEOUT_UNIT_PAUSES:?}")));
                }
            }
            self.validate_tlb_flush(vm.tlb_flush, &at("tlb_flush"))?;
            self.validate_cpu_max(vm, &at("cpu_max"))?;
            self.validate_pin(vm, &at("pin"))?;
            validate_workload(&vm.workload, vm.vcpus, &at("workload"))?;
            let locks = vm.workload.lock_count();
            if vm.lock.is_none() && locks > 0 {
                let what = format!("missing; the workload takes {locks} lock{}", if locks == 1 { "" } else { "s" });
                return Err(err(at("lock"), format!("{what}, so name its guest spinlock: {}", one_of(LockKind::NAMES))));
            }
        }
        Ok(())
    }

    /// A CPU quota within the kernel's bounds, on a Linux host (`bandwidth.rs`). Xen has caps of
    /// its own, and a gang's turns leave no room for a quota; neither is modelled.
    fn validate_cpu_max(&self, vm: &VmConfig, at: &str) -> Result<(), ScenarioError> {
        let Some(c) = &vm.cpu_max else { return Ok(()) };
        let scheduler = self.hypervisor.scheduler;
        if !matches!(scheduler, SchedulerKind::Cfs | SchedulerKind::Eevdf | SchedulerKind::Eevdf618) {
            let msg = format!(
                "is Linux's CFS bandwidth control, modelled under scheduler = \"cfs\", \"eevdf\" or \"eevdf-6.18\", not {:?}",
                scheduler.name()
            );
            return Err(err(at, msg));
        }
        if !CPU_MAX_PERIOD_US.contains(&c.period_us) {
            return Err(err(format!("{at}.period_us"), format!("{} is out of range; allowed {CPU_MAX_PERIOD_US:?} (µs)", c.period_us)));
        }
        if !CPU_MAX_QUOTA_US.contains(&c.quota_us) {
            return Err(err(format!("{at}.quota_us"), format!("{} is out of range; allowed {CPU_MAX_QUOTA_US:?} (µs)", c.quota_us)));
        }
        Ok(())
    }

    /// APLE's settings only with its policy, and a round of three windows that fits its bounds.
    fn validate_aple(&self) -> Result<(), ScenarioError> {
        let ple = &self.hypervisor.ple;
        if ple.policy != PlePolicy::Aple {
            return match ple.aple {
                Some(_) => Err(err("hypervisor.ple.aple", format!("applies only to policy = \"aple\", not {:?}", ple.policy.name()))),
                None => Ok(()),
            };
        }
        let a = ple.aple_settings();
        let at = |f: &str| format!("hypervisor.ple.aple.{f}");
        if !APLE_WINDOW_CYCLES.contains(&a.min_cycles) {
            return Err(err(at("min_cycles"), format!("{} is out of range; allowed {APLE_WINDOW_CYCLES:?} (a 32-bit VMCS field)", a.min_cycles)));
        }
        // A bound the user did not set is its default: say so, since the message names it.
        const DEFAULTS: &str = "unset, they are initial_cycles 8192, min_cycles 4096, max_cycles 32768";
        if !(a.min_cycles..=*APLE_WINDOW_CYCLES.end()).contains(&a.max_cycles) {
            let msg = format!("{} is out of range; allowed {}..={} (from min_cycles; {DEFAULTS})", a.max_cycles, a.min_cycles, APLE_WINDOW_CYCLES.end());
            return Err(err(at("max_cycles"), msg));
        }
        if !(a.min_cycles..=a.max_cycles).contains(&a.initial_cycles) {
            let msg = format!("{} is out of range; allowed {}..={} (min_cycles to max_cycles; {DEFAULTS})", a.initial_cycles, a.min_cycles, a.max_cycles);
            return Err(err(at("initial_cycles"), msg));
        }
        if !APLE_WINDOW_CYCLES.contains(&a.step_cycles) {
            return Err(err(at("step_cycles"), format!("{} is out of range; allowed {APLE_WINDOW_CYCLES:?}", a.step_cycles)));
        }
        if !APLE_EPOCH_EXITS.contains(&a.epoch_exits) {
            return Err(err(at("epoch_exits"), format!("{} is out of range; allowed {APLE_EPOCH_EXITS:?}", a.epoch_exits)));
        }
        Ok(())
    }

    /// Under APLE the window is the VM's, set by APLE alone: stock KVM's window keys are refused
    /// rather than ignored (their defaults cannot be told from given values after parsing).
    fn ple_settings(&self, given: &serde_json::Value) -> Result<(), ScenarioError> {
        let ple = given.get("hypervisor").and_then(|h| h.get("ple"));
        if self.hypervisor.ple.counter == PauseCounter::Amd {
            for key in ["window_cycles", "max_cycles"] {
                if ple.and_then(|p| p.get(key)).is_some() {
                    let msg = "is Intel's window in TSC cycles; AMD's pause filter (counter = \"amd\") counts PAUSEs: set window_pauses and max_pauses instead";
                    return Err(err(format!("hypervisor.ple.{key}"), msg));
                }
            }
        }
        if self.hypervisor.scheduler == SchedulerKind::Credit1 {
            if let Some(key) = ["grow", "shrink", "max_cycles"].into_iter().find(|k| ple.and_then(|p| p.get(k)).is_some()) {
                let msg = "adapts the window, which Xen's PLE does not (a fixed ple_window); allowed under scheduler = \"credit1\": policy, window_cycles, gap_cycles";
                return Err(err(format!("hypervisor.ple.{key}"), msg));
            }
        }
        if self.hypervisor.ple.policy != PlePolicy::Aple {
            return Ok(());
        }
        for key in ["window_cycles", "grow", "shrink", "max_cycles"] {
            if ple.and_then(|p| p.get(key)).is_some() {
                let msg = "is stock KVM's window setting, which policy = \"aple\" does not use; set [hypervisor.ple.aple] (initial_cycles, min_cycles, max_cycles, step_cycles, epoch_exits) instead";
                return Err(err(format!("hypervisor.ple.{key}"), msg));
            }
        }
        Ok(())
    }

    /// `hypervisor.kernel`: the release's value for each key its version decides that the
    /// scenario leaves out (before [`Scenario::validate`], which then sees the release's values).
    fn kernel_defaults(&mut self, given: &serde_json::Value) -> Result<(), ScenarioError> {
        let hv = given.get("hypervisor");
        let is_given = |path: &[&str]| path.iter().fold(hv, |at, key| at.and_then(|v| v.get(key))).is_some();
        let Some(kernel) = self.hypervisor.kernel else {
            // Every default of a KVM host without a release is already 3.18's but the one the CPU
            // decides: on AMD, 3.18's fixed pause filter. (Xen's AMD filter is refused later.)
            if self.hypervisor.scheduler != SchedulerKind::Credit1 {
                self.amd_filter_of_3x(None, &is_given)?;
            }
            return Ok(());
        };
        if is_given(&["scheduler"]) && matches!(self.hypervisor.scheduler, SchedulerKind::Credit1 | SchedulerKind::Gang) {
            let msg = format!(
                "names a Linux KVM host's release, which scheduler = {:?} does not have; leave it out there, or use \"cfs\", \"eevdf\" or \"eevdf-6.18\"",
                self.hypervisor.scheduler.name()
            );
            return Err(err("hypervisor.kernel", msg));
        }
        let mut d = kernel.defaults();
        let v3 = matches!(kernel, KernelVersion::V3_5 | KernelVersion::V3_18);
        let policy_given = is_given(&["ple", "policy"]);
        if v3 && self.amd_filter_of_3x(Some(kernel), &is_given)? {
            d.ple_policy = PlePolicy::Fixed;
        }
        if d.ple_policy == PlePolicy::Fixed && !policy_given {
            refuse_adapting_a_fixed_window(Some(kernel), self.hypervisor.ple.counter, &is_given)?;
        }
        let hv = &mut self.hypervisor;
        if !is_given(&["scheduler"]) {
            hv.scheduler = d.scheduler;
        }
        if !is_given(&["directed_yield"]) {
            hv.directed_yield = d.directed_yield;
        }
        if !policy_given {
            hv.ple.policy = d.ple_policy;
        }
        if !is_given(&["ple", "max_cycles"]) {
            hv.ple.max_cycles = d.ple_max_cycles;
        }
        hv.ple.int_arithmetic = v3;
        if !is_given(&["halt_poll", "max_ns"]) {
            hv.halt_poll.max_ns = d.halt_poll_max_ns;
        }
        if !is_given(&["halt_poll", "shrink"]) {
            hv.halt_poll.shrink = d.halt_poll_shrink;
        }
        Ok(())
    }

    /// A 3.x release on AMD: `init_vmcb` sets the pause filter count once, so unless the policy
    /// is given the window is fixed, with no threshold (`kernel-mechanisms.md` §4.4). Returns
    /// whether it is.
    fn amd_filter_of_3x(&mut self, kernel: Option<KernelVersion>, is_given: &dyn Fn(&[&str]) -> bool) -> Result<bool, ScenarioError> {
        if self.hypervisor.ple.counter != PauseCounter::Amd || is_given(&["ple", "policy"]) {
            return Ok(false);
        }
        refuse_adapting_a_fixed_window(kernel, PauseCounter::Amd, is_given)?;
        self.hypervisor.ple.policy = PlePolicy::Fixed;
        if !is_given(&["ple", "gap_cycles"]) {
            self.hypervisor.ple.gap_cycles = 0;
        }
        Ok(true)
    }

    /// AMD's pause filter: its count in PAUSEs, within the VMCB's 16 bits; with KVM's own
    /// policies only (the seeds' APLE and Xen's filter are Intel's or not modelled).
    fn validate_pause_filter(&self) -> Result<(), ScenarioError> {
        let ple = &self.hypervisor.ple;
        if ple.counter == PauseCounter::Intel {
            for (key, value) in [("window_pauses", ple.window_pauses), ("max_pauses", ple.max_pauses)] {
                if value.is_some() {
                    return Err(err(format!("hypervisor.ple.{key}"), "applies only to counter = \"amd\" (AMD's pause filter counts PAUSEs); Intel's window is window_cycles"));
                }
            }
            return Ok(());
        }
        let at = |key: &str| format!("hypervisor.ple.{key}");
        if self.hypervisor.scheduler == SchedulerKind::Credit1 {
            return Err(err(at("counter"), "Xen's AMD pause filter (count 4000, threshold 1000 cycles) is not modelled; allowed \"intel\" under scheduler = \"credit1\""));
        }
        if ple.policy == PlePolicy::Aple {
            return Err(err(at("counter"), "APLE's windows are TSC cycles of Intel's PLE (the seed's); allowed \"intel\" with policy = \"aple\""));
        }
        let (base, max) = (ple.base_window(), ple.max_window());
        if !(1..=AMD_PAUSE_FILTER_MAX).contains(&base) {
            return Err(err(at("window_pauses"), format!("{base} is out of range; allowed 1..={AMD_PAUSE_FILTER_MAX} (a 16-bit count of PAUSEs)")));
        }
        if !(base..=AMD_PAUSE_FILTER_MAX).contains(&max) {
            return Err(err(at("max_pauses"), format!("{max} is out of range; allowed {base}..={AMD_PAUSE_FILTER_MAX} (window_pauses to the 16-bit count's largest)")));
        }
        if ple.policy == PlePolicy::Kvm && ple.gap_cycles == 0 {
            return Err(err(
                at("gap_cycles"),
                "0 (no pause filter threshold) with policy = \"kvm\": KVM's dynamic pause filter turns pause exiting off without a threshold (svm_vm_init); use policy = \"off\", or \"fixed\" for Linux 3.x KVM, which counts PAUSEs without one",
            ));
        }
        Ok(())
    }

    /// Gang scheduling: its settings only under it, and every VM gang-schedulable: no more vCPUs
    /// than pCPUs, each on a pCPU of its own, and no host thread outside the gangs.
    fn validate_gang(&self) -> Result<(), ScenarioError> {
        let hv = &self.hypervisor;
        if hv.scheduler != SchedulerKind::Gang {
            return match hv.gang {
                Some(_) => Err(err("hypervisor.gang", format!("applies only to scheduler = \"gang\", not {:?}", hv.scheduler.name()))),
                None => Ok(()),
            };
        }
        let g = hv.gang.clone().unwrap_or_default();
        if !GANG_SLICE_MS.contains(&g.slice_ms) {
            return Err(err("hypervisor.gang.slice_ms", format!("{} is out of range; allowed {GANG_SLICE_MS:?}", g.slice_ms)));
        }
        if hv.halt_poll.max_ns > 0 {
            return Err(err("hypervisor.halt_poll.max_ns", "a gang's pCPU idles while its vCPU halts; halt polling is not modelled under scheduler = \"gang\"; allowed 0"));
        }
        if self.host.background.is_some() {
            return Err(err(
                "host.background",
                "host threads belong to no gang, and scheduler = \"gang\" runs nothing but the VMs' rows; remove it (host.interruptions still applies)",
            ));
        }
        let n = self.pcpus();
        for (i, vm) in self.vms.iter().enumerate() {
            if vm.vcpus > n {
                let msg = format!("{} vCPUs cannot run at once on {n} pCPUs, as scheduler = \"gang\" runs a VM; allowed at most {n}", vm.vcpus);
                return Err(err(format!("vm[{i}].vcpus"), msg));
            }
            if let Pinning::List(l) = &vm.pin {
                if let Some(j) = (1..l.len()).find(|&j| l[..j].contains(&l[j])) {
                    let msg = format!("pCPU {} is listed twice; under scheduler = \"gang\" a VM's vCPUs run at once, each on a pCPU of its own", l[j]);
                    return Err(err(format!("vm[{i}].pin[{j}]"), msg));
                }
            }
        }
        Ok(())
    }

    /// Xen's settings only under Xen, and KVM's halt polling never there.
    fn validate_credit1(&self) -> Result<(), ScenarioError> {
        let hv = &self.hypervisor;
        if hv.scheduler != SchedulerKind::Credit1 {
            return match hv.credit1 {
                Some(_) => Err(err("hypervisor.credit1", format!("applies only to scheduler = \"credit1\", not {:?}", hv.scheduler.name()))),
                None => Ok(()),
            };
        }
        if hv.halt_poll.max_ns > 0 {
            return Err(err("hypervisor.halt_poll.max_ns", "KVM halt polling does not exist under scheduler = \"credit1\" (Xen); allowed 0"));
        }
        if self.record.ple_epochs {
            let msg = "APPLES' PLE epochs are counted by KVM's PLE exit handler, which scheduler = \"credit1\" (Xen) does not run, so the trace would be empty; allowed false here";
            return Err(err("record.ple_epochs", msg));
        }
        let c = hv.credit1.clone().unwrap_or_default();
        if !CREDIT1_TSLICE_MS.contains(&c.tslice_ms) {
            return Err(err("hypervisor.credit1.tslice_ms", format!("{} is out of range; allowed {CREDIT1_TSLICE_MS:?} (Xen's sched_credit_tslice_ms)", c.tslice_ms)));
        }
        if c.las && c.tslice_ms != 30 {
            let msg = format!(
                "{} with las = true; allowed 30: the LAS guest keeps only holds up to 30 ms, the credit scheduler's slice (docs/mechanisms/las.md)",
                c.tslice_ms
            );
            return Err(err("hypervisor.credit1.tslice_ms", msg));
        }
        let max = (*CREDIT1_RATELIMIT_US.end()).min(c.tslice_ms * 1000);
        if c.ratelimit_us != 0 && !(*CREDIT1_RATELIMIT_US.start()..=max).contains(&c.ratelimit_us) {
            return Err(err(
                "hypervisor.credit1.ratelimit_us",
                format!("{} is out of range; allowed 0 (none) or {}..={max} (at most the time slice)", c.ratelimit_us, CREDIT1_RATELIMIT_US.start()),
            ));
        }
        Ok(())
    }

    /// A paravirtual flush exists only under its own hypervisor (and a Xen PV guest only
    /// without PLE: `xen_settings`).
    fn validate_tlb_flush(&self, flush: TlbFlush, field: &str) -> Result<(), ScenarioError> {
        let hv = &self.hypervisor;
        let credit1 = hv.scheduler == SchedulerKind::Credit1;
        match flush {
            TlbFlush::Ipi => Ok(()),
            TlbFlush::KvmPv if credit1 => Err(err(field, "\"kvm-pv\" needs KVM's steal-time page, not scheduler = \"credit1\" (Xen); allowed \"ipi\" or \"xen-pv\"")),
            TlbFlush::XenPv if !credit1 => {
                Err(err(field, format!("\"xen-pv\" is a Xen PV guest's hypercall and needs scheduler = \"credit1\", not {:?}; allowed \"ipi\" or \"kvm-pv\"", hv.scheduler.name())))
            }
            TlbFlush::KvmPv | TlbFlush::XenPv => Ok(()),
        }
    }

    /// Under Xen: KVM's candidate search, halt polling and window policy and Linux's balancers
    /// do not exist, so setting them is refused (their defaults cannot be told from a given
    /// value after parsing, hence the check on the keys given); the PLE window, unless given,
    /// is Xen's fixed one (`ple_window = 4096`, `ple_gap = 128` in Xen's `vmx.c`).
    fn xen_settings(&mut self, given: &serde_json::Value) -> Result<(), ScenarioError> {
        if self.hypervisor.scheduler == SchedulerKind::Gang {
            return self.gang_settings(given);
        }
        if self.hypervisor.scheduler != SchedulerKind::Credit1 {
            return Ok(());
        }
        let hv = given.get("hypervisor");
        if hv.and_then(|h| h.get("posted_interrupts")).is_some() {
            let msg = "is modelled for KVM only (Intel APICv or AMD AVIC), not under scheduler = \"credit1\" (Xen); leave it out there";
            return Err(err("hypervisor.posted_interrupts", msg));
        }
        for key in ["directed_yield", "load_balance", "halt_poll"] {
            if hv.and_then(|h| h.get(key)).is_some() {
                let msg = "is a KVM/Linux setting, which scheduler = \"credit1\" (Xen) does not use: a PLE exit yields, and idle pCPUs steal work (docs/scenario.md)";
                return Err(err(format!("hypervisor.{key}"), msg));
            }
        }
        match hv.and_then(|h| h.get("ple")).and_then(|p| p.get("policy")) {
            None => self.hypervisor.ple.policy = PlePolicy::Fixed,
            Some(_) if matches!(self.hypervisor.ple.policy, PlePolicy::Kvm | PlePolicy::Aple) => {
                let msg = format!(
                    "{:?} is a KVM window policy; allowed under scheduler = \"credit1\": \"fixed\" (Xen's, the default there) or \"off\"",
                    self.hypervisor.ple.policy.name()
                );
                return Err(err("hypervisor.ple.policy", msg));
            }
            Some(_) => {}
        }
        // A Xen PV guest runs without VMX, so its PAUSEs never exit; PLE is host-wide here.
        let policy = self.hypervisor.ple.policy;
        if let Some(i) = self.vms.iter().position(|vm| vm.tlb_flush == TlbFlush::XenPv).filter(|_| policy != PlePolicy::Off) {
            let msg = format!(
                "\"xen-pv\" is a PV guest, whose PAUSEs never exit, but hypervisor.ple.policy is {:?} (PLE is host-wide here); set it to \"off\", or use \"ipi\" (an HVM guest)",
                policy.name()
            );
            return Err(err(format!("vm[{i}].tlb_flush"), msg));
        }
        Ok(())
    }

    /// Under gang scheduling a PLE exit has no vCPU to yield to (every runnable vCPU of the VM
    /// is running), so directed yield is off, and the host balances nothing: `directed_yield`
    /// other than `"off"`, and `load_balance`, are refused when given.
    fn gang_settings(&mut self, given: &serde_json::Value) -> Result<(), ScenarioError> {
        let hv = given.get("hypervisor");
        if hv.and_then(|h| h.get("directed_yield")).is_some() && self.hypervisor.directed_yield != DirectedYieldKind::Off {
            let msg = format!(
                "{:?} does not apply under scheduler = \"gang\": every runnable vCPU of a VM runs while its row does, so a PLE exit has no one to yield to; allowed \"off\" (the default there)",
                self.hypervisor.directed_yield.name()
            );
            return Err(err("hypervisor.directed_yield", msg));
        }
        if hv.and_then(|h| h.get("load_balance")).is_some() {
            let msg = "does not apply under scheduler = \"gang\": each vCPU keeps its pCPU in the gang's row; remove the key";
            return Err(err("hypervisor.load_balance", msg));
        }
        self.hypervisor.directed_yield = DirectedYieldKind::Off;
        Ok(())
    }

    fn validate_pin(&self, vm: &VmConfig, field: &str) -> Result<(), ScenarioError> {
        let n = self.pcpus();
        match &vm.pin {
            Pinning::Named(s) if s == "none" => Ok(()),
            Pinning::Named(s) if s == "1:1" => {
                if vm.vcpus > n {
                    Err(err(field, format!("\"1:1\" pins vCPU i to pCPU i, but the VM has {} vCPUs and the host {} pCPUs", vm.vcpus, n)))
                } else {
                    Ok(())
                }
            }
            Pinning::Named(s) => Err(err(field, format!("unknown pinning {s:?}; allowed \"1:1\", \"none\", or a list of pCPU indices"))),
            Pinning::List(l) => {
                if l.len() != vm.vcpus as usize {
                    return Err(err(field, format!("lists {} pCPUs for {} vCPUs; give exactly one per vCPU", l.len(), vm.vcpus)));
                }
                if let Some((i, bad)) = l.iter().enumerate().find(|&(_, &p)| !(0..n as i64).contains(&p)) {
                    return Err(err(format!("{field}[{i}]"), format!("pCPU {bad} does not exist; allowed 0..={}", n - 1)));
                }
                Ok(())
            }
        }
    }
}

fn validate_workload(w: &WorkloadConfig, vcpus: u32, at: &str) -> Result<(), ScenarioError> {
    let f = |n: &str| format!("{at}.{n}");
    for (n, v) in [("think_ns", w.think_ns), ("cs_ns", w.cs_ns), ("cs_long_ns", w.cs_long_ns), ("block_ns", w.block_ns)] {
        if let Some(v) = v {
            time(&f(n), v, 1.0, positive)?;
            if v < 1.0 {
                // A length is drawn, then rounded to whole ns (at least 1): a shorter mean or
                // fixed length would run as 1 ns whatever it says.
                return Err(err(f(n), format!("{} is below 1 ns, the simulator's resolution; allowed 1 ..= 3.6e12 (ns)", shown(v))));
            }
        }
    }
    for (n, v) in [
        ("cs_long_probability", w.cs_long_probability),
        ("block_probability", w.block_probability),
        ("shootdown_probability", w.shootdown_probability),
        ("wake_probability", w.wake_probability),
    ] {
        if let Some(v) = v {
            if !(0.0..=1.0).contains(&v) {
                return Err(err(f(n), format!("{v} is not a probability; allowed 0.0..=1.0")));
            }
        }
    }
    if let Some(v) = w.irqs_off_share {
        if !(0.0..=1.0).contains(&v) {
            return Err(err(f("irqs_off_share"), format!("{} is not a share of the locks; allowed 0.0..=1.0", shown(v))));
        }
    }
    if let Some(s) = w.zipf_s {
        non_negative(&f("zipf_s"), s)?;
    }
    if let Some(n) = w.locks {
        if !LOCKS.contains(&n) {
            return Err(err(f("locks"), format!("{n} is out of range; allowed {LOCKS:?}")));
        }
    }
    if let Some(t) = w.threads_per_vcpu {
        if !THREADS_PER_VCPU.contains(&t) {
            return Err(err(f("threads_per_vcpu"), format!("{t} is out of range; allowed {THREADS_PER_VCPU:?}")));
        }
    }
    if let Some(n) = w.barrier_every {
        if !BARRIER_EVERY.contains(&n) {
            return Err(err(f("barrier_every"), format!("{n} is out of range; allowed {BARRIER_EVERY:?} (work units per thread between barriers)")));
        }
    }
    if let Some(j) = w.jitter {
        if !JITTER.contains(&j) {
            return Err(err(f("jitter"), format!("{} is out of range; allowed {JITTER:?} (a coefficient of variation)", shown(j))));
        }
        if j > 0.0 && w.durations != Some(Durations::Fixed) {
            return Err(err(f("jitter"), "applies only with durations = \"fixed\" (exponential lengths vary already)"));
        }
    }
    if let Some(t) = w.shootdown_targets {
        if vcpus < 2 {
            return Err(err(f("shootdown_targets"), "a shootdown needs another vCPU; this VM has 1"));
        }
        if t == 0 || t >= vcpus {
            return Err(err(f("shootdown_targets"), format!("{t} is out of range; allowed 1..={} (other vCPUs of the VM)", vcpus.saturating_sub(1))));
        }
    }
    // Keys that would be accepted and change nothing, or take a length from nowhere. (A
    // probability given as 0 is a choice, e.g. one point of a sweep, and is left alone.)
    let profile = crate::workload::Profile::new(w, vcpus, 0);
    let preset = crate::workload::Profile::preset(w.preset, 0);
    // Without locks (`cpu-hog` unless `locks` is given) the loop never enters a critical section.
    if profile.locks == 0 {
        let lock_keys = [("cs_ns", w.cs_ns.is_some()), ("cs_long_probability", w.cs_long_probability.is_some()), ("cs_long_ns", w.cs_long_ns.is_some()), ("zipf_s", w.zipf_s.is_some()), ("irqs_off_share", w.irqs_off_share.is_some())];
        if let Some((name, _)) = lock_keys.iter().find(|(_, given)| *given) {
            return Err(err(f(name), format!("has no effect: the {} preset takes no locks; set locks too", w.preset.name())));
        }
    } else if preset.cs_ns == 0.0 && w.cs_ns.is_none() {
        return Err(err(f("locks"), format!("needs cs_ns too: the {} preset has no critical section to take a length from", w.preset.name())));
    }
    // A length or count whose event the preset never draws, and whose probability is not given
    // either: name the key that enables it.
    for (given, name, enabler, explicit, drawn) in [
        (w.cs_long_ns.is_some(), "cs_long_ns", "cs_long_probability", w.cs_long_probability.is_some(), profile.cs_long_probability > 0.0),
        (w.block_ns.is_some(), "block_ns", "block_probability", w.block_probability.is_some(), profile.block_probability > 0.0),
        (
            w.shootdown_targets.is_some(),
            "shootdown_targets",
            "shootdown_probability",
            w.shootdown_probability.is_some(),
            profile.shootdown_probability > 0.0,
        ),
    ] {
        if given && !explicit && !drawn {
            let msg = format!("has no effect: the {} preset has {enabler} = 0; set {enabler} too", w.preset.name());
            return Err(err(f(name), msg));
        }
    }
    // A probability whose event the preset never draws has no length of the preset's to use:
    // the length must come with it (else every such event would last a nanosecond).
    for (enabler, p, length, given, preset_draws) in [
        ("cs_long_probability", w.cs_long_probability, "cs_long_ns", w.cs_long_ns.is_some(), preset.cs_long_probability > 0.0),
        ("block_probability", w.block_probability, "block_ns", w.block_ns.is_some(), preset.block_probability > 0.0),
    ] {
        if p.is_some_and(|p| p > 0.0) && !given && !preset_draws {
            let msg = format!("needs {length} too: the {} preset has {enabler} = 0, so it has no length for these events", w.preset.name());
            return Err(err(f(enabler), msg));
        }
    }
    // The converse for shootdowns: a probability of sending them to no vCPU.
    if w.shootdown_probability.is_some_and(|p| p > 0.0) && profile.shootdown_targets == 0 {
        let msg = if vcpus < 2 {
            "has no effect: a shootdown needs another vCPU; this VM has 1".to_string()
        } else {
            format!("has no effect: the {} preset sends shootdowns to no vCPU; set shootdown_targets too", w.preset.name())
        };
        return Err(err(f("shootdown_probability"), msg));
    }
    // A peer to wake is a thread sleeping on another vCPU (`ipi.rs`, `wake_peer`).
    if w.wake_probability.is_some_and(|p| p > 0.0) && vcpus < 2 {
        return Err(err(f("wake_probability"), "has no effect: the peer it wakes sleeps on another vCPU; this VM has 1"));
    }
    Ok(())
}

/// The most vCPUs a scenario may have over all its VMs: 16 per hardware thread of the largest
/// host (256 threads), far past any over-commit the seeds study, and a bound on the run's memory.
const MAX_VCPUS: u64 = 4096;

// The ranges of the whole-number fields narrower than their type, which `validate` enforces and
// `whole_number_range` quotes for a value of the wrong type or sign.
/// Sockets, cores per socket, threads per core, and a VM's vCPUs.
const TOPOLOGY_COUNT: RangeInclusive<u32> = 1..=256;
/// Guest threads per vCPU.
const THREADS_PER_VCPU: RangeInclusive<u32> = 1..=4096;
/// The locks a workload spreads its acquisitions over. Each lock is a simulated word and an entry
/// of the Zipf popularity table; beyond 2^16 locks the hottest ones' share no longer changes what
/// contention looks like, and an unbounded count could exhaust the host's memory.
const LOCKS: RangeInclusive<u32> = 1..=1 << 16;
/// A fixed-length workload's jitter: each length is drawn uniformly from `mean × (1 ± √3 × jitter)`,
/// so `jitter` is its coefficient of variation; up to 0.5 the shortest draw stays above 13% of the
/// mean (a busy loop never runs in no time).
const JITTER: RangeInclusive<f64> = 0.0..=0.5;
/// `t` of the preemptable ticket locks, in PAUSEs.
const TIMEOUT_UNIT_PAUSES: RangeInclusive<u64> = 1..=1 << 30;
/// The shortest mean interval between two host bursts on a pCPU (`host.background`,
/// `host.interruptions`), µs: a host thread or interrupt needs about a microsecond to enter and
/// leave, so a pCPU interrupted more often would do nothing else, and a run would spend its events
/// there (0.01 µs made a 200 ms run take 318 M events).
const MIN_BURST_INTERVAL_US: f64 = 1.0;
/// The host's and a guest's timer tick (`CONFIG_HZ`).
const TICK_HZ: RangeInclusive<u32> = 10..=10_000;
/// Xen's bounds on `sched_credit_tslice_ms` and `sched_ratelimit_us` (`XEN_SYSCTL_CSCHED_TSLICE_*`,
/// `XEN_SYSCTL_SCHED_RATELIMIT_*`).
const CREDIT1_TSLICE_MS: RangeInclusive<u32> = 1..=1000;
const CREDIT1_RATELIMIT_US: RangeInclusive<u32> = 100..=500_000;
/// A gang row's slice (ms): from a millisecond (below, the row switches would dominate) to a
/// second, as Xen bounds its slice.
const GANG_SLICE_MS: RangeInclusive<u32> = 1..=1000;
/// APLE's windows and step: positive and within the VMCS's 32-bit `PLE_WINDOW` field.
const APLE_WINDOW_CYCLES: RangeInclusive<u64> = 1..=u32::MAX as u64;
/// PLE exits per APLE epoch (the seed's 1,000 among them).
const APLE_EPOCH_EXITS: RangeInclusive<u32> = 1..=1_000_000;

/// The allowed values of a whole-number field whose range is narrower than its type's, so that
/// a value of the wrong type or sign is answered with the range `validate` enforces.
fn whole_number_range(path: &str) -> Option<String> {
    if let Some(field) = path.strip_prefix("hypervisor.ple.aple.") {
        return Some(if field == "epoch_exits" { format!("{APLE_EPOCH_EXITS:?}") } else { format!("{APLE_WINDOW_CYCLES:?}") });
    }
    let field = path.rsplit('.').next()?;
    if field.starts_with("pin[") {
        return Some("a pCPU index, 0 up to the host's pCPUs - 1".to_string());
    }
    Some(match field {
        "vcpus" | "sockets" | "cores_per_socket" | "threads_per_core" => format!("{TOPOLOGY_COUNT:?}"),
        "threads_per_vcpu" => format!("{THREADS_PER_VCPU:?}"),
        "barrier_every" => format!("{BARRIER_EVERY:?}"),
        "locks" => format!("{LOCKS:?}"),
        "timeout_unit_pauses" | "halt_after_attempts" => format!("{TIMEOUT_UNIT_PAUSES:?}"),
        "guest_hz" | "hz" => format!("{TICK_HZ:?}"),
        "work_units" => "1 or more".to_string(),
        "quota_us" => format!("{CPU_MAX_QUOTA_US:?}"),
        "period_us" => format!("{CPU_MAX_PERIOD_US:?}"),
        "tslice_ms" => format!("{CREDIT1_TSLICE_MS:?}"),
        "slice_ms" => format!("{GANG_SLICE_MS:?}"),
        "ratelimit_us" => format!("0 (none) or {}..= the time slice", CREDIT1_RATELIMIT_US.start()),
        "shootdown_targets" => "1..= the VM's other vCPUs".to_string(),
        "max_ns" => format!("0..={} (whole nanoseconds; write 200000, not 2e5)", MAX_TIME_NS as u64),
        "seed" => format!("0..={}", u64::MAX),
        _ => return None,
    })
}

/// What a required field takes, for the message that says it is missing.
fn required_field(path: &str) -> Option<String> {
    let field = path.rsplit('.').next()?;
    let field = &field[..field.find('[').unwrap_or(field.len())];
    Some(match field {
        "duration_ms" => "the simulated time in ms, allowed 1e-6..=3600000".to_string(),
        "host" => "a table [host] with at least cores_per_socket".to_string(),
        "vm" => "at least one [[vm]] table, with name, vcpus, workload and (if its workload takes locks) lock".to_string(),
        "name" => "a string, unique among the VMs".to_string(),
        "workload" => format!("a table naming a preset, e.g. {{ preset = \"kernbench\" }}; presets: {}", one_of(Preset::NAMES)),
        "preset" => one_of(Preset::NAMES),
        "quota_us" => format!("µs of CPU time per period, allowed {CPU_MAX_QUOTA_US:?}"),
        "interval_us" => format!("a time in µs, at least {MIN_BURST_INTERVAL_US}"),
        "burst_us" => "a time in µs, above 0".to_string(),
        "exit_ns" | "residency_ns" => "a time in ns, 0 or more".to_string(),
        _ => format!("allowed {}", whole_number_range(path)?),
    })
}

/// `one of "a", "b"`, as serde words a wrong name.
fn one_of(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    format!("one of {}", quoted.join(", "))
}

/// A minimal valid scenario as JSON: every key the structs always serialize, so that the
/// messages below read the tables off the structs instead of a list that could drift from them.
fn minimal_scenario() -> &'static serde_json::Value {
    static MINIMAL: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    MINIMAL.get_or_init(|| {
        let minimal = "duration_ms = 1\n[host]\ncores_per_socket = 1\n[[vm]]\nname = \"a\"\nvcpus = 1\nworkload = { preset = \"cpu-hog\" }\n";
        serde_json::to_value(Scenario::from_toml(minimal).expect("the minimal scenario is valid")).expect("a scenario serializes")
    })
}

/// Whether `key` (dotted, indices left out: `vm.workload`) is a table that every scenario has,
/// not a list of tables (`vm`). An optional table (`host.background`) is not known here, and its
/// messages stay serde's.
fn is_table(key: &str) -> bool {
    // A list of tables on the way (`vm`) stands for its entries.
    let list_entry = |v: &'static serde_json::Value| v.as_array().and_then(|list| list.first()).unwrap_or(v);
    let at = key.split('.').try_fold(minimal_scenario(), |at, k| list_entry(at).get(k));
    at.is_some_and(|v| v.is_object())
}

/// For a key unknown to a VM (`path` = `vm[i].key`) that the top level or one of its tables
/// takes: where it belongs.
fn outer_table_of(path: &str, key: &str) -> Option<String> {
    let vm_key = path.strip_prefix("vm[")?.split_once("].")?.1;
    if vm_key != key {
        return None;
    }
    let top = minimal_scenario().as_object()?;
    if top.contains_key(key) && key != "vm" {
        return Some(format!("`{key}` is a top-level key, so move it to the top of the file, before any [table] header"));
    }
    let (table, _) = top.iter().find(|(_, v)| v.as_object().is_some_and(|t| t.contains_key(key)))?;
    Some(format!("`{key}` is a key of [{table}], so move it under the [{table}] header"))
}

/// A deserializer's message without its source excerpt: TOML errors keep their position as
/// "(line L, column C)", JSON errors drop theirs (the field path already locates them).
fn plain_message(raw: &str) -> String {
    if let Some(rest) = raw.strip_prefix("TOML parse error at ") {
        let position = rest.lines().next().unwrap_or_default();
        let message = raw.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default();
        return format!("{} ({position})", plain_types(message.trim()));
    }
    plain_types(raw.split(" at line ").next().unwrap_or(raw).trim())
}

/// serde names the Rust type it wanted; a scenario's author thinks in TOML values.
fn plain_types(message: &str) -> String {
    const TYPES: [(&str, &str); 5] = [
        ("expected f64", "expected a number"),
        ("expected i64", "expected a whole number"),
        ("expected u64", "expected a whole number, 0 or more"),
        ("expected u32", "expected a whole number from 0 to 4294967295"),
        ("expected a boolean", "expected true or false"),
    ];
    if let Some(rust) = TYPES.iter().find(|(rust, _)| message.ends_with(rust)) {
        return format!("{}{}", &message[..message.len() - rust.0.len()], rust.1);
    }
    match message.rsplit_once("expected struct ") {
        Some((before, name)) if !name.contains(' ') => format!("{before}expected a table"),
        // A list where a table belongs, too short to be read as the table's fields in order.
        Some((before, _)) if before.starts_with("invalid length ") => "expected a table, found a list".to_string(),
        _ => message.replace("expected a sequence", "expected a list"),
    }
}

/// The longest time any duration or cost may take: the longest run, one simulated hour. A
/// larger value would overflow the simulator's nanosecond clock or never happen in a run.
const MAX_TIME_NS: f64 = 3.6e12;

/// A time `v` in the field's own unit (`unit_ns` ns each) that passes `sign` and is at most
/// [`MAX_TIME_NS`].
fn time(field: &str, v: f64, unit_ns: f64, sign: fn(&str, f64) -> Result<(), ScenarioError>) -> Result<(), ScenarioError> {
    sign(field, v)?;
    if v * unit_ns > MAX_TIME_NS {
        return Err(err(field, format!("{} is out of range; allowed up to {:e} (one simulated hour)", shown(v), MAX_TIME_NS / unit_ns)));
    }
    Ok(())
}

/// A number as a user would write it: `1e300`, not three hundred digits (Rust's `{}` never uses
/// an exponent), and `0.5` as itself.
fn shown(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-4..1e16).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// A name that prints as itself: names are printed in summaries, tables and reports, where a
/// control character, a line break, an invisible character or a space at either end would
/// garble a row or make two names look alike.
fn printable(field: &str, name: &str) -> Result<(), ScenarioError> {
    let where_shown = "a name is printed in summaries, tables and reports";
    // Unicode's zero-width and direction-formatting characters (category Cf) most often met.
    let invisible = |c: char| matches!(c, '\u{AD}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}');
    if let Some(c) = name.chars().find(|&c| c.is_control() || (c.is_whitespace() && c != ' ') || invisible(c)) {
        let kind = if c.is_control() { "the control character" } else if invisible(c) { "the invisible character" } else { "the line or space character" };
        return Err(err(field, format!("{name:?} contains {kind} U+{:04X}; {where_shown}", c as u32)));
    }
    if name.trim() != name {
        return Err(err(field, format!("{name:?} begins or ends with a space; {where_shown}, which do not show it: remove it")));
    }
    Ok(())
}

fn positive(field: &str, v: f64) -> Result<(), ScenarioError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(err(field, format!("{} is not allowed; must be a finite number > 0", shown(v))))
    }
}

fn non_negative(field: &str, v: f64) -> Result<(), ScenarioError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(err(field, format!("{} is not allowed; must be a finite number >= 0", shown(v))))
    }
}
