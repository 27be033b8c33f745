"""WaveToken (ICML 2025): wavelet-tokenized time-series forecasting; see docs/papers/wavetoken.md."""
