"""functional_tom: literal versus functional theory of mind in repeated games (ICML 2025,
Riemer et al., "Position: Theory of Mind Benchmarks are Broken for Large Language Models")."""
