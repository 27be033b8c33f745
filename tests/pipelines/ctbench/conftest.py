"""Shared fixtures of the ctbench tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def ctbench_base() -> dict:
    """``conf/base``'s ``ctbench`` parameters as plain data, without the MNIST cache."""
    raw = yaml.safe_load((ROOT / "conf/base/parameters_ctbench.yml").read_text())["ctbench"]
    raw["data"]["cache"] = None
    return raw
