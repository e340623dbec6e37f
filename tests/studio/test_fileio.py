"""Output files: a path that cannot be written is refused before any work, naming the file and why."""

import os
import tempfile
from pathlib import Path

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


def _problem_as_an_ordinary_user(path) -> str | None:
    """output_file_problem(path) as the user would see it: root may write anywhere, so under root (CI, the fresh
    Debian check) it is asked in a forked child that has become `nobody`."""
    if os.geteuid() != 0:
        return output_file_problem(path)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.setgid(65534)
            os.setuid(65534)
            answer = output_file_problem(path) or ""
        except Exception as error:  # noqa: BLE001 - shown by the failing assertion, not lost in the child
            answer = f"the child could not ask: {error}"
        finally:
            os.write(write, answer.encode())
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        text = answer.read().decode()
    os.waitpid(child, 0)
    return text or None


def test_a_read_only_folder_is_named():
    folder = Path(tempfile.mkdtemp(prefix="read-only-", dir="/tmp"))  # /tmp: `nobody` may look in it
    folder.chmod(0o555)
    try:
        assert _problem_as_an_ordinary_user(folder / "take.csv") == (
            f"cannot write {folder / 'take.csv'}: folder {folder} is not writable")
        assert _problem_as_an_ordinary_user(Path("/tmp") / "take.csv") is None
    finally:
        folder.rmdir()


def test_a_temp_file_that_cannot_be_made_is_reported_under_the_users_file_name(tmp_path):
    target = tmp_path / "gone" / "take.csv"
    with pytest.raises(OSError, match=f"cannot write {target}: No such file or directory"), atomic_writer(target):
        pass
