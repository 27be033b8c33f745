from typing import Literal

import pytest
from pydantic import Field, model_validator

from icml25.core.params import ParameterError, ParamsModel, validate_parameters


class Model(ParamsModel):
    d_model: int = Field(gt=0)
    n_heads: int = 4


class Root(ParamsModel):
    seed: int = 0
    model: Model
    tokenizer: Literal["wavelet", "bins"] = "wavelet"


def test_valid_parameters_give_a_typed_object():
    p = validate_parameters(Root, {"model": {"d_model": 64}}, "demo")
    assert p.model.d_model == 64 and p.model.n_heads == 4 and p.tokenizer == "wavelet"


def test_bad_value_names_full_key_value_and_expectation():
    with pytest.raises(ParameterError) as err:
        validate_parameters(Root, {"model": {"d_model": -3}}, "wavetoken")
    msg = str(err.value)
    assert "wavetoken.model.d_model" in msg
    assert "-3" in msg
    assert "greater than 0" in msg


def test_unknown_missing_and_literal_errors_all_reported():
    with pytest.raises(ParameterError) as err:
        validate_parameters(Root, {"model": {"dmodel": 3}, "tokenizer": "haar"}, "wavetoken")
    msg = str(err.value)
    assert "wavetoken.model.dmodel: unexpected parameter" in msg
    assert "wavetoken.model.d_model: missing" in msg
    assert "wavetoken.tokenizer: got 'haar'" in msg


def test_missing_tree():
    with pytest.raises(ParameterError, match="wavetoken: no parameters"):
        validate_parameters(Root, None, "wavetoken")


class Checked(ParamsModel):
    low: int = 0
    high: int = 1
    tags: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _order(self) -> "Checked":
        if self.low >= self.high:
            raise ValueError(f"low {self.low} must be below high {self.high}")
        return self


def test_a_model_level_check_gives_its_reason_not_the_whole_tree():
    with pytest.raises(ParameterError) as err:
        validate_parameters(Checked, {"low": 5, "high": 2, "tags": ["x" * 50] * 20}, "room")
    msg = str(err.value)
    assert msg == "invalid parameters\n  room: low 5 must be below high 2"


def test_a_long_bad_value_is_cut():
    with pytest.raises(ParameterError) as err:
        validate_parameters(Checked, {"tags": "y" * 500}, "room")
    line = str(err.value).splitlines()[1].strip()
    assert line.startswith("room.tags: got 'yyy") and "..." in line and len(line) < 300
