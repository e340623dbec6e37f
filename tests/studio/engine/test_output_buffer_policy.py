"""The speaker's adaptive buffer policy, as plain arithmetic on given times (no device, no clock)."""

import pytest

from studio.engine.output import BUSY_START_S, MAX_BUFFER_S, MIN_BUFFER_S, OutputBufferPolicy, cpu_pressure_pct


def test_it_starts_small_and_an_underrun_doubles_it_at_once():
    policy = OutputBufferPolicy(min_s=0.02, max_s=0.2, quiet_s=30.0, settle_s=1.0)
    assert policy.update(0.0) == 0.02
    assert policy.update(5.0, underruns=1) == 0.04
    assert policy.update(5.5, underruns=3) == 0.04  # the old size's underruns, still arriving: no second step
    assert policy.update(7.0, underruns=1) == 0.08
    assert policy.grows == 2


def test_it_never_grows_past_the_maximum():
    policy = OutputBufferPolicy(min_s=0.02, max_s=0.1, quiet_s=30.0, settle_s=0.0)
    sizes = [policy.update(float(t), underruns=1) for t in range(10)]
    assert max(sizes) == sizes[-1] == 0.1


def test_a_quiet_stretch_halves_it_step_by_step_down_to_the_minimum():
    policy = OutputBufferPolicy(min_s=0.02, max_s=0.2, quiet_s=30.0, settle_s=1.0)
    for t in (0.0, 2.0, 4.0):
        policy.update(t, underruns=1)
    assert policy.size_s == 0.16
    assert policy.update(33.9) == 0.16  # not yet 30 s since the last underrun
    assert policy.update(34.0) == 0.08
    assert policy.update(50.0) == 0.08  # each step needs its own quiet stretch
    assert policy.update(64.0) == 0.04
    assert policy.update(94.0) == 0.02
    assert policy.update(1000.0) == 0.02 and policy.shrinks == 3


def test_an_underrun_soon_after_a_shrink_makes_the_next_shrink_wait_longer():
    policy = OutputBufferPolicy(min_s=0.02, max_s=0.2, quiet_s=10.0, max_quiet_s=25.0, settle_s=0.0)
    policy.update(0.0, underruns=1)
    assert policy.update(10.0) == 0.02  # shrunk after a quiet 10 s
    assert policy.update(12.0, underruns=1) == 0.04  # too small here after all
    assert policy.quiet_s == 20.0
    assert policy.update(31.0) == 0.04  # 19 s quiet: not enough any more (hysteresis)
    assert policy.update(32.0) == 0.02
    policy.update(33.0, underruns=1)
    assert policy.quiet_s == 25.0  # bounded


def test_defaults_and_bad_settings_are_named():
    assert OutputBufferPolicy().size_s == MIN_BUFFER_S <= 0.02 < MAX_BUFFER_S
    with pytest.raises(ValueError, match="min_s=0.3 and max_s=0.2"):
        OutputBufferPolicy(min_s=0.3, max_s=0.2)
    with pytest.raises(ValueError, match="quiet_s=0"):
        OutputBufferPolicy(quiet_s=0)
    with pytest.raises(ValueError, match="settle_s=-1"):
        OutputBufferPolicy(settle_s=-1)
    with pytest.raises(ValueError, match="start_s=0.5 must lie within"):
        OutputBufferPolicy(start_s=0.5)
    assert OutputBufferPolicy(start_s=0.1).size_s == 0.1


def test_the_first_size_is_small_on_a_quiet_machine_and_larger_on_a_contended_one():
    assert OutputBufferPolicy().start_for(cpu_pressure_pct=2.0) == MIN_BUFFER_S
    assert OutputBufferPolicy().start_for(cpu_pressure_pct=None) == MIN_BUFFER_S  # unknown: taken as quiet
    busy = OutputBufferPolicy()
    assert busy.start_for(cpu_pressure_pct=60.0) == BUSY_START_S > MIN_BUFFER_S
    assert busy.start_for(cpu_pressure_pct=0.0) == BUSY_START_S  # chosen once: a reopen keeps what was learned
    assert OutputBufferPolicy(start_s=0.02).start_for(cpu_pressure_pct=60.0) == 0.02  # an explicit start stands
    learned = OutputBufferPolicy(settle_s=0.0)
    learned.update(0.0, underruns=1)
    assert learned.start_for(cpu_pressure_pct=0.0) == 2 * MIN_BUFFER_S
    pressure = cpu_pressure_pct()
    assert pressure is None or 0.0 <= pressure <= 100.0
