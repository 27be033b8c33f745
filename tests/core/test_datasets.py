import pytest
import torch

from icml25.core.datasets import OptionalJSONDataset, TorchModelDataset


def test_optional_json_missing_is_none_present_loads_corrupt_raises(tmp_path):
    ds = OptionalJSONDataset(filepath=str(tmp_path / "a" / "claims.json"))
    assert ds.load() is None
    ds.save({"pipeline": "x"})
    assert ds.load() == {"pipeline": "x"}
    (tmp_path / "a" / "claims.json").write_text("{not json")
    with pytest.raises(Exception, match=r"claims\.json"):
        ds.load()


def test_torch_model_roundtrip_keeps_tensors_and_metadata(tmp_path):
    net = torch.nn.Linear(3, 2)
    ds = TorchModelDataset(filepath=str(tmp_path / "m" / "model.safetensors"))
    ds.save({"state_dict": net.state_dict(), "metadata": {"config": {"d": 3}, "loss": [1.0]}})
    loaded = ds.load()
    assert loaded["metadata"] == {"config": {"d": 3}, "loss": [1.0]}
    clone = torch.nn.Linear(3, 2)
    clone.load_state_dict(loaded["state_dict"])
    torch.testing.assert_close(clone.weight, net.weight, rtol=0, atol=0)
    assert ds.exists()


def test_torch_model_errors_name_the_file(tmp_path):
    path = tmp_path / "bad.safetensors"
    ds = TorchModelDataset(filepath=str(path))
    with pytest.raises(Exception, match="does not exist"):
        ds.load()
    path.write_bytes(b"\x00\x01garbage")
    with pytest.raises(Exception, match=r"bad\.safetensors"):
        ds.load()
    with pytest.raises(Exception, match="state_dict"):
        ds.save({"weights": {}})
