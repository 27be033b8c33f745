"""Parameters of the sparse_iht pipeline (``conf/*/parameters_sparse_iht.yml``), validated once.

Every choice the paper leaves open (see ``docs/papers/sparse_iht.md``) is a parameter here; bad
values (k larger than the dimension, an infeasible constraint set, a batch that never grows)
stop the run before any work, naming the full key.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from icml25.core.claims import ClaimSpec
from icml25.core.params import ParamsModel, Seeds

SettingKind = Literal["nonneg", "nonneg_budget", "l2_ball", "l1_ball", "box", "nonneg_l2_ball"]
NONNEG_KINDS = ("nonneg", "nonneg_budget", "nonneg_l2_ball")


class SettingParams(ParamsModel):
    """A constraint set Γ sized from the truth: ``scale = 1`` contains w̄, ``< 1`` is binding."""

    name: str = Field(min_length=1)
    kind: SettingKind
    scale: float = Field(default=1.0, le=10.0)
    signed: bool = False

    @field_validator("scale")
    @classmethod
    def _feasible(cls, scale: float) -> float:
        if not scale > 0:
            raise ValueError(f"scale {scale} <= 0 makes the constraint set infeasible for any "
                             "non-zero point (radius, budget or box half-width would be <= 0)")
        return scale

    @model_validator(mode="after")
    def _signs(self) -> SettingParams:
        if self.signed and self.kind in NONNEG_KINDS:
            raise ValueError(f"signed truth is infeasible for the non-negative set {self.kind}")
        return self

    @property
    def binding(self) -> bool:
        return self.scale < 1


def _unique_names(settings: list[SettingParams]) -> list[SettingParams]:
    names = [s.name for s in settings]
    if len(set(names)) != len(names):
        raise ValueError(f"setting names must be distinct, got {names}")
    return settings


# a list (not a mapping) so that an environment's override replaces it instead of merging
Settings = Annotated[list[SettingParams], Field(min_length=1), AfterValidator(_unique_names)]


class _WithSettings(ParamsModel):
    """A block of constraint settings with distinct names, also looked up by name."""

    @property
    def named(self) -> dict[str, SettingParams]:
        return {s.name: s for s in self.settings}


class SyntheticParams(_WithSettings):
    n: int = Field(gt=0)
    d: int = Field(gt=0)
    k_bar: int = Field(gt=0)
    rho: float = Field(ge=0, lt=1)
    sigma: float = Field(ge=0)
    k_ratios: list[float] = Field(min_length=2)
    iterations: int = Field(gt=0)
    dense_iterations: int = Field(gt=0)
    lasso_alphas: int = Field(default=300, ge=10)
    trace_ratio: float = 2.0
    settings: Settings

    @field_validator("k_ratios")
    @classmethod
    def _ratios(cls, ratios: list[float]) -> list[float]:
        if any(r < 1 for r in ratios) or ratios != sorted(set(ratios)):
            raise ValueError(f"k_ratios must be increasing and >= 1 (k >= k_bar), got {ratios}")
        return ratios

    @model_validator(mode="after")
    def _sizes(self) -> SyntheticParams:
        if self.k_bar > self.d:
            raise ValueError(f"k_bar = {self.k_bar} is larger than the dimension d = {self.d}")
        k_max = max(self.ks)
        if k_max > self.d:
            raise ValueError(f"k = {k_max} (k_ratio {max(self.k_ratios)} x k_bar {self.k_bar}) is "
                             f"larger than the dimension d = {self.d}")
        if self.trace_ratio not in self.k_ratios:
            raise ValueError(f"trace_ratio {self.trace_ratio} is not one of k_ratios "
                             f"{self.k_ratios}")
        return self

    @property
    def ks(self) -> list[int]:
        return [k_of(r, self.k_bar) for r in self.k_ratios]


def k_of(ratio: float, k_bar: int) -> int:
    """``k = round(ratio · k̄)`` (half up)."""
    return int(ratio * k_bar + 0.5)


class SmallParams(_WithSettings):
    """Small instances where the best k̄-sparse feasible point is found by exhaustive search."""

    n: int = Field(gt=0)
    d: int = Field(gt=0, le=40)
    k_bar: int = Field(gt=0)
    rho: float = Field(ge=0, lt=1)
    sigma: float = Field(ge=0)
    iterations: int = Field(gt=0)
    settings: Settings

    @model_validator(mode="after")
    def _sizes(self) -> SmallParams:
        if self.k_bar > self.d:
            raise ValueError(f"k_bar = {self.k_bar} is larger than the dimension d = {self.d}")
        for s in self.settings:
            if s.kind not in ("nonneg", "l2_ball"):
                raise ValueError(f"settings {s.name!r}: exhaustive search is implemented for the "
                                 f"non-negative orthant and the l2 ball, got {s.kind}")
        return self


class StochasticParams(ParamsModel):
    setting: str
    k_ratio: float = Field(ge=1)
    b0: int = Field(gt=0)
    tau: float = Field(gt=1)
    extra_full_steps: int = Field(gt=0)


class ZerothOrderParams(ParamsModel):
    n: int = Field(gt=0)
    d: int = Field(gt=0)
    k_bar: int = Field(gt=0)
    k: int = Field(gt=0)
    rho: float = Field(ge=0, lt=1)
    sigma: float = Field(ge=0)
    constraint: Literal["nonneg"] = "nonneg"
    q0: int = Field(gt=0)
    rho_q: float = Field(gt=1)
    q_max: int | None = Field(default=None, gt=0)
    iterations: int = Field(gt=0)
    szoht_q: list[int] = Field(min_length=2)
    szoht_iterations: int = Field(gt=0)
    # SZOHT's step η = szoht_step_scale / L for every q (the first-order step at 1.0, which is
    # also HZO-HT-2SP's limit); null: the variance-adjusted q_min / ((q_min + d) L)
    szoht_step_scale: float | None = Field(default=1.0, gt=0, le=2)
    s2: int | None = Field(default=None, gt=0)
    mu: float = Field(gt=0)
    fo_iterations: int = Field(gt=0)
    eval_every: int = Field(gt=0)
    plateau_fraction: float = Field(default=0.5, gt=0, le=1)

    @field_validator("mu")
    @classmethod
    def _mu(cls, mu: float) -> float:
        if mu < 1e-7:
            raise ValueError(f"mu {mu} < 1e-7 cancels in float64 finite differences")
        return mu

    @field_validator("szoht_q")
    @classmethod
    def _qs(cls, qs: list[int]) -> list[int]:
        if any(q < 1 for q in qs) or qs != sorted(set(qs)):
            raise ValueError(f"szoht_q must be increasing positive integers, got {qs}")
        return qs

    @model_validator(mode="after")
    def _sizes(self) -> ZerothOrderParams:
        for key in ("k_bar", "k"):
            if getattr(self, key) > self.d:
                raise ValueError(f"{key} = {getattr(self, key)} is larger than the dimension "
                                 f"d = {self.d}")
        if self.s2 is not None and self.s2 > self.d:
            raise ValueError(f"s2 = {self.s2} is larger than the dimension d = {self.d}")
        if self.k < self.k_bar:
            raise ValueError(f"k = {self.k} < k_bar = {self.k_bar}: the guarantees need k >= k_bar")
        return self


class BreastCancerParams(ParamsModel):
    ks: list[int] = Field(min_length=1)
    radius: float = Field(gt=0)
    iterations: int = Field(gt=0)
    n_c: int = Field(default=30, ge=5)  # points on the ℓ1-logistic regularisation path

    @field_validator("ks")
    @classmethod
    def _ks(cls, ks: list[int]) -> list[int]:
        return _ks_within(ks, 30)


class DiabetesParams(ParamsModel):
    ks: list[int] = Field(min_length=1)
    budget_fraction: float = Field(gt=0, le=10)
    iterations: int = Field(gt=0)

    @field_validator("ks")
    @classmethod
    def _ks(cls, ks: list[int]) -> list[int]:
        return _ks_within(ks, 10)


def _ks_within(ks: list[int], d: int) -> list[int]:
    if any(k < 1 for k in ks) or ks != sorted(set(ks)):
        raise ValueError(f"ks must be increasing positive integers, got {ks}")
    if max(ks) > d:
        raise ValueError(f"k = {max(ks)} is larger than the dimension d = {d} of the data set")
    return ks


class RealDataParams(ParamsModel):
    """The real data: scikit-learn's bundled breast-cancer (569 x 30) and diabetes (442 x 10)."""

    breast_cancer: BreastCancerParams
    diabetes: DiabetesParams


