"""The control API served by the window: commands that change what the window shows go through the window.

A persona or preset set by a client takes the same path as the operator's choice in the Persona or Preset panel
(`StudioPanels.select_persona` / `select_preset`), run on the GUI thread. The API's command thread waits for it,
bounded; the engine and the API's event loop never do.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from concurrent.futures import TimeoutError as FutureTimeout

from PySide6.QtCore import QObject, QThread, Signal

from studio.api.messages import ApiError, PersonaResult, PresetResult
from studio.api.service import StudioService
from studio.api.switch import ApiSwitch
from studio.presets import PresetError

GUI_WAIT_S = 10.0  # the longest a command waits for the window to take a change


class GuiUnavailable(RuntimeError):
    """The window did not run the call: it was busy past the wait, or the API is stopping."""


class GuiCalls(QObject):
    """Runs a function on the GUI thread for another thread and hands back its result or its exception."""

    _posted = Signal(object)

    def __init__(self) -> None:
        super().__init__()  # made on the GUI thread, so its queued calls run there
        self._lock = threading.Lock()
        self._pending: set[Future] = set()
        self._open = True
        self._posted.connect(self._run)  # queued: this object lives on the GUI thread, callers on others

    def call(self, function: Callable[[], object], wait_s: float = GUI_WAIT_S) -> object:
        on_gui_thread = QThread.currentThread() == self.thread()
        future: Future = Future()
        with self._lock:
            if not self._open:
                raise GuiUnavailable("the API is stopping")
            if not on_gui_thread:
                self._pending.add(future)
        if on_gui_thread:
            return function()
        self._posted.emit((future, function))
        try:
            return future.result(wait_s)
        except CancelledError:
            raise GuiUnavailable("the API is stopping") from None
        except FutureTimeout:
            future.cancel()
            raise GuiUnavailable(f"the window did not take it within {wait_s:g} s") from None
        finally:
            with self._lock:
                self._pending.discard(future)

    def _run(self, item: tuple[Future, Callable[[], object]]) -> None:
        future, function = item
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(function())
        except Exception as error:  # noqa: BLE001 - handed to the waiting thread, which reports it
            future.set_exception(error)

    def close(self) -> None:
        """Refuse new calls and release every caller still waiting (their work has not started)."""
        with self._lock:
            self._open = False
            pending = list(self._pending)
        for future in pending:
            future.cancel()


class WindowService(StudioService):
    """The API's service on the window's engine and mixer; persona and preset are the window's own."""

    def __init__(self, window, engine) -> None:
        super().__init__(window.persona, window.presets.preset, engine=engine, mixer=window.panels.mixer)
        self.window = window
        self.gui = GuiCalls()
        panels = window.panels
        panels.persona_doc.changed.connect(self._persona_shown)  # the operator's changes too
        window.presets.changed.connect(self._preset_shown)

    def _persona_shown(self, persona) -> None:
        self.persona = persona

    def _preset_shown(self, preset) -> None:
        self.preset = preset

    def stop_waiting(self) -> None:
        self.gui.close()
        self.window.panels.persona_doc.changed.disconnect(self._persona_shown)
        self.window.presets.changed.disconnect(self._preset_shown)

    def _in_window(self, function: Callable[[], object]) -> object:
        try:
            return self.gui.call(function)
        except GuiUnavailable as error:
            raise ApiError("engine_error", f"the window could not make the change: {error}") from None

    def set_persona(self, name: str) -> PersonaResult:
        panels = self.window.panels

        def choose():
            _check_unsaved(panels.persona_doc, "persona")
            try:
                panels.personas.load(name)
            except PresetError as error:
                raise ApiError("not_found", str(error)) from None
            if not panels.select_persona(name):
                raise ApiError("engine_error", f"the window kept persona {panels.persona_doc.item.name!r}")
            return panels.persona_doc.item

        persona = self._in_window(choose)
        self._event("persona", name=persona.name)
        return PersonaResult(name=persona.name, expressions=list(persona.expressions), voice=persona.voice.name)

    def set_preset(self, name: str) -> PresetResult:
        panels = self.window.panels

        def choose():
            _check_unsaved(panels.preset_doc, "preset")
            try:
                panels.presets.load(name)
            except PresetError as error:
                raise ApiError("not_found", str(error)) from None
            if not panels.select_preset(name):
                raise ApiError("engine_error", f"the window kept preset {panels.preset_doc.item.name!r}")
            return panels.preset_doc.item

        preset = self._in_window(choose)
        self._event("preset", name=preset.name)
        plan = preset.plan
        return PresetResult(name=preset.name, face_model=plan.face_variant, face_rate_hz=plan.face_rate_hz)


def _check_unsaved(document, kind: str) -> None:
    """A client never discards the operator's unsaved edits."""
    if document.dirty:
        raise ApiError("conflict", f"the operator has unsaved changes to {kind} {document.item.name!r} in the window; "
                       f"the {kind} is not switched until they are saved or reverted")


def window_api_switch(window) -> ApiSwitch:
    """The window's API switch: a WindowService on the window's engine (None while the engine cannot run)."""

    def make_service() -> WindowService | None:
        engine = window.engine.ensure_engine()
        if engine is None or window.presets.preset is None:
            return None
        return WindowService(window, engine)

    return ApiSwitch(make_service)
