"""Output files: a path that cannot be written is refused before any work, naming the file and why."""

import os

import pytest

from studio.fileio import atomic_writer, output_file_problem


def test_a_file_in_an_existing_folder_can_be_written(tmp_path):
    assert output_file_problem(tmp_path / "take.csv") is None
    (tmp_path / "take.csv").write_text("old")
    assert output_file_problem(tmp_path / "take.csv") is None  # replaced atomically when the work is done


def test_a_folder_given_as_the_output_file_is_refused(tmp_path):
    assert output_file_problem(tmp_path) == f"cannot write {tmp_path}: it is a folder; name a file inside it"


def test_a_missing_folder_is_named(tmp_path):
    problem = output_file_problem(tmp_path / "no" / "take.csv")
    assert problem == f"cannot write {tmp_path / 'no' / 'take.csv'}: folder {tmp_path / 'no'} does not exist"


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into any folder")
def test_a_read_only_folder_is_named(tmp_path):
    tmp_path.chmod(0o555)
    try:
        assert output_file_problem(tmp_path / "take.csv").endswith(f"folder {tmp_path} is not writable")
    finally:
        tmp_path.chmod(0o755)


def test_a_temp_file_that_cannot_be_made_is_reported_under_the_users_file_name(tmp_path):
    target = tmp_path / "gone" / "take.csv"
    with pytest.raises(OSError, match=f"cannot write {target}: No such file or directory"), atomic_writer(target):
        pass
