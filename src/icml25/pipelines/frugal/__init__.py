"""frugal: FRUGAL, memory-efficient optimisation by gradient splitting (ICML 2025)."""
