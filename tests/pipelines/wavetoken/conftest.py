"""Fixtures of the wavetoken tests."""

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models are fastest on one thread; two on a shared 2-core machine are ~10x slower."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
