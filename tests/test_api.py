import os
import re
from pathlib import Path
import threading

import pytest

import vspin
from vspin.scenario import parse_setting


def test_run_returns_metrics_and_dataframes(small):
    r = vspin.run(small)
    assert list(r.vms["name"]) == ["a", "b"]
    for col in ("throughput_per_s", "time_useful_ns", "time_waiting_ns", "halt_exits", "lwp_events"):
        assert col in r.vms.columns
    assert len(r.vcpus) == 4
    assert r.totals["acquisitions"] == r.vms["acquisitions"].sum() > 0


def test_lock_waits_count_every_acquisition_once(small):
    r = vspin.run(small)
    waits = r.lock_waits
    assert list(waits.columns) == ["vm", "from_ns", "to_ns", "acquisitions", "wait_ns"]
    per_vm = waits.groupby("vm")["acquisitions"].sum()
    assert per_vm.to_dict() == dict(zip(r.vms["name"], r.vms["acquisitions"]))
    assert ((waits["from_ns"] <= waits["wait_ns"] / waits["acquisitions"]) & (waits["wait_ns"] / waits["acquisitions"] < waits["to_ns"])).all()
    assert "lock_waits" not in r.vms.columns


def test_lock_holds_end_in_a_release_and_each_lock_adds_up_to_its_vm(small):
    r = vspin.run(small, {"record.locks": True})
    holds = r.lock_holds
    assert list(holds.columns) == ["vm", "from_ns", "to_ns", "holds", "hold_ns"]
    per_vm = holds.groupby("vm")["holds"].sum()
    for name, acquisitions, vcpus in zip(r.vms["name"], r.vms["acquisitions"], r.vms["vcpus"]):
        assert acquisitions - vcpus <= per_vm[name] <= acquisitions  # a vCPU may hold a lock at the end
    locks = r.locks
    assert list(locks.columns) == ["vm", "lock", "acquisitions", "wait_ns", "hold_ns"]
    assert locks.groupby("vm")["acquisitions"].sum().to_dict() == dict(zip(r.vms["name"], r.vms["acquisitions"]))
    assert locks.groupby("vm")["hold_ns"].sum().to_dict() == holds.groupby("vm")["hold_ns"].sum().to_dict()
    hist = r.lock_histograms
    assert set(hist["measure"]) == {"wait", "hold"}
    waits = hist[hist["measure"] == "wait"].groupby(["vm", "from_ns"])["count"].sum()
    assert waits.to_dict() == r.lock_waits.set_index(["vm", "from_ns"])["acquisitions"].to_dict()
    assert "lock_holds" not in r.vms.columns and "locks" not in r.vms.columns
    assert "the locks each VM waited for longest" in r.summary()


def test_each_lock_is_recorded_only_when_the_scenario_asks(small):
    r = vspin.run(small)
    assert "lock holds, from acquisition to unlock()" in r.summary()
    with pytest.raises(ValueError, match=r"record\.locks = true"):
        r.locks


def test_ple_epochs_are_traced_only_when_the_scenario_asks(examples):
    path = examples / "apples.toml"
    with pytest.raises(ValueError, match=r"record\.ple_epochs = true"):
        vspin.run(path, duration_ms=20).ple_epoch_trace
    r = vspin.run(path, {"record.ple_epochs": True}, duration_ms=60)
    trace = r.ple_epoch_trace
    assert list(trace.columns) == ["vm", "epoch", "end_ms", "window_cycles", "inefficiency"]
    assert trace.groupby("vm").size().to_dict() == dict(zip(r.vms["name"], r.vms["ple_epochs"]))
    assert trace.groupby("vm")["end_ms"].is_monotonic_increasing.all()
    assert "ple_epoch_trace" not in r.vms.columns


def test_summary_reports_how_long_acquisitions_waited(small):
    text = vspin.run(small).summary()
    assert "lock waits, from lock() to acquisition" in text
    assert "median" in text and "half the waiting in waits of" in text


