"""The Outputs panel's model: links switched on and off, errors in plain words, several outputs at once."""

from __future__ import annotations

import socket
from dataclasses import replace

import pytest

from studio.engine.pipeline import Engine
from studio.interop.links import DEFAULT_SETTINGS, LiveLinks
from studio.interop.livelink_udp import decode_packet
from tests.studio.interop.test_livelink_udp import wait_for


@pytest.fixture()
def engine():
    running = Engine()
    running.start()
    yield running
    running.stop()


def listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(30.0)
    return sock


def test_vmc_and_live_link_out_run_at_once_and_switch_off(engine: Engine) -> None:
    links = LiveLinks(lambda: engine, rate_hz=30.0)
    vmc_sink, livelink_sink = listening_socket(), listening_socket()
    try:
        assert links.apply("vmc_out", replace(DEFAULT_SETTINGS["vmc_out"], enabled=True,
                                              port=vmc_sink.getsockname()[1])) is None
        assert links.apply("livelink_out", replace(DEFAULT_SETTINGS["livelink_out"], enabled=True,
                                                   port=livelink_sink.getsockname()[1])) is None
        assert vmc_sink.recv(65536).startswith(b"#bundle\x00")
        assert decode_packet(livelink_sink.recv(65536))[1] == "AvatarStudio"
        wait_for(lambda: links.status("vmc_out").packets_per_s > 0, "VMC packets counted")
        assert "packets/s to 127.0.0.1:" in links.status("vmc_out").detail
        assert links.apply("vmc_out", replace(links.settings["vmc_out"], enabled=False)) is None
        assert links.status("vmc_out").detail == "off" and links.status("livelink_out").on
    finally:
        links.close()
        vmc_sink.close()
        livelink_sink.close()
    assert engine._subscribers == []  # every output let go of its queue


def test_link_errors_are_plain_words_and_leave_the_link_off(engine: Engine) -> None:
    links = LiveLinks(lambda: engine)
    taken = listening_socket()
    try:
        port = taken.getsockname()[1]
        error = links.apply("vmc_in", replace(DEFAULT_SETTINGS["vmc_in"], enabled=True, host="127.0.0.1", port=port))
        assert error == f"port {port} is in use by another program"
        assert not links.settings["vmc_in"].enabled and links.status("vmc_in").detail == error
        assert links.tracker_status() == "off"
        assert links.apply("livelink_in", replace(DEFAULT_SETTINGS["livelink_in"], enabled=True, port=0)) is None
        assert links.tracker_status() == "waiting for the tracker's first packet"
        assert engine.tracking is links.mixer and engine.anchor.pose_input is links.mixer.pose_target
        listen = links.running["livelink_in"].port
        error = links.apply("livelink_out", replace(DEFAULT_SETTINGS["livelink_out"], enabled=True, port=listen))
        assert error == (f"Live Link in uses port {listen} on this computer too, so the avatar would drive itself: "
                         "choose another port")
        assert links.apply("vmc_out", replace(DEFAULT_SETTINGS["vmc_out"], enabled=True, host="no.such.host.invalid")) \
            .startswith("host 'no.such.host.invalid' is not a known address")
        links.apply("livelink_in", replace(links.settings["livelink_in"], enabled=False))
        assert engine.tracking is None and engine.anchor.pose_input is None
    finally:
        links.close()
        taken.close()


def test_no_engine_is_said_plainly() -> None:
    links = LiveLinks(lambda: None)
    assert links.apply("vmc_out", replace(DEFAULT_SETTINGS["vmc_out"], enabled=True)) == \
        "the engine is not running, so there is nothing to send or to drive"


def test_a_stalled_output_drops_its_oldest_frames_and_never_holds_the_engine(engine: Engine) -> None:
    import threading

    from studio.interop.sender import QUEUE_FRAMES, FrameSender

    release = threading.Event()

    class StalledSender(FrameSender):
        name = "stalled"

        def encode(self, frame) -> bytes:
            release.wait()  # a receiver path that does not move until the test lets it
            return b"x"

    sender = StalledSender(port=9, rate_hz=240.0)
    sender.start(engine)
    try:
        first = engine.slot.latest().sequence if engine.slot.latest() else 0
        wait_for(lambda: engine.slot.latest() is not None and engine.slot.latest().sequence > first + 10 * QUEUE_FRAMES,
                 "the engine making frames while the output is stuck")
        assert sender.stats().dropped > 0 and sender.sent == 0
    finally:
        release.set()
        sender.close()


def test_link_settings_are_kept_and_a_bad_file_is_said_and_left_alone(tmp_path) -> None:
    path = tmp_path / "live_links.json"
    links = LiveLinks(lambda: None)
    links.settings["vmc_out"] = replace(links.settings["vmc_out"], enabled=True, host="192.168.1.20", port=39540,
                                        rate_hz=60.0, naming="vrm")
    links.set_source("mouth_jaw", "tracker")
    links.save(path)
    again = LiveLinks(lambda: None)
    assert again.load(path) is None
    assert again.settings["vmc_out"] == replace(links.settings["vmc_out"], enabled=False)  # every link starts off
    assert again.mixer.sources["mouth_jaw"] == "tracker"
    path.write_text('{"links": {"vmc_out": {"port": 70000}}}')
    fresh = LiveLinks(lambda: None)
    assert fresh.load(path) == f"{path}: vmc_out.port 70000 is not allowed; use 1..65535; using the default link settings"
    assert fresh.settings == DEFAULT_SETTINGS and path.read_text() == '{"links": {"vmc_out": {"port": 70000}}}'
    path.write_text("{not json")
    assert fresh.load(path).startswith(f"{path}: Expecting property name")
    assert LiveLinks(lambda: None).load(tmp_path / "none.json") is None


def test_a_receiver_flooded_past_its_share_of_time_drops_packets_unread() -> None:
    import time

    from studio.interop.receiver import UdpReceiver

    class SlowReceiver(UdpReceiver):
        name = "slow"
        handled = 0

        def handle(self, data: bytes, arrived: float) -> None:
            time.sleep(0.05)  # 50 ms of decoding a packet: the share (0.3 s a second) is spent after six
            self.handled += 1

    receiver = SlowReceiver(port=0, host="127.0.0.1")
    receiver.start()
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _ in range(40):
            out.sendto(b"x", ("127.0.0.1", receiver.port))
        wait_for(lambda: receiver.packets == 40, "all 40 packets read")
    finally:
        out.close()
        receiver.stop()
    assert receiver.counts["flood"] >= 10 and receiver.handled + receiver.counts["flood"] == 40
