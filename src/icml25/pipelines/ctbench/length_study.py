"""How long must ctbench train before its table describes converged models?

One cell of the study is one (method, training length, seed): the model is trained with the
pipeline's own nodes (``nodes.train_method``) and settings, at ε = 0.1, except for the schedule,
which scales with the length exactly as the default's does (ε ramp over epochs 1 to L/2, learning
rate x ``lr_decay`` at 70 % and 85 % of L), and certified with the default cascade
(``nodes.certify_method``). Cells are appended to a JSON file as they finish, so an interrupted
study resumes where it stopped; cells of a finished default run can be imported from its
``metrics.json`` (``--from-run``) instead of being trained twice.

The rule (:func:`convergence`): a length L is *converged* for a method when the mean over seeds
of the cascade-certified accuracy at 2L is less than ``tolerance`` points above the mean at L,
both over the same seeds. More training then no longer raises what the table reports by more than
the tolerance; a fall (over-fitting, an unlucky seed) counts as converged too, since training
longer does not help it.

    python -m icml25.pipelines.ctbench.length_study run --epochs 240 --seeds 1 2
    python -m icml25.pipelines.ctbench.length_study import data/08_reporting/ctbench/metrics.json
    python -m icml25.pipelines.ctbench.length_study report
    python -m icml25.pipelines.ctbench.length_study docs   # the tables in docs/papers/ctbench.md
"""

from __future__ import annotations

import argparse
import json
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

SETTING = "eps0_1"
METHODS = ("ibp", "crown_ibp", "sabr", "mtl_ibp")
DEFAULT_OUT = Path("results/ctbench/length_study.json")
TOLERANCE = 1.0   # points of certified accuracy


def schedule(epochs: int) -> dict[str, Any]:
    """The default schedule scaled to ``epochs``: ε ramp over the first half, decays at 70 / 85 %."""
    if epochs < 4:
        raise ValueError(f"epochs must be at least 4 for a ramp and two decays, got {epochs}")
    return {"epochs": epochs, "ramp_start": 1, "ramp_end": epochs // 2,
            "milestones": [round(0.7 * epochs), round(0.85 * epochs)]}


def cell_params(params: Mapping[str, Any], epochs: int, seed: int) -> dict[str, Any]:
    """``params:ctbench`` for one cell: one seed, the scaled schedule, ε = 0.3 off, and no
    method's ``epochs_scale`` (the cell's length is the whole length)."""
    p = json.loads(json.dumps(params))   # a deep copy of plain YAML data
    p["seeds"] = [seed]
    p["train"].update(schedule(epochs))
    for method in p.get("methods", {}).values():
        method.pop("epochs_scale", None)
    for name, setting in p["settings"].items():
        if name != SETTING:
            setting["enabled"] = False
        for override in setting.get("methods", {}).values():
            override.pop("epochs_scale", None)
    return p


def run_cell(split, params: Mapping[str, Any], method: str, epochs: int,
             seed: int) -> dict[str, Any]:
    """Train and certify one cell; its accuracies in % of the test images."""
    from icml25.pipelines.ctbench import nodes
    p = cell_params(params, epochs, seed)
    t0 = time.perf_counter()
    models = nodes.train_method(split, p, SETTING, method)
    table = nodes.certify_method(models, split, p, SETTING, method)
    meta = models[f"seed_{seed}"]["metadata"]
    return {"method": method, "epochs": epochs, "seed": seed,
            "nat": 100 * float(table["correct"].mean()),
            "cert": 100 * float(table["certified"].mean()),
            "ibp": 100 * float(table["ibp"].mean()),
            "pgd": 100 * float(table["pgd_robust"].mean()),
            "best_epoch": int(meta["best_epoch"]),
            "seconds": round(time.perf_counter() - t0, 1), "source": "length_study"}


def load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"setting": SETTING, "tolerance": TOLERANCE, "cells": []}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON ({err}); move it away to start a new study") \
            from err
    if not isinstance(data.get("cells"), list):
        raise ValueError(f"{path} has no list of cells; move it away to start a new study")
    return data


