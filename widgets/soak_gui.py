"""`avatar-studio soak --gui`: a scripted operator session in the real studio window, for memory and smoothness.

The window opens under the current DISPLAY exactly as `avatar-studio gui` builds it (engine, docks, Takes,
panels); no dialog is shown. A script then loops what an operator does, through the window's own methods:
switch persona and preset, edit the persona (colours, body shape, style), start recording, speak a cue,
press the persona's expression hotkeys (real key events), stop, play the take back, export it as MP4 in the
export process and decode the file. Once a second it samples the process memory, the presented frame rate
and the speaker's underruns. The script runs on the GUI thread between frames (a 50 ms step timer), so the
window presents and the engine speaks as they do for a person.

report.json holds the samples, the counts of every action done, and `gui_rss_growth_pct`: the memory growth
after the warm-up (the first 5 minutes, or the first third of a shorter run). With `trace_memory` it also
names what grew (tracemalloc lines and object counts by type between the warm-up and the end).
"""

from __future__ import annotations

import gc
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from studio.housekeeping import rss_mb
from studio.soak import gui_rss_growth

STEP_MS = 50
SAMPLE_MS = 1000
KEEP_TAKES = 2  # the soak deletes older takes and exports: a 30-minute session must not fill the disk
EXPORT_SIZE = (640, 360)
EXPORT_FPS = 30.0
MAX_RSS_GROWTH_PCT = 2.0
MIN_JUDGED_S = 600.0  # shorter runs report the growth but do not pass or fail on it (the heap is still settling)


@dataclass
class GuiSoakOptions:
    duration_s: float
    work_dir: Path  # takes and exports of this session (older ones are deleted as it goes)
    personas: tuple[str, ...] = ()  # cycled; empty: every persona the library lists
    presets: tuple[str, ...] = ()
    trace_memory: bool = False


@dataclass
class _Wait:
    """A script step waits until `done()` or `timeout_s` has passed (then `what` is noted as timed out)."""

    done: Callable[[], bool]
    timeout_s: float
    what: str = ""


@dataclass
class GuiSoakRun:
    counts: Counter = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    time_s: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    fps: list[float] = field(default_factory=list)
    underruns: list[int] = field(default_factory=list)
    last_export: str | None = None
    memory_at_warmup: dict | None = None
    memory_growth: dict | None = None


def _pause(seconds: float) -> _Wait:
    until = time.monotonic() + seconds
    return _Wait(lambda: time.monotonic() >= until, seconds + 1.0)


def _type_counts() -> Counter:
    return Counter(type(item).__qualname__ for item in gc.get_objects())


