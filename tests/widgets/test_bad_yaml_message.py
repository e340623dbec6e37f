"""A persona or preset file that is not valid YAML: one line naming the file, the line, the column and the
problem (not the parser's five-line dump), from the loader and from the command line, exit code 2."""

from __future__ import annotations

import pytest

from studio.presets import PresetError, load_persona, load_preset
from tests.widgets.test_commands import run_headless

UNCLOSED_LIST = "name: bad\nschema_version: 2\ncolors:\n  shirt: [1, 2\nvoice: {name: en}\n"
MISPLACED_KEY = "name: bad\nschema_version: 2\n  render: x\n"
TAB_INDENT = "name: bad\nschema_version: 2\ncue_lines:\n\t- Hello.\n"


@pytest.mark.parametrize(("text", "where", "problem"), [
    (UNCLOSED_LIST, "line 5, column 6", "expected ',' or ']', but got ':' (while parsing a flow sequence that starts "
                                        "at line 4, column 10)"),
    (MISPLACED_KEY, "line 3, column 9", "mapping values are not allowed here"),
    (TAB_INDENT, "line 4, column 1", "found character '\\t' that cannot start any token"),
])
@pytest.mark.parametrize("kind", ["persona", "preset"])
def test_the_loader_says_file_line_column_and_problem_in_one_line(tmp_path, text, where, problem, kind):
    path = tmp_path / f"my {kind}.yaml"
    path.write_text(text)
    with pytest.raises(PresetError) as error:
        (load_persona if kind == "persona" else load_preset)(path)
    message = str(error.value)
    assert message.startswith(f"{path}, {where}: not a valid YAML {kind} file: {problem}"), message
    assert "\n" not in message and "^" not in message and "<unicode string>" not in message
    assert path.read_text() == text, "the bad file is left as it is"


@pytest.mark.parametrize("option", ["--persona", "--preset"])
def test_the_command_line_prints_one_line_and_exits_2(tmp_path, option):
    path = tmp_path / "bad.yaml"
    path.write_text(UNCLOSED_LIST)
    result = run_headless("record", "--text", "Hi.", "--take", str(tmp_path / "take"), option, str(path), timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines == [f"avatar-studio: error: {path}, line 5, column 6: not a valid YAML "
                     f"{option[2:]} file: expected ',' or ']', but got ':' (while parsing a flow sequence that starts "
                     "at line 4, column 10)"], result.stderr
    assert not (tmp_path / "take").exists()


def test_a_file_that_is_not_text_is_named_in_one_line(tmp_path):
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"\xff\xfe name")
    with pytest.raises(PresetError, match=r"binary.yaml: not a persona file: byte 0 is not UTF-8 text$"):
        load_persona(path)
