"""Offline speech synthesis through espeak-ng and flite."""

import shutil

import numpy as np
import pytest

from icml25.core.speech import SpeechError, resample, synthesize

espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")
flite = pytest.mark.skipif(shutil.which("flite") is None, reason="flite not installed")


@espeak
def test_espeak_speech_is_deterministic_and_at_the_asked_rate():
    a = synthesize("the quick brown fox", voice="en+m3", sample_rate=16000)
    b = synthesize("the quick brown fox", voice="en+m3", sample_rate=16000)
    assert a.dtype == np.float32 and np.array_equal(a, b)
    assert 0.05 < np.abs(a).max() <= 1.0
    assert 0.5 < a.size / 16000 < 5.0
    faster = synthesize("the quick brown fox", voice="en+m3", rate_wpm=320)
    assert faster.size < 0.75 * a.size
    assert not np.array_equal(a, synthesize("the quick brown fox", voice="en+f2"))


@flite
def test_flite_speaks_and_refuses_an_unknown_voice():
    x = synthesize("hello there", voice="slt", engine="flite", sample_rate=8000)
    assert x.size > 0.3 * 8000 and np.abs(x).max() > 0.05
    with pytest.raises(SpeechError, match="no voice 'nobody'"):
        synthesize("hello", voice="nobody", engine="flite")


@espeak
def test_bad_arguments_are_refused_by_name():
    with pytest.raises(SpeechError, match="empty text"):
        synthesize("  ")
    with pytest.raises(SpeechError, match="rate_wpm"):
        synthesize("hi", rate_wpm=10)
    with pytest.raises(SpeechError, match="pitch"):
        synthesize("hi", pitch=120)
    with pytest.raises(SpeechError, match="unknown speech engine"):
        synthesize("hi", engine="say")
    with pytest.raises(SpeechError, match="does not exist"):
        synthesize("hi", voice="zz-none")


def test_resample_keeps_a_tone_at_its_frequency():
    sr = 22050
    t = np.arange(sr) / sr
    x = np.sin(2 * np.pi * 440 * t).astype(np.float32)
    y = resample(x, sr, 16000)
    assert y.size == 16000
    spectrum = np.abs(np.fft.rfft(y))
    assert abs(np.argmax(spectrum) * 16000 / y.size - 440) <= 1
    with pytest.raises(ValueError, match="positive"):
        resample(x, 0, 16000)