class OperatorScript:
    """The looped operator session on one MainWindow; `steps()` yields a wait after each action."""

    def __init__(self, window, options: GuiSoakOptions, run: GuiSoakRun) -> None:
        self.window = window
        self.panels = window.panels
        self.options = options
        self.run = run
        self.personas = options.personas or tuple(self.panels.personas.names())
        self.presets = options.presets or tuple(self.panels.presets.names())
        self.started = time.monotonic()
        self.exports = options.work_dir / "exports"
        self.exports.mkdir(parents=True, exist_ok=True)
        self._decode: threading.Thread | None = None

    def expired(self) -> bool:
        return time.monotonic() - self.started >= self.options.duration_s

    def problem(self, text: str) -> None:
        self.run.problems.append(f"{time.monotonic() - self.started:.0f} s: {text}")

    def steps(self) -> Iterator[_Wait]:
        cycle = 0
        while not self.expired():
            yield from self.cycle(cycle)
            cycle += 1
            self.run.counts["cycles"] += 1

    def cycle(self, index: int) -> Iterator[_Wait]:
        panels, counts = self.panels, self.run.counts
        if panels.select_persona(self.personas[index % len(self.personas)]):
            counts["persona_switches"] += 1
        else:
            self.problem(f"could not switch to persona {self.personas[index % len(self.personas)]} (the Persona dock says why)")
        yield _pause(1.0)
        if panels.select_preset(self.presets[index % len(self.presets)]):
            counts["preset_switches"] += 1
        else:
            self.problem(f"could not switch to preset {self.presets[index % len(self.presets)]} (the Preset dock says why)")
        yield _pause(1.0)
        yield from self.edit_persona(index)
        if self.expired():
            return
        if not self.window.recording.start_recording():
            self.problem(f"could not start recording: {self.window.last_error}")
            return
        folder = self.window.recording.recorder.folder
        yield _pause(0.5)
        if panels.speak_cue():
            counts["cues_spoken"] += 1
            yield _Wait(lambda: self.window.engine.source is None, 30.0, "cue speech")
        else:
            self.problem(f"could not speak a cue: {self.window.last_error}")
        yield from self.press_hotkeys()
        self.window.recording.stop_recording("soak step done")
        counts["takes_recorded"] += 1
        yield _pause(0.5)
        yield from self.play_back(folder)
        yield from self.export(folder, index)
        self.prune()

    def edit_persona(self, index: int) -> Iterator[_Wait]:
        """What a designer does in the Persona dock: a colour, the body shape, a style value."""
        doc = self.panels.persona_doc
        shade = 0.3 + 0.1 * (index % 5)
        for path, value in (("colors.shirt", (shade, 0.35, 0.6)),
                            ("betas", [0.4 * ((index % 3) - 1)]),
                            ("style.head_motion", 0.8 + 0.1 * (index % 4))):
            doc.update(path, value)
            self.run.counts["persona_edits"] += 1
            yield _pause(0.6)

    def press_hotkeys(self) -> Iterator[_Wait]:
        """Each of the persona's expression keys, pressed and pressed again (fade in, fade out), as key events."""
        from PySide6.QtCore import Qt
        from PySide6.QtGui import QKeySequence
        from PySide6.QtTest import QTest

        mixer = self.panels.mixer
        bindings = self.panels.hotkeys.expression_bindings()
        for name, key in list(bindings.items())[:2]:
            combination = QKeySequence(key)[0]
            for want_on in (True, False):
                self.window.activateWindow()
                QTest.keyClick(self.window, Qt.Key(combination.key()), combination.keyboardModifiers())
                if mixer.is_active(name) != want_on:  # no focus on a bare X server: the shortcut's own signal
                    self.panels.operator_panel.shortcuts[name].activated.emit()
                    self.run.counts["hotkeys_by_signal"] += 1
                if mixer.is_active(name) == want_on:
                    self.run.counts["hotkeys_pressed"] += 1
                else:
                    self.problem(f"hotkey {key} did not turn {name!r} {'on' if want_on else 'off'}")
                yield _pause(0.8)

    def play_back(self, folder: Path) -> Iterator[_Wait]:
        recording = self.window.recording
        recording.refresh(select=folder.name)
        if not recording.load(folder):
            self.problem(f"could not load take {folder.name}: {self.window.last_error}")
            return
        recording.toggle_playback()
        self.run.counts["playbacks"] += 1
        player = recording.player
        yield _Wait(lambda: player.state != "playing", player.duration_s + 10.0, "playback")
        recording.close_playback()

    def export(self, folder: Path, index: int) -> Iterator[_Wait]:
        recording = self.window.recording
        out = self.exports / f"soak-{index:04d}.mp4"
        if not recording.export(folder, "mp4", out, size=EXPORT_SIZE, fps=EXPORT_FPS):
            self.problem(f"could not start the export: {self.window.last_error}")
            return
        yield _Wait(lambda: recording.export_process is None, 300.0, "export")
        if recording.export_process is not None:
            recording.cancel_export()
            yield _Wait(lambda: recording.export_process is None, 30.0, "export cancel")
            return
        self.run.last_export = recording.last_export
        if not out.is_file():
            self.problem(f"export wrote nothing: {recording.last_export}")
            return
        self.run.counts["exports_written"] += 1
        self._decode = threading.Thread(target=self._check_video, args=(out,), name="soak-decode", daemon=True)
        self._decode.start()
        yield _Wait(lambda: not self._decode.is_alive(), 60.0, "decoding the export")

    def _check_video(self, path: Path) -> None:
        """Decode every frame of the exported MP4 (off the GUI thread): counts it when it holds video frames."""
        import av

        try:
            with av.open(str(path)) as container:
                has_audio = bool(container.streams.audio)
                frames = sum(1 for _ in container.decode(video=0))
        except (av.FFmpegError, OSError) as error:
            self.problem(f"{path.name} does not decode: {error}")
            return
        if not frames:
            self.problem(f"{path.name} holds no video frame")
            return
        self.run.counts["exports_decoded"] += 1
        self.run.counts["exported_frames"] += frames
        self.run.counts["exports_with_sound"] += has_audio

    def prune(self) -> None:
        """Delete all but the newest takes and exports (they are this session's own files)."""
        recording = self.window.recording
        for info in recording.rows[KEEP_TAKES:]:
            shutil.rmtree(info.path, ignore_errors=True)
        for old in sorted(self.exports.glob("*.mp4"))[:-KEEP_TAKES]:
            old.unlink(missing_ok=True)
        recording.refresh()


