"""VMC out as the window runs it: at the current preset's rate.

The bundles are received on a real UDP socket and read back by python-osc's parser."""

from __future__ import annotations

import socket
from contextlib import closing
from dataclasses import replace

from pythonosc.osc_bundle import OscBundle


def listening() -> socket.socket:
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    receiver.settimeout(30.0)
    return receiver


def switch_vmc_out_on(window, port: int) -> None:
    settings = replace(window.live_links.settings["vmc_out"], enabled=True, host="127.0.0.1", port=port)
    assert window.live_links.apply("vmc_out", settings) is None


def test_vmc_out_follows_the_current_presets_rate(qtbot, studio_window) -> None:
    with closing(studio_window(real_engine=True)) as window:
        panel = window.outputs_dock.widget()
        rate = panel.rows["vmc_out"].rate
        assert window.presets.preset.name == "default" and rate.value() == 30
        with closing(listening()) as receiver:
            switch_vmc_out_on(window, receiver.getsockname()[1])
            assert window.live_links.running["vmc_out"].rate_hz == 30.0
            window.panels.select_preset("performance")  # as the operator picks it in the Preset panel (25 fps)
            sender = window.live_links.running["vmc_out"]
            assert sender.rate_hz == 25.0 and rate.value() == 25 and sender.running
            assert window.live_links.settings["vmc_out"].rate_hz == 25.0
            OscBundle(receiver.recv(65536))  # still sending, at the new rate
            window.panels.select_preset("default")
            assert window.live_links.running["vmc_out"].rate_hz == 30.0 and rate.value() == 30
        window.live_links.apply("vmc_out", replace(window.live_links.settings["vmc_out"], enabled=False))
        window.panels.select_preset("performance")  # switched off, it starts at the preset's rate next time
        assert window.live_links.settings["vmc_out"].rate_hz == 25.0 and rate.value() == 25

