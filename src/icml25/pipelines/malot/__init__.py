"""MA-LoT (ICML 2025): prover–corrector collaboration for Lean 4 theorem proving with a verifier
in the loop; see docs/papers/malot.md."""
