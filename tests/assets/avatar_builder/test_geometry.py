"""centroid_weights: the joint regressor's weights, which must be the same on every machine that builds the avatar."""

import numpy as np
import pytest

from assets.avatar_builder.geometry import centroid_weights


def ring(count: int, radius: float = 0.05, height: float = 1.0) -> np.ndarray:
    angles = np.linspace(0.0, 2.0 * np.pi, count, endpoint=False)
    return np.stack([radius * np.cos(angles), np.full(count, height), radius * np.sin(angles)], axis=1)


def test_a_centred_ring_keeps_uniform_weights():
    points = ring(12)
    weights = centroid_weights(points, points.mean(axis=0))
    np.testing.assert_allclose(weights, 1.0 / 12, atol=1e-12)


def test_an_off_centre_target_gets_non_negative_weights_that_place_it_exactly():
    points = np.vstack([ring(16), ring(16, height=1.04)])
    target = np.array([0.035, 1.01, -0.01])
    weights = centroid_weights(points, target)
    assert weights.min() >= 0.0 and weights.min() == 0.0  # some points must drop out to reach it
    assert weights.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(weights @ points, target, atol=1e-9)


def test_mirrored_points_get_mirrored_weights():
    points = np.vstack([ring(16), ring(16, height=1.04)])
    mirror = np.concatenate([(8 - np.arange(16)) % 16, 16 + (8 - np.arange(16)) % 16])
    np.testing.assert_allclose(points[mirror], points * [-1.0, 1.0, 1.0], atol=1e-15)
    weights = centroid_weights(points, np.array([0.0, 1.01, 0.035]))
    assert weights.min() == 0.0
    np.testing.assert_allclose(weights[mirror], weights, atol=1e-12)


def test_last_bit_noise_moves_the_weights_by_no_more_than_noise():
    """Another CPU's rounding perturbs the last bits; the weights must not jump to another solution (on this
    mirrored set a path-following solver, Lawson-Hanson NNLS, breaks the tie differently for some noise)."""
    points = np.vstack([ring(16), ring(16, height=1.04)])
    target = np.array([0.0, 1.02, 0.04])
    weights = centroid_weights(points, target)
    for seed in range(30):
        noisy = points * (1.0 + np.random.default_rng(seed).uniform(-1e-14, 1e-14, points.shape))
        np.testing.assert_allclose(centroid_weights(noisy, target), weights, atol=1e-9)


def test_a_target_outside_the_points_is_refused():
    with pytest.raises(ValueError, match="outside the candidate vertices' hull"):
        centroid_weights(ring(8), np.array([0.2, 1.0, 0.0]))