class GuiSoak:
    """Drives an OperatorScript from timers and samples memory, fps and underruns once a second."""

    def __init__(self, window, options: GuiSoakOptions) -> None:
        from PySide6.QtCore import QTimer

        self.window = window
        self.options = options
        self.run = GuiSoakRun()
        self.script = OperatorScript(window, options, self.run)
        self._steps = self.script.steps()
        self._wait: _Wait | None = None
        self._wait_started = 0.0
        self._draws = window.viewport.draw_count
        self._last_sample = time.monotonic()
        self.warmup_s = min(300.0, options.duration_s / 3.0)
        self.finished = False
        self.on_finished: Callable[[], None] = lambda: None
        self.step_timer = QTimer(window, interval=STEP_MS)
        self.step_timer.timeout.connect(self._step)
        self.sample_timer = QTimer(window, interval=SAMPLE_MS)
        self.sample_timer.timeout.connect(self._sample)

    def start(self) -> None:
        if self.options.trace_memory:
            import tracemalloc

            tracemalloc.start(12)
        self.step_timer.start()
        self.sample_timer.start()

    def _step(self) -> None:
        wait = self._wait
        if wait is not None:
            if wait.done():
                self._wait = None
            elif time.monotonic() - self._wait_started > wait.timeout_s:
                self.script.problem(f"{wait.what or 'a step'} did not finish within {wait.timeout_s:.0f} s")
                self._wait = None
            else:
                return
        try:
            self._wait, self._wait_started = next(self._steps), time.monotonic()
        except StopIteration:
            self._finish()

    def _sample(self) -> None:
        now = time.monotonic()
        run = self.run
        elapsed = now - self.script.started
        draws = self.window.viewport.draw_count
        run.time_s.append(round(elapsed, 2))
        run.rss_mb.append(round(rss_mb(), 2))
        run.fps.append(round((draws - self._draws) / max(now - self._last_sample, 1e-3), 2))
        run.underruns.append(int(self.window.latency_model.output_underruns or 0))
        self._draws, self._last_sample = draws, now
        if self.options.trace_memory and run.memory_at_warmup is None and elapsed >= self.warmup_s:
            run.memory_at_warmup = self._memory_state()

    def _memory_state(self) -> dict:
        import tracemalloc

        gc.collect()
        return {"snapshot": tracemalloc.take_snapshot(), "types": _type_counts()}

    def _finish(self) -> None:
        self.step_timer.stop()
        self.sample_timer.stop()
        self._sample()
        if self.options.trace_memory and self.run.memory_at_warmup is not None:
            self.run.memory_growth = _memory_growth(self.run.memory_at_warmup, self._memory_state())
            self.run.memory_at_warmup = None
        self.finished = True
        self.window.close()
        self.on_finished()


