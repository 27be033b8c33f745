"""WaveToken (ICML 2025): wavelet-tokenized time-series forecasting; see specs/wavetoken.md."""
