"""The studio's main window: the avatar viewport, the inspector and latency docks, menus and status bar.

A ~60 Hz presentation timer takes the newest FrameState (the engine's latest-frame slot when
speech is running, the idle animation otherwise) and hands it to the viewport; it never
waits on the engine. The docks are arranged in workspaces (Operate, Design, Record: widgets.workspaces);
the window's place and size and each workspace's arrangement are saved on close and restored on start.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from PySide6.QtCore import QByteArray, QRect, Qt, QTimer  # noqa: E402
from PySide6.QtGui import QAction, QActionGroup, QColor, QKeySequence, QPalette  # noqa: E402
from PySide6.QtWidgets import (  # noqa: E402
    QApplication,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDockWidget,
    QFileDialog,
    QFormLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

import studio  # noqa: E402
from studio.animation import IdleAnimator  # noqa: E402
from studio.avatar.imported import describe_import, is_gltf_path  # noqa: E402
from studio.avatar.io import AVATAR_FILE_FILTER, load_avatar, load_avatar_or_default  # noqa: E402
from studio.avatar.model import AvatarFormatError, AvatarModel  # noqa: E402
from studio.frame import FrameState  # noqa: E402
from studio.interop.links import LiveLinks  # noqa: E402
from studio.presets import Persona, Preset, PresetError, Voice, persona_by_name, preset_by_name
from studio.recent import RecentAvatars  # noqa: E402
from studio.telemetry import ProcessCpuMeter  # noqa: E402
from studio.workspaces import WorkspaceError  # noqa: E402
from widgets.api_window import window_api_switch  # noqa: E402
from widgets.av_sync import AvSyncBar  # noqa: E402
from widgets.drift_dock import DriftDock  # noqa: E402
from widgets.inspector import InspectorPanel, monospace_font  # noqa: E402
from widgets.latency_dock import LatencyPanel  # noqa: E402
from widgets.level_meter import LevelMeter  # noqa: E402
from widgets.models import DEFAULT_LATENCY_TARGET_MS, EngineController, FpsMeter, InspectorModel, LatencyModel  # noqa: E402
from widgets.panels.outputs_panel import OutputsPanel  # noqa: E402
from widgets.panels.studio_panels import StudioPanels  # noqa: E402
from widgets.preset_control import PresetController  # noqa: E402
from widgets.recent_menu import RecentAvatarsMenu  # noqa: E402
from widgets.settings import LayoutError, WindowLayout, default_layout_path, load_layout, save_layout  # noqa: E402
from widgets.shortcut_guard import ShortcutGuard  # noqa: E402
from widgets.take_browser import RecordingController  # noqa: E402
from widgets.viewport import CAMERA_FRAMINGS, Viewport  # noqa: E402
from widgets.workspaces import WorkspaceSwitcher  # noqa: E402

DEFAULT_PRESENT_FPS = 30.0  # without a preset; a preset sets its own (never faster than it asks)
STATUS_INTERVAL_MS = 500
TELEMETRY_INTERVAL_MS = 100
DEFAULT_SIZE = (1440, 900)
MIN_LIFT_SHOWN_DB = 1.0  # a quiet voice lifted for the lip model: the status bar says so from this lift on
MINIMUM_SIZE = (960, 640)  # every workspace fits: its panels beside the viewport, none over it
BACKGROUND_LABELS = {"studio": "Studio", "chroma": "Chroma green", "transparent": "Transparent"}
ESPEAK_VOICES = ("en-us", "en-gb", "en-gb-scotland", "en-us+f3", "en-us+m3", "de", "fr-fr", "es")

_STYLESHEET = """
QMainWindow::separator { background: #2b2d31; width: 4px; height: 4px; }
QToolBar#workspaceBar { background: #1f2023; border: none; border-bottom: 1px solid #34373c; spacing: 0; padding: 2px 6px; }
QTabBar#workspaceTabs::tab { background: #26282c; color: #aeb3bc; padding: 4px 16px; border: 1px solid #34373c;
                             margin-right: -1px; }
