"""acorn: physical awareness from sound (ACORN, ICML 2025) — channel simulator, AQA-PHY tasks, magnitude+phase encoder."""
