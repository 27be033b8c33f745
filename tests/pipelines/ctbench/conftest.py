"""Shared fixtures of the ctbench tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]


def _load_base() -> dict:
    raw = yaml.safe_load((ROOT / "conf/base/parameters_ctbench.yml").read_text())["ctbench"]
    raw["data"]["cache"] = None
    return raw


@pytest.fixture
def ctbench_base() -> Callable[[], dict]:
    """A fresh copy of ``conf/base``'s ``ctbench`` parameters as plain data, without the MNIST
    cache, at every call (tests edit what they get)."""
    return _load_base
