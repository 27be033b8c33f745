"""robust_rl: robust average-reward RL by reduction to robust discounted RL (ICML 2025)."""