def _memory_growth(before: dict, after: dict, top: int = 15) -> dict:
    """The source lines whose live allocations grew most, and the object types whose count grew most."""
    stats = after["snapshot"].compare_to(before["snapshot"], "traceback")
    lines = []
    for stat in stats[:top]:
        frames = [f"{frame.filename.split('site-packages/')[-1]}:{frame.lineno}" for frame in stat.traceback[-4:]]
        lines.append({"kib": round(stat.size_diff / 1024, 1), "count": stat.count_diff, "where": " < ".join(reversed(frames))})
    types = (after["types"] - before["types"]).most_common(top)
    return {"allocations": lines, "object_types": [{"type": name, "count": count} for name, count in types]}


def run_gui_soak(avatar, preset, persona, options: GuiSoakOptions) -> dict:
    """Open the studio window, run the operator script for `options.duration_s` and return the report."""
    from PySide6.QtCore import QEventLoop

    from widgets.main_window import MainWindow, create_application, studio_engine

    app = create_application()
    window = MainWindow(avatar, engine=studio_engine(preset, persona), latency_target_ms=preset.render.latency_target_ms,
                        persona=persona, preset=preset, show_dialogs=False, persist_layout=False,
                        recordings_root=options.work_dir / "takes")
    window.presets.preload()
    window.show()
    soak = GuiSoak(window, options)
    loop = QEventLoop()
    soak.on_finished = loop.quit
    soak.start()
    started = time.perf_counter()
    loop.exec()
    app.processEvents()
    return build_gui_report(soak, time.perf_counter() - started)


def build_gui_report(soak: GuiSoak, wall_s: float) -> dict:
    run, options = soak.run, soak.options
    growth = gui_rss_growth(run.time_s, run.rss_mb, soak.warmup_s)
    after = [fps for t, fps in zip(run.time_s, run.fps) if t >= soak.warmup_s] or run.fps
    underruns_at_warmup = next((u for t, u in zip(run.time_s, run.underruns) if t >= soak.warmup_s), 0)
    judged = options.duration_s >= MIN_JUDGED_S
    counts = dict(run.counts)
    every_action = all(counts.get(name, 0) > 0 for name in (
        "persona_switches", "preset_switches", "persona_edits", "cues_spoken", "hotkeys_pressed", "takes_recorded",
        "playbacks", "exports_written", "exports_decoded"))
    checks = {
        "every_action_done": every_action,
        "no_problems": not run.problems,
        "rss_growth": (growth["growth_pct"] <= MAX_RSS_GROWTH_PCT) if judged else None,
    }
    return {
        "kind": "gui",
        "settings": {"duration_s": options.duration_s, "warmup_s": round(soak.warmup_s, 1),
                     "personas": list(soak.script.personas), "presets": list(soak.script.presets),
                     "export_size": f"{EXPORT_SIZE[0]}x{EXPORT_SIZE[1]}", "export_fps": EXPORT_FPS},
        "summary": {
            "wall_s": round(wall_s, 1),
            "gui_rss_growth_pct": growth["growth_pct"],
            "rss_at_warmup_mb": growth["baseline_mb"],
            "rss_at_end_mb": growth["end_mb"],
            "rss_max_after_warmup_mb": growth["max_mb"],
            "rss_start_mb": run.rss_mb[0] if run.rss_mb else None,
            "presented_fps_mean": round(sum(after) / len(after), 2) if after else None,
            "presented_fps_min": min(after) if after else None,
            "audio_underruns": run.underruns[-1] if run.underruns else 0,
            "audio_underruns_after_warmup": (run.underruns[-1] - underruns_at_warmup) if run.underruns else 0,
            "counts": counts,
            "last_export": run.last_export,
        },
        "thresholds": {"max_gui_rss_growth_pct": MAX_RSS_GROWTH_PCT, "judged_from_s": MIN_JUDGED_S},
        "pass": checks,
        "passed": all(ok is not False for ok in checks.values()),
        "problems": run.problems,
        "memory_growth": run.memory_growth,
        "series": {"time_s": run.time_s, "rss_mb": run.rss_mb, "presented_fps": run.fps, "audio_underruns": run.underruns},
    }


def default_work_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="avatar-soak-gui-"))
