"""The live links the Outputs panel switches: VMC out and in, Live Link Face out and in, one tracker stage.

Qt-free: the panel edits `LinkSettings`, calls `apply`, and shows `status`. Each link runs on its own thread;
both inputs feed one TrackerInput, laid over the engine by one TrackingMixer. The engine is asked for only
when a link is switched on (`engine_provider`, which may build and start it), and a rebuilt engine is
picked up by `follow_engine`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import numpy as np

from studio.fileio import atomic_write
from studio.interop.livelink_udp import LIVELINK_PORT, LiveLinkReceiver, LiveLinkSender
from studio.interop.tracking import REGIONS, SOURCES, TrackerInput, TrackingMixer
from studio.interop.unity import BLEND_NAMINGS
from studio.interop.vmc import VMC_PORT, VmcReceiver, VmcSender

OUTPUTS = ("vmc_out", "livelink_out")
INPUTS = ("vmc_in", "livelink_in")
LINK_TITLES = {"vmc_out": "VMC out", "livelink_out": "Live Link out", "vmc_in": "VMC in", "livelink_in": "Live Link in"}
_LOOPBACK = ("127.0.0.1", "localhost", "::1", "0.0.0.0")


@dataclass(frozen=True)
class LinkSettings:
    enabled: bool = False
    host: str = "127.0.0.1"  # outputs: where to send; inputs: the address to listen on
    port: int = VMC_PORT
    rate_hz: float = 30.0  # outputs only
    naming: str = "arkit"  # VMC out only: one of BLEND_NAMINGS


DEFAULT_SETTINGS = {
    "vmc_out": LinkSettings(host="127.0.0.1", port=VMC_PORT),
    "livelink_out": LinkSettings(host="127.0.0.1", port=LIVELINK_PORT, rate_hz=60.0),
    "vmc_in": LinkSettings(host="0.0.0.0", port=VMC_PORT),
    "livelink_in": LinkSettings(host="0.0.0.0", port=LIVELINK_PORT),
}


def links_path() -> Path:
    """Where the Outputs panel keeps its addresses, ports, rates and region sources."""
    from studio.paths import user_config_dir

    return user_config_dir() / "live_links.json"


@dataclass(frozen=True)
class LinkStatus:
    on: bool
    packets_per_s: float
    error: str | None  # in plain words, None when all is well
    detail: str  # a short line for the panel


class LiveLinks:
    """Every link's settings and running object, and the tracker stage shared by the inputs."""

    def __init__(self, engine_provider: Callable[[], object | None], rate_hz: float | None = None,
                 current_engine: Callable[[], object | None] | None = None,
                 rest_joints: Callable[[], np.ndarray] | None = None) -> None:
        """`engine_provider` gives the running engine (building it if need be); `current_engine` the one there is
        now, without building one (for `follow_engine`); `rest_joints` the avatar's (55, 3) joints at rest, from
        which VMC out sends each bone's position (asked when VMC out starts and after `avatar_changed`)."""
        self.engine_provider = engine_provider
        self.current_engine = current_engine
        self.rest_joints = rest_joints
        self.settings = dict(DEFAULT_SETTINGS)
        if rate_hz is not None:
            self.settings["vmc_out"] = replace(self.settings["vmc_out"], rate_hz=float(rate_hz))
        self.tracker = TrackerInput()
        self.mixer = TrackingMixer(self.tracker)
        self.running: dict[str, object] = {}
        self.errors: dict[str, str | None] = dict.fromkeys(LINK_TITLES)
        self._engine = None

    # ------------------------------------------------------------ control

    def apply(self, name: str, settings: LinkSettings) -> str | None:
        """Switch link `name` to `settings` (restarting it if on); returns the error in plain words, or None."""
        if name not in LINK_TITLES:
            raise ValueError(f"link {name!r} is not known; allowed: {', '.join(LINK_TITLES)}")
        self._stop(name)
        self.settings[name] = settings
        self.errors[name] = None
        if not settings.enabled:
            self._update_tracking()
            return None
        error = self._check(name, settings)
        if error is None:
            engine = self._ensure_engine()
            if engine is None:
                error = "the engine is not running, so there is nothing to send or to drive"
        if error is None:
            try:
                self.running[name] = self._start(name, settings, engine)
            except (ValueError, OSError) as failure:
                error = str(failure)
        if error is not None:
            self.settings[name] = replace(settings, enabled=False)
            self.errors[name] = error
        self._update_tracking()
        return error

    def follow_rate(self, rate_hz: float) -> dict[str, str]:
        """Every output (VMC out, Live Link out) at the preset's frame rate (restarted at it when on); the operator
        may set another in the panel until the next preset. Returns the outputs that failed to restart, with the
        error in plain words."""
        errors = {}
        for name in OUTPUTS:
            settings = replace(self.settings[name], rate_hz=float(rate_hz))
            if settings == self.settings[name]:
                continue
            if name in self.running:
                error = self.apply(name, settings)
                if error is not None:
                    errors[name] = error
            else:
                self.settings[name] = settings
        return errors

    def avatar_changed(self) -> str | None:
        """Another avatar or body shape: VMC out, when on, restarts with its bone positions."""
        if "vmc_out" in self.running and self.rest_joints is not None:
            return self.apply("vmc_out", self.settings["vmc_out"])
        return None

    def set_source(self, region: str, source: str) -> None:
        self.mixer.set_source(region, source)

    def save(self, path: str | os.PathLike) -> None:
        """Addresses, ports, rates, naming and region sources (not whether a link is on: every link starts off)."""
        links = {name: {k: v for k, v in asdict(settings).items() if k != "enabled"}
                 for name, settings in self.settings.items()}
        atomic_write(path, json.dumps({"links": links, "sources": dict(self.mixer.sources)}, indent=2) + "\n")

    def load(self, path: str | os.PathLike) -> str | None:
        """Take saved settings; a missing file is no error, a bad one is left alone and said in one line."""
        path = Path(path)
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            settings = {}
            for name, values in data.get("links", {}).items():
                if name not in LINK_TITLES:
                    raise ValueError(f"link {name!r} is not known; allowed: {', '.join(LINK_TITLES)}")
                known = {f.name for f in fields(LinkSettings)} - {"enabled"}
                unknown = set(values) - known
                if unknown:
                    raise ValueError(f"{name}: field {sorted(unknown)[0]!r} is not known; allowed: {', '.join(sorted(known))}")
                settings[name] = _checked(name, replace(DEFAULT_SETTINGS[name], **values))
            sources = data.get("sources", {})
            for region, source in sources.items():
                if region not in REGIONS or source not in SOURCES:
                    raise ValueError(f"source {region}={source!r} is not allowed; regions: {', '.join(REGIONS)}; "
                                     f"sources: {', '.join(SOURCES)}")
        except (OSError, ValueError, TypeError, AttributeError) as error:
            return f"{path}: {error}; using the default link settings"
        self.settings.update(settings)
        for region, source in sources.items():
            self.mixer.set_source(region, source)
        return None

    def follow_engine(self) -> None:
        """After the engine was rebuilt: attach the tracker stage and the outputs to the new one."""
        current = self.current_engine() if self.current_engine is not None else None
        if current is None or current is self._engine:
            return
        for name in list(self.running):
            self.apply(name, self.settings[name])

    def close(self) -> None:
        for name in list(self.running):
            self._stop(name)
        if self._engine is not None:
            self.mixer.detach(self._engine)
            self._engine = None

    # ------------------------------------------------------------ reading

    def status(self, name: str) -> LinkStatus:
        link = self.running.get(name)
        error = self.errors.get(name)
        if link is None:
            return LinkStatus(False, 0.0, error, error or "off")
        stats = link.stats()
        error = stats.last_error
        if name in OUTPUTS:
            detail = f"{stats.packets_per_s:.0f} packets/s to {link.host}:{link.port}"
            if stats.dropped:
                detail += f", {stats.dropped} frames dropped"
        else:
            ignored = sum(count for what, count in stats.counts.items() if what != "clamped")
            detail = f"{stats.packets_per_s:.0f} packets/s on port {link.port}"
            if ignored:
                detail += f", {ignored} bad values or packets ignored"
        return LinkStatus(True, stats.packets_per_s, error, error or detail)

    def tracker_status(self) -> str:
        """The tracker's state in words ("off" when no input is on)."""
        if not any(name in self.running for name in INPUTS):
            return "off"
        return self.mixer.status

    # ------------------------------------------------------------ inside

    def _check(self, name: str, settings: LinkSettings) -> str | None:
        if name == "vmc_out" and settings.naming not in BLEND_NAMINGS:
            return f"blendshape naming {settings.naming!r} is not known; allowed: {', '.join(BLEND_NAMINGS)}"
        pairs = {"vmc_out": "vmc_in", "vmc_in": "vmc_out", "livelink_out": "livelink_in", "livelink_in": "livelink_out"}
        other = self.settings[pairs[name]]
        output, listening = (settings, other) if name in OUTPUTS else (other, settings)
        receiver = self.running.get(pairs[name] if name in OUTPUTS else name)
        listening_port = receiver.port if receiver is not None else listening.port  # port 0 binds a free one
        if other.enabled and output.host in _LOOPBACK and output.port == listening_port:
            return (f"{LINK_TITLES[pairs[name]]} uses port {settings.port} on this computer too, so the avatar would "
                    f"drive itself: choose another port")
        return None

    def _ensure_engine(self):
        engine = self.engine_provider()
        if engine is not None and engine is not self._engine:
            if self._engine is not None:
                self.mixer.detach(self._engine)
            self._engine = engine
        return engine

    def _start(self, name: str, settings: LinkSettings, engine) -> object:
        if name == "vmc_out":
            rest_joints = self.rest_joints() if self.rest_joints is not None else None
            link = VmcSender(settings.host, settings.port, settings.rate_hz, settings.naming, rest_joints)
        elif name == "livelink_out":
            link = LiveLinkSender(settings.host, settings.port, settings.rate_hz)
        elif name == "vmc_in":
            link = VmcReceiver(self.tracker, settings.port, settings.host)
        else:
            link = LiveLinkReceiver(self.tracker, settings.port, settings.host)
        if name in OUTPUTS:
            link.start(engine)
        else:
            link.start()
        return link

    def _stop(self, name: str) -> None:
        link = self.running.pop(name, None)
        if link is not None:
            if hasattr(link, "close"):
                link.close()
            else:
                link.stop()

    def _update_tracking(self) -> None:
        engine = self._engine
        if engine is None:
            return
        wanted = any(name in self.running for name in INPUTS)
        if wanted and getattr(engine, "tracking", None) is not self.mixer:
            self.mixer.attach(engine)
        elif not wanted and getattr(engine, "tracking", None) is self.mixer:
            self.mixer.detach(engine)


def _checked(name: str, settings: LinkSettings) -> LinkSettings:
    """Settings read from a file, each field of the right kind and range (ValueError names the field)."""
    if not isinstance(settings.host, str) or not settings.host:
        raise ValueError(f"{name}.host {settings.host!r} must be an address")
    if not isinstance(settings.port, int) or not 1 <= settings.port <= 65535:
        raise ValueError(f"{name}.port {settings.port!r} is not allowed; use 1..65535")
    if not isinstance(settings.rate_hz, (int, float)) or not 1 <= settings.rate_hz <= 240:
        raise ValueError(f"{name}.rate_hz {settings.rate_hz!r} is out of range; allowed 1..240")
    if settings.naming not in BLEND_NAMINGS:
        raise ValueError(f"{name}.naming {settings.naming!r} is not known; allowed: {', '.join(BLEND_NAMINGS)}")
    return replace(settings, rate_hz=float(settings.rate_hz))
