"""The operator and designer panels as one piece the main window installs with a single line.

`StudioPanels` owns the Qt-free models (persona and preset documents, the expression mixer and
editor, the cue list, the hotkey map), the four docks that show them, the Operator menu and the
clean output window, and applies every accepted change to the running studio at once: the look
(avatar, body shape, colours) to the viewport, the style to the motion, the preset's module plan
and latency target to the engine and the Latency dock.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QAction, QActionGroup, QGuiApplication, QKeySequence
from PySide6.QtWidgets import QMessageBox

from studio.animation import IdleAnimator
from studio.avatar.io import load_avatar
from studio.avatar.look import Look
from studio.avatar.model import AvatarFormatError, AvatarModel
from studio.cues import CueList, remaining_clip
from studio.documents import Document
from studio.expressions import ExpressionEditor, ExpressionMixer, default_hotkeys
from studio.frame import FrameState
from studio.hotkeys import OPERATOR_ACTIONS, HotkeyMap, normalise_key
from studio.library import Library
from studio.precision import plan_for
from studio.presets import Persona, Preset, PresetError
from widgets.panels.expression_editor import ExpressionEditorPanel
from widgets.panels.operator_panel import OperatorPanel
from widgets.panels.output_window import OUTPUT_BACKGROUNDS, OutputWindow
from widgets.panels.persona_panel import PersonaPanel
from widgets.panels.preset_panel import PresetPanel

LOOK_DELAY_MS = 150  # a dragged body-shape slider rebuilds the mesh at most this often
POLL_INTERVAL_MS = 200


class StudioPanels:
    def __init__(self, window, preset: Preset | None = None, measure_costs: bool = True) -> None:
        self.window = window
        self.personas: Library[Persona] = Library(Persona)
        self.presets: Library[Preset] = Library(Preset)
        self.base_avatar: AvatarModel = window.viewport.base_avatar
        self._avatars: dict[str, AvatarModel] = {"default": window.viewport.base_avatar}
        self.persona_doc: Document[Persona] = Document(window.persona)
        self.preset_doc: Document[Preset] = Document(preset or self._fallback_preset())
        self.mixer = ExpressionMixer()
        self.editor = ExpressionEditor(self.persona_doc, self.mixer)
        self.cues = CueList(window.persona.cue_lines)
        self.hotkeys = HotkeyMap(default_hotkeys(window.persona), reserved=self._window_keys())
        self.output: OutputWindow | None = None
        self.output_background = "chroma"
        self.muted = False
        self.paused_clip = None
        self._look = None
        window.engine.configure(expression=self.mixer, plan=plan_for(self.preset_doc.item),
                                style=window.persona.motion_style())

        self.persona_panel = PersonaPanel(self)
        self.preset_panel = PresetPanel(self, measure=measure_costs)
        self.editor_panel = ExpressionEditorPanel(self)
        self.operator_panel = OperatorPanel(self)
        left, right = Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea
        self.persona_dock = window.add_dock("Persona", "personaDock", self.persona_panel, left)
        self.preset_dock = window.add_dock("Preset", "presetDock", self.preset_panel, left)
        self.editor_dock = window.add_dock("Expression Editor", "expressionEditorDock", self.editor_panel, left)
        self.operator_dock = window.add_dock("Operator", "operatorDock", self.operator_panel, right)
        window.tabifyDockWidget(self.persona_dock, self.preset_dock)
        window.tabifyDockWidget(self.preset_dock, self.editor_dock)
        window.tabifyDockWidget(window.inspector_dock, self.operator_dock)
        self.persona_dock.raise_()
        self.operator_dock.raise_()
        window.resizeDocks([self.persona_dock, self.operator_dock], [390, 380], Qt.Orientation.Horizontal)
        self.preset_dock.visibilityChanged.connect(self.preset_panel.on_visible)
        self.docks = (self.persona_dock, self.preset_dock, self.editor_dock, self.operator_dock)
        self._build_menu()

        self._look_timer = QTimer(window, singleShot=True, interval=LOOK_DELAY_MS)
        self._look_timer.timeout.connect(self.apply_look)
        self.poll_timer = QTimer(window, interval=POLL_INTERVAL_MS)
        self.poll_timer.timeout.connect(self.poll)
        self.poll_timer.start()
        self.persona_doc.changed.connect(self._persona_changed)
        self.preset_doc.changed.connect(self._preset_changed)
        self.apply_look()

    # ---- construction helpers
    def _fallback_preset(self) -> Preset:
        try:
            return self.presets.load("default")
        except PresetError:
            return Preset(name="default")

    def _window_keys(self) -> dict[str, str]:
        keys = {}
        for action in self.window.findChildren(QAction):
            text = action.shortcut().toString()
            if text:
                try:
                    keys[normalise_key(text)] = action.text().replace("&", "")
                except PresetError:
                    continue
        return keys

    def _build_menu(self) -> None:
        menu = self.window.menuBar().addMenu("&Operator")
        self.output_action = QAction("Clean &Output Window", self.window, checkable=True)
        self.output_action.setShortcut(QKeySequence("Ctrl+Shift+W"))
        self.output_action.toggled.connect(self.show_output)
        menu.addAction(self.output_action)
        background_menu = menu.addMenu("Output &Background")
        group = QActionGroup(self.window)
        self.output_background_actions = {}
        for mode in OUTPUT_BACKGROUNDS:
            action = QAction(mode.capitalize(), self.window, checkable=True)
            action.setChecked(mode == self.output_background)
            action.triggered.connect(lambda _c=False, m=mode: self.set_output_background(m))
            group.addAction(action)
            background_menu.addAction(action)
            self.output_background_actions[mode] = action
        screen_menu = menu.addMenu("Output &Screen")
        screen_menu.aboutToShow.connect(lambda: self._fill_screens(screen_menu))

    def _fill_screens(self, menu) -> None:
        menu.clear()
        for index, screen in enumerate(QGuiApplication.screens()):
            geometry = screen.geometry()
            action = menu.addAction(f"{index}: {screen.name()} ({geometry.width()}×{geometry.height()})")
            action.triggered.connect(lambda _c=False, i=index: self.output_to_screen(i))

    def report(self, panel, message: str) -> None:
        panel.message.error(message)
        self.window.statusBar().showMessage(" ".join(message.split()), 10000)

    # ---- per frame (called by the main window)
    def filter_idle(self, state: FrameState) -> FrameState:
        """The window's own idle frames get the expression stage too (the engine applies it to its frames)."""
        return state.replace(arkit=self.mixer.apply(state.arkit))

    def present(self, state: FrameState) -> None:
        if self.output is not None and self.output.isVisible():
            self.output.set_frame(state)

    def poll(self) -> None:
        """Cue finished? Trigger buttons follow the mixer; the speaker follows mute."""
        engine = self.window.engine
        if self.cues.playing is not None and engine.source is None and self.paused_clip is None:
            self.cues.finish()
        speaker = getattr(engine.engine, "speaker", None)
        if speaker is not None and getattr(speaker, "muted", False) != self.muted:
            speaker.muted = self.muted
        self.operator_panel.show_trigger_states()

    # ---- persona
    def select_persona(self, name: str) -> bool:
        """Make that persona the running one (its default preset too); a bad file changes nothing."""
        if self.persona_doc.dirty and self.window.show_dialogs:
            answer = QMessageBox.question(
                self.window, "Unsaved persona", f"Discard the unsaved changes to {self.persona_doc.item.name!r}?")
            if answer != QMessageBox.StandardButton.Yes:
                self.persona_panel.refresh(self.persona_doc.item)
                return False
        try:
            persona = self.personas.load(name)
        except PresetError as error:
            self.report(self.persona_panel, f"{error}\nKeeping persona {self.persona_doc.item.name!r}.")
            self.persona_panel.refresh(self.persona_doc.item)
            return False
        self.persona_doc.load(persona)
        self.persona_panel.message.clear_message()
        if persona.default_preset != self.preset_doc.item.name:
            self.select_preset(persona.default_preset)
        return True

    def save_persona(self) -> bool:
        try:
            self.personas.save(self.persona_doc.item)
        except (PresetError, OSError) as error:
            self.report(self.persona_panel, f"Could not save persona {self.persona_doc.item.name!r}: {error}")
            return False
        self.persona_doc.mark_saved()
        self.persona_panel.refresh_names()
        return True

    def _library_action(self, action) -> Persona | None:
        try:
            return action()
        except (PresetError, OSError) as error:
            self.report(self.persona_panel, str(error))
            return None

    def create_persona(self, name: str) -> bool:
        persona = self._library_action(lambda: self.personas.create(name))
        return persona is not None and self._switch_to(persona)

    def duplicate_persona(self, name: str) -> bool:
        persona = self._library_action(lambda: self.personas.create(name, self.persona_doc.item))
        return persona is not None and self._switch_to(persona)

    def rename_persona(self, name: str) -> bool:
        old = self.persona_doc.item.name
        persona = self._library_action(lambda: self.personas.rename(old, name))
        return persona is not None and self._switch_to(persona)

    def delete_persona(self) -> bool:
        name = self.persona_doc.item.name
        if self._library_action(lambda: self.personas.delete(name) or True) is None:
            return False
        fallback = self.personas.load(name) if self.personas.is_builtin(name) else self.personas.load("default")
        return self._switch_to(fallback)

    def _switch_to(self, persona: Persona) -> bool:
        self.persona_doc.load(persona)
        self.persona_panel.refresh_names()
        self.persona_panel.message.clear_message()
        return True

    def _persona_changed(self, persona: Persona) -> None:
        previous = self.window.persona
        self.window.persona = persona
        if (persona.avatar, persona.colors, persona.betas) != (previous.avatar, previous.colors, previous.betas):
            self._look_timer.start()
        if persona.style != previous.style:
            style = persona.motion_style()
            self.window.idle = IdleAnimator(style=style, hands_mode=self.preset_doc.item.plan.hands_mode)
            self.window.engine.configure(style=style)
        if persona.cue_lines != previous.cue_lines:
            self.cues.set_lines(persona.cue_lines)
        if (persona.expressions, persona.hotkeys) != (previous.expressions, previous.hotkeys):
            try:
                self.hotkeys.set_bindings(default_hotkeys(persona))
            except PresetError as error:
                self.report(self.operator_panel, str(error))

    def avatar_opened(self, avatar: AvatarModel) -> None:
        """File → Open Avatar drew another avatar than the persona's: the persona panel offers only what this one
        has (no shape sliders on a glTF/VRM, no colour buttons for parts it lacks), so no edit swaps it back."""
        self.base_avatar = avatar
        for key, cached in list(self._avatars.items()):  # a reopened file (a saved mapping): the persona gets it too
            if cached.source == avatar.source:
                self._avatars[key] = avatar
        self.persona_panel.refresh(self.persona_doc.item)
        if self.output is not None:  # the audience sees what the operator sees
            self.output.set_avatar(avatar, self.window.viewport.look)

    def apply_look(self) -> bool:
        """Avatar, colours and body shape of the persona into the viewport (and the output window)."""
        persona = self.persona_doc.item
        look = (persona.avatar, tuple(sorted(persona.colors.items())), tuple(persona.betas))
        if look == self._look:
            return True
        try:
            base = self._avatars.get(persona.avatar) or load_avatar(persona.avatar)
        except (AvatarFormatError, OSError, ValueError) as error:
            self.report(self.persona_panel, f"Could not open avatar {persona.avatar}: {error}\nKeeping the current one.")
            return False
        self._avatars[persona.avatar] = base
        self.base_avatar = base
        if persona.avatar != "default":
            self.window.remember_avatar(persona.avatar)
        self.persona_panel.refresh(persona)  # which colour parts and shape sliders this avatar has
        look = Look.of_persona(persona)
        viewport = self.window.viewport
        if base is viewport.base_avatar and self._look is not None:  # the first look is drawn before the window shows
            viewport.set_look(look)
        else:
            viewport.set_avatar(base, look)
        self.window.update_avatar_label()
        if self.output is not None:
            self.output.set_avatar(base, look)
        self._look = look
        return True

    # ---- preset
    def select_preset(self, name: str) -> bool:
        try:
            preset = self.presets.load(name)
        except PresetError as error:
            self.report(self.preset_panel, f"{error}\nKeeping preset {self.preset_doc.item.name!r}.")
            self.preset_panel.refresh(self.preset_doc.item)
            return False
        self.preset_doc.load(preset)
        self.preset_panel.message.clear_message()
        return True

    def save_preset(self) -> bool:
        try:
            self.presets.save(self.preset_doc.item)
        except (PresetError, OSError) as error:
            self.report(self.preset_panel, f"Could not save preset {self.preset_doc.item.name!r}: {error}")
            return False
        self.preset_doc.mark_saved()
        self.preset_panel.refresh_names()
        return True

    def duplicate_preset(self, name: str) -> bool:
        try:
            preset = self.presets.create(name, self.preset_doc.item)
        except (PresetError, OSError) as error:
            self.report(self.preset_panel, str(error))
            return False
        self.preset_doc.load(preset)
        self.preset_panel.refresh_names()
        return True

    def _preset_changed(self, preset: Preset) -> None:
        try:
            self.window.presets.apply(preset)
        except (ValueError, OSError) as error:
            self.report(self.preset_panel, f"Could not switch the engine to {preset.name!r}: {error}")
        if self.output is not None:
            self.output.set_output_size(preset.render.width, preset.render.height)
            self.output.view.set_cloth(preset.plan.cloth_regions)

    # ---- operator
    def hotkey(self, action: str) -> None:
        if action == "neutral":
            self.neutral()
        elif action == "next cue":
            self.speak_cue()
        elif action == "mute":
            self.operator_panel.mute_button.toggle()
        elif action == "pause/resume":
            self.pause_resume()
        else:
            self.toggle_expression(action)

    def bind_key(self, action: str, key: str) -> None:
        """Rebind; a key already bound or used by the window raises PresetError and changes nothing."""
        if action in OPERATOR_ACTIONS:
            self.hotkeys.bind(action, key)
            return
        trial = HotkeyMap(self.hotkeys.expression_bindings(), self.hotkeys.reserved)
        for fixed in OPERATOR_ACTIONS:
            trial.bind(fixed, self.hotkeys.key_for(fixed), notify=False)
        trial.bind(action, key)
        self.persona_doc.update("hotkeys", trial.expression_bindings())
        self.hotkeys.set_bindings(trial.expression_bindings())

    def toggle_expression(self, name: str) -> bool:
        expression = self.persona_doc.item.expressions.get(name)
        if expression is None:
            self.report(self.operator_panel, f"persona {self.persona_doc.item.name!r} has no expression {name!r}")
            return False
        on = self.mixer.toggle(name, expression)
        self.operator_panel.show_trigger_states()
        return on

    def set_fade(self, name: str, field: str, seconds: float) -> None:
        persona = self.persona_doc.item
        expressions = {k: v.model_dump() for k, v in persona.expressions.items()}
        expressions[name][field] = float(seconds)
        try:
            self.persona_doc.update("expressions", expressions)
        except PresetError as error:
            self.report(self.operator_panel, str(error))

    def speak_cue(self, index: int | None = None) -> bool:
        """Speak cue `index` (default: the next one); at the end of the list say so, and wrap if allowed."""
        wrapping = index is None and self.cues.ended and self.cues.wrap
        try:
            text = self.cues.start(index)
        except PresetError as error:
            self.report(self.operator_panel, str(error))
            return False
        self.paused_clip = None
        self.operator_panel.pause_button.setChecked(False)
        voice = self.persona_doc.item.voice
        if not self.window.speak_text(text, voice.name, voice.rate_wpm, voice.pitch):
            self.cues.finish()
            self.report(self.operator_panel, f"Could not speak cue: {self.window.engine.state}")
            return False
        if wrapping:
            self.operator_panel.message.info(f"The cue list had ended: starting again at cue 1 of {len(self.cues.lines)}")
            self.window.statusBar().showMessage(self.operator_panel.message.text(), 8000)
        elif self.cues.ended:
            self.operator_panel.message.info(f"Last cue ({len(self.cues.lines)} of {len(self.cues.lines)}): the list ends here")
            self.window.statusBar().showMessage(self.operator_panel.message.text(), 8000)
        else:
            self.operator_panel.message.clear_message()
        return True

    def set_muted(self, on: bool) -> None:
        self.muted = bool(on)
        self.poll()

    def pause_resume(self) -> bool:
        """Pause the spoken line where it is heard now; resume speaks the rest of it."""
        engine = self.window.engine
        if self.paused_clip is not None:
            clip, self.paused_clip = self.paused_clip, None
            self.operator_panel.pause_button.setChecked(False)
            return engine.speak_clip(clip)
        source = engine.source
        clip = getattr(source, "clip", None)
        if clip is None or engine.engine is None:
            self.operator_panel.pause_button.setChecked(False)
            self.report(self.operator_panel, "Nothing to pause: pause works on spoken lines (cues, Speak Text)")
            return False
        heard_s = engine.engine.media_time_now() - engine.engine.source_start_media_s
        self.paused_clip = remaining_clip(clip, heard_s)
        engine.stop()
        self.operator_panel.pause_button.setChecked(True)
        return True

    def neutral(self) -> None:
        """Panic: triggers and the designer's pose off at once, speech stopped, the face at rest."""
        self.mixer.neutral()
        self.editor.reset()
        self.paused_clip = None
        self.window.stop_speech()
        self.cues.finish()
        self.operator_panel.pause_button.setChecked(False)
        self.operator_panel.show_trigger_states()

    # ---- output window
    def show_output(self, on: bool = True) -> OutputWindow | None:
        if on and self.output is None:
            preset = self.preset_doc.item
            viewport = self.window.viewport
            self.output = OutputWindow(viewport.base_avatar, (preset.render.width, preset.render.height),
                                       self.output_background, viewport.look)
            self.output.view.set_cloth(preset.plan.cloth_regions)
        if self.output is not None:
            self.output.setVisible(on)
            if on and self.window.current_frame is not None:
                self.output.set_frame(self.window.current_frame)
        if self.output_action.isChecked() != on:
            self.output_action.setChecked(on)
        return self.output

    def set_output_background(self, mode: str) -> None:
        self.output_background = mode
        self.output_background_actions[mode].setChecked(True)
        if self.output is not None:
            self.output.set_background(mode)

    def output_to_screen(self, index: int) -> None:
        try:
            self.show_output(True).move_to_screen(index)
        except ValueError as error:
            self.window.report_error("Output window", str(error))

    def close(self) -> None:
        self.poll_timer.stop()
        self.preset_panel.stop()
        if self.output is not None:
            self.output.canvas.close()
            self.output.close()
            self.output = None