QTabBar#workspaceTabs::tab:selected { background: #3d6fb4; color: #ffffff; font-weight: 600; }
QTabBar#workspaceTabs::tab:hover:!selected { background: #34373c; }
QDockWidget { color: #d7dae0; font-weight: 600; }
QDockWidget::title { background: #26282c; padding: 5px 8px; border-bottom: 1px solid #34373c; }
QLabel#sectionHeader { color: #8fb3ff; font-weight: 600; padding-top: 6px; padding-bottom: 2px; }
QLabel#hint { color: #8b8f98; }
QLabel#weightName { color: #c8ccd4; }
QStatusBar { background: #1b1c1f; color: #c8ccd4; border-top: 1px solid #34373c; }
QStatusBar QLabel { padding: 0 8px; color: #aeb3bc; }
QMenuBar { background: #1f2023; color: #d7dae0; }
QMenuBar::item:selected { background: #34373c; }
QMenu { background: #25272b; color: #d7dae0; border: 1px solid #3a3d42; }
QMenu::item:selected { background: #3d6fb4; }
QMenu::item:disabled { color: #6b6f78; }
QScrollArea, QScrollArea > QWidget > QWidget { background: #202124; }
"""


def apply_studio_theme(app: QApplication) -> None:
    """Dark studio look: Fusion style, a dark palette and a small stylesheet."""
    app.setStyle("Fusion")
    palette = QPalette()
    colors = {
        QPalette.ColorRole.Window: "#202124",
        QPalette.ColorRole.WindowText: "#d7dae0",
        QPalette.ColorRole.Base: "#1b1c1f",
        QPalette.ColorRole.AlternateBase: "#26282c",
        QPalette.ColorRole.ToolTipBase: "#2b2d31",
        QPalette.ColorRole.ToolTipText: "#d7dae0",
        QPalette.ColorRole.Text: "#d7dae0",
        QPalette.ColorRole.Button: "#2b2d31",
        QPalette.ColorRole.ButtonText: "#d7dae0",
        QPalette.ColorRole.Highlight: "#3d6fb4",
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.Link: "#8fb3ff",
        QPalette.ColorRole.PlaceholderText: "#6b6f78",
    }
    for role, color in colors.items():
        palette.setColor(role, QColor(color))
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText):
        palette.setColor(QPalette.ColorGroup.Disabled, role, QColor("#6b6f78"))
    app.setPalette(palette)
    app.setStyleSheet(_STYLESHEET)


class SpeakTextDialog(QDialog):
    """A line of text and the voice, rate and pitch to speak it with."""

    def __init__(self, parent: QWidget | None = None, voice: Voice | None = None) -> None:
        super().__init__(parent)
        voice = voice or Voice()
        self.setWindowTitle("Speak Text")
        self.text = QLineEdit()
        self.text.setPlaceholderText("Type a line for the avatar to say…")
        self.text.setMinimumWidth(420)
        self.voice = QComboBox()
        self.voice.setEditable(True)
        self.voice.addItems(ESPEAK_VOICES)
        self.voice.setCurrentText(voice.name)
        self.rate = QSpinBox()
        self.rate.setRange(80, 450)
        self.rate.setValue(voice.rate_wpm)
        self.rate.setSuffix(" wpm")
        self.pitch = QSpinBox()
        self.pitch.setRange(0, 99)
        self.pitch.setValue(voice.pitch)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Speak")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout(self)
        form.addRow("Text", self.text)
        form.addRow("Voice", self.voice)
        form.addRow("Rate", self.rate)
        form.addRow("Pitch", self.pitch)
        form.addRow(buttons)


class MainWindow(QMainWindow):
    """Viewport in the centre, the current workspace's panels around it, a workspace tab bar above.

    `show_dialogs=False` turns error boxes into status-bar messages only (tests, kiosk use);
    every error is also kept in `last_error`. `persist_layout=False` neither restores nor saves
    the window layout (screenshots, previews).
    """

    def __init__(
        self,
        avatar: AvatarModel,
        engine: EngineController | None = None,
        latency_target_ms: float = DEFAULT_LATENCY_TARGET_MS,
        layout_path: Path | None = None,
        show_dialogs: bool = True,
        persist_layout: bool = True,
        persona: Persona | None = None,
        preset: Preset | None = None,
        recordings_root: Path | None = None,
    ) -> None:
        super().__init__()
        self.setWindowTitle(f"Avatar Studio {studio.__version__}")
        self.setDockOptions(QMainWindow.DockOption.AnimatedDocks | QMainWindow.DockOption.AllowTabbedDocks)
        self.show_dialogs = show_dialogs
        self.last_error: str | None = None
        self.layout_path = layout_path or default_layout_path()
        self._layout_file_bad = False
        self.engine = engine or EngineController()
        self.live_links = LiveLinks(self.engine.ensure_engine, rate_hz=preset.render.fps if preset is not None else None,
                                    current_engine=lambda: self.engine.engine, rest_joints=lambda: self.avatar.rest_joints())
        self.persona = persona or Persona(name="default")
        self.idle = IdleAnimator(style=self.persona.motion_style())
        self.fps_meter = FpsMeter()
        self.inspector_model = InspectorModel()
        self.latency_model = LatencyModel(target_ms=latency_target_ms)
        self._clock_origin = time.monotonic()
        self.current_frame: FrameState | None = None
        self._message_boxes: list[QMessageBox] = []
        self._cpu = ProcessCpuMeter()
        self._cpu.load_pct()

        self.viewport = Viewport(avatar)
        self.setCentralWidget(self.viewport)
        self.viewport.drawn.connect(self._on_drawn)
        self.inspector = InspectorPanel(self.inspector_model)
        self.latency = LatencyPanel(self.latency_model)
        self.av_sync = AvSyncBar(self.engine)
        latency_box = QWidget()
        latency_layout = QVBoxLayout(latency_box)
        latency_layout.setContentsMargins(0, 0, 0, 0)
        latency_layout.addWidget(self.latency, 1)
        latency_layout.addWidget(self.av_sync)
        self.inspector_dock = self.add_dock("Inspector", "inspectorDock", self.inspector, Qt.DockWidgetArea.RightDockWidgetArea)
        self.latency_dock = self.add_dock("Latency", "latencyDock", latency_box, Qt.DockWidgetArea.BottomDockWidgetArea)
        self.drift = DriftDock(self, preset)
        self.setMinimumSize(*MINIMUM_SIZE)
        self.resize(*DEFAULT_SIZE)

        self._build_status_bar()
        self.recent_avatars = RecentAvatars()
        self._build_menus()
        self._present_fps = DEFAULT_PRESENT_FPS
        self.presets = PresetController(self)
        self.panels = StudioPanels(self, preset)
        if self.panels.hotkeys.refused:  # a persona saved before the window took one of its keys
            self.show_notice("Hotkeys left unbound: " + "; ".join(
                f"{action!r}: {why}" for action, why in self.panels.hotkeys.refused.items()))
        self.engine.state_changed.connect(self._on_engine_state)
        self.engine.notice.connect(self.show_notice)
        self.update_avatar_label()
        self._on_engine_state(self.engine.state)
        self.recording = RecordingController(self, recordings_root)
        self.api = window_api_switch(self)
        self.outputs_dock = self.add_dock("Outputs", "outputsDock", OutputsPanel(self.live_links, api=self.api),
                                          Qt.DockWidgetArea.RightDockWidgetArea)
        self.outputs_dock.widget().approval_asked.connect(self._client_asks)
        self.presets.changed.connect(self.outputs_dock.widget().follow_preset)
        self.workspaces.install([self.panels.operator_dock, self.latency_dock, self.drift.dock, self.panels.persona_dock,
                                 self.panels.editor_dock, self.panels.preset_dock, self.inspector_dock,
                                 self.recording.dock, self.outputs_dock])
        self.shortcut_guard = ShortcutGuard(self)
        self.persist_layout = persist_layout
        arrangement = self.restore_layout() if persist_layout else None
        self.workspaces.show_arrangement(arrangement)

        self.present_timer = self._start_timer(round(1000.0 / self._present_fps), self.present, Qt.TimerType.PreciseTimer)
        self.presets.apply(self.panels.preset_doc.item)
        self.status_timer = self._start_timer(STATUS_INTERVAL_MS, self._update_status)
        self.telemetry_timer = self._start_timer(TELEMETRY_INTERVAL_MS, self._update_telemetry)
        self.present()

    # --- construction -------------------------------------------------------------------------

    def add_dock(self, title: str, name: str, panel: QWidget, area: Qt.DockWidgetArea) -> QDockWidget:
        """A closable, movable, floatable dock named `name` (the layout file's key) holding `panel`; panels add theirs."""
        dock = QDockWidget(title, self)
        dock.setObjectName(name)
        dock.setWidget(panel)
        dock.setFeatures(
            QDockWidget.DockWidgetFeature.DockWidgetClosable
            | QDockWidget.DockWidgetFeature.DockWidgetMovable
            | QDockWidget.DockWidgetFeature.DockWidgetFloatable
        )
        self.addDockWidget(area, dock)
        return dock

    def _start_timer(self, interval_ms: int, slot, kind: Qt.TimerType = Qt.TimerType.CoarseTimer) -> QTimer:
        timer = QTimer(self)
        timer.setTimerType(kind)
        timer.setInterval(interval_ms)
        timer.timeout.connect(slot)
        timer.start()
        return timer

    def _build_status_bar(self) -> None:
        mono = monospace_font()
        self.fps_label = QLabel("— fps")
        self.fps_label.setFont(mono)
        self.fps_label.setMinimumWidth(80)
        self.avatar_label = QLabel("")
        self.provider_label = QLabel("")  # where the face model runs, once the engine has started
        self.provider_label.setToolTip("The onnxruntime execution provider the face model runs on: CUDA where "
                                       "onnxruntime-gpu finds a usable NVIDIA GPU, else the CPU")
        self.source_label = QLabel("")
        self.input_label = QLabel("Input: off")
        self.input_label.setToolTip("The microphone being listened to")
        self.input_meter = LevelMeter()
        self.lift_label = QLabel("")
        self.lift_label.setStyleSheet("color: #e5c07b")
        self.lift_label.setToolTip("The voice is quiet, so the studio lifts it by this much before the lip model reads "
                                   "it; what you hear and record is unchanged. Move the microphone closer or raise its "
                                   "input gain.")
        self.lift_label.hide()
        self.underrun_label = QLabel("")
        self.underrun_label.setStyleSheet("color: #e5c07b")
        self.underrun_label.setToolTip("The speaker ran dry this often: each is a dropout in the sound")
        self.underrun_label.hide()
        bar = self.statusBar()
        bar.addPermanentWidget(self.underrun_label)
        bar.addPermanentWidget(self.source_label)
        bar.addPermanentWidget(self.input_label)
        bar.addPermanentWidget(self.input_meter)
        bar.addPermanentWidget(self.lift_label)
        bar.addPermanentWidget(self.avatar_label)
        bar.addPermanentWidget(self.provider_label)
        bar.addPermanentWidget(self.fps_label)

    def _action(self, menu, text: str, slot, shortcut: str | QKeySequence | None = None) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    def _build_menus(self) -> None:
        bar = self.menuBar()
        file_menu = bar.addMenu("&File")
        self._action(file_menu, "&Open Avatar…", self._choose_avatar, QKeySequence.StandardKey.Open)
        self.recent_avatars_menu = RecentAvatarsMenu(file_menu, self.recent_avatars, self.open_avatar)
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", self.close, QKeySequence.StandardKey.Quit)

        avatar_menu = bar.addMenu("&Avatar")
        self.edit_mapping_action = self._action(avatar_menu, "Edit &Mapping…", self.edit_mapping)
        self.edit_mapping_action.setStatusTip("Which morph target or bone of this imported avatar drives each engine channel")

        view_menu = bar.addMenu("&View")
        self._action(view_menu, "Frame &Head", self.viewport.frame_head, "H")
        self._action(view_menu, "Frame &Body", self.viewport.frame_body, "B")
        background_menu = view_menu.addMenu("Back&ground")
        self.background_actions: dict[str, QAction] = {}
        group = QActionGroup(self)
        group.setExclusive(True)
        for mode, label in BACKGROUND_LABELS.items():
            action = QAction(label, self, checkable=True)
            action.setChecked(mode == self.viewport.background)
            action.triggered.connect(lambda _checked=False, m=mode: self.set_background(m))
            group.addAction(action)
            background_menu.addAction(action)
            self.background_actions[mode] = action
        view_menu.addSeparator()
        self.workspaces = WorkspaceSwitcher(self, view_menu)
        view_menu.addSeparator()
        self._action(view_menu, "&Reset Layout", self.reset_layout).setStatusTip(
            "Lay the current workspace's panels out as shipped")

        speech_menu = bar.addMenu("&Speech")
        self.microphone_action = self._action(speech_menu, "&Microphone", self._toggle_microphone, "Ctrl+M")
        self.microphone_action.setCheckable(True)
        self.microphone_menu = speech_menu.addMenu("Microphone &Device")
        self.microphone_menu.aboutToShow.connect(self.fill_microphone_menu)
        self._action(speech_menu, "Play Audio &File…", self._choose_audio_file, "Ctrl+Shift+O")
        self._action(speech_menu, "Speak &Text…", self._ask_text, "Ctrl+T")
        speech_menu.addSeparator()
        self._action(speech_menu, "&Stop", self.stop_speech, "Esc")

        help_menu = bar.addMenu("&Help")
        self._action(help_menu, "&About Avatar Studio", self._about)

    # --- presentation ---------------------------------------------------------------------------

    def apply_preset(self, preset: Preset) -> None:
        """Make this the running preset (the preset panel shows it): module levels, rates, LOD, fps and
        latency target switch live (widgets.preset_control)."""
        self.panels.preset_doc.load(preset)

    def set_present_fps(self, fps: float) -> None:
        """Present (and so render) at most this often: the preset's fps."""
        self._present_fps = float(fps)
        self.viewport.dynamic_resolution.set_fps(fps)
        if hasattr(self, "present_timer"):
            self.present_timer.setInterval(max(1, round(1000.0 / fps)))

    def presentation_time_s(self) -> float:
        return time.monotonic() - self._clock_origin

    def present(self) -> None:
        """Show the newest frame: the engine's if it has one for now, else the idle animation."""
        state = self.recording.playback_frame() or self.engine.latest_frame()
        if state is None:
            state = self.panels.filter_idle(self.idle.frame_at(self.presentation_time_s()))
        self.present_frame(state)

    def present_frame(self, state: FrameState) -> None:
        self.current_frame = state
        self.viewport.set_frame(state)
        self.inspector_model.set_frame(state)
        self.panels.present(state)

    def _on_drawn(self, time_s: float, render_ms: float) -> None:
        self.engine.note_presented(time_s)
        self.fps_meter.tick(time_s)
        self.latency_model.add_render_time(time_s, render_ms)

    def _update_status(self) -> None:
        scale = self.viewport.canvas.render_scale
        shown = f"{self.fps_meter.fps():5.1f} fps" + (f" · {scale:.0%} res" if scale < 0.999 else "")
        self.fps_label.setText(shown)
        self.fps_label.setToolTip(f"Frames presented per second (the preset asks for {self._present_fps:g}); "
                                  "'res' is the render resolution, lowered while the GL cannot hold the rate")
        if self.engine.engine is not None:
            self.provider_label.setText(f"Face: {self.engine.engine.face_provider.removesuffix('ExecutionProvider')}")
        self.engine.poll()

    def _update_telemetry(self) -> None:
        try:
            snapshot = self.engine.telemetry_snapshot()
        except Exception as error:  # noqa: BLE001 - a telemetry fault must not stop the graph
            snapshot = None
            self.statusBar().showMessage(f"Telemetry unavailable: {error}", 5000)
        cpu_pct = None if snapshot is not None else self._cpu.load_pct()
        self.latency_model.update(time.monotonic(), snapshot, cpu_pct)
        self._update_input()
        underruns = self.latency_model.output_underruns
        if underruns:
            self.underrun_label.setText(f"{underruns} audio underrun{'s' if underruns != 1 else ''}")
        self.underrun_label.setVisible(bool(underruns))

    # --- avatar, background, speech ---------------------------------------------------------------

    def open_avatar(self, path: str | os.PathLike) -> bool:
        """Load an avatar file; on failure keep the current avatar and say which file and why."""
        try:
            model = load_avatar(path)
            self.viewport.set_avatar(model)
        except (AvatarFormatError, OSError, ValueError) as error:
            self.report_error("Cannot open avatar", f"Could not open avatar {path}:\n{error}\n\nKeeping {self.avatar.name}.")
            return False
        self.update_avatar_label()
        self.panels.avatar_opened(model)
        about = describe_import(model)
        self.statusBar().showMessage(f"Opened avatar {model.name} from {path}" + (f": {about}" if about else ""), 15000)
        self.remember_avatar(path)
        return True

    def remember_avatar(self, path: str | os.PathLike) -> None:
        """Put an avatar file that opened first in File → Open Recent Avatar (a config that cannot be written is
        said in the status bar; the avatar stays open)."""
        try:
            self.recent_avatars.add(path)
        except OSError as error:
            self.statusBar().showMessage(f"Could not remember {path} among the recent avatars: {error}", 15000)

    @property
    def avatar(self) -> AvatarModel:
        return self.viewport.avatar

    def update_avatar_label(self) -> None:
        """The status bar's avatar name, and where the avatar came from as its tooltip (after a persona switch too)."""
        self.avatar_label.setText(f"Avatar: {self.avatar.name}")
        about = describe_import(self.avatar)
        self.avatar_label.setToolTip(self.avatar.source + (f"\n{about}" if about else ""))
        self.live_links.avatar_changed()  # VMC out sends this avatar's bone positions
        self.edit_mapping_action.setEnabled(is_gltf_path(self.viewport.base_avatar.source))

    def edit_mapping(self):
        """Avatar → Edit Mapping…: the imported avatar's channel → morph/bone table (widgets.mapping_dialog)."""
        from widgets.mapping_dialog import open_mapping_dialog

        return open_mapping_dialog(self)

    def set_background(self, mode: str) -> None:
        self.viewport.set_background(mode)
        self.background_actions[mode].setChecked(True)

    def start_microphone(self, device: int | str | None = None) -> bool:
        started = self.engine.start_microphone(device)
        self.microphone_action.setChecked(self.engine.microphone() is not None)
        self._update_input()
        return started

    def _toggle_microphone(self, checked: bool) -> None:
        if checked:
            self.start_microphone()
        else:
            self.stop_speech()

    def _update_input(self) -> None:
        """Status bar: the microphone being listened to and its level (the loudest sample since the last look)."""
        microphone = self.engine.microphone()
        if microphone is None:
            self.input_label.setText("Input: off")
            self.input_meter.set_level(None)
            self.lift_label.hide()
            return
        self.input_label.setText(f"Input: {readable_device_name(microphone.device_name)}")
        self.input_meter.set_level(microphone.take_peak())
        lift_db = self.engine.input_lift_db()
        self.lift_label.setText(f"Quiet voice: +{lift_db:.0f} dB for the lips")
        self.lift_label.setVisible(lift_db >= MIN_LIFT_SHOWN_DB)

    def fill_microphone_menu(self) -> None:
        """List the input devices each time the menu opens: devices come and go while the studio runs."""
        self.microphone_menu.clear()
        try:
            from studio.engine.sources import input_devices

            devices = input_devices()
        except Exception as error:  # noqa: BLE001 - PortAudio missing or failing: say so in the menu
            self.microphone_menu.addAction(f"Audio devices unavailable: {error}").setEnabled(False)
            return
        if not devices:
            self.microphone_menu.addAction("No input device found").setEnabled(False)
        microphone = self.engine.microphone()
        current = microphone.device_index if microphone is not None else None
        default = _default_input_index()
        group = QActionGroup(self.microphone_menu)
        for index, name in devices:
            label = readable_device_name(name) + (" (default)" if index == default else "")
            action = self._action(self.microphone_menu, label, lambda _checked=False, i=index: self.start_microphone(i))
            action.setCheckable(True)
            action.setChecked(index == current)
            action.setToolTip(f"PortAudio device {index}: {name}")
            group.addAction(action)

    def play_audio_file(self, path: str) -> bool:
        return self.engine.play_file(path)

    def speak_text(self, text: str, voice: str = "en-us", rate_wpm: int = 165, pitch: int = 50) -> bool:
        if not text.strip():  # said once, here; the engine is not involved
            self.statusBar().showMessage("Nothing to speak: the text is empty", 8000)
            return False
        return self.engine.speak_text(text, voice, rate_wpm, pitch)

    def stop_speech(self) -> None:
        self.engine.stop()

    def show_notice(self, text: str) -> None:
        """Something the user should know that is no error (a status-bar message, no dialog)."""
        self.statusBar().showMessage(text, 15000)

    def _client_asks(self, name: str) -> None:
        """A control API client waits for the operator's Allow or Deny in the Outputs panel: bring it forward, say so."""
        self.outputs_dock.raise_()
        self.show_notice(f"Client '{name}' wants to control the avatar: Allow or Deny it in the Outputs panel")
        QApplication.alert(self)

    def _on_engine_state(self, state: str) -> None:
        self.source_label.setText(f"Source: {state.split(' — ')[0]}")  # the reason goes to a dialog, whole
        self.source_label.setToolTip(state)
        self.microphone_action.setChecked(state.startswith("microphone"))
        if state.startswith("idle — "):  # a source that failed: a dialog the user can read, not a passing status
            self.report_error("Speech", state[len("idle — "):])

    # --- dialogs (thin: each calls a method above that tests drive directly) -----------------------

    def _choose_avatar(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open Avatar", "", AVATAR_FILE_FILTER)
        if path:
            self.open_avatar(path)

    def _choose_audio_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Play Audio File", "", "Audio (*.wav *.flac *.ogg *.mp3);;All files (*)")
        if path:
            self.play_audio_file(path)

    def _ask_text(self) -> None:
        dialog = SpeakTextDialog(self, self.persona.voice)
        if dialog.exec() == QDialog.DialogCode.Accepted:
            self.speak_text(dialog.text.text(), dialog.voice.currentText(), dialog.rate.value(), dialog.pitch.value())

    def _about(self) -> None:
        self._show_box(
            QMessageBox.Icon.Information, "About Avatar Studio",
            f"Avatar Studio {studio.__version__}\nLive, speech-driven 3D avatars on your own machine.",
        )

    def report_error(self, title: str, message: str) -> None:
        """Status-bar message plus, when dialogs are on, a non-blocking message box."""
        self.last_error = message
        self.statusBar().showMessage(" ".join(message.split()), 15000)
        self._show_box(QMessageBox.Icon.Warning, title, message)

    def _show_box(self, icon: QMessageBox.Icon, title: str, text: str) -> None:
        if not self.show_dialogs:
            return
        box = QMessageBox(icon, title, text, QMessageBox.StandardButton.Ok, self)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.setWindowModality(Qt.WindowModality.NonModal)
        box.finished.connect(lambda _result, b=box: self._message_boxes.remove(b) if b in self._message_boxes else None)
        self._message_boxes.append(box)
        box.show()

    # --- layout persistence ---------------------------------------------------------------------------

    def restore_layout(self) -> bytes | None:
        """Apply the saved window place and options; returns the current workspace's saved arrangement.

        A bad file is reported and left alone until the next save. A file from before workspaces keeps
        only the window's place: its single dock arrangement is not any workspace's.
        """
        try:
            layout = load_layout(self.layout_path)
            if layout is not None and layout.workspaces is not None:
                self.workspaces.model.load_json(layout.workspaces, str(self.layout_path))
        except (LayoutError, WorkspaceError) as error:
            self._layout_file_bad = True
            self.statusBar().showMessage(f"Ignored the saved window layout: {error}", 15000)
            return None
        if layout is None:
            return None
        if layout.window is not None:
            self._restore_window_rect(layout.window)
        elif not self.restoreGeometry(QByteArray(layout.geometry)):
            self._layout_file_bad = True
            self.statusBar().showMessage(f"Ignored the saved window layout: {self.layout_path}: Qt could not apply it", 15000)
            return None
        background = layout.options.get("background")
        if background in BACKGROUND_LABELS:
            self.set_background(background)
        if layout.options.get("framing") in CAMERA_FRAMINGS:
            self.viewport.set_framing(layout.options["framing"])
        if "api" in layout.options:
            self.outputs_dock.widget().api_row.restore(layout.options["api"], f"{self.layout_path}: options.api")
        return layout.dock_state if layout.workspaces is not None else None

    def _restore_window_rect(self, window: dict) -> None:
        """The client rectangle as saved: set as client geometry, so the window manager puts the window's
        content exactly there (Qt's restoreGeometry moves by the frame, and the window crept down by a
        title bar on every start). A place on no screen any more keeps only the size."""
        rect = QRect(window["x"], window["y"], window["width"], window["height"])
        screens = QApplication.screens()
        if any(screen.availableGeometry().intersects(rect) for screen in screens):
            self.setGeometry(rect)
        else:
            self.resize(rect.size())
        if window.get("maximized"):
            self.setWindowState(self.windowState() | Qt.WindowState.WindowMaximized)

    def _window_rect(self) -> dict:
        maximized = bool(self.windowState() & (Qt.WindowState.WindowMaximized | Qt.WindowState.WindowFullScreen))
        rect = self.normalGeometry() if maximized and self.normalGeometry().isValid() else self.geometry()
        return {"x": rect.x(), "y": rect.y(), "width": rect.width(), "height": rect.height(), "maximized": maximized}

    def save_layout(self) -> Path:
        state = self.workspaces.arrangement()
        self.workspaces.model.keep(self.workspaces.current, state)
        layout = WindowLayout(
            bytes(self.saveGeometry().data()), state,
            {"background": self.viewport.background, "framing": self.viewport.framing,
             "api": self.outputs_dock.widget().api_row.settings()},
            self._window_rect(), self.workspaces.model.to_json(),
        )
        path = save_layout(layout, self.layout_path, keep_bad_copy=self._layout_file_bad)
        self._layout_file_bad = False
        return path

    def switch_workspace(self, name: str) -> None:
        """Operate, Design or Record (studio.workspaces), each as the user left it."""
        self.workspaces.switch(name)

    def reset_layout(self) -> None:
        """The current workspace's panels as shipped; the other workspaces keep how they were left."""
        self.workspaces.reset()

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self.workspaces.schedule_fit()

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt override
        for timer in (self.present_timer, self.status_timer, self.telemetry_timer):
            timer.stop()
        try:
            if self.persist_layout:
                self.save_layout()
        except OSError as error:
            print(f"avatar-studio: could not save the window layout to {self.layout_path}: {error}", file=sys.stderr)
        self.recording.shutdown()
        self.live_links.close()
        self.api.stop()
        self.drift.close()
        self.panels.close()
        self.engine.shutdown()
        for box in list(self._message_boxes):
            box.close()
        super().closeEvent(event)


_DEVICE_NAMES = {
    "default": "System default",
    "sysdefault": "System default (ALSA)",
    "pulse": "PulseAudio sound server",
    "pipewire": "PipeWire sound server",
    "jack": "JACK sound server",
}


def readable_device_name(name: str) -> str:
    """A device name a person recognises: ALSA's pseudo devices ("pulse", "default") spelled out."""
    return _DEVICE_NAMES.get(name.strip().lower(), name.strip())


def _default_input_index() -> int | None:
    try:
        import sounddevice

        index = sounddevice.default.device[0]
    except Exception:  # noqa: BLE001 - PortAudio missing: no default to mark
        return None
    return int(index) if index is not None and index >= 0 else None


def _load_persona(name: str):
    """(persona, why the named one was not used or None): a bad persona falls back to the built-in defaults."""
    try:
        return persona_by_name(name), None
    except PresetError as error:
        return Persona(name="default"), f"{error}; using the built-in persona settings"


def _load_preset(name: str):
    """(preset or None, why the preset was not used or None)."""
    try:
        return preset_by_name(name), None
    except PresetError as error:
        return None, f"{error}; using the default latency target of {DEFAULT_LATENCY_TARGET_MS:.0f} ms"


def _engine_factory(preset, persona: Persona):
    """Builds the engine with the preset's face-model variant and the persona's style (import deferred to first use)."""

    def build():
        from studio.engine.anchor import SpatialAnchor
        from studio.engine.pipeline import Engine, ExpressionLayer
        from studio.housekeeping import prepare_long_session

        variant = preset.face_model_variant if preset is not None else "fp32"
        engine = Engine(model_variant=variant, style=persona.motion_style(),
                        expression=ExpressionLayer(*persona.style.weight_arrays(), name=persona.name),
                        anchor=SpatialAnchor(preset.anchor) if preset is not None else None)
        if preset is not None:
            prepare_long_session(engine, preset, persona.voice.name)
        return engine

    return build


def studio_engine(preset: Preset | None, persona: Persona) -> EngineController:
    """The engine controller `run_gui` gives its window (for scripted sessions that build the window themselves)."""
    return EngineController(_engine_factory(preset, persona))


def create_application(argv: list[str] | None = None) -> QApplication:
    """The QApplication (existing or new), themed; call before building any window."""
    app = QApplication.instance() or QApplication(argv if argv is not None else sys.argv[:1])
    app.setApplicationName("Avatar Studio")
    app.setOrganizationName("avatar-studio")
    apply_studio_theme(app)
    return app


def run_gui(avatar_path: str | AvatarModel | None, preset: str | Preset | None = None,
            persona: str | Persona = "default") -> int:
    """Open the studio window and run until it closes; returns the process exit status.

    The persona sets the voice, the motion and expression style and, unless `preset` names one,
    the preset. Each may come loaded already (the command line checks them before a window opens).
    """
    app = create_application()
    try:
        avatar, avatar_problem = ((avatar_path, None) if isinstance(avatar_path, AvatarModel)
                                  else load_avatar_or_default(avatar_path))
    except AvatarFormatError as error:
        print(f"avatar-studio: cannot load an avatar: {error}", file=sys.stderr)
        return 2
    loaded_persona, persona_problem = (persona, None) if isinstance(persona, Persona) else _load_persona(persona)
    loaded_preset, preset_problem = ((preset, None) if isinstance(preset, Preset)
                                     else _load_preset(preset or loaded_persona.default_preset))
    target_ms = loaded_preset.render.latency_target_ms if loaded_preset is not None else DEFAULT_LATENCY_TARGET_MS
    window = MainWindow(avatar, engine=EngineController(_engine_factory(loaded_preset, loaded_persona)),
                        latency_target_ms=target_ms, persona=loaded_persona, preset=loaded_preset)
    window.presets.preload()
    window.show()
    for problem in (persona_problem, preset_problem, avatar_problem):
        if problem:
            window.report_error("Avatar Studio", problem)
    return int(app.exec())


def benchmark_gui(avatar: AvatarModel | None = None, seconds: float = 3.0) -> dict:
    """Presentation rate and the GUI thread's per-refresh costs with the idle animation running."""
    import numpy as np

    app = create_application()
    if avatar is None:
        avatar, _problem = load_avatar_or_default(None)
    window = MainWindow(avatar, engine=EngineController(), show_dialogs=False, persist_layout=False)
    window.show()
    render_ms: list[float] = []
    window.viewport.drawn.connect(lambda _t, ms: render_ms.append(ms))
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        app.processEvents()
    render_ms.clear()
    started, draws_before = time.monotonic(), window.viewport.draw_count
    while time.monotonic() < started + seconds:
        app.processEvents()
        time.sleep(0.001)
    elapsed = time.monotonic() - started
    fps = (window.viewport.draw_count - draws_before) / elapsed

    frames = [window.idle.frame_at(10.0 + i * 0.37) for i in range(20)]

    def cost_ms(refresh) -> float:
        total = 0.0
        for frame in frames:
            window.inspector_model.set_frame(frame)
            window.latency_model.update(time.monotonic(), None, 0.0)
            begin = time.perf_counter()
            refresh()
            total += time.perf_counter() - begin
        return total * 1000.0 / len(frames)

    window.present_timer.stop()
    inspector_ms = cost_ms(window.inspector.refresh)
    latency_ms = cost_ms(window.latency.refresh)
    present_ms = cost_ms(lambda: window.present_frame(window.idle.frame_at(time.monotonic())))
    width, height = window.viewport.canvas.size
    window.close()
    return {
        "presented_fps": round(fps, 2),
        "render_present_p50_ms": round(float(np.percentile(render_ms, 50)), 2) if render_ms else None,
        "render_present_p95_ms": round(float(np.percentile(render_ms, 95)), 2) if render_ms else None,
        "present_call_ms": round(present_ms, 3),
        "inspector_refresh_ms": round(inspector_ms, 3),
        "latency_refresh_ms": round(latency_ms, 3),
        "viewport_width_px": int(width),
        "viewport_height_px": int(height),
        "avatar_vertices": avatar.num_vertices,
    }