def test_a_metric_without_a_value_is_nan_in_every_frame_so_runs_concatenate(small):
    off = vspin.run(small, {"hypervisor.ple.policy": "off"})
    assert off.raw["vms"][0]["ple_inefficiency"] is None and off.raw["vcpus"][0]["ple_window_cycles"] is None
    assert off.vms.ple_inefficiency.dtype == "float64" and off.vms.ple_inefficiency.isna().all()
    assert off.vcpus.ple_window_cycles.dtype == "float64"
    swept = vspin.sweep(small, {"hypervisor.ple.policy": ["off", "kvm"]}, workers=1)
    assert swept.ple_window_mean_cycles.dtype == "float64" and swept.completion_ms.dtype == "float64"


def test_every_vcpu_nanosecond_is_accounted_for(small):
    r = vspin.run(small)
    time_cols = [c for c in r.vcpus.columns if c.startswith("time_")]
    assert (r.vcpus[time_cols].sum(axis=1) == round(r.raw["simulated_ms"] * 1e6)).all()


def test_same_scenario_and_seed_give_identical_json(small):
    assert vspin.run(small).to_json() == vspin.run(small).to_json()


def test_seed_override_changes_the_run(small):
    assert vspin.run(small, seed=1).to_json() != vspin.run(small, seed=2).to_json()


def test_scenario_as_path_and_as_dict_agree(examples):
    path = examples / "undercommitted.toml"
    from_path = vspin.run(path, duration_ms=10)
    from_dict = vspin.run(vspin.load_scenario(path), duration_ms=10)
    assert from_path.to_json() == from_dict.to_json()
    assert from_path.raw["scenario"] == "undercommitted"


def test_bad_field_is_named_with_allowed_values(small):
    with pytest.raises(vspin.ScenarioError, match=r'vm\[0\]\.lock: .*"tas", "tas-yield", "las-tas", "ticket", "pv-ticket"'):
        vspin.run(small.replace('"pv-ticket"', '"mcs"'))


def test_negative_duration_is_rejected(small):
    with pytest.raises(vspin.ScenarioError, match="duration_ms"):
        vspin.validate(small, duration_ms=-1)


def test_an_error_of_a_vm_says_which_vm_its_index_is(small):
    with pytest.raises(vspin.ScenarioError) as e:
        vspin.run(small, {"vm.*.lock": "mcs"})
    name = vspin.load_scenario(small)["vm"][0]["name"]
    assert str(e.value).startswith("vm[0].lock: invalid value")
    assert str(e.value).endswith(f'(vm[0] is the VM named "{name}")')
    with pytest.raises(vspin.ScenarioError) as e:
        vspin.run(small, {"vm.0.name": " "})
    assert str(e.value) == 'vm[0].name: " " must be non-empty (not only spaces)', "a blank name names no VM"


def test_missing_file_is_a_clear_error():
    with pytest.raises(vspin.ScenarioError, match="not found"):
        vspin.run("no/such/scenario.toml")
    # A one-line name with an '=' is tried as TOML too; a typo there is still a missing file.
    with pytest.raises(vspin.ScenarioError, match="scenario file not found: ple=of.toml"):
        vspin.run("ple=of.toml")


def test_a_setting_that_looks_like_toml_but_is_not_is_refused():
    from vspin.scenario import parse_setting

    assert parse_setting("vm.*.lock=tas") == ("vm.*.lock", "tas")
    assert parse_setting("vm.0.pin=[0, 1]") == ("vm.0.pin", [0, 1])
    with pytest.raises(vspin.ScenarioError, match="not valid TOML"):
        parse_setting("vm.0.pin=[0, 1")


def test_toml_syntax_error_is_a_scenario_error():
    with pytest.raises(vspin.ScenarioError, match="TOML syntax"):
        vspin.run("duration_ms = = 3\n")


def test_a_toml_error_quotes_the_line_it_names():
    with pytest.raises(vspin.ScenarioError, match=r"Cannot overwrite a value \(at line 2, column 17\): duration_ms = 60$"):
        vspin.run("duration_ms = 50\nduration_ms = 60\n")


def test_a_key_given_both_as_a_setting_and_as_an_argument_is_refused(small):
    with pytest.raises(vspin.ScenarioError, match=r"duration_ms: given twice, as the setting duration_ms=30 \(--set\) "
                                                  r"and as the argument 40 \(--duration-ms\)"):
        vspin.run(small, {"duration_ms": 30}, duration_ms=40)
    with pytest.raises(vspin.ScenarioError, match="seed: given twice"):
        vspin.run(small, {"seed": 5}, seed=3)


