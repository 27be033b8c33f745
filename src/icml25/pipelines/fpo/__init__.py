"""FPO (ICML 2025): feature-level constrained preference optimisation; see specs/fpo.md."""
