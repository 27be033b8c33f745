"""Sparse optimisation over support-preserving sets with the two-step projection (ICML 2025);
see docs/papers/sparse_iht.md."""
