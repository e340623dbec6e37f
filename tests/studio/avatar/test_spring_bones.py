"""VRM spring bones: each chain's own parameters and colliders are read, the chain swings after a head turn and
settles, a collider keeps the tip out of the head, and the cloth precision levels decide which chains run."""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path

import numpy as np

from studio.avatar.gltf import read_gltf
from studio.avatar.imported import describe_import, load_gltf_avatar
from studio.avatar.skeleton import JOINT_INDEX, NUM_JOINTS
from studio.avatar.skinning import Kinematics
from studio.avatar.springs import MAX_STEPS, SpringBoneSim, SpringRig
from studio.avatar.vrm import read_vrm
from studio.cloth import CLOTH_REGIONS, ClothSim
from studio.precision import CLOTH_LEVELS

DATA = Path(__file__).resolve().parents[2] / "data" / "avatars"
VRM1 = DATA / "humanoid_vrm1.vrm"


def head_turn(model):
    """rows(yaw): the avatar's skinning matrices (55, 3, 4) with the head turned by `yaw` radians."""
    kinematics = Kinematics(model.parents, model.rest_joints())

    def rows(yaw: float) -> np.ndarray:
        pose = np.zeros((NUM_JOINTS, 3))
        pose[JOINT_INDEX["head"], 1] = yaw
        return kinematics.skinning_matrices(pose)[:, :3, :]
    return rows


def turn_then_hold(step, rows, fps: float = 30.0, seconds: float = 4.0) -> list:
    """Turn the head 0.8 rad in 0.3 s, then hold it still; what `step(t, rows)` returns per frame."""
    return [step(i / fps, rows(0.8 * min(1.0, i / fps / 0.3))) for i in range(int(seconds * fps))]


def test_each_chains_parameters_and_colliders_are_read():
    scene = read_gltf(VRM1)
    vrm = read_vrm(scene)
    (chain,) = vrm.spring_chains
    assert [scene.node_names[j.node] for j in chain.joints] == ["hair_1", "hair_2"]
    assert (chain.joints[0].stiffness, chain.joints[0].drag, chain.joints[0].hit_radius) == (1.0, 0.4, 0.02)
    assert chain.colliders == (0,) and vrm.colliders[0].radius == 0.11 and vrm.colliders[0].tail is None
    model = load_gltf_avatar(VRM1)
    assert "spring bones: 1 chain, 1 collider" in describe_import(model)
    rig = model.spring_bones
    np.testing.assert_allclose(rig.collider_head[0], (0.0, 1.62, 0.0), atol=1e-5)  # the head's centre, from its offset
    assert rig.channel.tolist() == [CLOTH_REGIONS.index("hair")] and rig.collides.all()


def test_vrm0_bone_groups_and_collider_groups_are_read_in_glTF_axes(tmp_path):
    data = (DATA / "humanoid_vrm0.vrm").read_bytes()
    length = struct.unpack("<I", data[12:16])[0]
    document = json.loads(data[20:20 + length])
    head = next(i for i, n in enumerate(document["nodes"]) if n.get("name") == "head")
    animation = document["extensions"]["VRM"]["secondaryAnimation"]
    animation["colliderGroups"] = [{"node": head, "colliders": [{"offset": {"x": 0, "y": 0.12, "z": 0}, "radius": 0.1}]}]
    animation["boneGroups"][0].update(colliderGroups=[0], gravityPower=0.5, gravityDir={"x": 0, "y": 0, "z": 1})
    text = json.dumps(document).encode()
    text += b" " * (-len(text) % 4)
    body = struct.pack("<I4s", len(text), b"JSON") + text + data[20 + length:]
    path = tmp_path / "ponytail_collider.vrm"
    path.write_bytes(struct.pack("<4sII", b"glTF", 2, 12 + len(body)) + body)
    rig = load_gltf_avatar(path).spring_bones
    assert rig.collides.all() and rig.collider_radius.tolist() == [0.1] and rig.gravity_power[0, 0] == 0.5
    np.testing.assert_allclose(rig.collider_head[0][1], 1.62, atol=1e-5)
    # Unity's forward (+z in VRM 0.x's vectors) is the avatar's forward in the studio (+z, the way it faces)
    np.testing.assert_allclose(rig.gravity_dir[0, 0], (0.0, 0.0, 1.0), atol=1e-6)
    # as UniVRM does, the leaf (hair_2) gets a virtual end 7 cm on, so the last bone swings too
    assert rig.count.tolist() == [3]
    np.testing.assert_allclose(rig.rest[0, 2] - rig.rest[0, 1], (0.0, -0.07, 0.0), atol=1e-5)


def test_the_ponytail_swings_after_a_head_turn_and_settles():
    model = load_gltf_avatar(VRM1)
    sim = SpringBoneSim(model.spring_bones)
    lag = np.array(turn_then_hold(lambda t, rows: (sim.step(t, rows), np.linalg.norm(sim.region_offsets(4)[0]))[1],
                                  head_turn(model)))
    assert lag[:15].max() > 0.01, "the tip did not lag behind the turning head"
    assert lag[-30:].max() < 1e-4, "the chain did not come to rest after the head stopped"
    turned = head_turn(model)(0.8)
    rigid_tip = turned[JOINT_INDEX["head"]] @ np.append(model.spring_bones.rest[0, 1], 1.0)
    np.testing.assert_allclose(sim.tips()[0], rigid_tip, atol=1e-3)  # settled where the turned head carries it


