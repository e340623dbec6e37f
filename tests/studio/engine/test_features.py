import numpy as np
import pytest

from studio.engine.features import LogMelExtractor


def _speechlike(seconds: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(16000 * seconds)) / 16000
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 3 * t)
    return (envelope * (0.3 * np.sin(2 * np.pi * 220 * t) + 0.05 * rng.standard_normal(t.size))).astype(np.float32)


def test_streamed_frames_equal_offline_frames_exactly_for_random_chunk_sizes():
    audio = _speechlike(2.5)
    extractor = LogMelExtractor()
    offline = extractor.compute(audio)
    rng = np.random.default_rng(1)
    for _ in range(3):
        extractor.reset()
        chunks, position = [], 0
        while position < audio.size:
            size = int(rng.integers(0, 1200))
            chunks.append(extractor.push(audio[position : position + size]))
            position += size
        streamed = np.concatenate(chunks)
        assert streamed.shape == offline.shape == (audio.size // 160, 80)
        np.testing.assert_array_equal(streamed, offline)


def test_frame_t_is_ready_once_sample_t_plus_one_hop_has_arrived():
    extractor = LogMelExtractor()
    assert extractor.push(np.zeros(159, np.float32)).shape == (0, 80)
    assert extractor.push(np.zeros(1, np.float32)).shape == (1, 80)
    assert extractor.push(np.zeros(480, np.float32)).shape == (3, 80)
    assert extractor.frames_emitted == 4


def test_silence_gives_finite_floor_and_speech_rises_above_it():
    extractor = LogMelExtractor()
    silent = extractor.compute(np.zeros(16000, np.float32))
    assert np.all(np.isfinite(silent))
    assert silent.max() - silent.min() < 1e-6
    assert extractor.compute(_speechlike(1.0)).mean() > silent.mean() + 5


def test_dc_offset_and_clipping_barely_change_features():
    audio = _speechlike(1.0)
    extractor = LogMelExtractor()
    clean = extractor.compute(audio)
    with_dc = extractor.compute(audio + 0.3)
    assert np.median(np.abs(with_dc[5:] - clean[5:])) < 0.05
    clipped = extractor.compute(audio * 50)
    assert np.all(np.isfinite(clipped))
    assert clipped.max() < clean.max() + 10


def test_bad_input_is_rejected_with_a_clear_message():
    extractor = LogMelExtractor()
    with pytest.raises(ValueError, match="NaN"):
        extractor.push(np.array([0.0, np.nan], np.float32))
    with pytest.raises(ValueError, match=r"shape \(2, 3\)"):
        extractor.push(np.zeros((2, 3), np.float32))


def test_int16_input_is_scaled_like_float_input():
    audio = _speechlike(0.5)
    as_int16 = (audio * 32768).astype(np.int16)
    extractor = LogMelExtractor()
    difference = np.abs(extractor.compute(as_int16) - extractor.compute(audio))
    assert np.median(difference) < 1e-2