class SyntheticMarketParams(ParamsModel):
    """A generated factor-model market (``index_tracking.synthetic_market``), one per seed."""

    assets: int = Field(ge=2, le=24)  # the exhaustive optimum enumerates subsets of the assets
    factors: int = Field(ge=1)
    train: int = Field(ge=2)
    test: int = Field(ge=2)
    index_noise: float = Field(ge=0)
    periods_per_year: float = Field(default=252.0, gt=0)

    @model_validator(mode="after")
    def _periods(self) -> SyntheticMarketParams:
        if self.train <= self.assets:
            raise ValueError(f"train = {self.train} periods for {self.assets} assets: the "
                             "exhaustive optimum needs more periods than assets")
        return self


class IndexColumn(ParamsModel):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")  # the instance's name in metric keys
    column: str = Field(min_length=1)


class RealMarketParams(ParamsModel):
    """Real prices: ``path`` null reads the monthly prices matplotlib ships (``Stocks.csv``)."""

    path: str | None = None
    assets: list[str] = Field(min_length=2, max_length=24)
    indices: list[IndexColumn] = Field(min_length=1)
    train: tuple[str, str]
    test: tuple[str, str]
    # pandas resampling rule (the last price of each period); null: the table's rows as periods
    frequency: str | None = "ME"
    periods_per_year: float = Field(default=12.0, gt=0)
    ks: list[int] = Field(min_length=1)

    @field_validator("assets")
    @classmethod
    def _distinct(cls, assets: list[str]) -> list[str]:
        if len(set(assets)) != len(assets):
            raise ValueError(f"assets must be distinct, got {assets}")
        return assets

    @field_validator("train", "test")
    @classmethod
    def _dates(cls, window: tuple[str, str]) -> tuple[str, str]:
        import pandas as pd
        try:
            start, end = (pd.Timestamp(x) for x in window)
        except ValueError as err:
            raise ValueError(f"{window}: not two dates ({err})") from None
        if not start < end:
            raise ValueError(f"{window}: the start must precede the end")
        return window

    @model_validator(mode="after")
    def _windows(self) -> RealMarketParams:
        import pandas as pd
        if not pd.Timestamp(self.train[1]) < pd.Timestamp(self.test[0]):
            raise ValueError(f"the training window {self.train} must end before the test "
                             f"window {self.test} starts")
        _ks_within(self.ks, len(self.assets))
        names = [i.name for i in self.indices]
        if len(set(names)) != len(names) or "synthetic" in names:
            raise ValueError(f"index names must be distinct and not 'synthetic', got {names}")
        overlap = sorted({i.column for i in self.indices} & set(self.assets))
        if overlap:
            raise ValueError(f"indices {overlap} are also listed as assets")
        return self


