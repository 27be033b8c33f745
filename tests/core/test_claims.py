"""Known answers of the claim engine on constructed data: each relation, each verdict."""

import json
import math

import jsonschema
import numpy as np
import pytest
from pydantic import ValidationError
from scipy import stats

from icml25.core.claims import (
    ClaimError,
    ClaimSpec,
    claims_report,
    claims_schema,
    evaluate_claim,
    metrics_report,
    verdict_counts,
    with_unit_values,
)

# lower is better ("wql"); per seed
METRICS = {
    "method": {"wql": [0.50, 0.52, 0.54, 0.51, 0.53], "acc": [0.9] * 5},
    "baseline": {"wql": [0.60, 0.61, 0.62, 0.60, 0.63], "acc": [0.8] * 5},
    "twin": {"wql": [0.50, 0.52, 0.54, 0.51, 0.53], "acc": [0.9] * 5},
    "noisy": {"wql": [0.40, 0.70, 0.45, 0.62, 0.55], "acc": [0.9] * 5},
    "one_seed": {"wql": 0.55, "acc": 0.9},
    "broken": {"wql": [0.5, math.nan, 0.5, 0.5, 0.5], "acc": [0.9] * 5},
}


def claim(**kw):
    base = {"claim": "c", "metric": "wql", "method": "method", "baseline": "baseline",
            "relation": "better", "direction": "lower"}
    return {**base, **kw}


def test_clear_win_holds_with_the_paired_t_interval():
    out = evaluate_claim(claim(), METRICS)
    d = np.subtract(METRICS["method"]["wql"], METRICS["baseline"]["wql"])
    half = stats.t.ppf(0.9, 4) * d.std(ddof=1) / math.sqrt(5)
    assert out["verdict"] == "holds" and out["holds"] is True
    assert out["difference"] == pytest.approx(d.mean())
    assert (out["ci_low"], out["ci_high"]) == pytest.approx((d.mean() - half, d.mean() + half))
    assert (out["n_pairs"], out["n_seeds"], out["test"], out["ci_level"]) == (5, 5, "t", 0.9)
    assert out["method_value"] == pytest.approx(0.52)
    assert out["baseline_value"] == pytest.approx(0.612)


def test_clear_loss_fails_and_the_direction_matters():
    assert evaluate_claim(claim(method="baseline", baseline="method"), METRICS)["verdict"] == "fails"
    higher = claim(metric="acc", direction="higher")
    assert evaluate_claim(higher, METRICS)["verdict"] == "holds"
    assert evaluate_claim({**higher, "method": "baseline", "baseline": "method"},
                          METRICS)["verdict"] == "fails"


def test_a_tie_is_not_better():
    """Identical values on every seed: no spread, the difference is exactly 0, and 'strictly
    better' is contradicted, not merely unproven."""
    out = evaluate_claim(claim(baseline="twin"), METRICS)
    assert out["verdict"] == "fails" and not out["holds"]
    assert out["difference"] == 0 and out["ci_low"] == out["ci_high"] == 0
    tie_threshold = claim(baseline=None, threshold=0.9, metric="acc", direction="lower")
    assert evaluate_claim(tie_threshold, METRICS)["verdict"] == "fails"  # 0.9 is not below 0.9


def test_noisy_small_difference_is_inconclusive():
    out = evaluate_claim(claim(method="noisy"), METRICS)  # mean 0.544 vs 0.612, sd of d ~0.12
    assert out["difference"] < 0  # the mean favours the method...
    assert out["verdict"] == "inconclusive" and not out["holds"]  # ...inside the seed spread
    assert out["ci_low"] < 0 < out["ci_high"]
    assert "no difference" in out["reason"]


def test_margin_of_a_better_claim_is_required_improvement():
    # the method improves by 0.092 on average; "better by more than 0.2" is contradicted
    assert evaluate_claim(claim(margin=0.2), METRICS)["verdict"] == "fails"
    assert evaluate_claim(claim(margin=0.05), METRICS)["verdict"] == "holds"


