"""Dynamic resolution picks the render scale from draw times against the preset's frame budget."""

from __future__ import annotations

import pytest

from render.scaled_canvas import MIN_SCALE, DynamicResolution


def feed(control: DynamicResolution, draw_ms: float, seconds: float, start_s: float = 0.0, fps: float = 30.0) -> float:
    t = start_s
    while t < start_s + seconds:
        control.add_draw(t, draw_ms * control.scale ** 2)  # raster time goes with the pixels shaded
        t += 1.0 / fps
    return t


def test_a_slow_draw_lowers_the_scale_until_the_frame_fits_the_budget():
    control = DynamicResolution(fps=30.0)
    feed(control, draw_ms=60.0, seconds=10.0)
    assert MIN_SCALE <= control.scale < 1.0
    assert 60.0 * control.scale ** 2 <= 0.85 * 1000.0 / 30.0  # now inside the budget


def test_it_never_goes_below_the_floor_and_climbs_back_when_the_machine_frees_up():
    control = DynamicResolution(fps=30.0)
    end = feed(control, draw_ms=1000.0, seconds=10.0)
    assert control.scale == pytest.approx(MIN_SCALE)
    feed(control, draw_ms=5.0, seconds=20.0, start_s=end)
    assert control.scale == 1.0


def test_a_fast_draw_keeps_full_resolution_and_disabled_means_full():
    control = DynamicResolution(fps=30.0)
    feed(control, draw_ms=10.0, seconds=5.0)
    assert control.scale == 1.0 and control.changes == 0
    control.enabled = False
    feed(control, draw_ms=500.0, seconds=5.0)
    assert control.scale == 1.0