def test_summary_names_every_vm(small):
    text = vspin.run(small).summary()
    assert "pv-ticket" in text and "\na " in text and "\nb " in text


def test_settings_override_nested_keys_and_every_vm(small):
    data = vspin.load_scenario(small, {"vm.*.lock": "tas", "hypervisor.ple.policy": "off", "vm.1.vcpus": 1})
    assert [vm["lock"] for vm in data["vm"]] == ["tas", "tas"]
    assert data["hypervisor"] == {"ple": {"policy": "off"}}
    assert data["vm"][1]["vcpus"] == 1
    assert vspin.run(data).vms["lock"].tolist() == ["tas", "tas"]


def test_setting_a_missing_list_entry_is_a_clear_error(small):
    with pytest.raises(vspin.ScenarioError, match=r"vm\.5 does not exist; the list has 2 entries \(use 0\.\.1 or \*, or a name: a, b\)"):
        vspin.load_scenario(small, {"vm.5.lock": "tas"})
    with pytest.raises(vspin.ScenarioError, match=r"vm\.web does not exist; .* or a name: a, b\)"):
        vspin.load_scenario(small, {"vm.web.lock": "tas"})


def test_a_setting_names_a_vm_by_its_name(small):
    data = vspin.load_scenario(small, {"vm.b.lock": "tas", "vm[a].vcpus": 1})
    assert [vm["lock"] for vm in data["vm"]] == ["pv-ticket", "tas"]
    assert data["vm"][0]["vcpus"] == 1


@pytest.mark.parametrize("settings", [
    {"vm.a.lock": "tas", "vm.0.lock": "ticket"},
    {"vm.*.lock": "tas", "vm.b.lock": "ticket"},
    {"vm.0.workload.think_ns": 5, "vm[a].workload": {"preset": "ebizzy"}},
])
def test_two_settings_that_reach_one_value_are_refused_rather_than_the_last_silently_winning(small, settings):
    first, later = settings
    with pytest.raises(vspin.ScenarioError, match=rf"settings {re.escape(first)} and {re.escape(later)}: "
                                                  rf"{re.escape(later)} would overwrite what {re.escape(first)} sets"):
        vspin.load_scenario(small, settings)


def test_a_file_whose_name_has_an_equals_sign_is_read_as_a_file(small, tmp_path):
    path = tmp_path / "ple=off.toml"
    path.write_text(small)
    assert vspin.load_scenario(str(path))["name"] == "small"


@pytest.mark.parametrize("scenario, message", [
    ({"duration_ms": float("nan")}, r"duration_ms: nan is not allowed; no field takes NaN or an infinity"),
    ({"duration_ms": float("inf")}, r"duration_ms: inf is not allowed; no field takes NaN or an infinity"),
    ({"vm": [{"name": float("nan")}]}, r"vm\[0\]\.name: nan is not allowed; no field takes NaN or an infinity"),
    ("duration_ms = 1979-05-27\n", r"duration_ms: 1979-05-27 is a TOML date or time"),
    ({"vm": [{"pin": [0, object()]}]}, r"vm\[0\]\.pin\[1\]: .*\(type object\) is not allowed"),
    (5, r"scenario: expected a file path, TOML text or a dict, got int"),
    ("", r"scenario: empty"),
])
def test_values_json_cannot_carry_are_named(scenario, message):
    with pytest.raises(vspin.ScenarioError, match=message):
        vspin.load_scenario(scenario)


def test_what_pythons_toml_parser_cannot_take_is_a_scenario_error_not_a_traceback():
    with pytest.raises(vspin.ScenarioError, match="nested too deep"):
        vspin.load_scenario("duration_ms = 10\nx = " + "[" * 600 + "]" * 600 + "\n")
    with pytest.raises(vspin.ScenarioError, match="more than 4300 digits"):
        vspin.load_scenario("seed = " + "9" * 5000 + "\n")
    with pytest.raises(vspin.ScenarioError, match=r"--set 'seed=9+': TOML: a whole number of more than 4300 digits"):
        parse_setting("seed=" + "9" * 5000)


