from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def examples() -> Path:
    return ROOT / "examples"


@pytest.fixture
def docs() -> Path:
    return ROOT / "docs"


SMALL = """
name = "small"
seed = 5
duration_ms = 20
[host]
cores_per_socket = 2
[[vm]]
name = "a"
vcpus = 2
pin = "1:1"
lock = "pv-ticket"
workload = { preset = "kernbench" }
[[vm]]
name = "b"
vcpus = 2
pin = "1:1"
lock = "pv-ticket"
workload = { preset = "kernbench" }
"""


@pytest.fixture
def small() -> str:
    return SMALL