def test_no_worse_within_a_margin():
    # baseline vs method: the baseline is worse by ~0.092 wql
    spec = claim(method="baseline", baseline="method", relation="no_worse")
    assert evaluate_claim({**spec, "margin": 0.2}, METRICS)["verdict"] == "holds"
    assert evaluate_claim({**spec, "margin": 0.05}, METRICS)["verdict"] == "fails"
    assert evaluate_claim({**spec, "margin": 0.09}, METRICS)["verdict"] == "inconclusive"
    # a tie is non-inferior for any positive margin
    assert evaluate_claim({**spec, "baseline": "twin", "method": "method", "margin": 0.01},
                          METRICS)["verdict"] == "holds"


def test_equivalence_inside_and_outside_the_margin_tost():
    inside = claim(baseline="twin", relation="within", direction=None, margin=0.01)
    assert evaluate_claim(inside, METRICS)["verdict"] == "holds"
    outside = claim(relation="within", direction=None, margin=0.02)  # |d| ~ 0.09 > 0.02
    assert evaluate_claim(outside, METRICS)["verdict"] == "fails"
    straddle = claim(method="noisy", relation="within", direction=None, margin=0.1)
    out = evaluate_claim(straddle, METRICS)
    assert out["verdict"] == "inconclusive" and "±0.1" in out["reason"]


def test_equivalence_to_a_threshold():
    # chance-level accuracy: 0.5 ± 0.05
    metrics = {"m": {"acc": [0.49, 0.51, 0.50, 0.52, 0.48]}, "far": {"acc": [0.7, 0.72, 0.69]}}
    spec = {"claim": "at chance", "metric": "acc", "method": "m", "threshold": 0.5,
            "relation": "within", "margin": 0.05}
    assert evaluate_claim(spec, metrics)["verdict"] == "holds"
    assert evaluate_claim({**spec, "method": "far"}, metrics)["verdict"] == "fails"


def test_threshold_claim_is_a_one_sample_test():
    spec = claim(baseline=None, threshold=0.6)
    out = evaluate_claim(spec, METRICS)
    assert out["verdict"] == "holds" and out["baseline"] == "threshold 0.6"
    assert evaluate_claim({**spec, "threshold": 0.4}, METRICS)["verdict"] == "fails"
    assert evaluate_claim({**spec, "threshold": 0.52}, METRICS)["verdict"] == "inconclusive"


def test_unequal_seeds_are_refused_naming_claim_and_variants():
    with pytest.raises(ClaimError, match=r"claim 'c': 'method' has 5 seed\(s\) and 'one_seed' 1"):
        evaluate_claim(claim(baseline="one_seed"), METRICS)
    seeds_of = {"method": [0, 1, 2, 3, 4], "baseline": [0, 1, 2, 3, 5]}
    with pytest.raises(ClaimError, match="ran seeds"):
        evaluate_claim(claim(), METRICS, seeds_of=seeds_of)


def test_unpaired_comparison_only_when_asked_welch():
    out = evaluate_claim(claim(baseline="one_seed", paired=False), METRICS)
    assert out["verdict"] == "inconclusive" and "at least 2 seeds" in out["reason"]
    a, b = METRICS["method"]["wql"], METRICS["noisy"]["wql"][:4]
    metrics = {"a": {"wql": a}, "b": {"wql": b}}
    out = evaluate_claim(claim(method="a", baseline="b", paired=False), metrics)
    va, vb = np.var(a, ddof=1) / 5, np.var(b, ddof=1) / 4
    dof = (va + vb) ** 2 / (va**2 / 4 + vb**2 / 3)
    half = stats.t.ppf(0.9, dof) * math.sqrt(va + vb)
    diff = np.mean(a) - np.mean(b)
    assert out["test"] == "welch" and out["n_pairs"] == 0
    assert (out["ci_low"], out["ci_high"]) == pytest.approx((diff - half, diff + half))


