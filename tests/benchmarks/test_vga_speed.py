"""Speed and memory of the vga pipeline (run with `make bench`; never part of `make test`).

- images generated per second: instance generation with exact labels, layouts and PIL
  rendering of a balanced batch of shortest-path instances (three layouts per test graph);
- one training step of the default CNN and ViT on 1 and 2 threads;
- the whole default run (`kedro run --pipeline=vga`, conf/base): wall time and peak RSS in the
  benchmark's extra_info.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from icml25.pipelines.vga.generator import generate_task
from icml25.pipelines.vga.images import compute_layouts, render_images
from icml25.pipelines.vga.models import build_model
from icml25.pipelines.vga.render import RenderConfig


@pytest.mark.benchmark(group="vga-generation")
@pytest.mark.parametrize("task", ["shortest_path", "iso_hard"])
def test_images_generated_per_second(benchmark, task):
    cfg = RenderConfig(size=128)
    sizes = {"train": 64, "val": 16, "test": 32}
    protocol = {task: ("planar", ["planar", "random"]) if task.startswith("iso")
                else ("kk", ["kk", "planar", "random"])}
    counts = {}

    def once():
        graphs = generate_task(task, sizes, [8, 9], (0.2, 0.4), seed=0, progress=False)
        layouts = compute_layouts(graphs, protocol, cfg, progress=False)
        images = render_images(graphs, layouts, cfg, progress=False)
        counts["images"] = len(images)

    benchmark.pedantic(once, rounds=2, iterations=1)
    benchmark.extra_info["images_per_second"] = counts["images"] / benchmark.stats.stats.mean
    print(f"{task}: {benchmark.extra_info['images_per_second']:.0f} images/s")


@pytest.mark.benchmark(group="vga-train-step")
@pytest.mark.parametrize("kind", ["cnn", "vit"])
@pytest.mark.parametrize("threads", [1, 2])
def test_training_step_default_models(benchmark, kind, threads):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch.manual_seed(0)
        kw = ({"widths": [16, 32, 64, 128], "depths": [1, 1, 2, 1]} if kind == "cnn" else
              {"image_size": 128, "patch": 16, "dim": 96, "depth": 4, "heads": 4, "mlp": 192})
        model = build_model(kind, 2, **kw)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x, y = torch.rand(32, 1, 128, 128), torch.randint(0, 2, (32,))

        def step():
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()

        benchmark(step)
        benchmark.extra_info["images_per_second"] = 32 / benchmark.stats.stats.mean
    finally:
        torch.set_num_threads(before)


@pytest.mark.benchmark(group="default-run")
def test_default_run_wall_time_and_peak_memory(default_run):
    default_run("vga")
