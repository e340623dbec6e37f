"""Recording in the studio window: Record button and hotkey, the red recording indicator, the Takes dock
(list, rename, delete to the trash with undo, repair), playback with a timeline, re-targeting, Live Link
Face CSV import and exports that run in a separate process (progress, cancel, the UI never waits).

`RecordingController(window)` builds all of it and hooks it into a MainWindow; the window asks it for
`playback_frame()` each refresh and calls `shutdown()` when it closes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import pyqtgraph as pg  # noqa: E402
from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, Qt, QTimer, Signal  # noqa: E402
from PySide6.QtGui import QAction, QKeySequence  # noqa: E402
from PySide6.QtWidgets import (  # noqa: E402
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QProgressBar,
    QPushButton,
    QSlider,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from studio.fileio import remember_folder, remembered_folder  # noqa: E402
from studio.frame import FrameState  # noqa: E402
from studio.paths import recordings_dir, user_data_dir  # noqa: E402
from studio.recording.take import (  # noqa: E402
    Take,
    TakeError,
    TakeInfo,
    find_unfinished,
    list_takes,
    new_take_folder,
    open_take,
    rename_take,
    repair_take,
    restore_take,
    size_text,
    trash_take,
)

COLUMNS = ("Name", "Date", "Length", "Persona", "Size", "Status")
EXPORT_FILTERS = {"mp4": "MP4 video (*.mp4)", "mov": "ProRes 4444 with alpha (*.mov)", "webm": "VP9 WebM with alpha (*.webm)",
                  "csv": "Live Link Face CSV (*.csv)", "bvh": "BVH motion (*.bvh)"}
RECORDED = "(as recorded)"
_REC_STYLE = "QLabel { background: #c62828; color: white; font-weight: 700; padding: 1px 8px; border-radius: 3px; }"


def _clock_text(seconds: float) -> str:
    minutes, rest = divmod(max(seconds, 0.0), 60)
    return f"{int(minutes):02d}:{rest:04.1f}"


class Timeline(pg.PlotWidget):
    """Speech activity (the take's voice activity and audio level), operator events, and a draggable playhead."""

    seek_requested = Signal(float)

    def __init__(self) -> None:
        super().__init__()
        self.setMinimumHeight(120)
        self.setMaximumHeight(180)
        self.setMouseEnabled(x=False, y=False)
        self.hideButtons()
        self.setMenuEnabled(False)
        self.getPlotItem().hideAxis("left")
        self.setYRange(0, 1.15, padding=0)
        self.level = self.plot(pen=pg.mkPen("#4fc1ff", width=1), fillLevel=0, brush=pg.mkBrush(79, 193, 255, 60))
        self.voice = self.plot(pen=pg.mkPen("#b5cea8", width=1.5))
        self.playhead = pg.InfiniteLine(0.0, movable=True, pen=pg.mkPen("#f48771", width=2))
        self.playhead.sigDragged.connect(lambda line: self.seek_requested.emit(float(line.value())))
        self.addItem(self.playhead)
        self._event_items: list = []
        self.scene().sigMouseClicked.connect(self._clicked)

    def show_take(self, take: Take | None) -> None:
        for item in self._event_items:
            self.removeItem(item)
        self._event_items = []
        if take is None:
            self.level.setData([], [])
            self.voice.setData([], [])
            return
        times, voice = take.voice_activity()
        self.voice.setData(times, voice)
        self.level.setData(*take.audio_level())
        for event in take.events:
            at = float(event["t"]) - take.start_media_s
            label = str(event.get("name") or event.get("text") or event.get("file") or event["kind"])[:24]
            line = pg.InfiniteLine(max(at, 0.0), pen=pg.mkPen("#dcdcaa", style=Qt.PenStyle.DashLine),
                                   label=f"{event['kind']}: {label}", labelOpts={"position": 0.9, "color": "#dcdcaa"})
            self.addItem(line)
            self._event_items.append(line)
        self.setXRange(0, max(take.duration_s, 0.1), padding=0.01)

    def set_position(self, seconds: float) -> None:
        if not self.playhead.moving:
            self.playhead.setValue(seconds)

    def _clicked(self, event) -> None:
        point = self.getPlotItem().vb.mapSceneToView(event.scenePos())
        self.seek_requested.emit(float(point.x()))


class TakesPanel(QWidget):
    """The Takes dock's contents; every button calls a RecordingController method that tests drive directly."""

    def __init__(self, controller: RecordingController) -> None:
        super().__init__()
        self.controller = controller
        self.record_button = QPushButton("● Record")
        self.record_button.setToolTip("Start or stop recording a take (Ctrl+R)")
        self.record_button.clicked.connect(controller.toggle_recording)
        self.record_status = QLabel("")
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().hide()
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.DoubleClicked | QAbstractItemView.EditTrigger.EditKeyPressed)
        header = self.table.horizontalHeader()
        for column in range(len(COLUMNS)):  # a name is read whole ("take-2026-12-04-101530"), never cut to "tak…"
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # if ever too narrow, the distinct end shows
        self.table.itemChanged.connect(self._renamed)
        self.table.itemDoubleClicked.connect(lambda item: controller.load_selected() if item.column() else None)

        self.play_button = QPushButton("▶ Play")
        self.play_button.clicked.connect(controller.toggle_playback)
        self.loop_box = QCheckBox("Loop")
        self.loop_box.toggled.connect(controller.set_loop)
        self.persona_box = QComboBox()
        self.persona_box.setToolTip("Play or export the take as another persona (re-targeting)")
        self.delete_button = QPushButton("Delete")
        self.delete_button.clicked.connect(controller.delete_selected)
        self.undo_button = QPushButton("Undo Delete")
        self.undo_button.setEnabled(False)
        self.undo_button.clicked.connect(controller.undo_delete)
        self.repair_button = QPushButton("Repair")
        self.repair_button.clicked.connect(controller.repair_selected)
        self.export_button = QToolButton()
        self.export_button.setText("Export ▾")
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.export_button)
        for kind, label in EXPORT_FILTERS.items():
            menu.addAction(label.split(" (")[0], lambda k=kind: controller.choose_export(k))
        self.export_button.setMenu(menu)
        self.time_label = QLabel("00:00.0 / 00:00.0")
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, 1000)
        self.slider.sliderMoved.connect(lambda value: controller.seek(value / 1000 * controller.duration_s()))
        self.timeline = Timeline()
        self.timeline.seek_requested.connect(controller.seek)
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.hide()
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.hide()
        self.cancel_button.clicked.connect(controller.cancel_export)

        top = QHBoxLayout()
        top.addWidget(self.record_button)
        top.addWidget(self.record_status, 1)
        top.addWidget(self.export_button)
        actions = QHBoxLayout()
        for widget in (self.repair_button, self.delete_button, self.undo_button):
            actions.addWidget(widget)
        actions.addStretch(1)
        actions.addWidget(QLabel("Play as"))
        actions.addWidget(self.persona_box)
        transport = QHBoxLayout()
        transport.addWidget(self.play_button)
        transport.addWidget(self.loop_box)
        transport.addWidget(self.slider, 1)
        transport.addWidget(self.time_label)
        exporting = QHBoxLayout()
        exporting.addWidget(self.progress, 1)
        exporting.addWidget(self.cancel_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(top)
        layout.addWidget(self.table, 1)
        layout.addLayout(actions)
        layout.addLayout(transport)
        layout.addWidget(self.timeline)
        layout.addLayout(exporting)

    def _renamed(self, item: QTableWidgetItem) -> None:
        if item.column() == 0:
            self.controller.rename(item.data(Qt.ItemDataRole.UserRole), item.text())


def export_folder() -> Path:
    """Where an export dialog starts: the folder last exported to, else the studio's exports folder."""
    return remembered_folder("export", user_data_dir() / "exports")


class ExportDialog(QDialog):
    """Where to, and for video the size, frame rate and background (alpha only in MOV and WebM)."""

    SIZES = ("1280x720", "1920x1080", "640x360", "720x1280", "1080x1080")

    def __init__(self, parent: QWidget, info: TakeInfo, kind: str, background: str) -> None:
        super().__init__(parent)
        self.kind = kind
        self.setWindowTitle(f"Export {info.name} as {kind.upper()}")
        self.path = QLineEdit(str(export_folder() / f"{info.name}.{kind}"))
        self.path.setMinimumWidth(380)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        where = QHBoxLayout()
        where.addWidget(self.path, 1)
        where.addWidget(browse)
        self.size_box = QComboBox()
        self.size_box.setEditable(True)
        self.size_box.addItems(self.SIZES)
        self.fps = QDoubleSpinBox()
        self.fps.setRange(1, 120)
        self.fps.setValue(30.0)
        self.background = QComboBox()
        self.background.addItems(["studio", "chroma"] + (["transparent"] if kind in ("mov", "webm") else []))
        self.background.setCurrentText(background)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Export")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout(self)
        form.addRow("File", where)
        if kind in ("mp4", "mov", "webm"):
            form.addRow("Size", self.size_box)
            form.addRow("Background", self.background)
        form.addRow("Frame rate", self.fps)
        form.addRow(buttons)

    def _browse(self) -> None:
        out, _ = QFileDialog.getSaveFileName(self, "Export to", self.path.text(), EXPORT_FILTERS[self.kind])
        if out:
            self.path.setText(out if out.lower().endswith(f".{self.kind}") else f"{out}.{self.kind}")

    def out_path(self) -> str:
        text = self.path.text().strip()
        return text if not text or text.lower().endswith(f".{self.kind}") else f"{text}.{self.kind}"

    def size(self) -> tuple[int, int] | None:
        try:
            width, height = (int(v) for v in self.size_box.currentText().lower().split("x"))
        except ValueError:
            return None
        return width, height


class RecordingController(QObject):
    """Records, lists, plays and exports takes for one MainWindow."""

    recorder_stopped = Signal(str)  # emitted on the recorder's thread; handled on the GUI thread

    def __init__(self, window, root: Path | None = None) -> None:
        super().__init__(window)
        self.window = window
        self.root = Path(root) if root is not None else recordings_dir()
        self.recorder = None
        self.player = None
        self.take: Take | None = None
        self.rows: list[TakeInfo] = []
        self.trashed: list[tuple[Path, Path]] = []
        self.export_process: QProcess | None = None
        self.export_target: Path | None = None
        self.last_export: str | None = None
        self._queue = None
        self._engine = None
        self._watched = (None, None)
        self._original_avatar = None
        self.recorder_stopped.connect(self._on_recorder_stopped)

        self.panel = TakesPanel(self)
        self.dock = window.add_dock("Takes", "takesDock", self.panel, Qt.DockWidgetArea.RightDockWidgetArea)
        self.indicator = QLabel("")
        self.indicator.setStyleSheet(_REC_STYLE)
        self.indicator.hide()
        window.statusBar().insertPermanentWidget(0, self.indicator)
        menu = window.menuBar().addMenu("&Recording")
        self.record_action = QAction("&Record", window)
        self.record_action.setShortcut(QKeySequence("Ctrl+R"))
        self.record_action.triggered.connect(self.toggle_recording)
        menu.addAction(self.record_action)
        menu.addAction("&Import Live Link Face CSV…", self.choose_livelink_import)
        self.timer = QTimer(self)
        self.timer.setInterval(200)
        self.timer.timeout.connect(self._tick)
        self.timer.start()
        self.refresh()
        self.recover_unfinished()

    # ------------------------------------------------------------------ recording

    @property
    def recording(self) -> bool:
        return self.recorder is not None and self.recorder.recording

    def toggle_recording(self) -> None:
        self.stop_recording() if self.recording else self.start_recording()

    def _preset_name(self) -> str:
        panels = getattr(self.window, "panels", None)
        if panels is not None:
            return panels.preset_doc.item.name
        return self.window.persona.default_preset

    def start_recording(self) -> bool:
        """Record from the engine's frame queue (the engine starts if it is not running yet)."""
        from studio.recording.recorder import DiskSpaceError, TakeRecorder, live_take_format, take_manifest

        engine = self.window.engine.ensure_engine()
        if engine is None:
            self.window.report_error("Cannot record", f"Cannot record: {self.window.engine.unavailable_reason}")
            return False
        try:
            folder = new_take_folder(self.root)
            rate, channels = live_take_format(engine)  # the microphone's own rate and channels, not the engine's copy
            manifest = take_manifest(self.window.persona.name, self._preset_name(), self.window.avatar, rate,
                                     engine.fps, channels=channels)
            queue = engine.subscribe(1024)
            recorder = TakeRecorder(folder, manifest, queue, on_stopped=self.recorder_stopped.emit)
            recorder.start()
        except (DiskSpaceError, OSError) as error:
            if "queue" in locals():
                engine.unsubscribe(queue)
            if "folder" in locals() and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
            self.window.report_error("Cannot record", str(error))
            return False
        engine.listen_source_audio(recorder.add_audio)
        self.recorder, self._queue, self._engine = recorder, queue, engine
        self._watched = (self.window.persona.name, self._preset_name())
        self.window.engine.state_changed.connect(self._on_source)
        recorder.add_event("start", engine.media_time_now(), source=self.window.engine.state)
        self._show_recording()
        return True

    def stop_recording(self, reason: str = "stopped by the operator") -> dict | None:
        recorder = self.recorder
        if recorder is None:
            return None
        manifest = recorder.stop(reason)
        self._detach()
        self.refresh(select=recorder.folder.name)
        self.window.statusBar().showMessage(f"Recorded take {recorder.folder.name}: {manifest.get('duration_s', 0):.1f} s, "
                                            f"{recorder.frames_written} frames", 8000)
        if not recorder.holds_sound:
            self._warn_silent(recorder)
        return manifest

    def _warn_silent(self, recorder) -> None:
        """A take without sound is kept, but the operator hears about it now rather than at the export."""
        audio = ("no audio at all" if recorder.audio_samples == 0 else
                 f"{recorder.audio_samples / recorder.sample_rate:.1f} s of silence")
        self.window.report_error(
            "Silent take",
            f"The take {recorder.folder.name} holds no sound ({audio}): nothing was spoken, played or heard while it "
            "recorded. It was kept. To record a voice, start a cue, Speak Text, an audio file or the microphone "
            "while recording.")

    def _detach(self) -> None:
        if self._engine is not None:
            self._engine.unlisten_source_audio(self.recorder.add_audio)
            self._engine.unsubscribe(self._queue)
        self.window.engine.state_changed.disconnect(self._on_source)
        self.recorder, self._engine, self._queue = None, None, None
        self._show_recording()

    def add_event(self, kind: str, **data) -> None:
        """An operator event (expression trigger, cue line, …) into the take being recorded, if any."""
        if self.recording:
            self.recorder.add_event(kind, self._engine.media_time_now(), **data)

    def _on_source(self, state: str) -> None:
        if state.startswith("text "):
            self.add_event("cue", text=state[5:].strip("“”"))
        else:
            self.add_event("source", state=state)

    def _on_recorder_stopped(self, reason: str) -> None:
        """The recorder stopped by itself (disk almost full, a write error): finish and say why."""
        if self.recorder is not None and not self.recorder.recording:
            folder = self.recorder.folder
            self._detach()
            self.refresh(select=folder.name)
            self.window.report_error("Recording stopped", f"Recording stopped: {reason}. The take {folder.name} was saved.")

    def _show_recording(self) -> None:
        recording = self.recording
        self.indicator.setVisible(recording)
        self.panel.record_button.setText("■ Stop" if recording else "● Record")
        self.panel.record_button.setStyleSheet("QPushButton { background: #c62828; color: white; font-weight: 700; }"
                                               if recording else "")
        self.record_action.setText("Stop &Recording" if recording else "&Record")
        if recording:
            self._tick()
        else:
            self.panel.record_status.setText("")

    # ------------------------------------------------------------------ the list

    def refresh(self, select: str | None = None) -> None:
        self.rows = list_takes(self.root)
        table = self.panel.table
        table.blockSignals(True)
        table.setRowCount(len(self.rows))
        for row, info in enumerate(self.rows):
            date = info.started_at.replace("T", " ")[:16]
            values = (info.name, date, _clock_text(info.duration_s), info.persona, size_text(info.size_bytes), info.status)
            for column, value in enumerate(values):
                item = QTableWidgetItem(value)
                if column:
                    item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
                item.setData(Qt.ItemDataRole.UserRole, str(info.path))
                if info.problem:
                    item.setToolTip(info.problem)
                elif column == 0:
                    item.setToolTip(f"{info.name}\n{info.path}")
                table.setItem(row, column, item)
            if select is not None and info.name == select:
                table.selectRow(row)
        table.blockSignals(False)
        self._fill_personas()

    def _fill_personas(self) -> None:
        from studio.library import Library
        from studio.presets import Persona

        box = self.panel.persona_box
        current = box.currentText()
        box.blockSignals(True)
        box.clear()
        box.addItem(RECORDED)
        try:
            box.addItems(Library(Persona).names())
        except Exception:  # noqa: BLE001 - an unreadable persona folder leaves only "as recorded"
            pass
        box.setCurrentText(current or RECORDED)
        box.blockSignals(False)

    def selected(self) -> TakeInfo | None:
        rows = self.panel.table.selectionModel().selectedRows()
        return self.rows[rows[0].row()] if rows else None

    def select(self, name: str) -> None:
        for row, info in enumerate(self.rows):
            if info.name == name:
                self.panel.table.selectRow(row)

    def rename(self, path: str, new_name: str) -> bool:
        try:
            target = rename_take(path, new_name)
        except (ValueError, OSError) as error:
            self.window.report_error("Cannot rename take", str(error))
            self.refresh(select=Path(path).name)
            return False
        if self.take is not None and self.take.path == Path(path):
            self.take.path = target
        self.refresh(select=target.name)
        return True

    def delete_selected(self) -> bool:
        info = self.selected()
        if info is None or (self.recorder is not None and info.path == self.recorder.folder):
            return False
        if self.take is not None and self.take.path == info.path:
            self.close_playback()
        try:
            self.trashed.append((trash_take(info.path), info.path))
        except OSError as error:
            self.window.report_error("Cannot delete take", f"Could not move {info.name} to the trash: {error}")
            return False
        self.panel.undo_button.setEnabled(True)
        self.window.statusBar().showMessage(f"Moved take {info.name} to the trash (Undo Delete brings it back)", 8000)
        self.refresh()
        return True

    def undo_delete(self) -> bool:
        if not self.trashed:
            return False
        trashed, original = self.trashed.pop()
        try:
            restore_take(trashed, original)
        except OSError as error:
            self.window.report_error("Cannot undo delete", str(error))
            self.trashed.append((trashed, original))
            return False
        self.panel.undo_button.setEnabled(bool(self.trashed))
        self.refresh(select=original.name)
        self.window.statusBar().showMessage(f"Restored take {original.name} from the trash", 8000)
        return True

    def repair_selected(self) -> list[str]:
        info = self.selected()
        if info is None:
            return []
        try:
            done = repair_take(info.path)
        except TakeError as error:
            self.window.report_error("Cannot repair take", str(error))
            return []
        self.window.statusBar().showMessage(f"Repaired {info.name}: " + ("; ".join(done) or "nothing to do"), 10000)
        self.refresh(select=info.name)
        return done

    def recover_unfinished(self) -> list[str]:
        """On start: repair takes whose recorder died (crash, kill) and offer them in the list."""
        recovered = []
        for folder in find_unfinished(self.root):
            try:
                done = repair_take(folder)
            except TakeError as error:
                self.window.report_error("Unfinished take", f"Found an unfinished take that cannot be repaired:\n{error}")
                continue
            recovered.append(folder.name)
            take = open_take(folder)
            self.window.report_error(
                "Recovered a take",
                f"The take {folder.name} was not finished (the studio stopped while recording). It was repaired and "
                f"kept: {take.duration_s:.1f} s.\n" + "; ".join(done))
        if recovered:
            self.refresh(select=recovered[-1])
        return recovered

    # ------------------------------------------------------------------ playback

    def load_selected(self) -> bool:
        info = self.selected()
        if info is None:
            return False
        return self.load(info.path)

    def load(self, path: str | Path) -> bool:
        """Open a take for playback (paused at 0); a damaged take is refused with what is wrong."""
        from studio.recording.playback import TakePlayer

        try:
            take = open_take(path)
        except TakeError as error:
            self.window.report_error("Cannot play take", str(error))
            return False
        self.close_playback()
        self.take = take
        self.player = TakePlayer(take, self._retargeted(take))
        self.player.loop = self.panel.loop_box.isChecked()
        self.panel.timeline.show_take(take)
        self._update_transport()
        return True

    def _chosen_persona(self):
        name = self.panel.persona_box.currentText()
        if not name or name == RECORDED:
            return None
        from studio.presets import PresetError, persona_by_name

        try:
            return persona_by_name(name)
        except PresetError as error:
            self.window.report_error("Cannot re-target", str(error))
            return None

    def _retargeted(self, take: Take) -> Callable[[FrameState], FrameState] | None:
        persona = self._chosen_persona()
        if persona is None or persona.name == take.manifest.get("persona"):
            self._restore_avatar()
            return None
        from studio.avatar.io import load_avatar
        from studio.avatar.look import Look
        from studio.recording.session import retargeter

        viewport = self.window.viewport
        if self._original_avatar is None:
            self._original_avatar = (viewport.base_avatar, viewport.look)
        base = self._original_avatar[0] if persona.avatar == "default" else load_avatar(persona.avatar)
        viewport.set_avatar(base, Look.of_persona(persona))
        return retargeter(take.manifest.get("persona") or "default", persona)

    def _restore_avatar(self) -> None:
        if self._original_avatar is not None:
            self.window.viewport.set_avatar(*self._original_avatar)
            self._original_avatar = None

    def toggle_playback(self) -> None:
        if self.player is None and not self.load_selected():
            return
        self.player.toggle()
        self._update_transport()
        if self.player.silent_reason:
            self.window.statusBar().showMessage(f"Playing without sound: {self.player.silent_reason}", 8000)

    def seek(self, seconds: float) -> None:
        if self.player is not None:
            self.player.seek(seconds)
            self._update_transport()

    def set_loop(self, loop: bool) -> None:
        if self.player is not None:
            self.player.loop = bool(loop)

    def duration_s(self) -> float:
        return self.player.duration_s if self.player is not None else 0.0

    def close_playback(self) -> None:
        if self.player is not None:
            self.player.close()
        self.player, self.take = None, None
        self._restore_avatar()
        self.panel.timeline.show_take(None)
        self._update_transport()

    def playback_frame(self) -> FrameState | None:
        """The take's frame for now while a take is loaded (playing or paused), else None (live)."""
        return self.player.frame() if self.player is not None else None

    def _update_transport(self) -> None:
        player = self.player
        playing = player is not None and player.state == "playing"
        self.panel.play_button.setText("❚❚ Pause" if playing else "▶ Play")
        position = player.position() if player is not None else 0.0
        duration = self.duration_s()
        self.panel.time_label.setText(f"{_clock_text(position)} / {_clock_text(duration)}")
        if not self.panel.slider.isSliderDown():
            self.panel.slider.setValue(int(1000 * position / duration) if duration else 0)
        self.panel.timeline.set_position(position)

    # ------------------------------------------------------------------ import and export

    def choose_livelink_import(self) -> None:
        csv_path, _ = QFileDialog.getOpenFileName(self.window, "Import Live Link Face CSV", "", "CSV (*.csv);;All files (*)")
        if not csv_path:
            return
        audio, _ = QFileDialog.getOpenFileName(self.window, "Its audio file (Cancel: none)", str(Path(csv_path).parent),
                                               "Audio (*.wav *.flac *.ogg *.mp3 *.m4a);;All files (*)")
        self.import_livelink(csv_path, audio or None)

    def import_livelink(self, csv_path: str, audio_path: str | None = None) -> Path | None:
        from studio.engine.sources import AudioInputError
        from studio.recording.livelink import LiveLinkFormatError
        from studio.recording.session import import_livelink

        folder = new_take_folder(self.root, Path(csv_path).stem)
        try:
            import_livelink(csv_path, folder, self.window.avatar, audio_path, persona=self.window.persona.name,
                            preset=self._preset_name(), on_notice=self.window.show_notice)
        except (LiveLinkFormatError, AudioInputError, ValueError, OSError) as error:
            for child in folder.iterdir():
                child.unlink()
            folder.rmdir()
            self.window.report_error("Cannot import", str(error))
            return None
        self.refresh(select=folder.name)
        return folder

    def choose_export(self, kind: str) -> None:
        info = self.selected()
        if info is None:
            self.window.report_error("Export", "Select a take to export first.")
            return
        dialog = self.export_dialog(info, kind)
        if dialog.exec() != QDialog.DialogCode.Accepted or not dialog.out_path():
            return
        if kind in ("mp4", "mov", "webm") and dialog.size() is None:
            self.window.report_error("Export", f"size {dialog.size_box.currentText()!r} is not WIDTHxHEIGHT, e.g. 1280x720")
            return
        self.export(info.path, kind, dialog.out_path(), background=dialog.background.currentText(),
                        size=dialog.size(), fps=dialog.fps.value())

    def export_dialog(self, info: TakeInfo, kind: str) -> ExportDialog:
        """The dialog for one export: a format "with alpha" starts transparent (that is why it was chosen), the
        others with what the viewport shows (an MP4 has no alpha)."""
        background = self.window.viewport.background
        if kind in ("mov", "webm"):
            background = "transparent"
        elif background == "transparent":
            background = "studio"
        return ExportDialog(self.window, info, kind, background)

    def export(self, take: str | Path, kind: str, out: str | Path, background: str = "studio",
               size: tuple[int, int] | None = None, fps: float | None = None) -> bool:
        """Export in a separate process (its own offscreen GL): progress here, cancel any time, the UI runs on."""
        if self.export_process is not None:
            self.window.report_error("Export", "An export is already running; wait for it or cancel it.")
            return False
        args = ["export", str(take), f"--{kind}", str(out), "--background", background]
        persona = self._chosen_persona()
        if persona is not None:
            args += ["--persona", persona.name]
        if size is not None:
            args += ["--size", f"{size[0]}x{size[1]}"]
        if fps is not None:
            args += ["--fps", f"{fps:g}"]
        process = QProcess(self)
        environment = QProcessEnvironment.systemEnvironment()
        root = str(Path(__file__).resolve().parents[1])
        environment.insert("PYTHONPATH", os.pathsep.join(filter(None, [root, environment.value("PYTHONPATH")])))
        process.setProcessEnvironment(environment)
        process.readyReadStandardOutput.connect(lambda: self._read_export_output(process))
        process.finished.connect(self._export_finished)
        self.export_process, self.export_target, self.last_export = process, Path(out), None
        try:
            remember_folder("export", Path(out).parent)
        except OSError:  # only a convenience: the export itself goes on
            pass
        self.panel.progress.setValue(0)
        self.panel.progress.setFormat(f"{kind.upper()} %p%")
        self.panel.progress.show()
        self.panel.cancel_button.show()
        if getattr(sys, "frozen", False):
            process.start(sys.executable, args)
        else:
            process.start(sys.executable, ["-m", "widgets.app", *args])
        return True

    def _read_export_output(self, process: QProcess) -> None:
        """Progress lines move the bar; the last line says what was written."""
        text = bytes(process.readAllStandardOutput().data()).decode("utf-8", "replace")
        for line in text.splitlines():
            if line.startswith("progress ") and line.endswith("%"):
                self.panel.progress.setValue(int(line[9:-1]))
            elif line.startswith("exported "):
                self.last_export = line

    def _export_finished(self, code: int, _status) -> None:
        process, self.export_process = self.export_process, None
        errors = bytes(process.readAllStandardError().data()).decode("utf-8", "replace").strip()
        self._read_export_output(process)
        self.panel.progress.hide()
        self.panel.cancel_button.hide()
        if code == 0:
            self.last_export = self.last_export or f"exported {self.export_target}"
            self.window.statusBar().showMessage(self.last_export, 10000)
        else:
            message = errors.splitlines()[-1] if errors else f"the export process ended with code {code}"
            self.last_export = f"failed: {message}"
            if "cancelled" in message:
                self.window.statusBar().showMessage(message.replace("avatar-studio: error: ", ""), 8000)
            else:
                self.window.report_error("Export failed", message.replace("avatar-studio: error: ", ""))
        process.deleteLater()

    def cancel_export(self) -> None:
        """Ask the export to stop (it removes its temporary file); nothing appears under the target name."""
        if self.export_process is not None:
            self.export_process.terminate()

    # ------------------------------------------------------------------ housekeeping

    def _tick(self) -> None:
        if self.recording:
            recorder = self.recorder
            warning = recorder.low_space
            self.indicator.setText(f"● REC  {_clock_text(recorder.elapsed_s)}  {size_text(recorder.bytes_written)}"
                                   + (f"  ⚠ {warning}" if warning else ""))
            self.panel.record_status.setText(f"{recorder.folder.name} · {recorder.frames_written} frames"
                                             + (f" · {recorder.queue.dropped} dropped" if recorder.queue.dropped else ""))
            watched = (self.window.persona.name, self._preset_name())
            if watched != self._watched:
                if watched[0] != self._watched[0]:
                    self.add_event("persona", name=watched[0])
                if watched[1] != self._watched[1]:
                    self.add_event("preset", name=watched[1])
                self._watched = watched
        if self.player is not None:
            self._update_transport()

    def shutdown(self) -> None:
        """Window closing: finish the take being recorded, stop playback, cancel an export."""
        self.timer.stop()
        if self.recorder is not None:
            self.stop_recording("closing")
        self.close_playback()
        if self.export_process is not None:
            self.export_process.terminate()
            self.export_process.waitForFinished(5000)
