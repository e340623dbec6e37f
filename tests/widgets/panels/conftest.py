"""A studio window with the operator and designer panels, on the real X server."""

from __future__ import annotations

import pytest

from studio.presets import persona_by_name
from tests.conftest import make_random_avatar
from widgets.main_window import MainWindow
from widgets.models import EngineController


def _no_engine():
    raise ImportError("No module named 'studio.engine.pipeline'")


@pytest.fixture
def studio_window(qtbot, studio_home):
    """build(real_engine=False, avatar=None, persona='default') → a shown MainWindow with its panels."""

    def build(real_engine: bool = False, avatar=None, persona: str = "default") -> MainWindow:
        engine = EngineController() if real_engine else EngineController(_no_engine)
        window = MainWindow(avatar or make_random_avatar(), engine=engine, show_dialogs=False,
                            persist_layout=False, persona=persona_by_name(persona))
        qtbot.addWidget(window)
        window.show()
        qtbot.waitExposed(window)
        return window

    return build
