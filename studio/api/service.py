"""What the API's commands do, on a Qt-free engine: speak, play, stop, expressions, persona and preset,
recording, status. `avatar-studio serve` runs one with no window; the server calls it off its event loop.

Headless, nothing is played on a sound card unless asked (`play_audio`): sources run on their own timer,
and the audio is streamed to API clients beside the frames instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from studio.api.messages import (
    Ack,
    ApiError,
    ExpressionResult,
    PersonaResult,
    PlayResult,
    PresetResult,
    RecordingResult,
    SpeakResult,
    StatusResult,
)
from studio.api.security import AllowedFolders, PathNotAllowed
from studio.engine.output import SpeakerOutput
from studio.engine.sources import ENGINE_RATE, AudioDeviceError
from studio.paths import recordings_dir
from studio.presets import MAX_CUE_CHARS, Persona, Preset, PresetError

EventListener = Callable[[str, dict], None]


class SilentSpeaker(SpeakerOutput):
    """The engine's output when the API serves without sound: it never opens a device, so every source runs on
    its timer (and a machine without a sound card starts as quickly as one with)."""

    def open(self) -> None:
        self.error = "no sound played: `avatar-studio serve` streams the audio to its clients (--play-audio plays it)"
        raise AudioDeviceError(self.error)


class StudioService:
    """One engine and the studio state the API changes; every method is safe from any thread."""

    def __init__(self, persona: Persona, preset: Preset, folders: AllowedFolders | None = None,
                 play_audio: bool = False, recordings: Path | None = None, prewarm: bool = True,
                 engine=None, mixer=None) -> None:
        """`engine` and `mixer`: an engine already running and its ExpressionMixer (a window's, which plays its
        sound); without them a headless engine is built, silent unless `play_audio`."""
        from studio.engine.anchor import SpatialAnchor
        from studio.engine.pipeline import Engine
        from studio.expressions import ExpressionMixer, MixSettings

        self.persona, self.preset = persona, preset
        self.folders = folders or AllowedFolders()
        self.recordings = Path(recordings) if recordings is not None else recordings_dir()
        self.play_audio = play_audio or engine is not None
        gains, caps = persona.style.weight_arrays()
        self.mixer = mixer or ExpressionMixer(MixSettings(gains=gains, caps=caps))
        if engine is None:
            engine = Engine(plan=preset.plan, style=persona.motion_style(), expression=self.mixer,
                            anchor=SpatialAnchor(preset.anchor))
            if not play_audio:
                engine.speaker = SilentSpeaker()
        else:
            prewarm = False  # its owner prepared it
        self.engine = engine
        if prewarm:
            from studio.housekeeping import prepare_long_session

            prepare_long_session(self.engine, preset, persona.voice.name)
        self._lock = threading.RLock()
        self._listeners: list[EventListener] = []
        self._source = None
        self._recorder = None
        self._record_queue = None
        self.clients: Callable[[], list[str]] = list  # the server tells who is connected

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> None:
        self.engine.start()

    def stop_waiting(self) -> None:
        """Let go of anything a command is waiting on, so the server can stop at once (the window's service waits
        on its GUI thread; this one waits on nothing)."""

    def close(self) -> None:
        if self._recorder is not None:
            self.stop_recording("the server stopped")
        self.engine.stop()

    @property
    def ready(self) -> bool:
        return self.engine.running

    def on_event(self, listener: EventListener) -> None:
        """`listener(kind, detail)` on whichever thread the event happens; it must only hand it on."""
        self._listeners.append(listener)

    def _event(self, kind: str, **detail) -> None:
        for listener in list(self._listeners):
            listener(kind, detail)

    # ---------------------------------------------------------------- sources

    def _use_source(self, source, description: str) -> None:
        with self._lock:
            self.engine.set_source(source)
            self._source = source
        self._event("speech_started", source=description)
        if self._recorder is not None:
            self._recorder.add_event("source", self.engine.media_time_now(), source=description)

    def speak(self, text: str, voice: str | None = None, rate_wpm: int | None = None, pitch: int | None = None) -> SpeakResult:
        from studio.engine.sources import TextSource
        from studio.presets import check_cue_line
        from studio.speech.espeak import SpeechError

        try:
            check_cue_line(text)
        except ValueError as error:
            code = "text_too_long" if len(text) > MAX_CUE_CHARS else "bad_request"
            raise ApiError(code, f"field 'payload.text': {error}") from None
        chosen = self.persona.voice
        voice = voice or chosen.name
        try:
            source = TextSource(text, voice, rate_wpm or chosen.rate_wpm, chosen.pitch if pitch is None else pitch,
                                play=self.play_audio)
        except SpeechError as error:
            raise ApiError("bad_request", f"cannot speak it: {error}") from None
        self._use_source(source, f"text {text[:40]!r}")
        return SpeakResult(duration_s=source.duration_s, voice=voice, sample_rate=ENGINE_RATE)

    def play(self, path: str) -> PlayResult:
        from studio.engine.sources import AudioInputError, FileSource

        try:
            real = self.folders.resolve(path)
        except PathNotAllowed as error:
            raise ApiError("path_not_allowed", str(error)) from None
        try:
            source = FileSource(real, play=self.play_audio)
        except AudioInputError as error:
            raise ApiError("bad_request", str(error)) from None
        self._use_source(source, f"file {real.name}")
        return PlayResult(path=str(real), duration_s=source.duration_s)

    def stop(self) -> Ack:
        with self._lock:
            speaking, self._source = self._source, None
            self.engine.set_source(None)
        if speaking is not None:
            self._event("speech_stopped", source=speaking.name)
        return Ack()

    def poll(self) -> None:
        """Say when the source speaking has finished or failed (call it often, from any one thread)."""
        with self._lock:
            source = self._source
            if source is None or not self.engine.running:
                return
            error = self.engine.source_error or source.error
            if not error and not source.finished:
                return
            self._source = None
        if error:
            self._event("source_error", source=source.name, message=str(error))
        else:
            self._event("speech_finished", source=source.name)

    # ---------------------------------------------------------------- expressions, persona, preset

    def _expression(self, name: str):
        expression = self.persona.expressions.get(name)
        if expression is None:
            known = ", ".join(self.persona.expressions) or "none"
            raise ApiError("not_found", f"persona {self.persona.name!r} has no expression {name!r}; it has: {known}")
        return expression

    def trigger(self, name: str) -> ExpressionResult:
        self.mixer.fire(name, self._expression(name))
        self._event("expression", name=name, on=True)
        return ExpressionResult(active=self.mixer.active_names())

    def release(self, name: str) -> ExpressionResult:
        self._expression(name)
        self.mixer.release(name)
        self._event("expression", name=name, on=False)
        return ExpressionResult(active=self.mixer.active_names())

    def set_persona(self, name: str) -> PersonaResult:
        from studio.presets import persona_by_name

        try:
            persona = persona_by_name(name)
        except PresetError as error:
            raise ApiError("not_found", str(error)) from None
        gains, caps = persona.style.weight_arrays()
        with self._lock:
            self.mixer.neutral()  # the old persona's expressions are not this one's
            self.mixer.set_settings(gains=gains, caps=caps)
            self.engine.set_style(persona.motion_style())
            self.persona = persona
        self._event("persona", name=persona.name)
        return PersonaResult(name=persona.name, expressions=list(persona.expressions), voice=persona.voice.name)

    def set_preset(self, name: str) -> PresetResult:
        from studio.presets import preset_by_name

        try:
            preset = preset_by_name(name)
        except PresetError as error:
            raise ApiError("not_found", str(error)) from None
        with self._lock:
            self.engine.set_plan(preset.plan)
            self.preset = preset
        self._event("preset", name=preset.name)
        plan = preset.plan
        return PresetResult(name=preset.name, face_model=plan.face_variant, face_rate_hz=plan.face_rate_hz)

    # ---------------------------------------------------------------- recording

    def start_recording(self, name: str | None = None) -> RecordingResult:
        from studio.avatar.io import default_avatar_path, load_avatar
        from studio.recording.recorder import DiskSpaceError, TakeRecorder, live_take_format, take_manifest
        from studio.recording.take import new_take_folder

        with self._lock:
            if self._recorder is not None:
                raise ApiError("conflict", f"already recording take {self._recorder.folder.name!r}; stop it first")
            if name is not None and (self.recordings / name).exists():
                raise ApiError("conflict", f"a take named {name!r} already exists")
            folder = new_take_folder(self.recordings, name)
            rate, channels = live_take_format(self.engine)  # a microphone's own rate and channels
            manifest = take_manifest(self.persona.name, self.preset.name, load_avatar(default_avatar_path()),
                                     rate, self.engine.fps, source="api", channels=channels)
            queue = self.engine.subscribe(1024)
            recorder = TakeRecorder(folder, manifest, queue)
            try:
                recorder.start()
            except (DiskSpaceError, OSError) as error:
                self.engine.unsubscribe(queue)
                if folder.is_dir() and not any(folder.iterdir()):
                    folder.rmdir()
                raise ApiError("engine_error", str(error)) from None
            self.engine.listen_source_audio(recorder.add_audio)
            recorder.add_event("start", self.engine.media_time_now(), source="api")
            self._recorder, self._record_queue = recorder, queue
        self._event("recording_started", take=folder.name)
        return RecordingResult(take=folder.name, folder=str(folder))

    def stop_recording(self, reason: str = "stopped by an API client") -> RecordingResult:
        with self._lock:
            recorder = self._recorder
            if recorder is None:
                raise ApiError("conflict", "not recording")
            self.engine.unlisten_source_audio(recorder.add_audio)
            manifest = recorder.stop(reason)
            self.engine.unsubscribe(self._record_queue)
            self._recorder = self._record_queue = None
        result = RecordingResult(take=recorder.folder.name, folder=str(recorder.folder), frames=recorder.frames_written,
                                 duration_s=float(manifest.get("duration_s", 0.0)))
        self._event("recording_stopped", take=result.take, frames=result.frames, duration_s=result.duration_s)
        return result

    # ---------------------------------------------------------------- status

    def status(self) -> StatusResult:
        engine = self.engine
        latest = engine.slot.latest()
        source = self._source
        recorder = self._recorder
        return StatusResult(
            state=str(source.status) if source is not None else ("idle" if engine.running else "stopped"),
            speaking=source is not None, persona=self.persona.name, preset=self.preset.name,
            expressions=self.mixer.active_names(), recording=recorder.folder.name if recorder is not None else None,
            media_time_s=latest.media_time_s if latest is not None else 0.0, frames_emitted=engine.work.frames_emitted,
            face_provider=engine.face_provider, clients=self.clients())
