"""The training-length study: its schedule, its convergence rule, resuming and importing."""

from __future__ import annotations

import json
import math

import pytest

from icml25.pipelines.ctbench import length_study as ls

pytestmark = pytest.mark.usefixtures("one_thread")


def _cell(method, epochs, seed, cert, nat=90.0):
    return {"method": method, "epochs": epochs, "seed": seed, "cert": cert, "nat": nat}


def test_schedule_scales_like_the_default():
    # conf/base's 120-epoch schedule is the 120 of this rule
    assert ls.schedule(120) == {"epochs": 120, "ramp_start": 1, "ramp_end": 60,
                                "milestones": [84, 102]}
    assert ls.schedule(240)["milestones"] == [168, 204]
    with pytest.raises(ValueError, match="epochs must be at least 4"):
        ls.schedule(3)


def test_convergence_pairs_seeds_and_uses_the_tolerance():
    cells = [_cell("ibp", 120, 0, 85.5), _cell("ibp", 120, 1, 80.0), _cell("ibp", 120, 2, 70.0),
             _cell("ibp", 240, 0, 86.6), _cell("ibp", 240, 1, 80.4),   # seed 2 not at 240
             _cell("sabr", 120, 0, 78.4), _cell("sabr", 240, 0, 75.9),
             _cell("mtl_ibp", 60, 0, 77.0)]                            # no 120: no row
    rows = {r["method"]: r for r in ls.convergence(cells, tolerance=1.0)}
    assert set(rows) == {"ibp", "sabr"}
    ibp = rows["ibp"]
    assert ibp["seeds"] == [0, 1]                     # only seeds measured at both lengths
    assert ibp["cert"] == pytest.approx((85.5 + 80.0) / 2)
    assert ibp["gain"] == pytest.approx((1.1 + 0.4) / 2)
    assert ibp["gain_std"] == pytest.approx(math.sqrt(2 * 0.35 ** 2))
    assert ibp["converged"]                           # 0.75 < 1
    assert not ls.convergence(cells, tolerance=0.5)[0]["converged"]
    assert rows["sabr"]["converged"] and rows["sabr"]["gain"] == pytest.approx(-2.5)
    assert math.isnan(rows["sabr"]["gain_std"])       # one seed: no spread


def test_cell_params_change_only_seed_schedule_and_settings():
    base = {"seeds": [0, 1, 2], "train": {"epochs": 30, "ramp_start": 1, "ramp_end": 15,
                                          "milestones": [21, 26], "lr": 5e-4},
            "settings": {"eps0_1": {"eps_test": 0.1}, "eps0_3": {"enabled": True}}}
    p = ls.cell_params(base, 240, 2)
    assert p["seeds"] == [2] and p["train"]["lr"] == 5e-4
    assert p["train"] | {} == {"lr": 5e-4, **ls.schedule(240)}
    assert p["settings"]["eps0_3"]["enabled"] is False and "enabled" not in p["settings"]["eps0_1"]
    assert base["seeds"] == [0, 1, 2] and base["train"]["epochs"] == 30   # not mutated


def test_cells_from_run_reads_per_seed_values_in_seed_order():
    variants = {"ibp": ("ibp", 120), "crown_ibp": ("crown_ibp", 120), "sabr": ("sabr", 120),
                "mtl_ibp": ("mtl_ibp", 480), "mtl_ibp_equal": ("mtl_ibp", 120)}
    per_seed = {m: {"cert_acc_eps0_1": [70.0 + i, 71.0 + i], "nat_acc_eps0_1": [90.0, 91.0]}
                for i, m in enumerate(variants)}
    metrics = {"run": {"seeds": [0, 1], "commit": "abc1234"}, "per_seed": per_seed}
    cells = ls.cells_from_run(metrics, variants)
    assert len(cells) == 2 * len(variants)
    sabr1 = next(c for c in cells if c["method"] == "sabr" and c["seed"] == 1)
    assert sabr1 == {"method": "sabr", "epochs": 120, "seed": 1, "nat": 91.0, "cert": 73.0,
                     "source": "default run abc1234"}
    # each variant's cells carry its own algorithm and length
    mtl = {(c["epochs"], c["seed"]): c["cert"] for c in cells if c["method"] == "mtl_ibp"}
    assert mtl == {(480, 0): 73.0, (480, 1): 74.0, (120, 0): 74.0, (120, 1): 75.0}
    del per_seed["ibp"]["nat_acc_eps0_1"]
    with pytest.raises(ValueError, match="nat_acc_eps0_1 per seed for ibp"):
        ls.cells_from_run(metrics, variants)
    with pytest.raises(ValueError, match="no per_seed table"):
        ls.cells_from_run({"run": {"seeds": [0]}}, variants)


