"""The Outputs panel in the Operate workspace: links on and off, plain-word errors, tracker state, region sources."""

from __future__ import annotations

import socket

from PySide6.QtCore import Qt

from widgets.panels.outputs_panel import OutputsPanel


def test_outputs_panel_lives_in_operate_and_says_what_goes_wrong(qtbot, studio_window) -> None:
    window = studio_window(real_engine=True)
    assert window.workspaces.current == "operate"
    assert window.outputs_dock.isVisible() or window.outputs_dock in window.tabifiedDockWidgets(window.panels.operator_dock)
    window.outputs_dock.show()
    window.outputs_dock.raise_()
    panel: OutputsPanel = window.outputs_dock.widget()
    taken = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    taken.bind(("0.0.0.0", 0))
    port = taken.getsockname()[1]
    try:
        row = panel.rows["vmc_in"]
        row.port.setValue(port)
        qtbot.mouseClick(row.enabled, Qt.MouseButton.LeftButton)
        assert not row.enabled.isChecked()
        assert row.status.text() == f"port {port} is in use by another program"
        assert "ff8a80" in row.status.styleSheet()
    finally:
        taken.close()
    row = panel.rows["livelink_in"]
    row.port.setValue(port)  # free now
    qtbot.mouseClick(row.enabled, Qt.MouseButton.LeftButton)
    assert row.enabled.isChecked(), row.status.text()
    panel.refresh()
    assert panel.tracker_state.text() == "Tracker: waiting for the tracker's first packet"
    assert row.status.text().startswith(f"0 packets/s on port {port}")
    engine = window.engine.engine
    assert engine.tracking is window.live_links.mixer
    mouth = panel.sources["mouth_jaw"]
    assert mouth.currentData() == "voice" and panel.sources["eyes_brows"].currentData() == "tracker"
    mouth.setCurrentIndex(mouth.findData("tracker"))
    assert window.live_links.mixer.sources["mouth_jaw"] == "tracker"
    window.close()
    assert window.live_links.running == {}