def test_the_head_collider_keeps_the_tip_outside():
    """Gravity pulls the ponytail forward, through the head: the head's sphere collider stops it."""
    model = load_gltf_avatar(VRM1)
    rig = model.spring_bones
    forward = dict(gravity_dir=np.broadcast_to([0.0, 0.0, 1.0], rig.gravity_dir.shape).copy(),
                   gravity_power=np.full_like(rig.gravity_power, 3.0))
    rows = head_turn(model)(0.0)
    centre, radius = rig.collider_head[0], float(rig.collider_radius[0])

    def distances(collides: bool) -> np.ndarray:
        sim = SpringBoneSim(dataclasses.replace(rig, collides=np.full_like(rig.collides, collides), **forward))
        out = []
        for i in range(90):
            sim.step(i / 30, rows)
            out.append(np.linalg.norm(sim.tips()[0] - centre))
        return np.array(out)

    kept_out, passed_through = distances(True), distances(False)
    assert passed_through[-1] < radius, "without the collider the tip should swing into the head"
    assert kept_out.min() > radius, f"the tip entered the head's collider: {kept_out.min():.3f} m < {radius} m"


def test_cloth_levels_choose_the_chains_on_their_own_thread_one_frame_behind():
    model = load_gltf_avatar(VRM1)
    rows = head_turn(model)
    anchors = np.zeros((len(CLOTH_REGIONS), 3))

    def run(sim: ClothSim) -> list:
        return turn_then_hold(lambda t, r: sim.step(t, anchors, r).copy(), rows, seconds=1)

    high, medium = ClothSim(CLOTH_LEVELS["high"], model.spring_bones), ClothSim(CLOTH_LEVELS["medium"], model.spring_bones)
    low, shirt_only = ClothSim(CLOTH_LEVELS["low"], model.spring_bones), ClothSim(("shirt",), model.spring_bones)
    swung = run(high)
    assert max(np.abs(o).max() for o in swung) > 0.01 and max(np.abs(o).max() for o in run(medium)) > 0.01
    assert max(np.abs(o).max() for o in run(low)) == 0.0 and low.springs_stepped == 0
    assert max(np.abs(o).max() for o in run(shirt_only)) == 0.0  # the ponytail rides on the head: it is `hair`
    # the thread's result is exactly the chains stepped in turn on this thread, one frame later
    alone = SpringBoneSim(model.spring_bones)
    in_turn = turn_then_hold(lambda t, r: (alone.step(t, r), alone.region_offsets(len(CLOTH_REGIONS)))[1], rows, seconds=1)
    np.testing.assert_array_equal(np.array(swung[1:]), np.array(in_turn[:-1]))
    # a cut (the clock jumps) starts the chains again at rest
    high.step(100.0, anchors, rows(0.5))
    assert np.abs(high.step(100.0 + 1 / 30, anchors, rows(0.5))).max() == 0.0


def test_a_late_frame_costs_at_most_max_steps():
    model = load_gltf_avatar(VRM1)
    rows = head_turn(model)
    sim = SpringBoneSim(model.spring_bones)
    sim.step(0.0, rows(0.0))
    sim.step(1 / 30, rows(0.1))
    before = sim.steps_taken
    sim.step(0.9, rows(0.5))  # a stalled display: 0.87 s late
    assert 0 < sim.steps_taken - before <= MAX_STEPS * int((model.spring_bones.count - 1).sum())


def test_a_capsule_collider_stops_a_swinging_tip():
    """A 20 cm pendulum hangs from a point; gravity pulls it sideways into a capsule lying across its path."""
    def rig(collides: bool) -> SpringRig:
        rest = np.array([[[0.0, 1.0, 0.0], [0.0, 0.8, 0.0]]])
        ones = np.ones((1, 2))
        return SpringRig(rest=rest, count=np.array([2]), ride=np.array([0]), channel=np.array([0]), stiffness=ones * 0.1,
                         gravity_power=ones * 2.0, gravity_dir=np.broadcast_to([1.0, 0.0, 0.0], (1, 2, 3)).copy(),
                         drag=ones * 0.4, hit_radius=ones * 0.01, collider_head=np.array([[0.14, 0.86, -0.5]]),
                         collider_tail=np.array([[0.14, 0.86, 0.5]]), collider_radius=np.array([0.04]),
                         collider_ride=np.array([0]), collides=np.array([[collides]]))

    def axis_distance(collides: bool) -> float:
        sim = SpringBoneSim(rig(collides))
        still = np.tile(np.hstack([np.eye(3), np.zeros((3, 1))]), (NUM_JOINTS, 1, 1))
        nearest = []
        for i in range(90):
            sim.step(i / 30, still)
            tip = sim.tips()[0]  # the capsule runs along z at x 0.14, y 0.86
            nearest.append(np.hypot(tip[0] - 0.14, tip[1] - 0.86))
        return min(nearest)

    assert axis_distance(False) < 0.04, "without the collider the tip should swing through the capsule"
    assert axis_distance(True) > 0.04, "the tip entered the capsule"