def test_nan_is_never_holds():
    out = evaluate_claim(claim(method="broken"), METRICS)
    assert out["verdict"] == "inconclusive" and not out["holds"]
    assert "NaN" in out["reason"] and "broken" in out["reason"]
    out = evaluate_claim(claim(method="broken", baseline=None, threshold=10.0), METRICS)
    assert out["verdict"] == "inconclusive"
    report = claims_report("demo", [claim(method="broken")], METRICS, {"env": "test"}, [0])
    text = json.dumps(report, allow_nan=False)
    assert json.loads(text)["claims"][0]["ci_low"] is None


def test_one_pair_is_inconclusive_unless_exact():
    metrics = {"a": {"m": 1.0}, "b": {"m": 2.0}}
    out = evaluate_claim(claim(metric="m", method="a", baseline="b"), metrics)
    assert out["verdict"] == "inconclusive" and "one pair" in out["reason"]
    exact = evaluate_claim(claim(metric="m", method="a", baseline="b", test="exact"), metrics)
    assert exact["verdict"] == "holds" and exact["ci_low"] == exact["ci_high"] == -1.0


def test_exact_refuses_a_noisy_metric():
    with pytest.raises(ClaimError, match="vary across seeds"):
        evaluate_claim(claim(test="exact"), METRICS)
    same = {"a": {"n": [3.0, 3.0, 3.0]}}
    spec = {"claim": "c", "metric": "n", "method": "a", "threshold": 3.0, "relation": "better",
            "direction": "lower", "test": "exact"}
    assert evaluate_claim(spec, same)["verdict"] == "fails"  # 3 is not below 3


def test_units_pair_by_name_and_average_seeds_first():
    # three datasets, two seeds: the pairs are the 3 dataset means, not 6 values
    metrics = {
        "m": {"log_wql": {"d1": [0.1, 0.3], "d2": [0.0, 0.2], "d3": [0.5, 0.7]}},
        "b": {"log_wql": {"d3": [0.9, 1.1], "d1": [0.4, 0.6], "d2": [0.3, 0.5]}},
    }
    spec = claim(metric="log_wql", method="m", baseline="b", unit="dataset")
    out = evaluate_claim(spec, metrics)
    assert out["n_pairs"] == 3 and out["n_seeds"] == 2 and out["unit"] == "dataset"
    assert out["difference"] == pytest.approx(-1 / 3)
    d = np.array([-0.3, -0.3, -0.4])
    half = stats.t.ppf(0.9, 2) * d.std(ddof=1) / math.sqrt(3)
    assert (out["ci_low"], out["ci_high"]) == pytest.approx((d.mean() - half, d.mean() + half))
    assert out["verdict"] == "holds"


def test_unit_claims_also_need_the_seeds_to_agree():
    """Every one of 50 items favours the method with seed 0 and the baseline with seed 1, each
    by a little more: across items (seed-averaged) the method wins clearly, across the three
    seeds the sign is not settled, so the claim is inconclusive, with both intervals shown."""
    rng = np.random.default_rng(0)
    n = 50
    base = rng.normal(size=n)
    seed_effect = np.array([-1.0, 0.8, -0.2])  # method - baseline per seed, mean -0.133
    noise = 0.01 * rng.normal(size=(3, n))
    m = {str(i): list(base[i] + seed_effect + noise[:, i]) for i in range(n)}
    b = {str(i): [base[i]] * 3 for i in range(n)}
    spec = claim(metric="x", method="m", baseline="b", unit="item")
    out = evaluate_claim(spec, {"m": {"x": m}, "b": {"x": b}})
    unit_lo, unit_hi = out["ci_units"]
    seed_lo, seed_hi = out["ci_seeds"]
    assert unit_hi < 0  # across items alone: certain
    assert seed_lo < 0 < seed_hi  # across seeds: not
    assert (out["ci_low"], out["ci_high"]) == (min(unit_lo, seed_lo), max(unit_hi, seed_hi))
    assert out["verdict"] == "inconclusive"
    assert "across items alone the claim holds, but not across the 3 seeds" in out["reason"]
    # consistent seeds: the envelope changes nothing
    consistent = {str(i): list(base[i] - 0.5 + noise[:, i]) for i in range(n)}
    out = evaluate_claim(spec, {"m": {"x": consistent}, "b": {"x": b}})
    assert out["verdict"] == "holds" and out["ci_seeds"][1] < 0
    # one seed per unit: no seed interval can be formed
    one = evaluate_claim(spec, {"m": {"x": {k: v[:1] for k, v in m.items()}},
                                "b": {"x": {k: v[:1] for k, v in b.items()}}})
    assert one["ci_seeds"] is None and one["ci_units"] is not None
    assert evaluate_claim(claim(), METRICS)["ci_units"] is None