def save(path: Path, data: dict[str, Any]) -> None:
    """Write atomically: an interrupted write leaves the previous file intact."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data["cells"].sort(key=lambda c: (c["method"], c["epochs"], c["seed"]))
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)


def has_cell(data: Mapping[str, Any], method: str, epochs: int, seed: int) -> bool:
    return any((c["method"], c["epochs"], c["seed"]) == (method, epochs, seed)
               for c in data["cells"])


def run_variants(params: Mapping[str, Any]) -> dict[str, tuple[str, int]]:
    """The default run's variants at ε = 0.1 that are cells of the study: ``{variant: (method,
    epochs)}`` with the algorithm each trains and its length there (``epochs_scale`` applied);
    a variant whose (method, epochs) an earlier one already gives is left out."""
    from icml25.pipelines.ctbench.params import METHODS as VARIANTS
    from icml25.pipelines.ctbench.params import CtbenchParams
    p = CtbenchParams.model_validate(dict(params))
    out: dict[str, tuple[str, int]] = {}
    for variant in VARIANTS:
        cell = (p.algorithm(variant), p.train_for(SETTING, variant).epochs)
        if cell[0] in METHODS and cell not in out.values():
            out[variant] = cell
    return out


def cells_from_run(metrics: Mapping[str, Any],
                   variants: Mapping[str, tuple[str, int]]) -> list[dict[str, Any]]:
    """A finished default run's per-seed certified and natural accuracy: one cell per seed of
    every ``{variant: (method, epochs)}`` (:func:`run_variants`)."""
    per_seed = metrics.get("per_seed")
    seeds = metrics.get("run", {}).get("seeds")
    if not isinstance(per_seed, Mapping) or not seeds:
        raise ValueError("metrics.json has no per_seed table or no run.seeds")
    commit = metrics.get("run", {}).get("commit", "?")
    out = []
    for variant, (method, epochs) in variants.items():
        row = per_seed.get(variant, {})
        cert, nat = row.get(f"cert_acc_{SETTING}"), row.get(f"nat_acc_{SETTING}")
        if cert is None or nat is None:
            raise ValueError(f"metrics.json has no cert_acc_{SETTING} / nat_acc_{SETTING} "
                             f"per seed for {variant}")
        if len(cert) != len(seeds) or len(nat) != len(seeds):
            raise ValueError(f"{variant}: {len(cert)} per-seed values for {len(seeds)} seeds")
        out += [{"method": method, "epochs": int(epochs), "seed": int(s), "nat": float(n),
                 "cert": float(c), "source": f"default run {commit}"}
                for s, c, n in zip(seeds, cert, nat, strict=True)]
    return out


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return float("nan")
    m = _mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def convergence(cells: Iterable[Mapping[str, Any]],
                tolerance: float = TOLERANCE) -> list[dict[str, Any]]:
    """For every method and length L with 2L also measured: the mean gain in certified accuracy
    from L to 2L over the seeds measured at both, and whether it is below ``tolerance``."""
    table: dict[tuple[str, int], dict[int, float]] = {}
    for c in cells:
        table.setdefault((c["method"], int(c["epochs"])), {})[int(c["seed"])] = float(c["cert"])
    out = []
    for (method, length), at_l in sorted(table.items()):
        at_2l = table.get((method, 2 * length))
        if not at_2l:
            continue
        seeds = sorted(set(at_l) & set(at_2l))
        if not seeds:
            continue
        gains = [at_2l[s] - at_l[s] for s in seeds]
        gain = _mean(gains)
        out.append({"method": method, "epochs": length, "doubled": 2 * length, "seeds": seeds,
                    "cert": _mean([at_l[s] for s in seeds]),
                    "cert_doubled": _mean([at_2l[s] for s in seeds]),
                    "gain": gain, "gain_std": _std(gains),
                    "converged": gain < tolerance})
    return out


def _pm(mean: float, std: float, sign: str = "") -> str:
    """``mean ± std``; one seed has no spread."""
    return f"{mean:{sign}.1f}" + ("" if math.isnan(std) else f" ± {std:.1f}")


def report(data: Mapping[str, Any]) -> str:
    """Markdown: mean ± std per method and length, then the rule's verdict per doubling."""
    groups: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for c in data["cells"]:
        groups.setdefault((c["method"], int(c["epochs"])), []).append(c)
    lines = ["| method | epochs | seeds | certified % | natural % |", "|---|---|---|---|---|"]
    for (method, epochs), cs in sorted(groups.items()):
        cert, nat = [c["cert"] for c in cs], [c["nat"] for c in cs]
        seeds = ", ".join(str(c["seed"]) for c in sorted(cs, key=lambda c: c["seed"]))
        lines.append(f"| {method} | {epochs} | {seeds} | {_pm(_mean(cert), _std(cert))} "
                     f"| {_pm(_mean(nat), _std(nat))} |")
    tol = float(data.get("tolerance", TOLERANCE))
    lines += ["", f"| method | L -> 2L | seeds | gain in certified % (mean ± std) | "
                  f"converged (< {tol:g}) |", "|---|---|---|---|---|"]
    for r in convergence(data["cells"], tol):
        lines.append(f"| {r['method']} | {r['epochs']} -> {r['doubled']} | "
                     f"{', '.join(map(str, r['seeds']))} | {_pm(r['gain'], r['gain_std'], '+')} "
                     f"| {'yes' if r['converged'] else 'no'} |")
    return "\n".join(lines)


