import pytest

import vspin


def test_run_returns_metrics_and_dataframes(small):
    r = vspin.run(small)
    assert list(r.vms["name"]) == ["a", "b"]
    for col in ("throughput_per_s", "time_useful_ns", "time_waiting_ns", "halt_exits", "lwp_events"):
        assert col in r.vms.columns
    assert len(r.vcpus) == 4
    assert r.totals["acquisitions"] == r.vms["acquisitions"].sum() > 0


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
    with pytest.raises(vspin.ScenarioError, match=r'vm\[0\]\.lock: .*"tas", "ticket", "pv-ticket"'):
        vspin.run(small.replace('"pv-ticket"', '"mcs"'))


def test_negative_duration_is_rejected(small):
    with pytest.raises(vspin.ScenarioError, match="duration_ms"):
        vspin.validate(small, duration_ms=-1)


def test_missing_file_is_a_clear_error():
    with pytest.raises(vspin.ScenarioError, match="not found"):
        vspin.run("no/such/scenario.toml")


def test_toml_syntax_error_is_a_scenario_error():
    with pytest.raises(vspin.ScenarioError, match="TOML syntax"):
        vspin.run("duration_ms = = 3\n")


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
    with pytest.raises(vspin.ScenarioError, match=r"vm\.5 does not exist; the list has 2 entries"):
        vspin.load_scenario(small, {"vm.5.lock": "tas"})
