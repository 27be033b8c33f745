"""SoftShape's mathematics against hand computations and the reference code's known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from icml25.pipelines.softshape.classifiers import (
    TrainSettings,
    accuracy,
    fit_fcn,
    fit_softshape,
    predict_logits,
    softshape_outputs,
)
from icml25.pipelines.softshape.model import (
    FCN,
    InceptionModule,
    RMSNorm,
    SoftShape,
    SoftShapeConfig,
    TopOneMoE,
    cv_squared,
    scores_to_time,
    shape_size_and_stride,
    soft_sparsify,
)
from icml25.pipelines.softshape.ucr_data import fill_and_normalise, make_cbf

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize(("T", "m", "q", "M"), [(150, 32, 4, 30), (24, 4, 4, 6)])
def test_token_count(T, m, q, M):
    assert SoftShapeConfig(T, m, q, 2).n_tokens == M
    x = torch.randn(3, 1, T)
    assert SoftShape(SoftShapeConfig(T, m, q, 2)).embed(x).shape == (3, 128, M)


def test_parameter_count_matches_the_reference_architecture():
    torch.manual_seed(0)
    model = SoftShape(SoftShapeConfig(150, 32, 4, 3))
    params = [p for p in model.parameters() if p.requires_grad]
    assert sum(p.numel() for p in params) == 263_188
    assert len(params) == 37


def test_untrained_zero_router_sends_every_token_to_expert_0_with_aux_6():
    torch.manual_seed(0)
    model = SoftShape(SoftShapeConfig(150, 32, 4, 3)).eval()
    _, aux, info = model(torch.randn(4, 1, 150), warm=False)
    n_tokens = 4 * (math.ceil(0.5 * 30) + 1)  # layer 2 keeps 15 shapes + the merged one
    assert info.load.tolist() == [n_tokens, 0, 0]
    assert float(aux.detach()) == pytest.approx(6.0, abs=1e-4)  # cv² = 3 for importance and for load


def test_soft_sparsification_on_a_hand_made_tensor():
    u = torch.arange(10, dtype=torch.float32).reshape(1, 5, 2) + 1.0
    s = torch.tensor([[0.9, 0.1, 0.8, 0.3, 0.2]])
    v, kept = soft_sparsify(u, s, remain=0.5)
    assert v.shape == (1, 4, 2)  # ceil(2.5) = 3 kept + 1 merged
    assert kept.tolist() == [[0, 2, 3]]
    for row, j in enumerate([0, 2, 3]):
        torch.testing.assert_close(v[0, row], s[0, j] * u[0, j], rtol=0, atol=0)
    torch.testing.assert_close(v[0, 3], 0.1 * u[0, 1] + 0.2 * u[0, 4])


def test_kept_shapes_stay_in_temporal_order_and_mass_is_conserved():
    torch.manual_seed(1)
    u, s = torch.randn(6, 11, 8), torch.rand(6, 11)
    v, kept = soft_sparsify(u, s, remain=0.4)
    assert (kept[:, 1:] > kept[:, :-1]).all()
    top = torch.topk(s, kept.shape[1], dim=1).indices.sort(dim=1).values
    assert torch.equal(kept, top)
    torch.testing.assert_close(v.sum(dim=1), (s.unsqueeze(-1) * u).sum(dim=1), atol=1e-6,
                               rtol=0)


def test_hard_flag_drops_the_merged_shape():
    u, s = torch.randn(2, 9, 4), torch.rand(2, 9)
    v, kept = soft_sparsify(u, s, remain=0.5, hard=True)
    assert v.shape == (2, 5, 4) and kept.shape == (2, 5)
    torch.testing.assert_close(v, torch.gather(s.unsqueeze(-1) * u, 1,
                                               kept.unsqueeze(-1).expand(-1, -1, 4)))


def test_warm_up_keeps_every_shape_and_has_no_aux_loss():
    torch.manual_seed(0)
    model = SoftShape(SoftShapeConfig(64, 8, 4, 3)).eval()
    _, aux, info = model(torch.randn(2, 1, 64), warm=True)
    assert float(aux) == 0.0 and info.load.sum() == 0
    assert info.final_scores.shape == (2, 15) and all(k is None for k in info.kept)
    _, aux, info = model(torch.randn(2, 1, 64), warm=False)
    assert info.final_scores.shape == (2, 8 + 1) and float(aux.detach()) > 0
    hard = SoftShape(SoftShapeConfig(64, 8, 4, 3, hard=True)).eval()
    assert hard(torch.randn(2, 1, 64))[2].final_scores.shape == (2, 8)


def test_moe_routes_each_token_to_exactly_one_expert_with_gate_near_one():
    torch.manual_seed(0)
    for n_experts in (2, 7, 100):
        moe = TopOneMoE(16, n_experts, 0.0, router_init="normal")
        z = torch.randn(50, 16)
        index, gate, _ = moe.route(z)
        assert index.shape == (50,) and set(index.tolist()) <= set(range(n_experts))
        probs = torch.softmax(z @ moe.w_gate, dim=-1)
        assert torch.equal(index, probs.argmax(-1))
        assert ((gate > 1 - 1e-4) & (gate < 1)).all()
        _, _, load = moe(z.reshape(5, 10, 16))
        assert int(load.sum()) == 50


def test_cv_squared_known_answers():
    assert float(cv_squared(torch.tensor([2.0, 0.0]))) == pytest.approx(2.0)
    assert float(cv_squared(torch.tensor([5.0]))) == 0.0
    moe = TopOneMoE(4, 2, 0.0)  # zero router: both tokens on expert 0, gate ~ 1
    _, _, aux = moe.route(torch.randn(2, 4))
    assert float(aux) == pytest.approx(4.0, abs=1e-4)  # importance [2, 0] and load [2, 0]


def test_rmsnorm_output_has_norm_sqrt_d():
    u = torch.randn(7, 32) * torch.logspace(-3, 3, 7).unsqueeze(1)
    out = RMSNorm(32)(u)
    torch.testing.assert_close(out.norm(dim=-1), torch.full((7,), 32**0.5), atol=1e-5, rtol=0)


@pytest.mark.parametrize("n", [2, 7, 30])
def test_inception_keeps_shape(n):
    module = InceptionModule(128, 32)
    assert module.kernel_sizes == (39, 19, 9)
    assert module(torch.randn(3, 128, n)).shape == (3, 128, n)


def test_head_is_the_score_weighted_mean_of_shape_logits():
    torch.manual_seed(0)
    model = SoftShape(SoftShapeConfig(64, 8, 4, 3)).eval()
    captured = {}
    model.head.register_forward_hook(lambda mod, inp, out: captured.update(h=inp[0]))
    logits, _, info = model(torch.randn(4, 1, 64))
    manual = (info.final_scores.unsqueeze(-1) * model.head(captured["h"])).mean(dim=1)
    torch.testing.assert_close(logits, manual)
    mean_model = SoftShape(SoftShapeConfig(64, 8, 4, 3, pooling="mean")).eval()
    logits, _, _ = mean_model(torch.randn(4, 1, 64))
    assert logits.shape == (4, 3)


def test_scores_to_time_averages_the_covering_windows():
    scores = torch.tensor([[0.2, 0.4, 0.9]])
    out = scores_to_time(scores, seq_len=9, shape_size=4, stride=2)[0].numpy()
    brute = []
    for t in range(9):
        cover = [scores[0, p].item() for p in range(3) if 2 * p <= t < 2 * p + 4]
        brute.append(np.mean(cover) if cover else np.nan)
    np.testing.assert_allclose(out, brute, equal_nan=True)


def test_shape_size_rules_and_guards():
    assert shape_size_and_stride(150, 32) == (32, 4)
    assert shape_size_and_stride(24, 4) == (4, 4)
    assert shape_size_and_stride(427, 0.1) == (42, 4)
    assert shape_size_and_stride(30, 0.1) == (3, 2)  # ratio gives m <= q: q := min(2, m)
    with pytest.raises(ValueError, match="need 1 <= m <= T - q"):
        shape_size_and_stride(24, 22)
    with pytest.raises(ValueError, match="need >= 2"):
        SoftShapeConfig(24, 24, 4, 2)
    with pytest.raises(ValueError, match="4 \\* inception_filters"):
        SoftShapeConfig(150, 32, 4, 2, emb_dim=64)
    with pytest.raises(ValueError, match="n_classes"):
        SoftShapeConfig(150, 32, 4, 1)
    with pytest.raises(ValueError, match="expected \\(B, 1, 150\\)"):
        SoftShape(SoftShapeConfig(150, 32, 4, 2))(torch.randn(2, 3, 150))


def _cbf(n: int, seed: int = 0):
    data = make_cbf(n, 64, np.random.default_rng(seed))
    return fill_and_normalise(data.X, np.arange(n)).astype(np.float32), data.y


def test_overfits_thirty_cbf_series():
    X, y = _cbf(30)
    config = SoftShapeConfig(64, 16, 4, 3)
    settings = TrainSettings(epochs=80, warm_up=10, patience=80)
    fit = fit_softshape(X, y, X, y, config, settings, seed=0, n_total=30)
    train_pred = predict_logits(fit.model, X, warm=fit.best_in_warm_up).argmax(-1).numpy()
    assert accuracy(train_pred, y) == 1.0


def test_same_seed_gives_identical_logits_and_fcn_shapes():
    X, y = _cbf(12, seed=3)
    config = SoftShapeConfig(64, 16, 4, 3)
    settings = TrainSettings(epochs=3, warm_up=1, patience=3)
    logits = [predict_logits(fit_softshape(X, y, X, y, config, settings, 5, 12).model, X)
              for _ in range(2)]
    torch.testing.assert_close(logits[0], logits[1], rtol=0, atol=0)
    assert FCN(1, 3)(torch.randn(2, 1, 64)).shape == (2, 3)


def test_sparsifying_layer_is_the_first_with_a_positive_rate():
    assert SoftShape(SoftShapeConfig(64, 16, 4, 3)).sparsifying_layer == 1  # rates [0, 0.5]
    assert SoftShape(SoftShapeConfig(64, 16, 4, 3, depth=3)).sparsifying_layer == 1
    assert SoftShape(SoftShapeConfig(64, 16, 4, 3, sparse_rate=0.0)).sparsifying_layer is None


def test_outputs_score_the_sparsifying_layer_and_report_the_balance_loss():
    X, _y = _cbf(12, seed=1)
    torch.manual_seed(0)
    model = SoftShape(SoftShapeConfig(64, 16, 4, 3))
    out = softshape_outputs(model, X, warm=False)
    with torch.no_grad():
        model.eval()
        _, aux, info = model(torch.as_tensor(X).unsqueeze(1), warm=False)
    np.testing.assert_allclose(out.scores, info.scores[1].numpy(), rtol=1e-6)
    np.testing.assert_allclose(out.first_layer_scores, info.scores[0].numpy(), rtol=1e-6)
    assert not np.allclose(out.scores, out.first_layer_scores)
    # untrained zero router: every token on expert 0, aux = 2 K = 6 (the known answer above)
    assert out.balance_loss == pytest.approx(float(aux)) == pytest.approx(6.0, abs=1e-4)
    none = softshape_outputs(SoftShape(SoftShapeConfig(64, 16, 4, 3, sparse_rate=0.0)), X,
                             warm=False)
    assert none.scores is None and none.balance_loss == 0.0


def test_training_logs_the_balance_loss_of_every_epoch():
    X, y = _cbf(12, seed=2)
    settings = TrainSettings(epochs=4, warm_up=2, patience=4)
    fit = fit_softshape(X, y, X, y, SoftShapeConfig(64, 16, 4, 3), settings, 0, 12)
    assert len(fit.balance_loss) == fit.epochs_run == 4
    assert fit.balance_loss[:2] == [0.0, 0.0]  # warm-up: no layer sparsifies, no MoE call
    assert all(0.0 < v <= 6.0 + 1e-4 for v in fit.balance_loss[2:])  # aux in (0, 2K]
    logged = [h["balance_loss"] for h in fit.history if "balance_loss" in h]
    assert logged == fit.balance_loss


def test_multichannel_input_trains_softshape_and_fcn():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 3, 64)).astype(np.float32)
    y = np.arange(12) % 2
    X[y == 1, 2, 20:40] += 3.0  # the class shows in channel 2 only
    settings = TrainSettings(epochs=2, warm_up=1, patience=2)
    config = SoftShapeConfig(64, 16, 4, 2, in_channels=3)
    fit = fit_softshape(X, y, X, y, config, settings, 0, 12)
    out = softshape_outputs(fit.model, X, warm=False)
    assert out.predictions.shape == (12,) and out.scores.shape == (12, config.n_tokens)
    assert fit.model.embed.weight.shape[1] == 3
    fcn = fit_fcn(X, y, X, y, 2, settings, 0, 12).model
    assert fcn.body[0].in_channels == 3
    assert predict_logits(fcn, X).shape == (12, 2)