def test_run_variants_follow_the_default_config(ctbench_base):
    # conf/base: every method at 120 epochs except mtl_ibp, stretched 4x at ε = 0.1; the
    # equal-budget twin is mtl_ibp's 120-epoch cell
    assert ls.run_variants(ctbench_base()) == {
        "ibp": ("ibp", 120), "crown_ibp": ("crown_ibp", 120), "sabr": ("sabr", 120),
        "mtl_ibp": ("mtl_ibp", 480), "mtl_ibp_equal": ("mtl_ibp", 120)}
    # without the stretch the twin repeats mtl_ibp's cell and is left out
    flat = ls.cell_params(ctbench_base(), 120, 0)
    assert "mtl_ibp_equal" not in ls.run_variants(flat)


def test_cell_params_drop_every_epochs_scale(ctbench_base):
    # a cell's length is its whole length: mtl_ibp's 4x stretch must not turn 240 into 960
    from icml25.pipelines.ctbench.params import CtbenchParams
    p = CtbenchParams.model_validate(ls.cell_params(ctbench_base(), 240, 1))
    assert {m: p.train_for("eps0_1", m).epochs for m in p.methods} == dict.fromkeys(p.methods,
                                                                                    240)


def test_a_corrupt_study_file_is_refused_and_kept(tmp_path):
    path = tmp_path / "study.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        ls.load(path)
    assert path.read_text() == "{not json"
    assert ls.load(tmp_path / "absent.json")["cells"] == []


def test_run_trains_missing_cells_only_and_resumes(kedro_project, capsys):
    out = kedro_project / "study.json"
    args = ["--out", str(out), "run", "--epochs", "4", "--seeds", "0", "--methods", "ibp",
            "--env", "test"]
    assert ls.main(args) == 0
    cells = json.loads(out.read_text())["cells"]
    assert len(cells) == 1
    c = cells[0]
    assert (c["method"], c["epochs"], c["seed"], c["source"]) == ("ibp", 4, 0, "length_study")
    # the cascade certifies at least what IBP does, and never more than PGD leaves robust
    assert 0 <= c["ibp"] <= c["cert"] <= c["pgd"] <= c["nat"] <= 100
    capsys.readouterr()
    assert ls.main(args) == 0                         # nothing left to train
    assert "already in" in capsys.readouterr().out
    assert json.loads(out.read_text())["cells"] == cells
    assert ls.main(["--out", str(out), "report"]) == 0
    assert "| ibp | 4 | 0 |" in capsys.readouterr().out


def test_a_bad_length_is_refused_before_training(kedro_project):
    out = kedro_project / "study.json"
    with pytest.raises(ValueError, match="epochs must be at least 4"):
        ls.main(["--out", str(out), "run", "--epochs", "8", "2", "--seeds", "0", "--env", "test"])
    assert not out.exists()


def test_the_docs_page_shows_the_committed_study():
    # docs/papers/ctbench.md's tables are the report of results/ctbench/length_study.json
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    data = ls.load(root / ls.DEFAULT_OUT)
    assert data["cells"], "results/ctbench/length_study.json has no cells"
    page = (root / ls.DOCS).read_text()
    assert ls.render_docs(page, data) == page, (
        "docs/papers/ctbench.md is stale: python -m icml25.pipelines.ctbench.length_study docs")
    with pytest.raises(ValueError, match="no <!-- length-study -->"):
        ls.render_docs("no block here", data)
