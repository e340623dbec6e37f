"""Offline analysis: a whole file or a line of text to FrameStates at any fps, and ARKit CSV export.

Frames are aligned to media time exactly (the model's lookahead is compensated), so an exported
take lines up with its audio. `lipsync_command` is the `avatar-studio lipsync` CLI body.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from studio.avatar.arkit import ARKIT_NAMES, NUM_ARKIT
from studio.engine.features import LogMelExtractor
from studio.engine.level import SpeechLevelLift
from studio.engine.motion import (
    AUDIBLE_DB,
    HOP_S,
    SILENCE,
    MotionGenerator,
    MotionStyle,
    MouthGate,
    Prosody,
    ProsodyTracker,
    lay_eyes,
    relaxed_rest_pose,
)
from studio.engine.mouth_shaper import CENTRED_REACH_HOPS as REACH
from studio.engine.mouth_shaper import MOUTH_CHANNELS, shape_mouth
from studio.engine.sources import ENGINE_RATE, AudioInputError, resample_clip, trim_leading_silence
from studio.engine.sources import HOP_SAMPLES as HOP
from studio.fileio import atomic_writer, check_output_file
from studio.frame import FrameState

ANALYSIS_CHUNK_S = 5.0


def offline_variant() -> str:
    """The full-context offline model where it is installed, else the live fp32 model."""
    from studio.engine.face_model import default_model_path

    return "offline" if default_model_path("offline").is_file() else "fp32"


def _check_fps(fps: float) -> float:
    if not isinstance(fps, (int, float)) or not math.isfinite(fps) or not 1 <= fps <= 1000:
        raise ValueError(f"fps={fps!r} is out of range; allowed 1..1000")
    return float(fps)


def _array_chunks(audio, sample_rate: int | None) -> Iterator[np.ndarray]:
    """An in-memory signal as engine-rate chunks (validated like a file)."""
    if sample_rate is None:
        raise ValueError("analyze_audio: an array needs sample_rate (Hz)")
    audio, rate = np.asarray(audio, np.float32), int(sample_rate)
    if audio.ndim == 2:
        audio = audio.mean(axis=1 if audio.shape[1] <= 8 else 0)
    if audio.ndim != 1 or audio.size == 0:
        raise AudioInputError(f"analyze_audio: expected a non-empty mono or (n, channels) array, got {audio.shape}")
    if not np.all(np.isfinite(audio)):
        raise AudioInputError("analyze_audio: audio contains NaN or infinite samples")
    audio = np.clip(audio, -1.0, 1.0)
    audio = resample_clip(audio, rate, ENGINE_RATE) if rate != ENGINE_RATE else audio
    step = ENGINE_RATE * 30
    for start in range(0, len(audio), step):
        yield audio[start:start + step]


def engine_chunks(path_or_array, sample_rate: int | None = None) -> Iterator[np.ndarray]:
    """A file (a path, or an `AudioFileStream` to read its `cut_short` afterwards; decoded in bounded chunks) or an
    array, as float32 mono chunks at ENGINE_RATE."""
    from studio.engine.audio_file import AudioFileStream

    if isinstance(path_or_array, (str, Path)):
        path_or_array = analysis_stream(path_or_array)
    if isinstance(path_or_array, AudioFileStream):
        return (chunk[:, 0] for chunk in path_or_array.chunks(rate=ENGINE_RATE, channels=1))
    return _array_chunks(path_or_array, sample_rate)


def analysis_stream(path: str | Path):
    """The file probed now (a bad file fails before any work), to be read in 5 s chunks (80,000 samples spread the
    per-chunk cost thin)."""
    from studio.engine.audio_file import AudioFileStream

    return AudioFileStream(path, chunk_s=ANALYSIS_CHUNK_S)


@dataclass
class FrameBlock:
    """Consecutive output frames as arrays (cheaper than FrameStates for a CSV of hours)."""

    first: int  # index of the first frame
    times: np.ndarray  # (k,) media time s
    arkit: np.ndarray  # (k, 52)
    pose: np.ndarray  # (k, 55, 3)
    transl: np.ndarray  # (k, 3)
    visemes: np.ndarray | None  # (k, 15)
    voice: np.ndarray  # (k,)

    def __len__(self) -> int:
        return len(self.times)

    def states(self) -> Iterator[FrameState]:
        for k in range(len(self.times)):
            yield FrameState(media_time_s=float(self.times[k]), arkit=self.arkit[k], pose=self.pose[k],
                             transl=self.transl[k], visemes=None if self.visemes is None else self.visemes[k],
                             voice_activity=float(self.voice[k]), sequence=self.first + k)


class StreamingAnalysis:
    """Engine-rate audio in, frames at `fps` out, as it comes: memory bounded whatever the length.

    Each hop goes through features, the face model (its lookahead compensated, so frame t depicts
    media time t), the silence gate (which looks MouthGate.FILE_LOOK_AHEAD hops ahead: a file has the
    future), and motion; `push()` returns the frames whose hops are all known, `finish()` the rest.
    """

    def __init__(self, fps: float = 60, model_variant: str | None = None, style: MotionStyle | None = None,
                 face_only: bool = False, model_path: str | Path | None = None) -> None:
        """`face_only`: the caller keeps only the face weights (a CSV), so only the eyes are animated and the
        body stays at the relaxed rest pose; `model_path`: a face model file other than the installed one of
        that variant (model evaluation)."""
        from studio.engine.face_model import FaceModel

        self.fps = _check_fps(fps)
        self.model = FaceModel(model_variant or offline_variant(), path=model_path)
        self.features = LogMelExtractor()
        self.level = SpeechLevelLift()
        self.prosody = ProsodyTracker()
        body = ("head_torso", "fixed") if face_only else ("full", "articulated")
        self.face_only = face_only
        self.motion = MotionGenerator(style or MotionStyle(), *body)
        self.gate = MouthGate(opened=False)
        self.samples = 0
        self._skip = self.model.lookahead_frames  # model outputs that depict time before 0
        self._last_features: np.ndarray | None = None
        self._face_start = 0  # hop index of the first kept model output
        self._face: list[np.ndarray] = [np.zeros((0, NUM_ARKIT), np.float32), np.zeros((0, 15), np.float32),
                                        np.zeros(0, np.float32)]
        self._prosody = np.zeros((0, 5))  # per hop: energy, pitch, voiced, level_db, audible
        self._prosody_start = 0
        self._hop_start = 0  # hop index of the first kept finished hop
        self._hop_arkit = np.zeros((0, NUM_ARKIT), np.float32)  # gated mouth per hop
        self._hop_voice = np.zeros(0, np.float32)
        self._hop_visemes = np.zeros((0, 15), np.float32)
        self._hops_done = 0
        self._frames_done = 0
        self._finished = False

    def push(self, samples: np.ndarray) -> FrameBlock | None:
        """Feed the next engine-rate mono samples; the frames they complete (None: none yet)."""
        if self._finished:
            raise RuntimeError("StreamingAnalysis: push() after finish()")
        samples = np.asarray(samples, np.float32)
        self.samples += len(samples)
        self._feed(samples)
        return self._frames(final_hops=None)

    def finish(self) -> FrameBlock | None:
        """The audio ended: the last frames (the model's lookahead owes some hops)."""
        if self.samples == 0:
            raise AudioInputError("the audio holds no samples")
        self._finished = True
        pad = (-self.samples) % HOP + HOP  # as a whole signal padded by up to two hops
        self._feed(np.zeros(pad, np.float32))
        total_hops = self._prosody_start + len(self._prosody)
        if self.model.lookahead_frames:  # as a whole run: the last frame repeated past the end
            self._model_step(np.repeat(self._last_features, self.model.lookahead_frames, axis=0))
        return self._frames(final_hops=total_hops)

    def _feed(self, samples: np.ndarray) -> None:
        features = self.level.push(self.features.push(samples))
        if len(features):
            self._last_features = features[-1:]
            self._model_step(features)
        self.prosody.audible_db = AUDIBLE_DB - self.level.lift_db
        hops = np.array(self.prosody.push_arrays(samples), np.float64).T  # energy, pitch, voiced, level_db, audible
        if len(hops):
            self._prosody = np.concatenate([self._prosody, hops])

    def _model_step(self, features: np.ndarray) -> None:
        if not len(features):
            return
        out = self.model.step(features)
        skip = min(self._skip, len(out))
        self._skip -= skip
        for k, values in enumerate((out.arkit, out.visemes, out.voice_activity)):
            self._face[k] = np.concatenate([self._face[k], values[skip:]])

    def _finish_hops(self, final_hops: int | None) -> None:
        """Gate and store every hop whose face and surrounding loudness are known."""
        face_end = self._face_start + len(self._face[2])
        prosody_end = self._prosody_start + len(self._prosody)
        if final_hops is None:  # the mouth shaper looks ahead too
            end = min(face_end - REACH, prosody_end - MouthGate.FILE_LOOK_AHEAD)
        else:
            end = min(face_end, final_hops)
        if end <= self._hops_done:
            return
        count = end - self._hops_done
        # a hop is heard when any hop from LOOK_BEHIND before to FILE_LOOK_AHEAD after it is loud (none past the end)
        loud_so_far = np.concatenate([[0], np.cumsum(self._prosody[:, 4] > 0)])
        at = np.arange(self._hops_done, end) - self._prosody_start
        low = np.clip(at - MouthGate.LOOK_BEHIND, 0, len(self._prosody))
        high = np.clip(at + MouthGate.FILE_LOOK_AHEAD + 1, 0, len(self._prosody))
        gates = self.gate.run((loud_so_far[high] > loud_so_far[low]).tolist())
        first = self._hops_done - self._face_start
        lead = min(first, REACH)  # the shaper's context on either side, where there is some
        beliefs = self._face[1][first - lead:first + count + REACH]
        shaped = shape_mouth(np.clip(self._face[0][first - lead:first - lead + len(beliefs)], 0.0, 1.0), beliefs)
        arkit = shaped[lead:lead + count]
        arkit[:, MOUTH_CHANNELS] *= gates[:, None]
        self._hop_arkit = np.concatenate([self._hop_arkit, arkit])
        self._hop_voice = np.concatenate([self._hop_voice, self._face[2][first:first + count] * gates])
        self._hop_visemes = np.concatenate([self._hop_visemes, self._face[1][first:first + count]])
        self._hops_done = end

    def _frames(self, final_hops: int | None) -> FrameBlock | None:
        self._finish_hops(final_hops)
        hop_end = self._hop_start + len(self._hop_voice)
        if final_hops is None:  # a frame needs the hop after its time for the interpolation
            count = max(0, int(math.ceil((hop_end - 1) * HOP_S * self.fps - 1e-9)) - self._frames_done)
        else:
            duration = self.samples / ENGINE_RATE
            count = max(1, int(math.ceil(duration * self.fps - 1e-9))) - self._frames_done
        block = self._interpolate(count, last_hop=hop_end - 1) if count > 0 else None
        self._trim()
        return block

    def _interpolate(self, count: int, last_hop: int) -> FrameBlock:
        first = self._frames_done
        times = np.arange(first, first + count) / self.fps
        position = np.clip(times / HOP_S, 0.0, last_hop)
        i = np.floor(position).astype(np.int64)
        j = np.minimum(i + 1, last_hop)
        w = (position - i).astype(np.float32)[:, None]
        li, lj = i - self._hop_start, j - self._hop_start
        arkit = self._hop_arkit[li] * (1 - w) + self._hop_arkit[lj] * w
        voice = self._hop_voice[li] * (1 - w[:, 0]) + self._hop_voice[lj] * w[:, 0]
        visemes = self._hop_visemes[np.where(w[:, 0] < 0.5, li, lj)]
        nearest = np.minimum(np.rint(position).astype(np.int64), last_hop) - self._prosody_start
        silence = (SILENCE.energy, SILENCE.pitch, SILENCE.voiced, SILENCE.level_db, SILENCE.audible)
        prosody = np.concatenate([self._prosody, [silence]])[np.minimum(nearest, len(self._prosody))]
        if self.face_only:  # only the eyes reach a CSV: the cheap block path, the body at rest
            eyes = self.motion.eye_weights_block(times, prosody[:, 0], prosody[:, 1], prosody[:, 2] > 0, voice)
            poses = np.broadcast_to(relaxed_rest_pose().astype(np.float32), (count, 55, 3))
            transl = np.zeros((count, 3), np.float32)
        else:
            poses = np.empty((count, 55, 3), np.float32)
            transl = np.empty((count, 3), np.float32)
            eyes = np.empty((count, NUM_ARKIT), np.float32)
            for k, (energy, pitch, voiced, level_db, heard) in enumerate(prosody.tolist()):
                # motion at the output rate: it only steers head, body and eyes
                frame = self.motion.step(float(times[k]), Prosody(energy, pitch, bool(voiced), float(voice[k]),
                                                                  level_db, bool(heard)))
                poses[k], transl[k], eyes[k] = frame.pose, frame.transl, frame.eye_weights
        self._frames_done += count
        return FrameBlock(first, times, lay_eyes(arkit, eyes), poses, transl, visemes, voice.astype(np.float32))

    def _trim(self) -> None:
        """Drop what no later frame or hop needs: state stays a few hops long."""
        keep_hop = max(0, int(math.floor(self._frames_done / self.fps / HOP_S)) - 1)
        drop = max(0, min(keep_hop, self._hops_done) - self._hop_start)
        if drop:
            self._hop_arkit, self._hop_voice = self._hop_arkit[drop:], self._hop_voice[drop:]
            self._hop_visemes = self._hop_visemes[drop:]
            self._hop_start += drop
        drop = max(0, self._hops_done - REACH - self._face_start)  # the last finished hops stay: the shaper's context
        if drop:
            self._face = [values[drop:] for values in self._face]
            self._face_start += drop
        keep = min(keep_hop, self._hops_done - MouthGate.LOOK_BEHIND)
        drop = max(0, keep - self._prosody_start)
        if drop:
            self._prosody = self._prosody[drop:]
            self._prosody_start += drop


def stream_frame_blocks(path_or_array, fps: float = 60, sample_rate: int | None = None,
                        model_variant: str | None = None, style: MotionStyle | None = None,
                        face_only: bool = False) -> Iterator[FrameBlock]:
    """A recording through the offline analysis, block by block, never holding the whole file."""
    chunks = engine_chunks(path_or_array, sample_rate)
    analysis = StreamingAnalysis(fps, model_variant, style, face_only=face_only)
    for chunk in chunks:
        block = analysis.push(chunk)
        if block is not None:
            yield block
    block = analysis.finish()
    if block is not None:
        yield block


def stream_frames(path_or_array, fps: float = 60, sample_rate: int | None = None, model_variant: str | None = None,
                  style: MotionStyle | None = None) -> Iterator[FrameState]:
    """FrameStates one per 1/fps of media time, produced as the audio is decoded."""
    for block in stream_frame_blocks(path_or_array, fps, sample_rate, model_variant, style):
        yield from block.states()


def analyze_audio(path_or_array, fps: float = 60, sample_rate: int | None = None, model_variant: str | None = None,
                  style: MotionStyle | None = None) -> list[FrameState]:
    """A whole recording through features, face model and motion: one FrameState per 1/fps of media time.

    Holds every frame in memory: for long files use `stream_frames` or `stream_frame_blocks`.
    """
    return list(stream_frames(path_or_array, fps, sample_rate, model_variant, style))


def _text_motion(arkit_hops: np.ndarray, voice_hops: np.ndarray, prosodies: list[Prosody],
                 style: MotionStyle) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-hop face of a phoneme track with motion laid over it: (arkit, pose, transl, voice). No silence gate:
    a phoneme track's mouth is exact, it does not murmur on noise."""
    motion = MotionGenerator(style)
    n = len(arkit_hops)
    poses = np.zeros((n, 55, 3), np.float32)
    transl = np.zeros((n, 3), np.float32)
    eyes = np.zeros((n, NUM_ARKIT), np.float32)
    voice_out = np.asarray(voice_hops, np.float32)[:n].copy()
    for i in range(n):
        prosody = prosodies[i] if i < len(prosodies) else SILENCE
        frame = motion.step(i * HOP_S, replace(prosody, speaking=float(voice_out[i])))
        poses[i], transl[i], eyes[i] = frame.pose, frame.transl, frame.eye_weights
    arkit = np.clip(np.asarray(arkit_hops, np.float32), 0.0, 1.0)
    return lay_eyes(arkit, eyes), poses, transl, voice_out


def _frames_at_fps(arkit, poses, transl, voice, visemes, duration_s: float, fps: float,
                   mouth: np.ndarray | None = None) -> list[FrameState]:
    """Sample per-hop values at k / fps (linear between hops); `mouth` (per output frame) replaces the mouth channels."""
    n_frames = max(1, int(math.ceil(duration_s * fps - 1e-9)))
    times = np.arange(n_frames) / fps
    position = np.clip(times / HOP_S, 0.0, len(arkit) - 1)
    i = np.floor(position).astype(np.int64)
    j = np.minimum(i + 1, len(arkit) - 1)
    w = (position - i).astype(np.float32)

    def lerp(values: np.ndarray) -> np.ndarray:
        weight = w.reshape((-1,) + (1,) * (values.ndim - 1))
        return values[i] * (1 - weight) + values[j] * weight

    arkit_at, pose_at, transl_at, voice_at = lerp(arkit), lerp(poses), lerp(transl), lerp(voice).tolist()
    if mouth is not None:
        rows = min(len(mouth), n_frames)
        arkit_at[:rows, MOUTH_CHANNELS] = mouth[:rows, MOUTH_CHANNELS]
    nearest = np.where(w < 0.5, i, j)
    return [FrameState(media_time_s=float(times[k]), arkit=arkit_at[k], pose=pose_at[k], transl=transl_at[k],
                       visemes=None if visemes is None else visemes[nearest[k]], voice_activity=voice_at[k], sequence=k)
            for k in range(n_frames)]


def analyze_text(text: str, voice: str = "en-us", rate_wpm: int = 175, pitch: int = 50, fps: float = 60,
                 style: MotionStyle | None = None):
    """Speak a line with espeak-ng; the mouth follows its exact phonemes. Returns (SpeechClip, frames).

    Leading silence is trimmed as in `TextSource`, so offline takes and live speech share one timeline.
    """
    from studio.speech.espeak import EspeakSynth
    from studio.speech.visemes import phoneme_track

    fps = _check_fps(fps)
    clip = trim_leading_silence(EspeakSynth(voice, rate_wpm, pitch).synthesize(text))
    audio = resample_clip(clip.audio, clip.sample_rate, ENGINE_RATE)
    track = phoneme_track(clip.phonemes, clip.duration_s, fps=1.0 / HOP_S)
    prosodies = ProsodyTracker().push(np.concatenate([audio, np.zeros(int(ENGINE_RATE * HOP_S), np.float32)]))
    arkit, poses, transl, voice_out = _text_motion(track.arkit, track.voice_active, prosodies, style or MotionStyle())
    # the mouth comes straight from the phoneme track at the output rate (exact closures, no hop blur)
    exact = phoneme_track(clip.phonemes, clip.duration_s, fps=fps).arkit
    return clip, _frames_at_fps(arkit, poses, transl, voice_out, None, clip.duration_s, fps, mouth=exact)


def smpte_timecode(media_time_s: float, fps: float) -> str:
    """Live Link Face style HH:MM:SS:FF.mmm (frame number within the second, then its fraction)."""
    total_frames = media_time_s * fps
    whole_seconds = int(math.floor(media_time_s + 1e-9))
    frame_in_second = max(0.0, total_frames - whole_seconds * fps)
    frame = int(math.floor(frame_in_second + 1e-6))
    fraction = min(999, int(round((frame_in_second - frame) * 1000)))
    hours, rest = divmod(whole_seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}:{frame:02d}.{max(fraction, 0):03d}"


_ROW_FORMAT = ",".join(["%.6f"] * NUM_ARKIT)


_TRIPLES = np.array([list(b"%03d" % i) for i in range(1000)], np.uint8)  # "000" .. "999" as bytes


def _timecodes(times: np.ndarray, fps: float) -> list[str]:
    """`smpte_timecode` of many times: the same float operations, done on arrays."""
    times = np.asarray(times, np.float64)
    whole_seconds = np.floor(times + 1e-9)
    frame_in_second = np.maximum(0.0, times * fps - whole_seconds * fps)
    frame = np.floor(frame_in_second + 1e-6)
    fraction = np.clip(np.rint((frame_in_second - frame) * 1000), 0, 999)  # rint rounds half to even, as round()
    hours, rest = np.divmod(whole_seconds.astype(np.int64), 3600)
    minutes, seconds = np.divmod(rest, 60)
    return [f"{h:02d}:{m:02d}:{s:02d}:{f:02d}.{x:03d}" for h, m, s, f, x in zip(
        hours.tolist(), minutes.tolist(), seconds.tolist(), frame.astype(np.int64).tolist(),
        fraction.astype(np.int64).tolist())]


def _weight_lines(weights: np.ndarray) -> list[str] | None:
    """Rows of float32 weights as "%.6f" text joined by commas, built as bytes in numpy (None: outside -9.5..9.5).

    A float32 times 10^6 is exact in float64, so rounding it half to even gives what "%.6f" prints.
    """
    if weights.dtype != np.float32 or not weights.size or not np.all(np.abs(weights) < 9.5):
        return None
    negative = np.signbit(weights)
    signed = bool(negative.any())
    micro = np.rint(np.abs(weights).astype(np.float64) * 1e6).astype(np.int32)
    whole, rest = np.divmod(micro, 1000000)
    high, low = np.divmod(rest, 1000)
    sign = 1 if signed else 0  # a sign column only when needed; unused ones hold 0 and are dropped
    text = np.empty(weights.shape + (sign + 9,), np.uint8)
    if signed:
        text[..., 0] = np.where(negative, ord("-"), 0)
    text[..., sign] = whole.astype(np.uint8) + ord("0")
    text[..., sign + 1] = ord(".")
    text[..., sign + 2:sign + 5] = _TRIPLES[high]
    text[..., sign + 5:sign + 8] = _TRIPLES[low]
    text[..., sign + 8] = ord(",")
    text[:, -1, sign + 8] = ord("\n")
    flat = text.reshape(-1)
    return (flat[flat != 0] if signed else flat).tobytes().decode("ascii").split("\n")[:-1]


def _csv_rows(times, arkit: np.ndarray, fps: float) -> str:
    arkit = np.asarray(arkit)
    lines = _weight_lines(arkit) if arkit.ndim == 2 else None
    if lines is None:  # values a float32 fast path cannot print exactly: one row at a time
        lines = [_ROW_FORMAT % tuple(row) for row in np.asarray(arkit, np.float64).tolist()]
    times = np.asarray(times, np.float64)
    return "".join(f"{code},{t:.6f},{line}\n" for code, t, line in zip(_timecodes(times, fps), times.tolist(), lines))


CSV_HEADER = ",".join(("Timecode", "media_time_s") + ARKIT_NAMES) + "\n"


def _write_csv(chunks, path: str | Path, fps: float) -> int:
    """Header, then rows from (media times, weight rows) chunks as they come; atomic. Returns the row count."""
    fps = _check_fps(fps)
    path = Path(path)
    check_output_file(path)  # before the first chunk is analysed
    rows = 0
    with atomic_writer(path) as out:
        out.write(CSV_HEADER)
        for times, weights in chunks:
            out.write(_csv_rows(times, weights, fps))
            rows += len(times)
    return rows


def write_arkit_csv(frames, path: str | Path, fps: float) -> int:
    """Timecode, media_time_s and the 52 ARKit weights per frame (FrameStates, any iterable), written as they
    come; atomic (an existing file survives any error). Returns the number of rows."""
    return _write_csv((([frame.media_time_s], [frame.arkit]) for frame in frames), path, fps)


def write_arkit_csv_blocks(blocks, path: str | Path, fps: float) -> int:
    """As write_arkit_csv, from FrameBlocks (the streaming analysis's output); returns the number of rows."""
    return _write_csv(((block.times.tolist(), block.arkit) for block in blocks), path, fps)


LIPSYNC_FORMATS = ("arkit", "livelink")


def lipsync_command(audio: str, out: str, fps: float = 60, style: MotionStyle | None = None,
                    csv_format: str = "arkit") -> int:
    """`avatar-studio lipsync AUDIO --out FILE.csv --fps N [--format arkit|livelink]`: 0 on success, 2 with one
    clear line on bad input. `arkit`: Timecode, media_time_s and the 52 weights; `livelink`: Live Link Face's
    own layout (with the head and eye angles the avatar would show), which imports wherever a take does.

    The file is decoded, analysed and written in bounded chunks: memory does not grow with its length.
    """
    try:
        fps = _check_fps(fps)
        if csv_format not in LIPSYNC_FORMATS:
            raise ValueError(f"--format {csv_format!r} is not one of {', '.join(LIPSYNC_FORMATS)}")
        stream = analysis_stream(audio)
        if csv_format == "livelink":
            from studio.recording.livelink import write_livelink_csv_blocks

            rows = write_livelink_csv_blocks(stream_frame_blocks(stream, fps=fps, style=style), out, fps)
        else:
            rows = write_arkit_csv_blocks(stream_frame_blocks(stream, fps=fps, style=style, face_only=True), out, fps)
    except (ValueError, OSError) as error:
        print(f"lipsync: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # the model or runtime failed: still one line, not a traceback
        print(f"lipsync: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print(f"lipsync: wrote {rows} frame{'' if rows == 1 else 's'} at {fps:g} fps to {out}")
    if stream.cut_short:
        print(f"lipsync: note: {stream.cut_short}", file=sys.stderr)
    return 0
