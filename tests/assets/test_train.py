import numpy as np
import pytest

from assets.model.train import (
    DEADLINE_MINUTES,
    EVALUATION_RESERVE_S,
    Example,
    build_examples,
    cache_provenance,
    colour,
    expected_minutes,
    fitted_budgets,
    load_examples,
    main,
    save_examples,
)
from studio.engine.features import LogMelExtractor


def _speech_like_features() -> np.ndarray:
    """A second of noise bursts with digital silence between them, as log-mel frames."""
    rng = np.random.default_rng(0)
    audio = np.zeros(16000, np.float32)
    audio[2000:6000] = 0.3 * rng.standard_normal(4000)
    audio[9000:13000] = 0.1 * rng.standard_normal(4000)
    return LogMelExtractor().compute(audio)


def test_colour_applies_one_gain_curve_to_every_frame_of_a_crop():
    features = _speech_like_features()
    coloured = colour(features, np.random.default_rng(1), equaliser_db=12.0)
    change_db = (coloured - features) * 10 / np.log(10)
    loudest = int(np.argmax(features.min(axis=1)))
    curve = np.broadcast_to(change_db[loudest], change_db.shape)
    clear = features > np.log(1e-2)  # a thousand times the floor: the floor's share is negligible
    assert clear.sum() > 1000
    np.testing.assert_allclose(change_db[clear], curve[clear], atol=0.01)
    assert np.ptp(change_db[loudest]) > 1.0  # the curve colours the bands, it is not a plain gain


def test_colour_stays_within_its_bound_and_keeps_silence_silent():
    features = _speech_like_features()
    silent = features.max(axis=1) <= np.log(2e-5)
    for seed in range(20):
        coloured = colour(features, np.random.default_rng(seed), equaliser_db=12.0)
        change_db = np.abs(coloured - features) * 10 / np.log(10)
        assert change_db.max() <= 12.0 / 2 + 3 * 12.0 / 4 + 1e-3
        np.testing.assert_allclose(coloured[silent], features[silent], atol=0.01)
    assert silent.sum() > 20


def test_colour_draws_a_different_curve_each_time():
    features = _speech_like_features()
    rng = np.random.default_rng(2)
    first, second = colour(features, rng, 12.0), colour(features, rng, 12.0)
    assert np.abs(first - second).max() > 0.1


def test_the_trainings_keep_their_budgets_when_the_corpus_leaves_room():
    assert fitted_budgets(corpus_s=700.0, live_minutes=14.0, offline_minutes=10.0) == (14.0, 10.0)


def test_a_slow_corpus_phase_shortens_both_trainings_so_make_model_ends_by_the_deadline():
    corpus_s = 1129.5  # measured on a 2-core Intel Xeon: 14 + 10 min of training would end after 47.8 minutes
    live, offline = fitted_budgets(corpus_s, 14.0, 10.0)
    assert live < 14.0 and offline < 10.0 and abs(live / offline - 1.4) < 1e-9
    assert corpus_s + (live + offline) * 60.0 + EVALUATION_RESERVE_S <= DEADLINE_MINUTES * 60.0 + 1e-6


def test_however_slow_the_machine_each_training_keeps_a_fifth_of_its_budget_and_ends_late():
    assert fitted_budgets(corpus_s=3600.0, live_minutes=14.0, offline_minutes=10.0) == (14.0 * 0.2, 10.0 * 0.2)
    on_time = 32.0 * 60  # the slowest corpus phase that still ends by the deadline, as the README says
    assert expected_minutes(on_time, *fitted_budgets(on_time, 14.0, 10.0)) <= DEADLINE_MINUTES
    late = 35.0 * 60
    assert expected_minutes(late, *fitted_budgets(late, 14.0, 10.0)) > DEADLINE_MINUTES


def _examples(count: int) -> list[Example]:
    rng = np.random.default_rng(0)
    return [Example(features=rng.normal(size=(n, 80)).astype(np.float32), arkit=np.zeros((n, 52), np.float32),
                    viseme=np.zeros(n, np.int64), voice_active=np.ones(n, np.float32)) for n in range(5, 5 + count)]


def test_a_corpus_cache_records_its_sources_and_split_and_one_that_does_not_is_refused(tmp_path):
    provenance = {"synthetic": {"voices": ["espeak:en-us"], "voices_kept_out": ["espeak:en-gb-x-rp"]},
                  "human_voices": {"steel_sky_lines": [1, 2, 3, 4, 6]}}
    examples = _examples(3)
    save_examples(examples, tmp_path / "corpus.npz", provenance)
    assert cache_provenance(tmp_path / "corpus.npz") == provenance
    assert [len(e.features) for e in load_examples(tmp_path / "corpus.npz")] == [5, 6, 7]
    np.savez(tmp_path / "old.npz", lengths=np.array([5]), features=examples[0].features, arkit=examples[0].arkit,
             viseme=examples[0].viseme, voice_active=examples[0].voice_active)
    with pytest.raises(ValueError, match="old.npz: this corpus cache does not record its sources and split"):
        load_examples(tmp_path / "old.npz")


def test_a_built_corpus_says_which_voices_went_in_and_which_were_kept_out():
    provenance: dict = {}
    build_examples(2, seed=0, held_out=False, provenance=provenance)
    synthetic = provenance["synthetic"]
    assert synthetic["utterances"] == 2 and synthetic["voices"] and synthetic["voices_kept_out"]
    assert not set(synthetic["voices"]) & set(synthetic["voices_kept_out"])
    assert provenance["human_voices"] is None


def test_a_member_of_an_averaged_start_that_is_missing_or_cannot_be_used_is_refused_before_any_work(capsys):
    shipped = "assets/models/face_fp32.onnx"  # the shipped live model: an average of two nets
    for argv, says in ((["--init-member", "1"], "--init-member needs --init"),
                       (["--init", shipped, "--offline-only", "--init-member", "1"], "--init-member needs --init"),
                       (["--init", shipped, "--init-member", "2"], "--init-member: " + shipped + ": no member 2"),
                       (["--init", shipped, "--offline-only", "--wide-from-member", "3"], "--wide-from-member: ")):
        with pytest.raises(SystemExit):
            main(argv)
        assert says in capsys.readouterr().err