def test_a_number_too_long_to_print_is_named_by_its_length(small):
    hexadecimal = "0x" + "f" * 4000  # TOML reads it without Python's 4300-digit limit on decimals
    assert "seed = 5\n" in small
    for scenario, settings in ((small.replace("seed = 5\n", f"seed = {hexadecimal}\n"), None), (small, {"seed": 10**5000})):
        with pytest.raises(vspin.ScenarioError, match=r"seed: a whole number of about [\d,]+ digits is out of range"):
            vspin.validate(scenario, settings)
    with pytest.raises(vspin.ScenarioError, match=r"timeline: .*got \(0, a whole number of about 5,001 digits\)"):
        vspin.run(small, timeline=(0, 10**5000))


def test_a_dict_scenario_that_json_cannot_carry_is_named(small):
    small = vspin.load_scenario(small)
    with pytest.raises(vspin.ScenarioError, match=r"scenario: the key \(1, 2\) is of type tuple"):
        vspin.run({**small, (1, 2): 2})
    itself = dict(small)
    itself["x"] = itself
    with pytest.raises(vspin.ScenarioError, match="a table that contains itself"):
        vspin.run(itself)
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(vspin.ScenarioError, match="nested more than 100"):
        vspin.run({**small, "x": deep})


def test_a_file_that_is_no_short_text_is_refused_without_reading_it_all(tmp_path):
    with pytest.raises(vspin.ScenarioError, match="longer than 16 MiB"):
        vspin.load_scenario(Path("/dev/zero"))


def test_a_named_pipe_that_nothing_writes_to_is_refused_without_waiting(tmp_path):
    pipe = tmp_path / "scenario.toml"
    os.mkfifo(pipe)
    with pytest.raises(vspin.ScenarioError, match="a named pipe that nothing writes to"):
        vspin.load_scenario(pipe)


def test_a_byte_order_mark_is_skipped(tmp_path):
    plain = tmp_path / "plain.toml"
    plain.write_text('duration_ms = 10\n[host]\ncores_per_socket = 2\n[[vm]]\nname = "a"\nvcpus = 2\nlock = "tas"\n'
                     'workload = { preset = "kernbench" }\n')
    marked = tmp_path / "marked.toml"
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    assert vspin.load_scenario(marked) == {**vspin.load_scenario(plain), "name": "marked"}


def test_an_unreadable_file_is_a_clear_error(tmp_path):
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00bin")
    with pytest.raises(vspin.ScenarioError, match="not UTF-8 text"):
        vspin.run(binary)
    with pytest.raises(vspin.ScenarioError, match="is a directory"):
        vspin.run(str(tmp_path))


def test_overrides_and_settings_are_checked_too(small):
    with pytest.raises(vspin.ScenarioError, match="duration_ms: nan is not allowed"):
        vspin.run(small, duration_ms=float("nan"))
    with pytest.raises(vspin.ScenarioError, match=r"vm\.\*\.vcpus: .*\(type object\)"):
        vspin.run(small, {"vm.*.vcpus": object()})


def test_settings_accept_the_bracket_notation_of_the_errors(small):
    assert vspin.load_scenario(small, {"vm[1].vcpus": 1})["vm"][1]["vcpus"] == 1


def test_a_vm_whose_name_holds_a_dot_is_named_in_brackets(small):
    data = vspin.load_scenario(small, {"vm.1.name": "db.prod"})
    assert vspin.load_scenario(data, {"vm[db.prod].lock": "tas"})["vm"][1]["lock"] == "tas"
    with pytest.raises(vspin.ScenarioError, match=r"vm\.db does not exist.*a name: a, \[db\.prod\]"):
        vspin.load_scenario(data, {"vm.db.prod.lock": "tas"})


@pytest.mark.parametrize("path", ["vm..lock", "vm[db.lock", "vm.]0.lock", ".seed", "vm[].lock"])
def test_a_setting_path_that_is_not_one_is_refused(small, path):
    with pytest.raises(vspin.ScenarioError, match="not a path; expected keys joined by dots"):
        vspin.load_scenario(small, {path: 1})


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, 10**23])
def test_a_whole_number_beyond_64_bits_is_named_not_read_as_a_float(small, value):
    with pytest.raises(vspin.ScenarioError, match=rf"seed: {value} is out of range.*a seed is 0..=18446744073709551615"):
        vspin.run(small, seed=value)


