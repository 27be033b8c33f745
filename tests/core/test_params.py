from typing import Literal

import pytest
from pydantic import Field

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
