"""Sortformer (ICML 2025): speaker diarization with Sort Loss and speaker-supervised multi-speaker ASR."""
