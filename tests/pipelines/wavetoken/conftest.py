"""Fixtures of the wavetoken tests."""

import pytest


@pytest.fixture(autouse=True)
def _wavetoken_tests_use_one_thread(one_thread):
    """Every wavetoken test module runs torch on one thread (``one_thread`` in tests/conftest)."""
