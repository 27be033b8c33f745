"""quantum_rl: Q-UCRL with an exactly simulated quantum transition oracle (Ganguly, Xu, Aggarwal, ICML 2025)."""