DOCS = Path("docs/papers/ctbench.md")
BLOCK = re.compile(r"(<!-- length-study -->\n)(?:.*?\n)?(<!-- /length-study -->)", re.S)


def render_docs(text: str, data: Mapping[str, Any]) -> str:
    """``text`` with its ``<!-- length-study -->`` block replaced by :func:`report`."""
    if not BLOCK.search(text):
        raise ValueError("no <!-- length-study --> ... <!-- /length-study --> block")
    return BLOCK.sub(lambda m: m.group(1) + report(data) + "\n" + m.group(2), text)


def _project_params(env: str | None) -> dict[str, Any]:
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project
    bootstrap_project(Path.cwd())
    with KedroSession.create(env=env) as session:
        return dict(session.load_context().params["ctbench"])


def _split(params: Mapping[str, Any]):
    from icml25.pipelines.ctbench import nodes
    return nodes.split_data(nodes.load_data(dict(params)), dict(params))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m icml25.pipelines.ctbench.length_study",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the study's JSON file")
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="train and certify the missing cells")
    run.add_argument("--epochs", type=int, nargs="+", required=True)
    run.add_argument("--seeds", type=int, nargs="+", required=True)
    run.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    run.add_argument("--env", default=None, help="Kedro env of the parameters (default: local)")
    imp = sub.add_parser("import", help="add a finished default run's cells")
    imp.add_argument("metrics", type=Path, help="data/08_reporting/ctbench/metrics.json")
    imp.add_argument("--env", default=None)
    sub.add_parser("report", help="print the tables")
    docs = sub.add_parser("docs", help="write the tables into the docs page's block")
    docs.add_argument("--page", type=Path, default=DOCS)
    args = ap.parse_args(argv)

    data = load(args.out)
    if args.cmd == "report":
        print(report(data))
        return 0
    if args.cmd == "docs":
        args.page.write_text(render_docs(args.page.read_text(), data))
        print(f"{args.page}: length-study tables written")
        return 0
    if args.cmd == "run":
        for e in args.epochs:
            schedule(e)   # refuse a bad length before loading anything or training
    params = _project_params(args.env)
    if args.cmd == "import":
        if not args.metrics.exists():
            raise SystemExit(f"{args.metrics} does not exist: run `kedro run --pipeline=ctbench`")
        new = cells_from_run(json.loads(args.metrics.read_text()), run_variants(params))
        data["cells"] = [c for c in data["cells"]
                         if not any((c["method"], c["epochs"], c["seed"])
                                    == (n["method"], n["epochs"], n["seed"]) for n in new)] + new
        save(args.out, data)
        print(f"{len(new)} cells imported into {args.out}")
        return 0
    todo = [(m, e, s) for e in args.epochs for m in args.methods for s in args.seeds
            if not has_cell(data, m, e, s)]
    if not todo:
        print(f"every requested cell is already in {args.out}")
        return 0
    split = _split(params)
    for method, epochs, seed in todo:
        cell = run_cell(split, params, method, epochs, seed)
        data = load(args.out)   # another process may have added cells meanwhile
        data["cells"].append(cell)
        save(args.out, data)
        print(json.dumps(cell), flush=True)
    print(report(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
