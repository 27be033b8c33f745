import json
import math

import pytest
from pydantic import ValidationError

from icml25.core.claims import ClaimSpec, claims_report, evaluate_claim, metrics_report

METRICS = {
    "method": {"wql": [0.50, 0.52, 0.54], "acc": 0.9},
    "baseline": {"wql": [0.60, 0.61, 0.62], "acc": 0.8},
    "broken": {"wql": float("nan"), "acc": 0.1},
}


def test_lower_is_better_claim_on_seed_means():
    out = evaluate_claim(
        {"claim": "m beats b", "metric": "wql", "method": "method", "baseline": "baseline",
         "direction": "lower"}, METRICS)
    assert out["holds"] is True
    assert out["method_value"] == pytest.approx(0.52)
    assert out["baseline_value"] == pytest.approx(0.61)
    assert out["method_std"] == pytest.approx(0.02)
    assert out["n_seeds"] == 3
    assert set(out) >= {"claim", "metric", "method", "baseline", "method_value",
                        "baseline_value", "holds"}


def test_margin_and_direction():
    spec = {"claim": "c", "metric": "wql", "method": "method", "baseline": "baseline",
            "direction": "lower", "margin": 0.1}
    assert evaluate_claim(spec, METRICS)["holds"] is False  # 0.52 > 0.61 - 0.1
    higher = {"claim": "c", "metric": "acc", "method": "method", "baseline": "baseline",
              "direction": "higher"}
    assert evaluate_claim(higher, METRICS)["holds"] is True
    assert evaluate_claim({**higher, "method": "baseline", "baseline": "method"},
                          METRICS)["holds"] is False


def test_threshold_claim():
    spec = {"claim": "below 1.1", "metric": "wql", "method": "method", "threshold": 0.51,
            "direction": "lower"}
    out = evaluate_claim(spec, METRICS)
    assert out["holds"] is False and out["baseline"] == "threshold 0.51"


def test_nan_never_holds_and_json_has_no_nan():
    spec = {"claim": "c", "metric": "wql", "method": "broken", "baseline": "baseline",
            "direction": "lower"}
    assert evaluate_claim(spec, METRICS)["holds"] is False
    report = claims_report("demo", [spec], METRICS, {"env": "test"}, [0, 1, 2])
    text = json.dumps(report, allow_nan=False)
    assert json.loads(text)["claims"][0]["method_value"] is None


def test_missing_variant_or_metric_is_a_named_error():
    with pytest.raises(KeyError, match="variant 'nope'"):
        evaluate_claim({"claim": "c", "metric": "wql", "method": "nope", "baseline": "baseline",
                        "direction": "lower"}, METRICS)
    with pytest.raises(KeyError, match="metric 'mase' missing"):
        evaluate_claim({"claim": "c", "metric": "mase", "method": "method",
                        "baseline": "baseline", "direction": "lower"}, METRICS)


def test_spec_needs_exactly_one_reference():
    with pytest.raises(ValidationError, match="exactly one"):
        ClaimSpec(claim="c", metric="m", method="a", direction="lower")
    with pytest.raises(ValidationError, match="exactly one"):
        ClaimSpec(claim="c", metric="m", method="a", baseline="b", threshold=1.0,
                  direction="lower")


def test_reports_carry_run_info_and_counts():
    specs = [{"claim": "c1", "metric": "wql", "method": "method", "baseline": "baseline",
              "direction": "lower"},
             {"claim": "c2", "metric": "acc", "method": "baseline", "baseline": "method",
              "direction": "higher"}]
    report = claims_report("demo", specs, METRICS, {"env": "test", "date": "d"}, [0, 1, 2])
    assert report["pipeline"] == "demo" and report["run"]["seeds"] == [0, 1, 2]
    assert (report["n_holds"], report["n_claims"]) == (1, 2)
    with pytest.raises(ValueError, match="at least one claim"):
        claims_report("demo", [], METRICS, {}, [0])
    metrics = metrics_report("demo", METRICS, {"env": "test"}, [0, 1, 2])
    assert metrics["metrics"]["method"]["wql"] == pytest.approx(0.52)
    assert metrics["metrics"]["method"]["wql_std"] == pytest.approx(0.02)
    assert metrics["per_seed"]["baseline"]["wql"] == [0.60, 0.61, 0.62]
    assert metrics["metrics"]["broken"]["wql"] is None
    assert not math.isnan(metrics["metrics"]["method"]["acc"])
