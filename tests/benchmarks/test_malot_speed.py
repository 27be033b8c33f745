"""Speed and memory of the malot pipeline (run with `make bench`; never part of `make test`).

- MiniLean verifier throughput (proofs per second) per decision procedure, on the synthetic
  families' reference proofs (the issue's "verifier time per proof");
- statement parsing throughput on miniF2F (statements per second), where the shared copy exists;
- the LoT-Solver trained here: training steps per second and batched sampling throughput
  (generated tokens per second) at the default model size;
- the whole default run (`kedro run --pipeline=malot`, conf/base): wall time and peak RSS
  recorded in the benchmark's extra_info.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from icml25.pipelines.malot.lean_syntax import OutOfFragment, parse_expr, parse_statement
from icml25.pipelines.malot.minilean import lean_file, verify
from icml25.pipelines.malot.synthetic import FAMILIES, generate_theorems

MINIF2F = Path(os.environ.get("ICML25_MINIF2F") or Path(__file__).resolve().parents[2].parent
               / "shared/data/minif2f/minif2f_lean4.jsonl")


@pytest.fixture(scope="module")
def theorems() -> list[dict]:
    return generate_theorems(60, seed=11, prefix="bench")


@pytest.mark.benchmark(group="minilean-verify")
@pytest.mark.parametrize("family", FAMILIES)
def test_minilean_verifier_throughput(benchmark, theorems, family):
    codes = [lean_file(t["statement"], t["proof"]) for t in theorems if t["family"] == family]

    def run():
        return [verify(code)["complete"] for code in codes]

    assert all(benchmark(run))
    benchmark.extra_info["proofs_per_second"] = len(codes) / benchmark.stats.stats.mean


@pytest.mark.benchmark(group="minilean-parse")
@pytest.mark.skipif(not MINIF2F.exists(), reason="shared miniF2F copy absent")
def test_minif2f_statement_parsing_throughput(benchmark):
    statements = [json.loads(line)["formal_statement"]
                  for line in MINIF2F.read_text().splitlines() if line.strip()]

    def run():
        parse_expr.cache_clear()
        inside = 0
        for text in statements:
            try:
                parse_statement(text)
                inside += 1
            except OutOfFragment:
                pass
        return inside

    assert benchmark(run) > 100
    benchmark.extra_info["statements_per_second"] = len(statements) / benchmark.stats.stats.mean


@pytest.mark.benchmark(group="lot-solver")
def test_lot_solver_training_and_sampling_speed(benchmark, theorems):
    import time

    import torch

    from icml25.pipelines.malot import lot_model as L
    from icml25.pipelines.malot.params import LotParams
    from icml25.pipelines.malot.synthetic import correction_records

    torch.set_num_threads(1)
    p = LotParams()
    stages = L.stage_examples(theorems, correction_records(theorems, 1, 0))
    tok = L.LeanTokenizer.train([a + " " + b for v in stages.values() for a, b in v]
                                + [L.OPENER, L.PLACEHOLDER, L.CD_PLACEHOLDER])
    cfg = L.RecipeConfig(**{k: getattr(p, k) for k in L.RecipeConfig.__dataclass_fields__})
    cfg = L.RecipeConfig(**{**cfg.__dict__, "stage1_steps": 10, "stage2_steps": 30,
                            "stage3_steps": 20})
    start = time.perf_counter()
    models, _ = L.train_recipe(tok, stages, cfg, seed=0)
    steps = 10 + 30 + 2 * 20
    benchmark.extra_info["train_steps_per_second"] = steps / (time.perf_counter() - start)
    agent = L.LotAgent(models["full"], tok, 0, thought_tokens=p.thought_tokens,
                       proof_tokens=p.proof_tokens, batch_size=p.sample_batch)
    requests = [(t["statement"], 4) for t in theorems]
    benchmark.pedantic(lambda: agent.prove_many(requests), rounds=1, iterations=1)
    benchmark.extra_info["sampled_tokens_per_second"] = (agent.tokens_generated
                                                         / benchmark.stats.stats.mean)


@pytest.mark.benchmark(group="default-run")
def test_default_run_wall_time_and_peak_memory(default_run):
    default_run("malot", f"--params=malot.minif2f.path={MINIF2F}")
