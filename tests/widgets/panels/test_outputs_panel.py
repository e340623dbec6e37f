"""The Outputs panel in the Operate workspace: links on and off, plain-word errors, tracker state, region sources."""

from __future__ import annotations

import socket

from PySide6.QtCore import Qt

from studio.interop.links import LiveLinks
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
    kept = OutputsPanel(LiveLinks(lambda: None))  # the next session: same port and sources, every link off
    assert kept.rows["livelink_in"].port.value() == port and not kept.rows["livelink_in"].enabled.isChecked()
    assert kept.sources["mouth_jaw"].currentData() == "tracker"
    qtbot.addWidget(kept)


def test_a_biased_live_link_tracker_shows_its_drift_and_the_anchored_result_in_the_drift_dock(qtbot, studio_window) -> None:
    """A phone whose head pitch creeps 3 degrees a second: the Drift dock shows the input's drift and the anchored head."""
    import math
    import threading
    import time
    from dataclasses import replace

    from pylivelinkface import FaceBlendShape, PyLiveLinkFace

    from studio.interop.links import DEFAULT_SETTINGS

    window = studio_window(real_engine=True)
    links = window.live_links
    assert links.apply("livelink_in", replace(DEFAULT_SETTINGS["livelink_in"], enabled=True, host="127.0.0.1", port=0)) \
        is None
    port = links.running["livelink_in"].port
    phone = PyLiveLinkFace(name="iPhone", fps=60)
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    stop = threading.Event()
    began = time.monotonic()

    def send() -> None:
        while not stop.wait(1 / 60):
            phone.set_blendshape(FaceBlendShape.HeadPitch, math.radians(3.0) * (time.monotonic() - began), no_filter=True)
            out.sendto(phone.encode(), ("127.0.0.1", port))

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    monitor = window.drift.model.monitor
    try:
        qtbot.waitUntil(lambda: "raw_head_drift_deg" in monitor.current and monitor.current["raw_head_drift_deg"] > 20.0,
                        timeout=120_000)
    finally:
        stop.set()
        sender.join()
        out.close()
    assert window.drift.model.pose_note is None
    assert monitor.current["head_drift_deg"] < monitor.current["raw_head_drift_deg"] / 3
    window.drift.panel.refresh()
    head = window.drift.panel.values["head"].text()
    assert "—" not in head and head.endswith("°"), head  # anchored · input, both shown
