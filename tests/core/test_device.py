import numpy as np
import pytest
import torch

from icml25.core.device import resolve_device, seed_everything, set_threads, thread_cap


def test_auto_resolves_to_an_available_device():
    device = resolve_device("auto")
    expected = "cuda" if torch.cuda.is_available() else (
        "mps" if torch.backends.mps.is_available() else "cpu")
    assert device.type == expected


def test_cpu_and_bad_names():
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="device: got 'gpu'"):
        resolve_device("gpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error")
def test_explicit_cuda_without_cuda_is_an_error():
    with pytest.raises(RuntimeError, match="no CUDA"):
        resolve_device("cuda")


def _draw(seed: int):
    rng = seed_everything(seed)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 1))
    out = net(torch.randn(16, 4))
    return rng.normal(size=3), np.random.rand(2), out.detach().numpy()


def test_same_seed_same_results_on_cpu():
    a, b = _draw(7), _draw(7)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    c = _draw(8)
    assert not np.array_equal(a[2], c[2])


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_bad_seed(bad):
    with pytest.raises(ValueError, match="seed"):
        seed_everything(bad)


def test_set_threads_roundtrip():
    before = torch.get_num_threads()
    try:
        assert set_threads(1) == 1
        assert set_threads(None) == 1
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ValueError):
        set_threads(-2)


def test_omp_num_threads_caps_the_torch_threads_a_node_asks_for(monkeypatch):
    assert thread_cap({}) is None and thread_cap({"OMP_NUM_THREADS": "x"}) is None
    assert thread_cap({"OMP_NUM_THREADS": "0"}) is None
    assert thread_cap({"OMP_NUM_THREADS": " 3 "}) == 3
    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("OMP_NUM_THREADS", "1")  # what a Dask worker starts with
        assert set_threads(2) == 1
        monkeypatch.delenv("OMP_NUM_THREADS")
        assert set_threads(2) == 2
    finally:
        torch.set_num_threads(before)
