"""The expression layer: designer pose, operator triggers and per-shape gain/cap over the speech face.

`ExpressionMixer` is what the engine calls on every frame (`apply(arkit)`), from its own thread,
while the GUI changes the settings: each change swaps one immutable `MixSettings` value or one
tuple of triggers, so the engine never sees half an update and never waits on the GUI.

How a trigger blends over lip sync: shapes that carry expression only (smile, dimple, brows,
cheeks, eyes) are added to the speech face; shapes that articulate speech (jaw, lip closure,
funnel, pucker, press, lip raise/lower, roll, tongue) take the expression's value only as far as
the mouth is not busy speaking. So the lips keep articulating under a smile and a p/b/m closure
still closes; between words an expression with an open mouth opens it.

`ExpressionEditor` is the designer's Qt-free model: 52 slider weights, mirror, solo, mute,
before/after, and the persona's gains and caps (edited through its `Document`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

import numpy as np
from psygnal import Signal

from studio.avatar.arkit import ARKIT_INDEX, ARKIT_NAMES, NUM_ARKIT, mirror_name
from studio.documents import Document
from studio.presets import NamedExpression, Persona, PresetError

ARTICULATION_SHAPES: tuple[str, ...] = (
    "jawOpen", "jawForward", "mouthClose", "mouthFunnel", "mouthPucker", "mouthRollLower", "mouthRollUpper",
    "mouthShrugLower", "mouthShrugUpper", "mouthPressLeft", "mouthPressRight", "mouthLowerDownLeft",
    "mouthLowerDownRight", "mouthUpperUpLeft", "mouthUpperUpRight", "tongueOut",
)
ARTICULATION = np.array([ARKIT_INDEX[n] for n in ARTICULATION_SHAPES])
_BUSY = np.array([ARKIT_INDEX[n] for n in ("jawOpen", "mouthClose", "mouthFunnel", "mouthPucker",
                                           "mouthPressLeft", "mouthPressRight", "mouthRollLower")])
BUSY_GAIN = 5.0  # speech weights summing to 0.2 already count as a fully busy mouth

REGIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Brows", tuple(n for n in ARKIT_NAMES if n.startswith("brow"))),
    ("Eyes", tuple(n for n in ARKIT_NAMES if n.startswith("eye"))),
    ("Cheeks & nose", tuple(n for n in ARKIT_NAMES if n.startswith(("cheek", "nose")))),
    ("Jaw", tuple(n for n in ARKIT_NAMES if n.startswith("jaw"))),
    ("Mouth", tuple(n for n in ARKIT_NAMES if n.startswith("mouth"))),
    ("Tongue", tuple(n for n in ARKIT_NAMES if n.startswith("tongue"))),
)


def mouth_busy(speech: np.ndarray) -> float:
    """0 (mouth at rest) … 1 (articulating): how much the speech face owns the articulation shapes."""
    return float(min(1.0, max(0.0, float(np.sum(speech[_BUSY])) * BUSY_GAIN)))


@dataclass(frozen=True)
class MixSettings:
    """One consistent set of designer settings; replaced whole, never mutated."""

    gains: np.ndarray = field(default_factory=lambda: np.ones(NUM_ARKIT, np.float32))
    caps: np.ndarray = field(default_factory=lambda: np.ones(NUM_ARKIT, np.float32))
    pose: np.ndarray = field(default_factory=lambda: np.zeros(NUM_ARKIT, np.float32))
    mute: np.ndarray = field(default_factory=lambda: np.zeros(NUM_ARKIT, bool))
    solo: np.ndarray = field(default_factory=lambda: np.zeros(NUM_ARKIT, bool))
    bypass: bool = False  # "before": the speech face without the designer's pose, gains and caps


@dataclass(frozen=True)
class Trigger:
    """One fired expression: ramps in over `fade_in_s`, holds, ramps out over `fade_out_s` after release."""

    name: str
    weights: np.ndarray
    fade_in_s: float
    fade_out_s: float
    started_at: float
    released_at: float | None = None

    def level(self, now: float) -> float:
        rise = 1.0 if self.fade_in_s <= 0 else min(1.0, max(0.0, (now - self.started_at) / self.fade_in_s))
        if self.released_at is None:
            return rise
        if self.fade_out_s <= 0:
            return 0.0 if now >= self.released_at else rise
        fall = 1.0 - max(0.0, (now - self.released_at) / self.fade_out_s)
        return max(0.0, min(rise, fall))

    def finished(self, now: float) -> bool:
        return self.released_at is not None and now >= self.released_at + self.fade_out_s


class ExpressionMixer:
    """The engine's expression stage (drop-in for `ExpressionLayer`): call `apply(arkit)` per frame."""

    def __init__(self, settings: MixSettings | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings or MixSettings()
        self.clock = clock
        self._triggers: tuple[Trigger, ...] = ()
        self._lock = threading.Lock()  # fire/release/prune; held for microseconds, never across a frame

    # ---- control (GUI thread)
    def set_settings(self, **changes) -> None:
        self.settings = replace(self.settings, **changes)

    def fire(self, name: str, expression: NamedExpression) -> None:
        """Fade this expression in (a second fire while it fades out brings it back from where it is)."""
        now = self.clock()
        with self._lock:
            level = 0.0
            kept = []
            for trigger in self._triggers:
                if trigger.name == name:
                    level = trigger.level(now)
                else:
                    kept.append(trigger)
            start = now - level * expression.fade_in_s
            kept.append(Trigger(name, expression.weight_array(), expression.fade_in_s, expression.fade_out_s, start))
            self._triggers = tuple(kept)

    def release(self, name: str) -> None:
        now = self.clock()
        with self._lock:
            self._triggers = tuple(
                replace(t, released_at=now, started_at=t.started_at if t.level(now) >= 1.0 or t.fade_in_s <= 0
                        else now - t.level(now) * t.fade_in_s)
                if t.name == name and t.released_at is None else t for t in self._triggers)

    def is_active(self, name: str) -> bool:
        return any(t.name == name and t.released_at is None for t in self._triggers)

    def toggle(self, name: str, expression: NamedExpression) -> bool:
        """Fire it, or release it when it is on; True when it is now on."""
        if self.is_active(name):
            self.release(name)
            return False
        self.fire(name, expression)
        return True

    def neutral(self) -> None:
        """Panic: every trigger gone at once, no fade."""
        with self._lock:
            self._triggers = ()

    def active_names(self) -> list[str]:
        return [t.name for t in self._triggers if t.released_at is None]

    @property
    def name(self) -> str:
        """The active expression(s), for FrameState.expression."""
        return "+".join(self.active_names())

    # ---- per frame (engine thread)
    def overlay(self, speech: np.ndarray) -> np.ndarray:
        """What the designer pose and the triggers add to this speech face (before gains and caps)."""
        settings, now = self.settings, self.clock()
        triggers = self._triggers
        out = settings.pose.astype(np.float32, copy=True)
        finished = False
        for trigger in triggers:
            level = trigger.level(now)
            if level > 0.0:
                np.maximum(out, trigger.weights * level, out=out)
            finished = finished or trigger.finished(now)
        if finished:
            with self._lock:
                self._triggers = tuple(t for t in self._triggers if not t.finished(now))
        out[ARTICULATION] *= 1.0 - mouth_busy(speech)
        return out

    def apply(self, arkit: np.ndarray) -> np.ndarray:
        speech = np.asarray(arkit, np.float32)
        settings = self.settings
        if settings.bypass:
            return np.clip(speech, 0.0, 1.0)
        out = speech + self.overlay(speech)
        np.multiply(out, settings.gains, out=out)
        np.clip(out, 0.0, None, out=out)
        np.minimum(out, np.minimum(settings.caps, 1.0), out=out)
        if settings.solo.any():
            out[~settings.solo] = 0.0
        out[settings.mute] = 0.0
        return out

    def __call__(self, arkit: np.ndarray) -> np.ndarray:
        return self.apply(arkit)


def default_hotkeys(persona: Persona) -> dict[str, str]:
    """The persona's bindings, and each expression without one on the first free key of 1..9."""
    bindings = dict(persona.hotkeys)
    free = [str(k) for k in range(1, 10) if str(k) not in {v.strip() for v in bindings.values()}]
    for name in persona.expressions:
        if name not in bindings and free:
            bindings[name] = free.pop(0)
    return bindings


class ExpressionEditor:
    """The designer's state over one persona document and the mixer it drives.

    Slider weights are the pose being designed (previewed live over speech); gains and caps are the
    persona's (`style.gains`/`style.caps`) and go through its document, so they are saved with it.
    `changed(names)` says which shapes' values changed; `flags_changed()` covers mirror/solo/mute/before.
    """

    changed = Signal(object)
    flags_changed = Signal()

    def __init__(self, document: Document, mixer: ExpressionMixer) -> None:
        self.document = document
        self.mixer = mixer
        self.weights = np.zeros(NUM_ARKIT, np.float32)
        self.mute: set[str] = set()
        self.solo: set[str] = set()
        self.mirror = False
        self.before = False
        document.changed.connect(self._on_document)
        self._push()

    # ---- reading
    def weight(self, name: str) -> float:
        return float(self.weights[ARKIT_INDEX[name]])

    def gain(self, name: str) -> float:
        return float(self.document.item.style.gains.get(name, 1.0))

    def cap(self, name: str) -> float:
        return float(self.document.item.style.caps.get(name, 1.0))

    def partners(self, name: str) -> list[str]:
        """The shape and, with mirror on, its left/right counterpart."""
        other = mirror_name(name)
        return [name, other] if self.mirror and other != name else [name]

    # ---- editing
    def set_weights(self, values: dict[str, float], mirror: bool | None = None) -> None:
        """Set slider weights (0..1), mirrored when mirror is on (or as `mirror` says); one `changed` for all."""
        touched = []
        mirror = self.mirror if mirror is None else mirror
        for name, value in values.items():
            if name not in ARKIT_INDEX:
                raise PresetError(f"unknown ARKit shape {name!r}")
            other = mirror_name(name)
            for target in ([name, other] if mirror and other != name else [name]):
                self.weights[ARKIT_INDEX[target]] = min(1.0, max(0.0, float(value)))
                touched.append(target)
        self._push()
        self.changed.emit(touched)

    def set_weight(self, name: str, value: float) -> None:
        self.set_weights({name: value})

    def reset(self, names: Iterable[str] | None = None) -> None:
        names = list(ARKIT_NAMES if names is None else names)
        for name in names:
            self.weights[ARKIT_INDEX[name]] = 0.0
        self._push()
        self.changed.emit(names)

    def set_gain_cap(self, name: str, gain: float | None = None, cap: float | None = None) -> None:
        """Per-shape gain (0..4) and cap (0..4; 1 = no cap), mirrored, into the persona's style."""
        style = self.document.item.style
        gains, caps = dict(style.gains), dict(style.caps)
        for target in self.partners(name):
            if gain is not None:
                gains[target] = float(gain)
            if cap is not None:
                caps[target] = float(cap)
        self.document.update("style", {**style.model_dump(), "gains": gains, "caps": caps})

    def set_flag(self, which: str, name: str, on: bool) -> None:
        """Solo or mute one shape (and its mirror)."""
        group = {"solo": self.solo, "mute": self.mute}[which]
        for target in self.partners(name):
            (group.add if on else group.discard)(target)
        self._push()
        self.flags_changed.emit()

    def set_mirror(self, on: bool) -> None:
        self.mirror = bool(on)
        self.flags_changed.emit()

    def set_before(self, on: bool) -> None:
        """Show the face without the designer's work (before) or with it (after)."""
        self.before = bool(on)
        self._push()
        self.flags_changed.emit()

    # ---- named expressions in the persona
    def save_expression(self, name: str, fade_in_s: float = 0.25, fade_out_s: float = 0.4) -> NamedExpression:
        name = name.strip()
        if not name or len(name) > 40 or any(c in name for c in "/\\:"):
            raise PresetError(f"expression name {name!r} is not allowed; use 1..40 characters without / \\ :")
        weights = {n: round(float(w), 4) for n, w in zip(ARKIT_NAMES, self.weights) if w > 0}
        expression = NamedExpression(weights=weights, fade_in_s=fade_in_s, fade_out_s=fade_out_s)
        expressions = dict(self.document.item.expressions)
        expressions[name] = expression
        self.document.update("expressions", {k: v.model_dump() for k, v in expressions.items()})
        return expression

    def load_expression(self, name: str) -> None:
        expression = self.document.item.expressions.get(name)
        if expression is None:
            raise PresetError(f"persona {self.document.item.name!r} has no expression {name!r}")
        self.weights[:] = expression.weight_array()
        self._push()
        self.changed.emit(list(ARKIT_NAMES))

    def delete_expression(self, name: str) -> None:
        """Remove a named expression and its hotkey from the persona."""
        persona = self.document.item
        if name in persona.hotkeys:
            self.document.update("hotkeys", {k: v for k, v in persona.hotkeys.items() if k != name})
        self.document.update("expressions", {k: v.model_dump() for k, v in persona.expressions.items() if k != name})

    # ---- into the mixer
    def _mask(self, names: set[str]) -> np.ndarray:
        mask = np.zeros(NUM_ARKIT, bool)
        for name in names:
            mask[ARKIT_INDEX[name]] = True
        return mask

    def _push(self) -> None:
        gains, caps = self.document.item.style.weight_arrays()
        self.mixer.set_settings(gains=gains, caps=caps, pose=self.weights.copy(), mute=self._mask(self.mute),
                                solo=self._mask(self.solo), bypass=self.before)

    def _on_document(self, _item) -> None:
        self._push()
        self.changed.emit([])