def test_units_must_match_and_be_declared():
    metrics = {"m": {"x": {"d1": [1.0], "d2": [1.0]}}, "b": {"x": {"d1": [2.0], "d3": [2.0]}},
               "c": {"x": {"d1": [1.0, 2.0], "d2": [1.0, 2.0]}}}
    with pytest.raises(ClaimError, match="different datasets"):
        evaluate_claim(claim(metric="x", method="m", baseline="b", unit="dataset"), metrics)
    with pytest.raises(ClaimError, match="same seeds"):
        evaluate_claim(claim(metric="x", method="m", baseline="c", unit="dataset"), metrics)
    with pytest.raises(ClaimError, match="has no 'unit'"):
        evaluate_claim(claim(metric="x", method="m", baseline="c"), metrics)


def test_bootstrap_needs_enough_pairs_and_agrees_with_t_on_many():
    rng = np.random.default_rng(3)
    few = {"a": {"x": list(rng.normal(size=5))}, "b": {"x": list(rng.normal(size=5))}}
    out = evaluate_claim(claim(metric="x", method="a", baseline="b", test="bootstrap"), few)
    assert out["verdict"] == "inconclusive" and "at least 10 pairs" in out["reason"]
    n = 400  # per-item 0/1 correctness: the method right on 70 %, the baseline on 60 %
    a = (rng.random(n) < 0.7).astype(float)
    b = (rng.random(n) < 0.6).astype(float)
    metrics = {"a": {"acc": {str(i): [a[i]] for i in range(n)}},
               "b": {"acc": {str(i): [b[i]] for i in range(n)}}}
    spec = claim(metric="acc", method="a", baseline="b", direction="higher", unit="item",
                 test="bootstrap")
    boot = evaluate_claim(spec, metrics)
    t = evaluate_claim({**spec, "test": "t"}, metrics)
    assert boot["n_pairs"] == n
    assert boot["ci_low"] == pytest.approx(t["ci_low"], abs=0.01)
    assert boot["ci_high"] == pytest.approx(t["ci_high"], abs=0.01)
    assert evaluate_claim(spec, metrics) == boot  # a fixed generator: the same verdict each run


def test_round_off_at_the_boundary_does_not_decide_a_verdict():
    """A bootstrap quantile of 4.4e-19 for what is exactly 0 (seed-averaged 0/1 correctness:
    sums of thirds) touches the boundary: it is not evidence of 'better'."""
    from icml25.core.claims import _verdict

    assert _verdict("better", "higher", 0.0, 4.4e-19, 0.0093)[0] == "holds"  # no tolerance
    assert _verdict("better", "higher", 0.0, 4.4e-19, 0.0093, tol=1e-9)[0] == "inconclusive"
    assert _verdict("within", None, 0.5, -0.5 + 1e-12, 0.1, tol=1e-9)[0] == "inconclusive"
    # 0.1 + 0.2 - 0.3 = 5.6e-17: a tie at a threshold, not a win
    tie = evaluate_claim(claim(baseline=None, threshold=0.1 + 0.2, metric="x", test="exact",
                               direction="lower"), {"method": {"x": [0.3]}})
    assert tie["difference"] != 0 and tie["verdict"] == "fails"


def test_confidence_level_widens_the_interval():
    narrow = evaluate_claim(claim(method="noisy"), METRICS, confidence=0.6)
    wide = evaluate_claim(claim(method="noisy"), METRICS, confidence=0.99)
    assert wide["ci_low"] < narrow["ci_low"] and wide["ci_high"] > narrow["ci_high"]
    with pytest.raises(ClaimError, match=r"\(0.5, 1\)"):
        evaluate_claim(claim(), METRICS, confidence=0.3)


