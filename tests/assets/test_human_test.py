import pytest

from assets.model import human_test


def _pack(root, name, lines):
    (root / name).mkdir()
    for line in lines:
        (root / name / f"{line}.ogg").write_bytes(b"")


def test_the_rule_takes_english_packs_but_the_processed_one_and_spells_lines_by_their_names(tmp_path):
    _pack(tmp_path, "Pirate", ["Illgetyou", "Ow3", "Hello", "Firepunch2"])
    _pack(tmp_path, "Default_es", ["Hello"])  # Spanish under the same names
    _pack(tmp_path, "Robot", ["Hello"])
    items = human_test.recordings(tmp_path)
    assert [(speaker, path.name, words) for speaker, path, words in items] == [
        ("hedgewars/Pirate", "Hello.ogg", "hello"), ("hedgewars/Pirate", "Illgetyou.ogg", "i'll get you")]


def test_a_line_the_rule_does_not_know_stops_it_before_anything_is_scored(tmp_path):
    _pack(tmp_path, "Surfer", ["Cowabunga"])
    with pytest.raises(ValueError, match="Cowabunga.ogg: line 'Cowabunga' is neither in WORDS nor in NOT_WORDS"):
        human_test.recordings(tmp_path)
