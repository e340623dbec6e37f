"""Presets (module precision and budgets) and personas (who the avatar is), as YAML.

Both carry a `schema_version`, are validated on load with a message naming the file,
the field and what is allowed, and are saved atomically so a failed save never
truncates the user's file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from studio.avatar.arkit import ARKIT_NAMES, NUM_ARKIT, arkit_index
from studio.drift import DriftThresholds
from studio.engine.anchor import AnchorSettings
from studio.engine.motion import MotionStyle
from studio.fileio import atomic_write
from studio.paths import presets_dir, user_data_dir
from studio.precision import Level, ModulePlan, plan_for

SCHEMA_VERSION = 2  # 2: preset `rates` and `render.lod` (module plan, studio.precision)
PERSONA_SCHEMA_VERSION = SCHEMA_VERSION  # persona 2 added named expressions and their hotkeys
COLOR_PARTS = ("skin", "lips", "hair", "brows", "eyes", "shirt", "trousers", "shoes")
MAX_CUE_CHARS = 500  # longer lines belong in a script file; espeak would speak 10,000 characters for minutes


class PresetError(ValueError):
    """A preset or persona file the studio cannot use; the message says which field and why."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Modules(_Strict):
    face: Level = "high"
    hands: Level = "medium"
    body: Level = "medium"
    cloth: Level = "low"


class RenderBudget(_Strict):
    width: int = Field(1280, ge=160, le=7680)
    height: int = Field(720, ge=90, le=4320)
    fps: float = Field(30.0, gt=0, le=240)
    latency_target_ms: float = Field(50.0, gt=0, le=1000)
    lod: Literal["auto", "high", "medium", "low"] = "auto"  # mesh level of detail; auto follows `modules.body`


class UpdateRates(_Strict):
    """Update rates in Hz; None (the default) takes the rate of the module's level."""

    face_hz: float | None = Field(None, ge=10, le=100)
    body_hz: float | None = Field(None, ge=5, le=100)


class LongSession(_Strict):
    housekeeping_interval_s: float = Field(300.0, gt=0)
    memory_budget_mb: float = Field(1500.0, gt=0)
    memory_watermark_pct: float = Field(80.0, gt=0, le=100)  # of the budget: above it, a lighter precision
    memory_watermark_mb: float | None = Field(None, gt=0)  # an absolute watermark instead of the percentage
    prewarm: bool = True

    @property
    def watermark_mb(self) -> float:
        if self.memory_watermark_mb is not None:
            return self.memory_watermark_mb
        return self.memory_budget_mb * self.memory_watermark_pct / 100.0


class Preset(_Strict):
    schema_version: int = SCHEMA_VERSION
    name: str
    description: str = ""
    modules: Modules = Modules()
    render: RenderBudget = RenderBudget()
    rates: UpdateRates = UpdateRates()
    long_session: LongSession = LongSession()
    anchor: AnchorSettings = AnchorSettings()
    drift: DriftThresholds = DriftThresholds()

    @property
    def face_model_variant(self) -> str:
        """`high` runs the fp32 face model, `medium`/`low` the INT8 one."""
        return self.plan.face_variant

    @property
    def plan(self) -> ModulePlan:
        """The concrete work this preset's levels ask for (model variant, rates, LOD, cloth springs)."""
        return plan_for(self)


class Voice(_Strict):
    name: str = "en-us"
    rate_wpm: int = Field(170, ge=80, le=450)
    pitch: int = Field(50, ge=0, le=99)


class ExpressionStyle(_Strict):
    gains: dict[str, float] = {}
    caps: dict[str, float] = {}
    blink_rate_per_min: float = Field(16.0, ge=0, le=40)
    head_motion: float = Field(1.0, ge=0, le=3)
    gesture_energy: float = Field(1.0, ge=0, le=2)
    sway: float = Field(1.0, ge=0, le=3)

    @field_validator("gains", "caps")
    @classmethod
    def _arkit_names(cls, values: dict[str, float]) -> dict[str, float]:
        for name, value in values.items():
            try:
                arkit_index(name)
            except KeyError:
                raise ValueError(f"unknown ARKit shape {name!r}; use one of the 52 ARKit names") from None
            if not 0.0 <= value <= 4.0:
                raise ValueError(f"{name} = {value}: allowed 0..4")
        return values

    def weight_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(gains, caps) over the 52 ARKit weights in canonical order; unnamed shapes get 1."""
        gains, caps = np.ones(NUM_ARKIT, np.float32), np.ones(NUM_ARKIT, np.float32)
        for name, value in self.gains.items():
            gains[arkit_index(name)] = value
        for name, value in self.caps.items():
            caps[arkit_index(name)] = value
        return gains, caps


def check_cue_line(text: str) -> str:
    """The line if TTS can speak it; ValueError saying why not (empty, too long, control characters)."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("a cue line must have words to speak; it is empty")
    if len(text) > MAX_CUE_CHARS:
        raise ValueError(f"a cue line has {len(text)} characters; allowed 1..{MAX_CUE_CHARS} (split it into lines)")
    if any(ord(c) < 32 and c not in "\t" for c in text):
        raise ValueError("a cue line may not hold line breaks or control characters")
    return text


