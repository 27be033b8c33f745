"""sgd_hitting room: global convergence time of SGD via large deviations (ICML 2025)."""
