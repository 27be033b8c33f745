"""ex2psro: explicit exploration for high-welfare equilibria in PSRO (ICML 2025)."""