def test_a_field_given_a_number_beyond_64_bits_is_told_what_it_takes(small):
    with pytest.raises(vspin.ScenarioError, match=r"^vm\.\*\.vcpus: invalid value: integer `100000000000000000000`, "
                                                  r"expected a whole number, allowed 1..=256$"):
        vspin.run(small, {"vm.*.vcpus": 10**20})
    text = small.replace("cores_per_socket = 2", f"cores_per_socket = {-(10**20)}")
    with pytest.raises(vspin.ScenarioError, match=r"^host\.cores_per_socket: invalid value: integer `-100000000000000000000`"):
        vspin.run(text)
    # A field of floats: the core prints the clamped bound as an f64, and the value given is put back.
    with pytest.raises(vspin.ScenarioError, match=r"^duration_ms: 100000000000000000000000 is out of range; allowed up to"):
        vspin.run(small, {"duration_ms": 10**23})
    # The core's reason is kept where it has one.
    with pytest.raises(vspin.ScenarioError, match=r"halt_poll\.max_ns: KVM halt polling does not exist under scheduler"):
        vspin.run(small, {"hypervisor.scheduler": "credit1", "hypervisor.halt_poll.max_ns": 10**20})
    # Another VM's complaint is not taken for this one's.
    two_bad = vspin.load_scenario(small, {"vm.0.pin": [0, -5]})
    two_bad["vm"][1]["pin"] = [0, -(10**20)]
    with pytest.raises(vspin.ScenarioError, match=r"^vm\[1\]\.pin\[1\]: -100000000000000000000 is out of range; no field"):
        vspin.run(two_bad)
    # A document that cannot be copied for the probe keeps the plain message, not a traceback.
    with pytest.raises(vspin.ScenarioError, match=r"^seed: 100000000000000000000 is out of range"):
        vspin.validate({"seed": 10**20, "lock": threading.Lock()})


def test_a_timeline_window_is_checked(small):
    for window in ("0:5", {0, 5}, (0, 10**400), ("0", "5"), (True, 5)):
        with pytest.raises(vspin.ScenarioError, match=r"timeline: expected \(from_ms, to_ms\)"):
            vspin.run(small, timeline=window)
    with pytest.raises(vspin.ScenarioError, match="at or after the run's end"):
        vspin.run(small, timeline=(500, 600))


def test_a_whole_number_field_of_the_wrong_type_gives_its_range(small):
    with pytest.raises(vspin.ScenarioError, match=r"vm\[0\]\.vcpus: .*expected a whole number, allowed 1..=256"):
        vspin.run(small, {"vm.0.vcpus": -1})


def test_a_run_that_ends_early_says_why(small):
    text = vspin.run(small, {"vm.*.work_units": 50}).summary()
    assert "ended before duration_ms = 20: every VM with a work_units target finished" in text


@pytest.mark.parametrize("settings, message", [
    ([("seed", 1)], "settings: expected a dict"),
    ("seed=1", "settings: expected a dict"),
    ({1: 2}, "settings: a path must be a string"),
])
def test_settings_of_the_wrong_type_are_a_scenario_error(small, settings, message):
    with pytest.raises(vspin.ScenarioError, match=message):
        vspin.run(small, settings)


def test_numpy_values_are_plain_values_in_settings_and_overrides(small):
    np = pytest.importorskip("numpy")
    assert vspin.run(small, {"vm.0.vcpus": np.int64(1)}, seed=np.int64(3)).to_json() == \
        vspin.run(small, {"vm.0.vcpus": 1}, seed=3).to_json()
    assert vspin.validate(small, {"vm.0.pin": np.array([0, 1])})["vm"][0]["pin"] == [0, 1]
    assert vspin.validate(small, {"vm.0.pin": list(np.arange(2))})["vm"][0]["pin"] == [0, 1]


def test_a_setting_applied_to_every_entry_gives_each_its_own_copy(small):
    data = vspin.validate(small, {"vm.*.workload": {"preset": "hackbench"}, "vm.0.workload.cs_ns": 100})
    assert data["vm"][0]["workload"] == {"preset": "hackbench", "cs_ns": 100}
    assert data["vm"][1]["workload"] == {"preset": "hackbench"}


