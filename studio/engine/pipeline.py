"""The real-time engine: one thread turning audio into FrameStates.

source → features → face model (or the source's exact phonemes) → motion → expression layer →
anchor → FrameState → LatestFrameSlot (render, interpolated) and bounded drop-oldest queues
(recorder, API). Every 10 ms hop of audio yields one face/motion step; frames go out at `fps`.

The session media clock is continuous: each source's sample position is laid on it from the
moment the source starts, and with no source (or a failed or finished one) the idle animation
runs on, so consumers always see time move forward.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from studio.avatar.arkit import NUM_ARKIT
from studio.engine.anchor import AnchorStage, SpatialAnchor
from studio.engine.features import LogMelExtractor
from studio.engine.level import SPEECH_MIN_DBFS, SpeechLevelLift
from studio.engine.monitor import MAX_DELAY_S, VoiceMonitor
from studio.engine.motion import (
    AUDIBLE_DB,
    HOP_S,
    SILENCE,
    MotionGenerator,
    MotionStyle,
    MouthGate,
    Prosody,
    ProsodyTracker,
)
from studio.engine.mouth_shaper import MOUTH_CHANNELS, StreamingMouthShaper
from studio.engine.output import SpeakerOutput
from studio.engine.sources import ENGINE_RATE, AudioDeviceError, AudioSource, MicrophoneSource
from studio.frame import FrameState, interpolate
from studio.precision import ModulePlan
from studio.telemetry import LatencyTelemetry

HOP = int(ENGINE_RATE * HOP_S)
STAGES = ("capture", "features", "inference", "motion", "anchor")
EASE_S = 0.15  # how long the mouth takes to settle when a source changes mid-word
MOUTH_AT_REST = 0.02  # no mouth weight above this: nothing to ease from
SOURCE_POLL_S = 0.05  # longest sleep: device-loss checks and idle frames never wait longer
REPLAY_HOPS = 48  # recent feature frames kept to warm a newly switched-in face model
ONSET_HOPS_WITHOUT_CLOSURE = 2
"""After a pause the lips are already together (the mouth at rest), and a p or b after a pause is released at its
first sound, so on the hop where the silence gate opens and the next the shaper does not shut the lips. The live
model reads a hard onset as a /b/ release (its p/b/m belief 0.5-0.7 on the hops either side of it), and the
streaming shaper held such an onset shut for one or two hops: fed hop by hop, the bench's bursts showed the mouth
open 17.0 / 38.9 ms (median / p95) after the onset, 14.8 / 18.6 ms now. On the human dev set, closures, rounding
and open vowels are unchanged (94.7 / 89.1 / 86.2 %), rest in pauses 99.0 -> 98.9 %, onsets 3.6 -> 3.2 ms late
(the experiment log, sixteenth round)."""


@dataclass
class EngineWork:
    """Work done since the engine was built, counted (not timed): what a module level changes."""

    inference_calls: int = 0
    hops_inferred: int = 0
    frames_emitted: int = 0
    motion_steps: int = 0
    finger_joint_updates: int = 0


class ExpressionLayer:
    """Designer gains and caps over the 52 weights (identity by default); `name` is the active expression."""

    def __init__(self, gains: np.ndarray | None = None, caps: np.ndarray | None = None, name: str = "") -> None:
        self.gains = np.ones(NUM_ARKIT, np.float32) if gains is None else np.asarray(gains, np.float32)
        self.caps = np.ones(NUM_ARKIT, np.float32) if caps is None else np.asarray(caps, np.float32)
        if self.gains.shape != (NUM_ARKIT,) or self.caps.shape != (NUM_ARKIT,):
            raise ValueError(f"ExpressionLayer gains/caps must have shape ({NUM_ARKIT},), got "
                             f"{self.gains.shape} and {self.caps.shape}")
        self.name = name

    def apply(self, arkit: np.ndarray) -> np.ndarray:
        out = np.multiply(arkit, self.gains, dtype=np.float32)
        return np.minimum(np.maximum(out, 0.0, out=out), self.caps, out=out)


def _is_live(source: AudioSource) -> bool:
    """A device stream (no known length, no phonemes): the only kind whose voice the monitor plays."""
    return source.duration_s is None and source.phonemes is None


class LatestFrameSlot:
    """The newest frames for the renderer: `get(t)` interpolates between the two frames around media time t."""

    def __init__(self, history: int = 64) -> None:
        self._frames: deque[FrameState] = deque(maxlen=history)
        self._lock = threading.Lock()

    def put(self, frame: FrameState) -> None:
        with self._lock:
            if self._frames and frame.media_time_s < self._frames[-1].media_time_s:
                self._frames.clear()  # time went back (a new session): old frames no longer bracket anything
            self._frames.append(frame)

    def latest(self) -> FrameState | None:
        with self._lock:
            return self._frames[-1] if self._frames else None

    def get(self, presentation_media_time: float | None = None) -> FrameState | None:
        """The frame for this media time (clamped to the frames held; the latest one when None)."""
        with self._lock:
            frames = list(self._frames)
        if not frames:
            return None
        if presentation_media_time is None or presentation_media_time >= frames[-1].media_time_s:
            return frames[-1]
        if presentation_media_time <= frames[0].media_time_s:
            return frames[0]
        times = np.array([f.media_time_s for f in frames])
        after = int(np.searchsorted(times, presentation_media_time, side="right"))
        a, b = frames[after - 1], frames[after]
        span = b.media_time_s - a.media_time_s
        return interpolate(a, b, (presentation_media_time - a.media_time_s) / span if span > 0 else 1.0)


class FrameQueue:
    """A bounded queue for one consumer: when it falls behind, the oldest frames are dropped (and counted)."""

    def __init__(self, maxlen: int = 256) -> None:
        if maxlen < 1:
            raise ValueError(f"FrameQueue maxlen={maxlen} must be at least 1")
        self._frames: deque[FrameState] = deque(maxlen=maxlen)
        self._ready = threading.Condition()
        self.dropped = 0

    def put(self, frame: FrameState) -> None:
        with self._ready:
            if len(self._frames) == self._frames.maxlen:
                self.dropped += 1
            self._frames.append(frame)
            self._ready.notify()

    def get(self, timeout: float | None = None) -> FrameState | None:
        """The oldest waiting frame, waiting up to `timeout` seconds (None when none came)."""
        with self._ready:
            if not self._frames:
                self._ready.wait(timeout)
            return self._frames.popleft() if self._frames else None

    def drain(self) -> list[FrameState]:
        with self._ready:
            frames = list(self._frames)
            self._frames.clear()
            return frames

    def __len__(self) -> int:
        return len(self._frames)


@dataclass
class _Hop:
    """Face and voice for one 10 ms hop of the current source (index: hops since the source's sample 0)."""

    index: int
    arkit: np.ndarray
    visemes: np.ndarray | None
    voice: float


class Engine:
    """Runs the pipeline on one thread; read frames from `slot`, `subscribe()` or telemetry from `telemetry`.

    The thread sleeps until there is work: a device callback of the current source, the next hop
    of a timer-paced source, the next idle frame, or a control call (`set_source`, `stop`).

    The engine owns one persistent `speaker` (SpeakerOutput): opened when the thread starts (or on the
    first clip played), shared by every source that plays sound, closed by `stop()`. Speech then starts
    on the next 10 ms device block instead of waiting for a new stream.
    """

    def __init__(self, source: AudioSource | None = None, model_variant: str = "fp32",
                 style: MotionStyle | None = None, fps: float = 100.0,
                 expression: ExpressionLayer | Callable[[np.ndarray], np.ndarray] | None = None,
                 anchor: AnchorStage | None = None, budget_ms: float = 10.0, plan: ModulePlan | None = None,
                 monotonic: Callable[[], float] = time.monotonic, model_path: str | Path | None = None) -> None:
        """`model_path`: a face model file other than the installed one of `model_variant` (model evaluation)."""
        from studio.engine.face_model import FaceModel

        if plan is not None:
            model_variant, fps = plan.face_variant, plan.face_rate_hz
        if not 1.0 <= fps <= 100.0:
            raise ValueError(f"Engine fps={fps} is out of range; allowed 1..100 (the model runs at 100 hops/s)")
        self.plan = plan or ModulePlan(face_variant=model_variant, face_rate_hz=fps)
        self.fps = float(fps)
        self.model = FaceModel(model_variant, path=model_path)
        self.model_variant = model_variant
        self._models = {model_variant: self.model}
        self.motion = MotionGenerator(style, self.plan.body_mode, self.plan.hands_mode)
        self.work = EngineWork()
        self._pending_plan: ModulePlan | None = None
        self._batch_features: list[np.ndarray] = []
        self._recent_features: deque[np.ndarray] = deque(maxlen=REPLAY_HOPS)
        self._model_fed = 0  # feature frames given to the model since its stream began
        self._held_motion = None  # (hop index, MotionFrame) while the body rate holds the pose
        self.expression = expression or ExpressionLayer()
        self.anchor = anchor or SpatialAnchor()
        self.tracking = None  # a tracker stage laid over the motion (studio.interop.tracking.TrackingMixer.attach)
        self.monotonic = monotonic  # the clock sources and idle frames are paced by (a soak drives its own)
        self.housekeeper = None  # called between passes; see studio.housekeeping
        self.slot = LatestFrameSlot()
        self.telemetry = LatencyTelemetry(budget_ms=budget_ms)
        self.features = LogMelExtractor()
        self.level = SpeechLevelLift()  # quiet voices lifted for the model; the source's level is its voice's
        self.prosody = ProsodyTracker()
        self._subscribers: list[FrameQueue] = []
        self._audio_listeners: list[Callable[[float, np.ndarray], None]] = []
        self._source_audio_listeners: list[Callable[[float, np.ndarray, int], None]] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._source = source
        self._pending: list[AudioSource | None] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._sequence = 0
        self._media_now = 0.0  # media time of the last frame emitted
        self._source_offset = 0.0  # session media time of the current source's sample 0
        self._last_emitted_frame_index = -1
        self._last_arkit = np.zeros(NUM_ARKIT, np.float32)
        self._ease_from = np.zeros(NUM_ARKIT, np.float32)
        self._ease_until = -1.0
        self._gate = MouthGate(MouthGate.attack_for_warning(self.model.lookahead_frames))
        self._shaper = StreamingMouthShaper()
        self._hops_since_gate_shut = 0
        self.status = "stopped"
        self.source_error: str | None = None
        self._needs_activation = True
        self.speaker = SpeakerOutput()
        self.telemetry.counter_sources["audio"] = self.audio_counters
        self.monitor = VoiceMonitor()  # the delayed voice for A/V sync (live input only, off by default)
        self.monitor_enabled = False
        self._needs_monitor_update = False

    # ------------------------------------------------------------ control (any thread)

    @property
    def source(self) -> AudioSource | None:
        return self._source

    @property
    def source_start_media_s(self) -> float:
        """Session media time of the current source's first sample (its frames are stamped from here)."""
        return self._source_offset

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def face_provider(self) -> str:
        """Where the face model runs: onnxruntime's CUDAExecutionProvider or CPUExecutionProvider (for the status bar)."""
        return self.model.provider

    def set_style(self, style: MotionStyle) -> None:
        self.motion.set_style(style)

    def set_plan(self, plan: ModulePlan) -> None:
        """Switch module levels live: face model and rate, body mode and rate, hands.

        A face model not yet loaded is loaded here, on the caller's thread; the switch itself happens
        on the engine thread between hops (the sound never stops), and the new model is first warmed
        on the recent audio so the mouth carries on where it was.
        """
        from studio.engine.face_model import FaceModel

        if not 1.0 <= plan.face_rate_hz <= 100.0:
            raise ValueError(f"face rate {plan.face_rate_hz} Hz is out of range; allowed 1..100")
        if plan.face_variant not in self._models:
            self._models[plan.face_variant] = FaceModel(plan.face_variant)
        if self.running:
            with self._lock:
                self._pending_plan = plan
            self._wake.set()
        else:
            self._apply_plan(plan)

    def _apply_plan(self, plan: ModulePlan) -> None:
        if plan.face_variant != self.model_variant:
            self._run_batch()
            model = self._models[plan.face_variant]
            model.reset()
            if self._recent_features:
                model.step(np.stack(list(self._recent_features)))
            self.model, self.model_variant = model, plan.face_variant
            self._gate.attack_omega = MouthGate.attack_for_warning(model.lookahead_frames)
        if plan.face_rate_hz != self.fps:
            self.fps = float(plan.face_rate_hz)
            self._last_emitted_frame_index = math.floor(self._media_now * self.fps + 1e-6)
        self.motion.configure(plan.body_mode, plan.hands_mode)
        self._held_motion = None
        self.plan = plan

    def subscribe(self, maxlen: int = 256) -> FrameQueue:
        queue = FrameQueue(maxlen)
        with self._lock:
            self._subscribers.append(queue)
        return queue

    def unsubscribe(self, queue: FrameQueue) -> None:
        with self._lock:
            if queue in self._subscribers:
                self._subscribers.remove(queue)

    def listen_audio(self, listener: Callable[[float, np.ndarray], None]) -> None:
        """Call `listener(media_time_s, samples)` on the engine thread with each chunk of source audio it
        analyses (mono, ENGINE_RATE); it must only copy (a recorder queues them for its own thread)."""
        with self._lock:
            self._audio_listeners.append(listener)

    def unlisten_audio(self, listener: Callable[[float, np.ndarray], None]) -> None:
        with self._lock:
            if listener in self._audio_listeners:
                self._audio_listeners.remove(listener)

    def listen_source_audio(self, listener: Callable[[float, np.ndarray, int], None]) -> None:
        """Call `listener(media_time_s, frames, rate)` on the engine thread with the source's audio as the source has
        it (a microphone's at its device rate and channels, (n, channels) when stereo, a voice's at its own rate; a
        source without its own, the analysed mono copy at ENGINE_RATE): what a take keeps. It must only copy."""
        with self._lock:
            self._source_audio_listeners.append(listener)

    def unlisten_source_audio(self, listener: Callable[[float, np.ndarray, int], None]) -> None:
        with self._lock:
            if listener in self._source_audio_listeners:
                self._source_audio_listeners.remove(listener)

    def start(self) -> None:
        if self.running:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="avatar-engine", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (joined), the source and the speaker output."""
        self._stop.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        if self._source is not None:
            self._source.stop()
            self._source.data_event = None
        self.speaker.close()
        self.status = "stopped"

    def set_source(self, source: AudioSource | None) -> None:
        """Switch sources (None: idle); while running the switch happens on the engine thread, mouth easing."""
        if self.running:
            with self._lock:
                self._pending.append(source)
            self._wake.set()
        else:
            if self._source is not None and self._source is not source:
                self._source.stop()
            self._source = source
            self._needs_activation = True

    def audio_counters(self) -> dict[str, int]:
        """Sound problems so far: speaker blocks that ran dry; microphone blocks lost (while one listens)."""
        source = self._source
        overflows = source.overflows if isinstance(source, MicrophoneSource) else 0
        return {"output_underruns": self.speaker.underruns, "input_overflows": overflows}

    def set_monitor(self, enabled: bool, offset_ms: float | None = None) -> None:
        """Play the live input's voice, delayed by the measured latency plus `offset_ms`, so a viewer hears
        it with the frames that show it; takes effect on the engine thread (now, or when a live source starts)."""
        if offset_ms is not None:
            if not -MAX_DELAY_S * 1000 <= offset_ms <= MAX_DELAY_S * 1000:
                raise ValueError(f"monitor offset {offset_ms} ms is out of range; allowed ±{MAX_DELAY_S * 1000:g}")
            self.monitor.offset_ms = float(offset_ms)
        self.monitor_enabled = bool(enabled)
        self._needs_monitor_update = True
        self._wake.set()

    def presentation_media_time(self) -> float:
        """The media time a viewport should show now: the audio heard now or, while the voice monitor plays,
        a fixed delay behind it (a jitter buffer: a frame the engine finished late is still shown on time)."""
        now = self.media_time_now()
        if self.monitor.clip is None:
            return now
        latest = self.slot.latest()
        if latest is not None:
            self.monitor.note_lag(now - latest.media_time_s)
        return now - self.monitor.video_shift_s

    def note_presented(self, picked_at: float, presented_at: float | None = None) -> None:
        """A viewport picked a frame (monotonic `picked_at`, with `presentation_media_time`) and showed it at
        `presented_at` (now when None): the render/present cost the voice monitor adds to its delay."""
        if self.monitor.clip is not None:
            self.monitor.note_render((presented_at or time.monotonic()) - picked_at)

    def _update_monitor(self) -> None:
        self._needs_monitor_update = False
        source = self._source
        clip = self.monitor.clip
        if not (self.monitor_enabled and source is not None and _is_live(source)):
            if clip is not None:
                self.speaker.cut(clip)
                self.monitor.clip = None
            return
        if clip is not None and not clip.done:
            return
        try:
            self.speaker.open()
            self.speaker.play_clip(self.monitor.attach(self.speaker.sample_rate, self.speaker.channels))
        except AudioDeviceError:  # no output: nothing to monitor on; speaker.status says why
            self.monitor.clip = None

    def media_time_now(self) -> float:
        """The session media time being heard now, per the active source's clock (for presentation)."""
        source = self._source
        if source is not None and source.clock.ready and self._source_active():
            return self._source_offset + source.clock.monotonic_to_media(self.monotonic())
        return self._media_now

    # ------------------------------------------------------------ engine thread

    def run_once(self) -> float:
        """One pass of the engine loop on the calling thread, for benchmarks and tests (the thread must not
        be running); returns how long the engine thread would now sleep, in seconds."""
        if self.running:
            raise RuntimeError("Engine.run_once: the engine thread is running; call stop() first")
        if self._needs_activation:
            self._activate(self._source)
        return self._iterate()

    def _run(self) -> None:
        try:
            self.speaker.open()
        except AudioDeviceError:  # no output device: sources play silently and say so; `speaker.status` tells
            pass
        self._activate(self._source)
        while not self._stop.is_set():
            self._wake.clear()  # before the work: a wake-up that comes during it is kept for the wait
            self._wake.wait(self._iterate())

    def _iterate(self) -> float:
        with self._lock:
            pending, self._pending = self._pending, []
            plan, self._pending_plan = self._pending_plan, None
        if plan is not None:
            self._apply_plan(plan)
        for source in pending:
            if self._source is not None and self._source is not source:
                self._source.stop()
                self._source.data_event = None
            self._activate(source)
        if self._needs_monitor_update:
            self._update_monitor()
        if self._source_active():
            self._process_source()
            wait = self._source_wait_s()
        else:
            self._process_idle()
            wait = self._idle_wait_s()
        if self.housekeeper is not None:  # between frames: the quiet moment housekeeping waits for
            self.housekeeper.tick(self)
        return wait

    def _source_wait_s(self) -> float:
        """Until the source's next audio: its device callback sets `_wake`; a timer-paced source says when."""
        hint = self._source.next_data_in_s() if self._source is not None else None
        return SOURCE_POLL_S if hint is None else min(hint, SOURCE_POLL_S)

    def _idle_wait_s(self) -> float:
        anchor_media, anchor_mono = self._idle_anchor
        due = (self._last_emitted_frame_index + 1) / self.fps - (anchor_media + self.monotonic() - anchor_mono)
        return min(max(due, 0.0), SOURCE_POLL_S)

    def _activate(self, source: AudioSource | None) -> None:
        """Start a source on the session clock right after the last emitted frame."""
        self._source = source
        self._needs_activation = False
        # ease the mouth only from where it is (a source switched mid-word); from rest there is no jump to hide
        if float(np.abs(self._last_arkit[MOUTH_CHANNELS]).max()) > MOUTH_AT_REST:
            self._ease_from = self._last_arkit.copy()
            self._ease_until = self._media_now + EASE_S
        else:
            self._ease_until = -1.0
        self._source_offset = self._media_now + HOP_S
        self._origin_hop = 0  # hop index (since the source's sample 0) where the feature streams began
        self._fed = 0  # samples fed to the streams since then
        self._hops_done = 0
        self._samples_seen = 0
        self._prosody_count = 0
        self._flushed = False
        self._prosody_history: deque[Prosody] = deque(maxlen=256)
        self._track = None
        self._reset_face_stream()
        self.level.reset()
        self.prosody.reset()
        self.motion.reset()
        self._held_motion = None
        self._gate.reset()
        self._shaper.reset()
        self._idle_anchor = (self._media_now, self.monotonic())
        self.source_error = None
        if source is None:
            self.status = "idle"
            return
        source.data_event = self._wake
        source.speaker = self.speaker
        try:
            source.start()  # first: its sound is on its way while the phoneme track is built
        except Exception as error:  # a source that cannot start leaves the engine idle, saying why
            self.source_error = f"{source.name}: {error}"
        self._update_monitor()
        if source.phonemes is not None and source.duration_s is not None:
            from studio.speech.visemes import phoneme_track

            self._track = phoneme_track(source.phonemes, source.duration_s, fps=1.0 / HOP_S)
        self.status = source.status

    def _source_active(self) -> bool:
        source = self._source
        return (source is not None and self.source_error is None and source.error is None
                and not (source.finished and self._hops_done * HOP >= self._samples_seen))

    def _process_source(self) -> None:
        source = self._source
        begin = time.perf_counter()
        try:
            start, samples = source.read_available()
        except Exception as error:  # never let a source take the engine down
            self.source_error = f"{source.name}: {error}"
            samples = np.zeros(0, np.float32)
        capture_ms = (time.perf_counter() - begin) * 1000.0
        if self.monitor.clip is not None and samples.size:
            self.monitor.feed(start, samples, source.clock)
        self.status = self.source_error or source.status
        if source.error is not None or self.source_error is not None:
            self._idle_anchor = (self._media_now, self.monotonic())
            return
        captured = source.captured_audio()
        if captured is not None:
            for listener in list(self._source_audio_listeners):
                listener(self._source_offset + captured[0], captured[1], captured[2])
        if samples.size == 0:
            if source.finished:
                self._flush_source_tail()
            return
        self._samples_seen = max(self._samples_seen, start + len(samples))
        samples = self._continuous(start, samples)
        if samples.size:
            media = self._source_offset + (self._origin_hop * HOP + self._fed) / ENGINE_RATE
            for listener in list(self._audio_listeners):
                listener(media, samples)
            for listener in list(self._source_audio_listeners) if captured is None else ():
                listener(media, samples, ENGINE_RATE)
        t0 = time.perf_counter()
        self.prosody.audible_db = AUDIBLE_DB - self.level.lift_db
        prosodies = self.prosody.push(samples)
        features = None if self._track is not None else self.level.push(self.features.push(samples))
        self._fed += len(samples)
        t1 = time.perf_counter()
        self._add_prosody(prosodies)
        hops = self._face_hops(features)
        t2 = time.perf_counter()
        n = max(1, len(prosodies))
        timings = {"capture": capture_ms / n, "features": (t1 - t0) * 1000.0 / n,
                   "inference": (t2 - t1) * 1000.0 / n}
        self._emit_hops(hops, timings)
        if source.finished:
            self._flush_source_tail()

    def _continuous(self, start: int, samples: np.ndarray) -> np.ndarray:
        """The part of these samples that continues the feature streams; after a gap (a device dropped
        audio) the streams restart at the next hop boundary, so every hop stays on its true media time."""
        expected = self._origin_hop * HOP + self._fed
        if start <= expected:
            return samples[expected - start:]
        self._flush_lookahead(expected)
        self._origin_hop = -(-start // HOP)
        self._fed = 0
        self._prosody_count = 0
        self._prosody_history.clear()
        self._hops_done = max(self._hops_done, self._origin_hop)
        self._reset_face_stream()
        self.prosody.reset()
        return samples[self._origin_hop * HOP - start:]

    def _reset_face_stream(self) -> None:
        self.features.reset()
        self.model.reset()
        self._batch_features = []
        self._recent_features.clear()
        self._model_fed = 0

    def _run_batch(self):
        """Run the face model on the waiting feature frames (None when there are none)."""
        if not self._batch_features:
            return None
        frames = np.concatenate(self._batch_features) if len(self._batch_features) > 1 else self._batch_features[0]
        self._batch_features = []
        output = self.model.step(frames)
        self._model_fed += len(frames)
        self.work.inference_calls += 1
        self.work.hops_inferred += len(frames)
        return output

    def _face_hops(self, features: np.ndarray | None, flush: bool = False) -> list[_Hop]:
        """Face weights for the hops that are now complete (model output lags by its lookahead).

        The model runs once the plan's batch of hops has arrived (every hop at 100 Hz), or at once on `flush`.
        """
        total = self._origin_hop + self._prosody_count
        if self._track is not None:
            track = self._track
            hops = [_Hop(index, track.arkit[min(index, track.num_frames - 1)], None,
                         float(track.voice_active[min(index, track.num_frames - 1)]))
                    for index in range(self._hops_done, total)]
            self._hops_done = max(self._hops_done, total)
            return hops
        if features is not None and len(features):
            self._batch_features.append(features)
            self._recent_features.extend(features)
        waiting = sum(len(f) for f in self._batch_features)
        if waiting == 0 or (waiting < self.plan.face_batch_hops and not flush):
            return []
        output = self._run_batch()
        first = self._origin_hop + self._model_fed - len(output) - self.model.lookahead_frames
        hops = [_Hop(first + i, output.arkit[i], output.visemes[i], float(output.voice_activity[i]))
                for i in range(len(output)) if first + i >= max(self._origin_hop, 0)]
        if hops:
            self._hops_done = hops[-1].index + 1
        return hops

    def _flush_lookahead(self, audio_end: int) -> None:
        """The model still owes the hops its lookahead has not seen yet: pad with silence and emit those
        before `audio_end` (a sample position), where this stretch of audio ends."""
        if self._track is not None or not self.model.lookahead_frames:
            return
        silence = np.zeros(HOP * self.model.lookahead_frames, np.float32)
        features = self.level.push(self.features.push(silence))
        self._add_prosody(self.prosody.push(silence))
        self._fed += len(silence)
        self._emit_hops([hop for hop in self._face_hops(features, flush=True) if hop.index * HOP < audio_end], {})

    def _flush_source_tail(self) -> None:
        """A finished source: the model's lookahead frames still owe the last hops; pad with silence."""
        if not self._flushed:
            self._flushed = True
            self._flush_lookahead(self._samples_seen)
        self._hops_done = max(self._hops_done, -(-self._samples_seen // HOP))
        self._idle_anchor = (self._media_now, self.monotonic())

    def _add_prosody(self, prosodies: list[Prosody]) -> None:
        self._prosody_history.extend(prosodies)
        self._prosody_count += len(prosodies)

    def _prosody_at(self, index: int) -> Prosody:
        offset = index - self._origin_hop - (self._prosody_count - len(self._prosody_history))
        if 0 <= offset < len(self._prosody_history):
            return self._prosody_history[offset]
        return SILENCE

    def _emit_hops(self, hops: list[_Hop], timings: dict) -> None:
        """Step every hop; of those in one output frame period only the newest is shown (below 100 fps
        the model runs on batches of hops, and the older ones of a batch are stale when they come)."""
        for i, hop in enumerate(hops):
            newer = i + 1 < len(hops) and self._frame_index(hops[i + 1].index) == self._frame_index(hop.index)
            self._emit_hop(hop, timings, shown=not newer)

    def _frame_index(self, hop_index: int) -> int:
        return math.floor((self._source_offset + hop_index * HOP_S) * self.fps + 1e-6)

    def _emit_hop(self, hop: _Hop, timings: dict, shown: bool = True) -> None:
        media = self._source_offset + hop.index * HOP_S
        prosody = self._prosody_at(hop.index)
        t0 = time.perf_counter()
        if self._track is None:  # the model's mouth is gated shut in silence (it may murmur on noise)
            near = [self._prosody_at(hop.index + k) for k in range(-MouthGate.LOOK_BEHIND, MouthGate.LOOK_AHEAD + 1)]
            audible = any(p.audible for p in near)
            sounding = any(p.level_db > SPEECH_MIN_DBFS for p in near)
            shut_before = self._gate.value < 0.5
            gate = self._gate.step(audible or (sounding and hop.voice > MouthGate.VOICE_OPENS))
            voice = hop.voice * gate
            self._hops_since_gate_shut = 0 if shut_before else self._hops_since_gate_shut + 1
        else:
            gate, voice = 1.0, hop.voice
            self._hops_since_gate_shut = ONSET_HOPS_WITHOUT_CLOSURE
        arkit = np.maximum(hop.arkit, 0.0, dtype=np.float32)
        np.minimum(arkit, 1.0, out=arkit)
        # closures shut and rounding shows when the model is sure
        arkit = self._shaper.step(arkit, hop.visemes, closures=self._hops_since_gate_shut >= ONSET_HOPS_WITHOUT_CLOSURE)
        if gate < 1.0:
            arkit[MOUTH_CHANNELS] *= gate
        motion = self._motion_at(hop.index, media, replace(prosody, speaking=max(voice, 0.0)))
        t1 = time.perf_counter()
        frame_index = self._frame_index(hop.index)
        if frame_index == self._last_emitted_frame_index or not shown:
            self._media_now = media
            return
        self._emit(media, motion.apply(self._eased(media, arkit)), motion.pose, motion.transl, hop.visemes, voice,
                   timings, (t1 - t0) * 1000.0)
        self._last_emitted_frame_index = frame_index

    def _motion_at(self, hop_index: int, media: float, prosody: Prosody):
        """Body motion for this hop: recomputed every `body_every_hops` hops, held in between."""
        held = self._held_motion
        if held is not None and 0 <= hop_index - held[0] < self.plan.body_every_hops:
            return held[1]
        motion = self.motion.step(media, prosody)
        self.work.motion_steps += 1
        self._held_motion = (hop_index, motion)
        return motion

    def _eased(self, media: float, arkit: np.ndarray) -> np.ndarray:
        if media >= self._ease_until:
            return arkit
        blend = 1.0 - (self._ease_until - media) / EASE_S
        blend = blend * blend * (3.0 - 2.0 * blend)
        eased = arkit.copy()
        eased[MOUTH_CHANNELS] = self._ease_from[MOUTH_CHANNELS] + (arkit - self._ease_from)[MOUTH_CHANNELS] * blend
        return eased

    def _process_idle(self) -> None:
        """No live audio: idle motion on the monotonic clock, mouth easing to rest."""
        anchor_media, anchor_mono = self._idle_anchor
        now_media = anchor_media + (self.monotonic() - anchor_mono)
        next_index = self._last_emitted_frame_index + 1
        while next_index / self.fps <= now_media:
            media = next_index / self.fps
            if media > self._media_now:
                t0 = time.perf_counter()
                motion = self._motion_at(round(media / HOP_S), media, SILENCE)
                t1 = time.perf_counter()
                arkit = self._eased(media, np.zeros(NUM_ARKIT, np.float32))
                self._emit(media, motion.apply(arkit), motion.pose, motion.transl, None, 0.0, {},
                           (t1 - t0) * 1000.0)
            self._last_emitted_frame_index = next_index
            next_index += 1
        if self._source is None:
            self.status = "idle"

    def _emit(self, media: float, arkit: np.ndarray, pose: np.ndarray, transl: np.ndarray,
              visemes: np.ndarray | None, voice: float, timings: dict, motion_ms: float) -> None:
        layer = self.expression
        t0 = time.perf_counter()
        tracking = self.tracking
        if tracking is not None:
            arkit, pose, transl = tracking.mix(media, arkit, pose, transl)
        arkit = layer.apply(arkit) if hasattr(layer, "apply") else layer(arkit)
        arkit, pose, transl = self.anchor.process(media, arkit, pose, transl)
        anchor_ms = (time.perf_counter() - t0) * 1000.0
        stage_ms = {"capture": timings.get("capture", 0.0), "features": timings.get("features", 0.0),
                    "inference": timings.get("inference", 0.0), "motion": motion_ms, "anchor": anchor_ms}
        self._last_arkit = np.asarray(arkit, np.float32)
        self._sequence += 1
        state = FrameState(media_time_s=media, arkit=arkit, pose=pose, transl=transl, visemes=visemes,
                           voice_activity=min(max(float(voice), 0.0), 1.0), expression=getattr(layer, "name", ""),
                           timings_ms=stage_ms, sequence=self._sequence)
        self._media_now = media
        self.work.frames_emitted += 1
        self.work.finger_joint_updates = self.motion.hands.joints_updated
        self.telemetry.record(stage_ms)
        self.slot.put(state)
        with self._lock:
            subscribers = list(self._subscribers)
        for queue in subscribers:
            queue.put(state)
