"""VRM emotion expressions driven live by the engine's ARKit weights: the persona's triggers move the avatar's own
emotion shapes, with VRM's isBinary and override rules, and the ARKit shapes they are read from do not double up."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from studio.avatar.arkit import ARKIT_INDEX, NUM_ARKIT
from studio.avatar.emotions import EMOTIONS, emotion_weights
from studio.avatar.gltf import read_gltf
from studio.avatar.imported import avatar_from_scene, describe_import, load_gltf_avatar
from studio.avatar.skinning import lbs
from studio.avatar.vrm import Expression, read_vrm
from studio.expressions import ExpressionMixer
from studio.presets import load_persona

DATA = Path(__file__).resolve().parents[2] / "data" / "avatars"
PERSONAS = Path(__file__).resolve().parents[3] / "presets" / "personas"


def trigger(persona: str, expression: str, speech: np.ndarray | None = None) -> np.ndarray:
    """The ARKit weights the engine's expression layer gives when the operator fires a persona's expression."""
    now = [0.0]
    mixer = ExpressionMixer(clock=lambda: now[0])
    mixer.fire(expression, load_persona(PERSONAS / f"{persona}.yaml").expressions[expression])
    now[0] = 5.0  # well past the fade-in
    return mixer.apply(np.zeros(NUM_ARKIT, np.float32) if speech is None else speech)


def arkit(**weights: float) -> np.ndarray:
    out = np.zeros(NUM_ARKIT, np.float32)
    for name, value in weights.items():
        out[ARKIT_INDEX[name]] = value
    return out


def face(model, weights: np.ndarray) -> np.ndarray:
    """Posed vertices of the avatar for these ARKit weights (the reference forward pass)."""
    return lbs(model, expression=weights)[0]


def bind_delta(path: Path, morph_names: tuple[str, ...]) -> np.ndarray:
    """Per vertex of the imported avatar, how far these morph targets together move it (file units, any axes)."""
    scene = read_gltf(path)
    out = []
    for piece in scene.primitives:
        total = np.zeros_like(piece.positions)
        for k, name in enumerate(piece.target_names):
            if name in morph_names:
                total = total + piece.targets[k]
        out.append(np.linalg.norm(total, axis=1))
    return np.concatenate(out)


def bind_moves(path: Path, morph_names: tuple[str, ...]) -> np.ndarray:
    """Vertices (rows of the imported avatar) that these morph targets move."""
    return np.flatnonzero(bind_delta(path, morph_names) > 1e-5)


def test_emotions_are_read_from_the_built_in_personas_triggers_and_not_from_speech():
    assert emotion_weights(trigger("default", "smile"))["happy"] == pytest.approx(1.0)
    assert emotion_weights(trigger("presenter", "big smile"))["happy"] == pytest.approx(1.0)
    assert emotion_weights(trigger("default", "concerned"))["sad"] > 0.5
    assert emotion_weights(trigger("presenter", "excited"))["surprised"] == pytest.approx(1.0)
    assert max(emotion_weights(trigger("default", "thinking")).values()) == 0.0
    assert max(emotion_weights(np.zeros(NUM_ARKIT)).values()) == 0.0
    speaking_ee = arkit(jawOpen=0.3, mouthSmileLeft=0.4, mouthSmileRight=0.4, mouthStretchLeft=0.3)
    assert max(emotion_weights(speaking_ee).values()) == 0.0  # talking smiles a little for "ee": no flicker of happy
    assert set(emotion_weights(speaking_ee)) == set(EMOTIONS)


def test_the_smile_trigger_drives_a_vrm0_avatars_joy_shape():
    path = DATA / "humanoid_vrm0.vrm"
    model = load_gltf_avatar(path)
    assert model.info["emotions"] == ["happy"]  # its `Joy` blend shape group
    assert "emotions happy follow the face" in describe_import(model)
    joy = bind_moves(path, ("Fcl_MTH_Joy_L", "Fcl_MTH_Joy_R"))
    assert len(joy) > 10
    still, smiling = face(model, np.zeros(NUM_ARKIT)), face(model, trigger("default", "smile"))
    moved = np.linalg.norm(smiling - still, axis=1)
    assert moved[joy].max() > 5e-3, "the Joy shape did not move with the persona's smile"
    # exactly the Joy binds at full weight, where the trigger's small jawOpen (the A vowel) does not reach
    only_joy = np.setdiff1d(joy, bind_moves(path, ("Fcl_MTH_A",)))
    np.testing.assert_allclose(moved[only_joy], bind_delta(path, ("Fcl_MTH_Joy_L", "Fcl_MTH_Joy_R"))[only_joy], atol=1e-5)


def test_the_renderers_mesh_moves_the_emotion_shape():
    from render.avatar_visual import AvatarMesh
    from studio.frame import FrameState

    path = DATA / "humanoid_vrm0.vrm"
    mesh = AvatarMesh(load_gltf_avatar(path))
    still = mesh.posed_vertices(FrameState())
    smiling = mesh.posed_vertices(FrameState(arkit=trigger("default", "smile")))
    joy = bind_moves(path, ("Fcl_MTH_Joy_L", "Fcl_MTH_Joy_R"))
    assert np.linalg.norm(smiling - still, axis=1)[joy].max() > 5e-3


def test_a_binary_happy_that_blocks_blinks_and_blends_the_mouth_behaves_as_the_vrm_spec_says():
    path = DATA / "humanoid_vrm1.vrm"
    model = load_gltf_avatar(path)
    happy = read_vrm(read_gltf(path)).expressions["happy"]
    assert happy.is_binary and happy.overrides["overrideBlink"] == "block" and happy.overrides["overrideMouth"] == "blend"
    joy = bind_moves(path, ("Fcl_MTH_Joy_L", "Fcl_MTH_Joy_R"))
    eyes = bind_moves(path, ("Fcl_EYE_Close_L", "Fcl_EYE_Close_R"))
    mouth = bind_moves(path, ("Fcl_MTH_A",))
    eyes, mouth = np.setdiff1d(eyes, np.union1d(joy, mouth)), np.setdiff1d(mouth, np.union1d(joy, eyes))
    assert min(len(joy), len(eyes), len(mouth)) > 4
    rest = face(model, np.zeros(NUM_ARKIT))

    def moved(weights, rows):
        return np.linalg.norm(face(model, weights) - rest, axis=1)[rows]

    blink_and_talk = arkit(eyeBlinkLeft=1.0, eyeBlinkRight=1.0, jawOpen=0.6)
    # below the binary threshold: no happy shape at all, blinks and mouth as they are
    weak = arkit(mouthSmileLeft=0.3, mouthSmileRight=0.3, cheekSquintLeft=0.3, cheekSquintRight=0.3) + blink_and_talk
    assert 0.0 < emotion_weights(weak)["happy"] < 0.5
    np.testing.assert_allclose(face(model, weak), face(model, blink_and_talk), atol=1e-6)
    assert moved(weak, eyes).max() > 5e-3 and moved(weak, mouth).max() > 5e-3
    # above it: the happy shape at full weight, the blinks blocked, and the mouth blended by (1 - 1): still
    strong = arkit(mouthSmileLeft=0.45, mouthSmileRight=0.45, cheekSquintLeft=0.3, cheekSquintRight=0.3) + blink_and_talk
    assert 0.5 < emotion_weights(strong)["happy"] < 1.0
    np.testing.assert_allclose(moved(strong, joy), bind_delta(path, ("Fcl_MTH_Joy_L", "Fcl_MTH_Joy_R"))[joy], atol=1e-5)
    assert moved(strong, eyes).max() < 1e-6, "happy blocks the blinks"
    assert moved(strong, mouth).max() < 1e-6, "happy (binary: 1) blends the mouth vowels to nothing"


def test_an_avatar_whose_arkit_shapes_carry_the_emotion_does_not_get_it_twice():
    """The Blender humanoid has ARKit smile shapes; give it a VRM `happy` on the very same morphs."""
    scene = read_gltf(DATA / "humanoid_arkit.glb")
    body = scene.primitives[0].node
    names = scene.primitives[0].target_names
    binds = tuple((body, names.index(n), 1.0) for n in ("mouthSmileLeft", "mouthSmileRight"))
    vrm = dataclasses.replace(read_vrm(scene), expressions={"happy": Expression("happy", binds)})
    model = avatar_from_scene(scene, vrm)
    assert model.info["emotions"] == ["happy"]  # it has no cheekSquint shapes, so happy is driven
    plain = avatar_from_scene(scene, read_vrm(scene))
    rest = face(model, np.zeros(NUM_ARKIT))
    smile = arkit(mouthSmileLeft=0.7, mouthSmileRight=0.7, cheekSquintLeft=0.3, cheekSquintRight=0.3)
    assert emotion_weights(smile)["happy"] == pytest.approx(1.0)
    full_smile = face(plain, arkit(mouthSmileLeft=1.0, mouthSmileRight=1.0)) - rest
    # the emotion replaced the ARKit smile it was read from: one full smile, not the 0.7 smile plus happy's 1.0
    np.testing.assert_allclose(face(model, smile) - rest, full_smile, atol=1e-5)
    # with every source shape present as an ARKit shape (perfect sync), the emotion is not driven at all
    perfect = dataclasses.replace(vrm, expressions={
        **vrm.expressions, "cheekSquintLeft": Expression("cheekSquintLeft", binds[:1]),
        "cheekSquintRight": Expression("cheekSquintRight", binds[1:])})
    assert avatar_from_scene(scene, perfect).expression_drive is None
