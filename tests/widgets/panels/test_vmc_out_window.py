"""VMC out as the window runs it: at the current preset's rate, with the current avatar's bone positions.

The bundles are received on a real UDP socket and read back by python-osc's parser."""

from __future__ import annotations

import socket
from contextlib import closing
from dataclasses import replace

import numpy as np
from pythonosc.osc_bundle import OscBundle

from studio.avatar.skeleton import JOINT_NAMES, PARENTS
from studio.interop.unity import UNITY_BONE

WAIT_MS = 60_000  # a hang guard, never a timing assert


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


def bone_positions(receiver: socket.socket) -> dict[str, np.ndarray]:
    """Every bone's position in one VMC bundle, by Unity bone name."""
    bundle = OscBundle(receiver.recv(65536))
    positions = {}
    for message in bundle:
        if message.address == "/VMC/Ext/Bone/Pos":
            name, *numbers = message.params
            positions[name] = np.array(numbers[:3])
    return positions


def expected_positions(avatar) -> dict[str, np.ndarray]:
    """Each bone's offset from its parent at rest (the hips from the origin), x mirrored for Unity's left hand."""
    joints = avatar.rest_joints().astype(np.float64)
    expected = {}
    for index, name in enumerate(JOINT_NAMES):
        offset = joints[index] - (joints[PARENTS[index]] if PARENTS[index] >= 0 else 0.0)
        expected[UNITY_BONE[name]] = offset * np.array([-1.0, 1.0, 1.0])
    return expected


def test_vmc_out_sends_the_avatars_rest_offsets_as_bone_positions_and_follows_a_new_avatar(qtbot, studio_window) -> None:
    with closing(studio_window(real_engine=True)) as window:
        with closing(listening()) as receiver:
            switch_vmc_out_on(window, receiver.getsockname()[1])
            sent = bone_positions(receiver)
            wanted = expected_positions(window.avatar)
            assert set(sent) == set(wanted) and len(sent) == 55
            for bone, position in wanted.items():
                np.testing.assert_allclose(sent[bone], position, atol=1e-5, err_msg=bone)
            assert np.linalg.norm(sent["Hips"]) > 0.01 and np.linalg.norm(sent["LeftUpperLeg"]) > 0.01

            window.panels.persona_doc.update("betas", [2.0, -1.5])  # a new body shape: the avatar changes
            qtbot.waitUntil(lambda: window.viewport.look.betas[:2] == (2.0, -1.5), timeout=WAIT_MS)
            reshaped = expected_positions(window.avatar)
            assert not np.allclose(reshaped["LeftUpperLeg"], wanted["LeftUpperLeg"], atol=1e-4)

            def new_offsets_sent() -> bool:
                sent = bone_positions(receiver)
                return all(np.allclose(sent[bone], position, atol=1e-5) for bone, position in reshaped.items())

            qtbot.waitUntil(new_offsets_sent, timeout=WAIT_MS)


def test_live_link_out_follows_the_current_presets_rate_too(qtbot, studio_window) -> None:
    from studio.interop.livelink_udp import decode_packet

    with closing(studio_window(real_engine=True)) as window:
        rate = window.outputs_dock.widget().rows["livelink_out"].rate
        with closing(listening()) as receiver:
            settings = replace(window.live_links.settings["livelink_out"], enabled=True, host="127.0.0.1",
                               port=receiver.getsockname()[1])
            assert window.live_links.apply("livelink_out", settings) is None
            assert window.live_links.running["livelink_out"].rate_hz == 30.0
            window.panels.select_preset("performance")
            sender = window.live_links.running["livelink_out"]
            assert sender.rate_hz == 25.0 and rate.value() == 25 and sender.running
            decode_packet(receiver.recv(65536))  # still sending, at the new rate
        window.live_links.apply("livelink_out", replace(window.live_links.settings["livelink_out"], enabled=False))