def test_spec_validation():
    with pytest.raises(ValidationError, match="exactly one"):
        ClaimSpec(claim="c", metric="m", method="a", relation="better", direction="lower")
    with pytest.raises(ValidationError, match="needs a 'direction'"):
        ClaimSpec(claim="c", metric="m", method="a", baseline="b", relation="better")
    with pytest.raises(ValidationError, match="needs a 'margin' > 0"):
        ClaimSpec(claim="c", metric="m", method="a", baseline="b", relation="within")
    with pytest.raises(ValidationError, match="needs a 'margin' > 0"):
        ClaimSpec(claim="c", metric="m", method="a", baseline="b", relation="no_worse",
                  direction="lower")
    with pytest.raises(ValidationError, match="relation"):
        ClaimSpec(claim="c", metric="m", method="a", baseline="b", direction="lower")
    with pytest.raises(ValidationError, match="threshold claim has one"):
        ClaimSpec(claim="c", metric="m", method="a", threshold=1.0, relation="better",
                  direction="lower", paired=False)


def test_missing_variant_or_metric_is_a_named_error():
    with pytest.raises(KeyError, match="variant 'nope'"):
        evaluate_claim(claim(method="nope"), METRICS)
    with pytest.raises(KeyError, match="metric 'mase' missing"):
        evaluate_claim(claim(metric="mase"), METRICS)


def test_report_follows_the_schema_and_counts_verdicts():
    specs = [claim(), claim(method="baseline", baseline="method"), claim(method="noisy"),
             claim(method="broken")]
    report = claims_report("demo", specs, METRICS, {"env": "test", "date": "d", "commit": "abc"},
                           [0, 1, 2, 3, 4], confidence=0.9)
    jsonschema.validate(report, claims_schema())
    assert report["counts"] == {"holds": 1, "fails": 1, "inconclusive": 2}
    assert (report["n_holds"], report["n_fails"], report["n_inconclusive"],
            report["n_claims"]) == (1, 1, 2, 4)
    assert verdict_counts(report["claims"]) == report["counts"]
    assert report["run"]["seeds"] == [0, 1, 2, 3, 4] and report["confidence"] == 0.9
    broken = dict(report, claims=[{**report["claims"][0], "verdict": "maybe"}])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, claims_schema())


def test_metrics_report_summarises_seeds_and_keeps_units_apart():
    metrics = {"m": {"wql": [0.5, 0.7], "log_wql": {"d1": [0.1, 0.2]}}}
    report = metrics_report("demo", metrics, {"env": "test"}, [0, 1])
    assert report["metrics"]["m"]["wql"] == pytest.approx(0.6)
    assert report["metrics"]["m"]["wql_std"] == pytest.approx(np.std([0.5, 0.7], ddof=1))
    assert "log_wql" not in report["metrics"]["m"]
    assert report["per_unit"]["m"]["log_wql"] == {"d1": [0.1, 0.2]}
    assert report["per_seed"]["m"]["wql"] == [0.5, 0.7]


def test_with_unit_values_swaps_in_the_per_unit_metric_of_unit_claims_only():
    specs = [claim(metric="acc", unit="image", direction="higher"), claim()]
    per_unit = {"method": {"acc": {"0": [1.0], "1": [0.0]}},
                "baseline": {"acc": {"0": [0.0], "1": [0.0]}}}
    out = with_unit_values(specs, METRICS, per_unit, "demo")
    assert out["method"]["acc"] == {"0": [1.0], "1": [0.0]}
    assert out["method"]["wql"] == METRICS["method"]["wql"]  # the seed claim keeps its values
    assert METRICS["method"]["acc"] == [0.9] * 5  # the input is not modified
    with pytest.raises(ClaimError, match=r"demo claim 'c': no per-image values of 'acc' for "
                                         r"'baseline'; per-image metrics of 'baseline': \[\]"):
        with_unit_values(specs, METRICS, {"method": per_unit["method"]}, "demo")
