"""Speech: on-device text-to-speech with phoneme timing (espeak-ng) and phoneme → viseme → ARKit targets."""

from studio.speech.espeak import EspeakSynth, Phoneme, SpeechClip, SpeechError, benchmark_tts
from studio.speech.visemes import VISEMES, Track, closure_intervals, lips_closed, mouth_openness, phoneme_track

__all__ = [
    "VISEMES", "EspeakSynth", "Phoneme", "SpeechClip", "SpeechError", "Track", "benchmark_tts", "closure_intervals",
    "lips_closed", "mouth_openness", "phoneme_track",
]
