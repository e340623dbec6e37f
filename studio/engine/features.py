"""Streaming log-mel features (numpy only).

Timing convention: feature frame t belongs to media time t * hop / sample_rate (10 ms hops
at 16 kHz). Its analysis window covers samples [(t + 1) * hop - win, (t + 1) * hop), i.e.
media time t*10 ms - 15 ms ... t*10 ms + 10 ms: the window itself looks 10 ms (one hop)
past the frame's own time, and frame t can be computed as soon as sample (t + 1) * hop has
arrived. Before the first sample the signal counts as silence (zeros).

Robustness: input is clipped to [-1, 1] (clipped recordings stay clipped, never explode),
pre-emphasis (1 - 0.97 z^-1) removes any DC offset, and the log has a floor so digital
silence gives finite values. Features are raw log-mel: the fixed global mean/std measured on
the training corpus is baked into the face model itself, so normalisation is causal and the
same offline and streamed.
"""

from __future__ import annotations

import numpy as np

PRE_EMPHASIS = 0.97
LOG_FLOOR = 1e-5


def mel_filterbank(sample_rate: int, n_fft: int, n_mels: int, fmin: float = 20.0, fmax: float = 7600.0) -> np.ndarray:
    """Triangular HTK-mel filters, (n_mels, n_fft // 2 + 1)."""
    fmax = min(fmax, sample_rate / 2)

    def hz_to_mel(hz):
        return 2595.0 * np.log10(1.0 + np.asarray(hz) / 700.0)

    def mel_to_hz(mel):
        return 700.0 * (10.0 ** (np.asarray(mel) / 2595.0) - 1.0)

    edges_hz = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    bins_hz = np.linspace(0.0, sample_rate / 2, n_fft // 2 + 1)
    lower, centre, upper = edges_hz[:-2, None], edges_hz[1:-1, None], edges_hz[2:, None]
    rising = (bins_hz[None] - lower) / (centre - lower)
    falling = (upper - bins_hz[None]) / (upper - centre)
    return np.maximum(0.0, np.minimum(rising, falling))


def _filter_bands(filters: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each triangular filter as the bins where it is non-zero: (n_mels, width) bin indices and weights,
    padded with weight 0 to the widest filter's width."""
    spans = []
    for row in filters:
        nonzero = np.flatnonzero(row)
        spans.append((int(nonzero[0]), int(nonzero[-1]) + 1) if nonzero.size else (0, 0))
    width = max(1, max(high - low for low, high in spans))
    offsets = np.arange(width)
    bands = np.array([np.minimum(low + offsets, filters.shape[1] - 1) for low, _ in spans])
    weights = np.array([np.where(low + offsets < high, row[bands[m]], 0.0) for m, (row, (low, high))
                        in enumerate(zip(filters, spans))])
    return bands, weights


def _as_mono_float(samples: np.ndarray, what: str) -> np.ndarray:
    array = np.asarray(samples)
    if array.ndim != 1:
        raise ValueError(f"{what}: expected mono samples of shape (n,), got shape {array.shape}")
    if np.issubdtype(array.dtype, np.integer):
        array = array.astype(np.float64) / float(np.iinfo(array.dtype).max + 1)
    array = array.astype(np.float64, copy=False)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{what}: samples contain NaN or infinity")
    return np.clip(array, -1.0, 1.0)


class LogMelExtractor:
    """Log-mel frames, streamed (`push`) or offline (`compute`), bit-identical either way."""

    def __init__(self, sample_rate: int = 16000, n_mels: int = 80, hop: int = 160, win: int = 400) -> None:
        if not 0 < hop <= win:
            raise ValueError(f"LogMelExtractor: need 0 < hop <= win, got hop={hop}, win={win}")
        self.sample_rate = sample_rate
        self.n_mels = n_mels
        self.hop = hop
        self.win = win
        self.n_fft = 1 << (win - 1).bit_length()
        self._window = np.hanning(win + 2)[1:-1]
        self._filters = mel_filterbank(sample_rate, self.n_fft, n_mels)
        self._bands, self._band_weights = _filter_bands(self._filters)
        self.reset()

    def reset(self) -> None:
        """Forget all audio: the next sample is media time 0 again."""
        self._pending = np.zeros(self.win - self.hop)
        self._last_sample = 0.0
        self.frames_emitted = 0

    def push(self, samples: np.ndarray) -> np.ndarray:
        """Feed any number of new samples; returns the frames they completed, (n_new, n_mels) float32."""
        audio = _as_mono_float(samples, "LogMelExtractor.push")
        emphasised = np.empty_like(audio)
        if audio.size:
            emphasised[0] = audio[0] - PRE_EMPHASIS * self._last_sample
            emphasised[1:] = audio[1:] - PRE_EMPHASIS * audio[:-1]
            self._last_sample = audio[-1]
        self._pending = np.concatenate([self._pending, emphasised])
        n_frames = 0 if self._pending.size < self.win else (self._pending.size - self.win) // self.hop + 1
        if n_frames == 0:
            return np.zeros((0, self.n_mels), np.float32)
        if n_frames == 1:  # the live case: one hop in, one frame out, no window view to build
            frames = self._pending[None, : self.win]
        else:
            frames = np.lib.stride_tricks.sliding_window_view(self._pending, self.win)[:: self.hop][:n_frames]
        out = self._log_mel(frames)
        self._pending = self._pending[n_frames * self.hop :]
        self.frames_emitted += n_frames
        return out

    def compute(self, audio: np.ndarray) -> np.ndarray:
        """All frames of a whole signal from media time 0, (len(audio) // hop, n_mels) float32."""
        offline = LogMelExtractor(self.sample_rate, self.n_mels, self.hop, self.win)
        return offline.push(audio)

    def _log_mel(self, frames: np.ndarray) -> np.ndarray:
        spectrum = np.fft.rfft(frames * self._window, n=self.n_fft, axis=-1)
        power = spectrum.real**2 + spectrum.imag**2
        # einsum without BLAS: each output is its own fixed-order sum, so a frame's value does not
        # depend on how many frames were computed together (streamed == offline, bit for bit);
        # over each filter's own few bins only (a tenth of the work of the whole spectrum).
        mel = np.einsum("tmk,mk->tm", power[:, self._bands], self._band_weights, optimize=False)
        return np.log(mel + LOG_FLOOR).astype(np.float32)