class NamedExpression(_Strict):
    """A designer's face (ARKit weights 0..1) that an operator fires by hotkey, fading in and out."""

    weights: dict[str, float] = {}
    fade_in_s: float = Field(0.25, ge=0, le=10)
    fade_out_s: float = Field(0.4, ge=0, le=10)

    @field_validator("weights")
    @classmethod
    def _arkit_weights(cls, values: dict[str, float]) -> dict[str, float]:
        out = {}
        for name, value in values.items():
            try:
                canonical = ARKIT_NAMES[arkit_index(name)]
            except KeyError:
                raise ValueError(f"unknown ARKit shape {name!r}; use one of the 52 ARKit names") from None
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} = {value}: allowed 0..1")
            out[canonical] = float(value)
        return out

    def weight_array(self) -> np.ndarray:
        array = np.zeros(NUM_ARKIT, np.float32)
        for name, value in self.weights.items():
            array[arkit_index(name)] = value
        return array


class Persona(_Strict):
    schema_version: int = PERSONA_SCHEMA_VERSION
    name: str
    avatar: str = "default"
    betas: list[float] = Field(default_factory=list, max_length=16)
    colors: dict[str, tuple[float, float, float]] = {}
    voice: Voice = Voice()
    style: ExpressionStyle = ExpressionStyle()
    default_preset: str = "default"
    cue_lines: list[str] = []
    expressions: dict[str, NamedExpression] = {}
    hotkeys: dict[str, str] = {}  # expression name -> key ("1".."9", "F5", "Ctrl+1")

    @field_validator("betas")
    @classmethod
    def _betas_in_range(cls, values: list[float]) -> list[float]:
        for i, value in enumerate(values):
            if not -5.0 <= value <= 5.0:
                raise ValueError(f"betas[{i}] = {value}: allowed -5..5")
        return values

    @field_validator("colors")
    @classmethod
    def _known_parts(cls, values: dict) -> dict:
        for part, rgb in values.items():
            if part not in COLOR_PARTS:
                raise ValueError(f"unknown colour part {part!r}; allowed: {', '.join(COLOR_PARTS)}")
            if not all(0.0 <= c <= 1.0 for c in rgb):
                raise ValueError(f"colors.{part} = {list(rgb)}: each channel allowed 0..1")
        return values

    @field_validator("cue_lines")
    @classmethod
    def _speakable(cls, lines: list[str]) -> list[str]:
        for i, line in enumerate(lines):
            try:
                check_cue_line(line)
            except ValueError as error:
                raise ValueError(f"cue_lines[{i}]: {error}") from None
        return lines

    @field_validator("expressions")
    @classmethod
    def _expression_names(cls, values: dict) -> dict:
        for name in values:
            if not name.strip() or len(name) > 40 or any(c in name for c in "/\\:"):
                raise ValueError(f"expression name {name!r} is not allowed; use 1..40 characters without / \\ :")
        return values

    @model_validator(mode="after")
    def _hotkeys_bind_known_expressions_once(self) -> Persona:
        from studio.hotkeys import normalise_key  # studio.hotkeys imports this module

        seen: dict[str, str] = {}
        for expression, key in self.hotkeys.items():
            if expression not in self.expressions:
                raise ValueError(f"hotkeys: {expression!r} is not one of this persona's expressions "
                                 f"({', '.join(self.expressions) or 'none'})")
            try:
                normalised = normalise_key(key)
            except PresetError as error:
                raise ValueError(f"hotkeys: {expression!r}: {error}") from None
            if normalised in seen:
                raise ValueError(f"hotkeys: key {key!r} is bound twice ({seen[normalised]!r} and {expression!r})")
            seen[normalised] = expression
        return self

    def motion_style(self) -> MotionStyle:
        """The engine's non-verbal motion at this persona's intensities."""
        return MotionStyle(head_gain=self.style.head_motion, blink_rate_per_min=self.style.blink_rate_per_min,
                           gesture_energy=self.style.gesture_energy, sway=self.style.sway)


