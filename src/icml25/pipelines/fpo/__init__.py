"""FPO (ICML 2025): feature-level constrained preference optimisation; see docs/papers/fpo.md."""
