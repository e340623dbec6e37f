"""`avatar-studio bench` figures for the live links: what a VMC / Live Link frame costs to send, and how long a
tracker's packet takes to show in a FrameState."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np

from studio.avatar.arkit import NUM_ARKIT
from studio.engine.motion import relaxed_rest_pose
from studio.frame import FrameState


def _percentiles(values: list[float]) -> tuple[float, float]:
    if not values:
        return float("nan"), float("nan")
    return float(np.percentile(values, 50)), float(np.percentile(values, 95))


def send_cost_ms(sender, frames: int = 600) -> tuple[float, float]:
    """(p50, p95) ms to encode and send one frame (the sender thread's work per frame)."""
    rng = np.random.default_rng(0)
    states = [FrameState(media_time_s=k / 60, arkit=rng.random(NUM_ARKIT),
                         pose=relaxed_rest_pose() + rng.normal(0.0, 0.1, (55, 3))) for k in range(16)]
    costs = []
    for k in range(frames):
        begin = time.perf_counter()
        sender.send_frame(states[k % len(states)])
        costs.append((time.perf_counter() - begin) * 1000.0)
    return _percentiles(costs)


def tracker_to_frame_ms(kind: str, seconds: float = 3.0, rate_hz: float = 60.0) -> dict:
    """A tracker sending `rate_hz` packets on loopback into a running engine: packet in -> FrameState, ms.

    Measured from the receiver's arrival stamp to the tracker stage building the first frame that holds it;
    that includes the wait for the engine's next frame (up to 1/fps)."""
    from studio.engine.pipeline import Engine
    from studio.interop.livelink_udp import LiveLinkReceiver, LiveLinkSender
    from studio.interop.tracking import TrackerInput, TrackingMixer
    from studio.interop.vmc import VmcReceiver, VmcSender

    tracker = TrackerInput()
    receiver = (VmcReceiver if kind == "vmc" else LiveLinkReceiver)(tracker, port=0, host="127.0.0.1")
    receiver.start()
    encoder = (VmcSender if kind == "vmc" else LiveLinkSender)(port=receiver.port)
    engine = Engine()
    mixer = TrackingMixer(tracker)
    mixer.attach(engine)
    engine.start()
    stop = threading.Event()
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    packet = encoder.encode(FrameState(arkit=np.full(NUM_ARKIT, 0.5), pose=relaxed_rest_pose()))

    def send() -> None:
        while not stop.wait(1.0 / rate_hz):
            out.sendto(packet, ("127.0.0.1", receiver.port))

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    time.sleep(seconds)
    stop.set()
    thread.join()
    engine.stop()
    receiver.stop()
    encoder.close()
    out.close()
    latencies = list(mixer.latencies_ms)[5:]  # past the first few (engine warming up)
    p50, p95 = _percentiles(latencies)
    return {f"{kind}_tracker_to_frame_ms_p50": p50, f"{kind}_tracker_to_frame_ms_p95": p95,
            f"{kind}_tracker_packets_count": receiver.packets, f"{kind}_tracker_engine_fps": engine.fps}


def mutated_packets(valid: list[bytes], count: int, seed: int) -> list[bytes]:
    """`count` fuzz datagrams for a receiver, made from its `valid` packets: random bytes, truncations, extensions,
    flipped bytes, NaN/infinite/huge floats spliced in, and cut-and-joined packets (the fuzz test's and the bench's)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        base = bytearray(valid[k % len(valid)])
        kind = k % 6
        if kind == 0:
            out.append(rng.bytes(int(rng.integers(0, 2000))))
            continue
        if kind == 1:
            base = base[:int(rng.integers(0, len(base)))]
        elif kind == 2:
            base += rng.bytes(int(rng.integers(1, 64)))
        elif kind == 3:
            for _ in range(int(rng.integers(1, 8))):
                base[int(rng.integers(0, len(base)))] = int(rng.integers(0, 256))
        elif kind == 4 and len(base) >= 8:
            at = int(rng.integers(0, len(base) - 4))
            base[at:at + 4] = bytes(rng.choice([b"\x7f\xc0\x00\x00", b"\x7f\x80\x00\x00", b"\x4f\x7f\xff\xff",
                                                b"\xff\xff\xff\xff"]))
        else:
            base = base[:int(rng.integers(0, len(base)))] + base[int(rng.integers(0, len(base))):]
        out.append(bytes(base))
    return out


def engine_hop_with_links(seconds: float = 3.0) -> dict:
    """Engine loop per 10 ms hop of speech at live pace (median, p99 ms): with no links; with VMC and Live Link
    out plus both trackers sending 60 packets/s into the tracker stage; and with both receivers flooded by
    garbage (about 2,000 packets/s each) besides: a receiver must never cost the engine its hop budget."""
    from studio.engine.bench import live_pace_hop_costs_ms, speech_like
    from studio.engine.pipeline import Engine
    from studio.interop.livelink_udp import LiveLinkReceiver, LiveLinkSender
    from studio.interop.tracking import TrackerInput, TrackingMixer
    from studio.interop.vmc import VmcReceiver, VmcSender

    engine = Engine()
    audio = speech_like(seconds)
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    tracker = TrackerInput()
    receivers = [VmcReceiver(tracker, port=0, host="127.0.0.1"), LiveLinkReceiver(tracker, port=0, host="127.0.0.1")]
    outputs = [VmcSender(port=sink.getsockname()[1], rate_hz=60.0), LiveLinkSender(port=sink.getsockname()[1])]
    frame = FrameState(arkit=np.full(NUM_ARKIT, 0.5), pose=relaxed_rest_pose())
    good = [outputs[0].encode(frame), outputs[1].encode(frame)]
    garbage = [mutated_packets([good[0]], 2000, 1), mutated_packets([good[1]], 2000, 2)]
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    stop = threading.Event()

    def send(packets_per_s: float, flood: bool) -> None:
        k = 0
        while not stop.wait(1.0 / packets_per_s):
            for receiver, packet, junk in zip(receivers, good, garbage):
                out.sendto(junk[k % len(junk)] if flood else packet, ("127.0.0.1", receiver.port))
            k += 1

    figures: dict[str, float] = {}
    threads: list[threading.Thread] = []
    try:
        live_pace_hop_costs_ms(engine, audio)  # warm-up
        costs = {"no_links": live_pace_hop_costs_ms(engine, audio)}
        for receiver in receivers:
            receiver.start()
        for output in outputs:
            output.start(engine)
        mixer = TrackingMixer(tracker)
        mixer.attach(engine)
        threads.append(threading.Thread(target=send, args=(60.0, False), daemon=True))
        threads[-1].start()
        costs["links"] = live_pace_hop_costs_ms(engine, audio)
        threads.append(threading.Thread(target=send, args=(2000.0, True), daemon=True))
        threads[-1].start()
        costs["links_flooded"] = live_pace_hop_costs_ms(engine, audio)
        figures["flood_ignored_count"] = float(sum(sum(r.counts.values()) for r in receivers))
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        for output in outputs:
            output.close()
        for receiver in receivers:
            receiver.stop()
        out.close()
        sink.close()
    for label, values in costs.items():
        figures[f"engine_hop_{label}_median_ms"] = float(np.median(values))
        figures[f"engine_hop_{label}_p99_ms"] = float(np.percentile(values, 99))
    return figures


def bench_interop(seconds: float = 3.0) -> dict:
    """The `interop` section: send cost per frame and tracker-to-frame latency for VMC and Live Link Face."""
    from studio.interop.livelink_udp import LiveLinkSender
    from studio.interop.vmc import VmcSender

    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # a receiver that never reads: sends still cost the same
    sink.bind(("127.0.0.1", 0))
    port = sink.getsockname()[1]
    figures: dict[str, object] = {}
    try:
        for name, sender in (("vmc", VmcSender(port=port)), ("vmc_vrm", VmcSender(port=port, naming="vrm")),
                             ("livelink", LiveLinkSender(port=port))):
            p50, p95 = send_cost_ms(sender)
            figures[f"{name}_send_ms_p50"], figures[f"{name}_send_ms_p95"] = p50, p95
            sender.close()
    finally:
        sink.close()
    figures.update(tracker_to_frame_ms("vmc", seconds))
    figures.update(tracker_to_frame_ms("livelink", seconds))
    figures.update(engine_hop_with_links(seconds))
    figures["note"] = ("send: encode + sendto per frame on the sender's thread (the engine only queues the frame); "
                       "tracker_to_frame: receiver arrival to the frame built, engine at its default rate")
    return figures