class IndexTrackingParams(ParamsModel):
    """Sparse index tracking with ``Γ = {w >= 0, Σw <= budget}`` against the exhaustive optimum."""

    ks: list[int] = Field(min_length=1)  # sparsity levels of the synthetic market
    budget: float = Field(gt=0)
    iterations: int = Field(gt=0)
    dense_iterations: int = Field(gt=0)
    lasso_alphas: int = Field(default=300, ge=10)
    synthetic: SyntheticMarketParams
    real: RealMarketParams | None = None

    @model_validator(mode="after")
    def _sizes(self) -> IndexTrackingParams:
        _ks_within(self.ks, self.synthetic.assets)
        return self


class SparseIHTParams(ParamsModel):
    seeds: Seeds
    progress: bool = True
    num_threads: int = Field(default=1, ge=0)  # BLAS threads; 0 keeps the library default
    rtol: float = Field(default=1e-6, gt=0)
    synthetic: SyntheticParams
    small: SmallParams
    stochastic: StochasticParams
    zeroth_order: ZerothOrderParams
    real_data: RealDataParams
    index_tracking: IndexTrackingParams
    claims: list[ClaimSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _references(self) -> SparseIHTParams:
        if self.stochastic.setting not in self.synthetic.named:
            raise ValueError(f"stochastic.setting {self.stochastic.setting!r} is not one of "
                             f"synthetic.settings {sorted(self.synthetic.named)}")
        if k_of(self.stochastic.k_ratio, self.synthetic.k_bar) > self.synthetic.d:
            raise ValueError("stochastic.k_ratio x k_bar is larger than the dimension d")
        return self
