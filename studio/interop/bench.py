"""`avatar-studio bench` figures for the live links: what a VMC / Live Link frame costs to send, how long a
tracker's packet takes to show in a FrameState, and what the engine pays per hop while a receiver is fuzzed."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

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


FUZZ_MESSAGES = 10_000


def hop_costs_while(engine, audio: np.ndarray, busy: Callable[[], bool]) -> list[float]:
    """Engine-loop cost per hop at live pace (`live_pace_hop_costs_ms`), pass after pass of `audio`, until `busy()`
    (a flood still being sent) is False: every hop of the flood is measured, whatever its length."""
    from studio.engine.bench import live_pace_hop_costs_ms

    costs: list[float] = []
    while True:
        costs += live_pace_hop_costs_ms(engine, audio)
        if not busy():
            return costs


def engine_hop_during_fuzz(seconds: float = 3.0, messages: int = FUZZ_MESSAGES, rounds: int = 2) -> dict:
    """Engine loop per 10 ms hop of speech at live pace (p50, p95 ms), with a VMC and a Live Link receiver feeding
    the tracker stage: quiet (no packets), and while `messages` fuzzed packets (`mutated_packets`) come to one door,
    spread evenly over `seconds`; the cases alternate over `rounds`, so that a busy moment of the machine is shared.
    Also the engine's own count of frames over its budget in each case."""
    from studio.engine.bench import live_pace_hop_costs_ms, speech_like
    from studio.engine.pipeline import Engine
    from studio.interop.livelink_udp import LiveLinkReceiver, LiveLinkSender
    from studio.interop.tracking import TrackerInput, TrackingMixer
    from studio.interop.vmc import VmcReceiver, VmcSender

    engine = Engine()
    audio = speech_like(seconds)
    tracker = TrackerInput()
    receivers = {"vmc": VmcReceiver(tracker, port=0, host="127.0.0.1"),
                 "livelink": LiveLinkReceiver(tracker, port=0, host="127.0.0.1")}
    rng = np.random.default_rng(3)
    frames = [FrameState(media_time_s=k / 60, arkit=rng.random(NUM_ARKIT), pose=relaxed_rest_pose()) for k in range(4)]
    encoders = {"vmc": VmcSender(port=9), "livelink": LiveLinkSender(port=9)}
    packets = {door: mutated_packets([encoder.encode(frame) for frame in frames], messages, seed)
               for seed, (door, encoder) in enumerate(encoders.items())}
    for encoder in encoders.values():
        encoder.close()
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def flood(door: str) -> None:
        port, batch = receivers[door].port, max(1, messages // int(seconds * 200))  # a batch every 5 ms
        due = time.perf_counter()
        for k in range(0, messages, batch):
            for packet in packets[door][k:k + batch]:
                out.sendto(packet, ("127.0.0.1", port))
            due += batch * seconds / messages
            time.sleep(max(0.0, due - time.perf_counter()))

    labels = ("quiet", "vmc_fuzz", "livelink_fuzz")
    costs: dict[str, list[float]] = {label: [] for label in labels}
    over = dict.fromkeys(labels, 0)
    figures: dict[str, float] = {"engine_hop_budget_ms": engine.telemetry.budget_ms}
    try:
        for receiver in receivers.values():
            receiver.start()
        TrackingMixer(tracker).attach(engine)
        live_pace_hop_costs_ms(engine, audio)  # warm-up
        for _round in range(rounds):
            for label in labels:
                over_before = engine.telemetry.over_budget_count
                if label == "quiet":
                    costs[label] += live_pace_hop_costs_ms(engine, audio)
                else:
                    sender = threading.Thread(target=flood, args=(label.removesuffix("_fuzz"),), daemon=True)
                    sender.start()
                    costs[label] += hop_costs_while(engine, audio, sender.is_alive)
                    sender.join()
                over[label] += engine.telemetry.over_budget_count - over_before
        for label in labels:
            figures[f"engine_hop_{label}_ms_p50"], figures[f"engine_hop_{label}_ms_p95"] = _percentiles(costs[label])
            figures[f"engine_hop_{label}_hops_count"] = float(len(costs[label]))
            figures[f"engine_over_budget_{label}_count"] = float(over[label])
        for door, receiver in receivers.items():
            figures[f"{door}_fuzz_received_count"] = float(receiver.packets)
            figures[f"{door}_fuzz_sent_count"] = float(rounds * messages)
            figures[f"{door}_fuzz_ignored_count"] = float(sum(receiver.counts.values()))
    finally:
        for receiver in receivers.values():
            receiver.stop()
        out.close()
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
    figures.update(engine_hop_during_fuzz(seconds))
    figures["note"] = ("send: encode + sendto per frame on the sender's thread (the engine only queues the frame); "
                       "tracker_to_frame: receiver arrival to the frame built, engine at its default rate; "
                       "*_fuzz: 10,000 fuzzed packets a round at that receiver, spread over the window; ignored: malformed, "
                       "non-finite, unknown names, clamped, or past the receiver's decoding share (flood)")
    return figures
