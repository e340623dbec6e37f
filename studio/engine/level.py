"""Quiet voices lifted to the level the face model reads well (an input gain control for the model only).

The face model reads raw log-mel, so it hears level as well as sound. Trained on voices within about -12..+6 dB
of the synthesizers' level, it reads a quiet microphone badly: the human dev set played 20 dB quieter (speech
near -40 dBFS, an ordinary laptop microphone far from the mouth) loses a sixth of its open vowels and shuts the
lips inside a tenth of its vowels; 30 dB quieter, half its open vowels. So before the model, speech whose level
is under `TARGET_DBFS` is lifted up to it, as a conferencing AGC would; louder speech is never touched, so a
voice at a normal level gives the model exactly the features it gave before.

The lift is applied to the log-mel frames (a gain on each band's power under the extractor's floor), not to the
samples: nothing clips, and the level meter, the recording and the monitored voice keep the sound as it came.
The silence gate's absolute threshold (`motion.AUDIBLE_DB`) would still hold a quiet voice shut, so the engine
and the file analysis lower it by the same lift (`ProsodyTracker.audible_db`). The lift is causal and runs frame
by frame: streamed in any chunks it is the same.

Speech level: a frame counts as speech when it stands `SPEECH_ABOVE_FLOOR_DB` over the room's floor (a minimum
that rises `FLOOR_RISE_DB_PER_S`); the level follows speech frames up quickly (vowel peaks, `RISE_PER_FRAME`) and
down slowly (`FALL_PER_FRAME`: about 10 s of speech), an upper envelope a few dB over the 90th percentile of a
voice's 10 ms levels. Its first `SETTLE_FRAMES` speech frames set it (their loudest) with no lift yet; frames
far under it (`RELATIVE_GATE_DB`) are other, quieter voices and leave it alone.
"""

from __future__ import annotations

import math

import numpy as np

from studio.engine.features import LOG_FLOOR

# A speech frame's log-mel level (10*log10 of its summed band power) stands this far above its samples' level in
# dBFS (median over the human dev set's clips; 31–43 dB with the voice's spectral tilt, through the pre-emphasis).
FEATURE_DB_OVER_DBFS = 36.3
# A voice whose level (below) is under this is lifted to it. The human dev set's voices: their 10 ms levels' 90th
# percentile at -28..-8 dBFS (median -19.5), their levels here about 8 dB over that; -18 lifts only the quietest.
TARGET_DBFS = -18.0
MAX_LIFT_DB = 30.0  # at most: a level this far down is a muted or unplugged microphone, not a quiet voice
SPEECH_ABOVE_FLOOR_DB = 15.0
SPEECH_MIN_DBFS = -75.0  # below this nothing counts as speech, whatever the floor (digital near-silence)
FLOOR_RISE_DB_PER_S = 1.0
RISE_PER_FRAME, FALL_PER_FRAME = 0.1, 0.001
# Once the voice's level is known, quieter frames than this under it are someone else (a television, a colleague
# across the room) and do not pull it down: a speaker who falls silent does not get the room's voices lifted.
RELATIVE_GATE_DB = 20.0
SETTLE_FRAMES = 25  # speech frames heard before any lift: a word's quiet onset is not the voice's level
FRAME_S = 0.01


class SpeechLevelLift:
    """Log-mel frames in, the same frames with quiet speech lifted out (`push`); state carries across calls."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """A new stream: no floor, no speech level, no lift."""
        self._floor_db = math.inf
        self._speech_db = -math.inf
        self._speech_frames = 0
        self.lift_db = 0.0

    @property
    def voice_db(self) -> float:
        """The voice's level in dBFS (-inf until it has been heard)."""
        return self._speech_db

    def push(self, features: np.ndarray) -> np.ndarray:
        """The frames (n, n_mels) with each one's lift applied (the lift as it stood after that frame)."""
        if not len(features):
            return features
        power = np.maximum(np.exp(features.astype(np.float64)) - LOG_FLOOR, 0.0)
        levels = 10.0 * np.log10(power.sum(axis=1) + 1e-30) - FEATURE_DB_OVER_DBFS
        lifts = np.empty(len(levels))
        floor_rise = FLOOR_RISE_DB_PER_S * FRAME_S
        floor_db, speech_db, heard = self._floor_db, self._speech_db, self._speech_frames
        for i, level_db in enumerate(levels.tolist()):  # plain floats: 100 frames per second of audio
            floor_db = min(level_db, floor_db + floor_rise)
            if level_db > SPEECH_MIN_DBFS and level_db > floor_db + SPEECH_ABOVE_FLOOR_DB:
                heard += 1
                if heard <= SETTLE_FRAMES:  # the loudest so far: the voice's first vowels set its level
                    speech_db = max(speech_db, level_db)
                elif level_db > speech_db - RELATIVE_GATE_DB:
                    speech_db += (level_db - speech_db) * (RISE_PER_FRAME if level_db > speech_db else FALL_PER_FRAME)
            lifts[i] = min(max(TARGET_DBFS - speech_db, 0.0), MAX_LIFT_DB) if heard >= SETTLE_FRAMES else 0.0
        self._floor_db, self._speech_db, self._speech_frames = floor_db, speech_db, heard
        self.lift_db = float(lifts[-1])
        if not lifts.any():
            return features
        lifted = np.array(features, np.float32)
        rows = lifts > 0.0
        lifted[rows] = np.log(power[rows] * 10.0 ** (lifts[rows, None] / 10.0) + LOG_FLOOR)
        return lifted