@pytest.mark.parametrize("text", ["vm.0.name=inf", "vm.0.name=nan"])
def test_a_setting_of_inf_or_nan_says_how_to_give_the_text(text):
    from vspin.scenario import parse_setting

    with pytest.raises(vspin.ScenarioError, match="for the text, quote it"):
        parse_setting(text)



def test_a_paravirtual_tlb_flush_is_checked_against_the_hypervisor(small):
    with pytest.raises(vspin.ScenarioError, match=r'vm\[0\]\.tlb_flush: "xen-pv" .*needs scheduler = "credit1", not "cfs"'):
        vspin.validate(small, {"vm.0.tlb_flush": "xen-pv"})
    xen = {"hypervisor.scheduler": "credit1", "vm.*.tlb_flush": "xen-pv"}
    with pytest.raises(vspin.ScenarioError, match=r'vm\[0\]\.tlb_flush: .*hypervisor\.ple\.policy is "fixed"'):
        vspin.validate(small, xen)
    assert vspin.validate(small, xen | {"hypervisor.ple.policy": "off"})["vm"][1]["tlb_flush"] == "xen-pv"
    with pytest.raises(vspin.ScenarioError, match=r'vm\[0\]\.tlb_flush: "kvm-pv" needs KVM'):
        vspin.validate(small, {"hypervisor.scheduler": "credit1", "vm.*.tlb_flush": "kvm-pv"})


def test_gang_scheduling_runs_from_python_and_refuses_kvm_balancing(small):
    r = vspin.run(small, {"hypervisor.scheduler": "gang", "duration_ms": 1000})
    a, b = (vm["throughput_per_s"] for vm in r.raw["vms"])
    assert a > 0 and abs(a / b - 1) < 0.1, (a, b)
    with pytest.raises(vspin.ScenarioError, match=r'hypervisor\.load_balance: does not apply under scheduler = "gang"'):
        vspin.validate(small, {"hypervisor.scheduler": "gang", "hypervisor.load_balance": "periodic"})
    with pytest.raises(vspin.ScenarioError, match=r'vm\[0\]\.vcpus: 4 vCPUs cannot run at once on 2 pCPUs'):
        vspin.validate(small, {"hypervisor.scheduler": "gang", "vm.0.vcpus": 4, "vm.0.pin": "none"})


def test_a_cpu_quota_throttles_the_vm_and_caps_its_cpu_time(examples):
    r = vspin.run(examples / "cpu-quota.toml", duration_ms=300)
    vm = r.vms.iloc[0]
    cpu_s = (vm["time_useful_ns"] + vm["time_spin_ns"] + vm["time_exit_ns"]) / 1e9
    assert vm["throttles"] > 0
    # 400 ms a period: the pool the run starts with and three refills (the first comes within
    # the first period), plus at most a tick per pCPU and period.
    assert cpu_s <= (1 + 3) * 0.4 + 8 * 3 * 0.004
    free = vspin.run(examples / "cpu-quota.toml", {"vm.0.cpu_max.quota_us": 1_600_000}, duration_ms=300)
    assert free.vms.iloc[0]["throttles"] == 0 and free.vms.iloc[0]["work_units"] > 1.5 * vm["work_units"]


def test_histograms_of_several_runs_add_up_bucket_by_bucket_in_order(small):
    runs = [vspin.run(small, seed=seed).raw["vms"][0]["lock_waits"] for seed in (1, 2)]
    merged = vspin.result.sum_histograms(runs)
    assert [b["from_ns"] for b in merged] == sorted({b["from_ns"] for run in runs for b in run})
    for key in ("acquisitions", "wait_ns"):
        assert sum(b[key] for b in merged) == sum(b[key] for run in runs for b in run)
    # The median of the merged waits lies between the two runs' own medians, as the
    # concatenated lists' did not have to (their buckets restart from 0 ns midway).
    halves = sorted(vspin.result.wait_quantile(run, 0.5)["from_ns"] for run in runs)
    assert halves[0] <= vspin.result.wait_quantile(merged, 0.5)["from_ns"] <= halves[1]
