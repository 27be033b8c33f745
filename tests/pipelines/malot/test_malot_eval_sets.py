"""Run-to-run reproducibility of the LoT-Solver evaluation: a synthetic theorem's samples and
verdicts depend on the seeds and the theorem, not on which other theorems are evaluated beside it.
Whether the miniF2F file is found (``malot.minif2f.path`` is resolved from the working directory,
so a run from another directory can miss it) once changed every synthetic LoT number, because one
sampling generator per (seed, variant) was shared by both evaluation sets."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from icml25.pipelines.malot import nodes
from icml25.pipelines.malot.synthetic import generate_theorems

pytestmark = pytest.mark.usefixtures("one_thread")
ROOT = Path(__file__).resolve().parents[3]


def _merge(a: dict, b: dict) -> dict:
    return {**a, **{k: _merge(a[k], v) if isinstance(v, dict) and isinstance(a.get(k), dict)
                    else v for k, v in b.items()}}


@pytest.fixture(scope="module")
def trained():
    base = yaml.safe_load((ROOT / "conf/base/parameters_malot.yml").read_text())["malot"]
    test = yaml.safe_load((ROOT / "conf/test/parameters_malot.yml").read_text())["malot"]
    p = _merge(base, test) | {"seeds": [0], "progress": False}
    p["lot"] = p["lot"] | {"stage1_steps": 2, "stage2_steps": 2, "stage3_steps": 2}
    theorems, corrections = nodes.generate_synthetic(p)
    bundle, _ = nodes.train_lot_solver(theorems, corrections, p, 0, 1)
    return p, theorems, bundle


def _minif2f(n: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``n`` in-fragment statements standing in for miniF2F's test split (names unique to it)."""
    rows = [{"split": "test", "name": f"mf_{t['name']}", "statement": t["statement"],
             "nl": t["nl"]} for t in generate_theorems(n, 99, "mf")]
    table = pd.DataFrame(rows)
    coverage = table[["name", "split"]].assign(in_fragment=True)
    return table, coverage


def test_synthetic_results_do_not_depend_on_minif2f_joining(trained):
    p, theorems, bundle = trained
    empty = pd.DataFrame(columns=["split", "name", "statement", "nl"])
    no_cov = pd.DataFrame(columns=["name", "split", "in_fragment"])
    mf, cov = _minif2f(6)
    cols = ["variant", "seed", "name", "generations", "solved_round"]
    a0, s0 = nodes.run_lot_variants(bundle, theorems, empty, no_cov, p)
    a1, s1 = nodes.run_lot_variants(bundle, theorems, mf, cov, p)
    assert set(s1["set"]) == {"synthetic", "minif2f"} and set(s0["set"]) == {"synthetic"}
    syn1 = s1[s1["set"] == "synthetic"].reset_index(drop=True)
    pd.testing.assert_frame_equal(s0[cols], syn1[cols])
    proofs0 = a0[["variant", "name", "round", "proof"]].reset_index(drop=True)
    proofs1 = a1.loc[a1["set"] == "synthetic", ["variant", "name", "round", "proof"]]
    pd.testing.assert_frame_equal(proofs0, proofs1.reset_index(drop=True))
    # and the same call twice gives the same rows (no clock, thread or hash dependence here)
    pd.testing.assert_frame_equal(s1, nodes.run_lot_variants(bundle, theorems, mf, cov, p)[1])