def _migrate(data: dict) -> dict:
    """Bring an older file forward to SCHEMA_VERSION, one version at a time.

    1 -> 2 only added optional sections (preset `rates`, `render.lod`; persona `expressions`,
    `hotkeys`) whose defaults keep a version-1 file meaning what it meant.
    """
    data = dict(data)
    version = data.get("schema_version", SCHEMA_VERSION)
    if version < 2:
        version = 2
    data["schema_version"] = version
    return data


def validation_problem(error: ValidationError) -> str:
    """The first problem pydantic found, as one line: the field's dotted path, the value given and what is wrong."""
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top level)"
    value = first.get("input")
    shown = "" if isinstance(value, dict) else f" = {value!r}"
    return f"field '{where}'{shown}: {first['msg']}"


def yaml_problem(path: Path, error: yaml.YAMLError, what: str = "YAML") -> str:
    """One line for a YAML syntax error: the file, line and column (1-based, as editors count) and the problem,
    instead of the parser's multi-line dump with the offending text and a caret."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or (str(error).splitlines() or ["unreadable"])[0]
    where = f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark is not None else str(path)
    context, context_mark = getattr(error, "context", None), getattr(error, "context_mark", None)
    if context and context_mark is not None and (mark is None or context_mark.line != mark.line
                                                 or context_mark.column != mark.column):
        problem += f" ({context} that starts at line {context_mark.line + 1}, column {context_mark.column + 1})"
    elif context:
        problem += f" ({context})"
    return f"{where}: not a valid {what} file: {problem}"


def _load(path: Path, kind: type[BaseModel]):
    label = kind.__name__.lower()
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PresetError(f"{path}: no such {label} file") from None
    except yaml.YAMLError as error:
        raise PresetError(yaml_problem(path, error, f"YAML {label}")) from None
    except UnicodeDecodeError as error:
        raise PresetError(f"{path}: not a {label} file: byte {error.start} is not UTF-8 text") from None
    except OSError as error:
        raise PresetError(f"{path}: cannot read the {label} file: {error.strerror or error}") from None
    if not isinstance(data, dict):
        raise PresetError(f"{path}: expected a YAML mapping with a 'name' and 'schema_version'")
    version = data.get("schema_version", SCHEMA_VERSION)
    if not isinstance(version, int) or not 1 <= version <= SCHEMA_VERSION:
        raise PresetError(f"{path}: field 'schema_version' = {version!r}: allowed 1..{SCHEMA_VERSION}")
    try:
        return kind.model_validate(_migrate(data))
    except ValidationError as error:
        raise PresetError(f"{path}: {validation_problem(error)}") from None


def load_preset(path: str | os.PathLike) -> Preset:
    return _load(Path(path), Preset)


def load_persona(path: str | os.PathLike) -> Persona:
    return _load(Path(path), Persona)


def _search_dirs(sub: str) -> list[Path]:
    return [user_data_dir() / sub, presets_dir() / ("" if sub == "presets" else sub)]


def _find(name: str, sub: str) -> Path:
    for folder in _search_dirs(sub):
        candidate = folder / f"{name}.yaml"
        if candidate.is_file():
            return candidate
    known = sorted({p.stem for folder in _search_dirs(sub) if folder.is_dir() for p in folder.glob("*.yaml")})
    raise PresetError(f"no {sub[:-1]} named {name!r}; available: {', '.join(known) or '(none)'}")


def preset_by_name(name: str) -> Preset:
    """A user's preset of that name, else the built-in one."""
    return load_preset(_find(name, "presets"))


def persona_by_name(name: str) -> Persona:
    return load_persona(_find(name, "personas"))


def names_a_file(value: str) -> bool:
    """A command-line value is a FILE when it ends in .yaml/.yml or holds a folder separator, else a NAME."""
    return value.lower().endswith((".yaml", ".yml")) or "/" in value or os.sep in value


def resolve_preset(value: str) -> Preset:
    """A preset by NAME (the user's, else the built-in one) or from a FILE; PresetError says why not."""
    return load_preset(value) if names_a_file(value) else preset_by_name(value)


def resolve_persona(value: str) -> Persona:
    """A persona by NAME (the user's, else the built-in one) or from a FILE; PresetError says why not."""
    return load_persona(value) if names_a_file(value) else persona_by_name(value)


def save_yaml(model: BaseModel, path: str | os.PathLike) -> None:
    """Write atomically: temp file in the same folder, fsync, rename."""
    atomic_write(path, yaml.safe_dump(model.model_dump(mode="json"), sort_keys=False, allow_unicode=True))
