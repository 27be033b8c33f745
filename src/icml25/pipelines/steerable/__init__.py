"""steerable: SE(d)-equivariant steerable transformers (Kundu & Kondor, ICML 2025)."""
