"""Sparse optimisation over support-preserving sets with the two-step projection (ICML 2025);
see specs/sparse_iht.md."""
