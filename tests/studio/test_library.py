"""Named personas and presets on disk: names that are refused, built-ins that stay read-only, atomic saves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from studio.library import Library, check_name
from studio.presets import Persona, Preset, PresetError, load_persona, persona_by_name


@pytest.fixture
def personas(tmp_path, monkeypatch) -> Library:
    monkeypatch.setenv("AVATAR_STUDIO_HOME", str(tmp_path))
    return Library(Persona)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("a/b", "contains /"),
        ("..\\evil", "contains \\"),
        ("what?", "contains ?"),
        ("x:y", "contains :"),
        ("CON", "reserved device name"),
        ("nul.txt", "reserved device name"),
        (".hidden", "not allowed"),
        ("trailing.", "not allowed"),
        ("x" * 65, "allowed 1..64"),
    ],
)
def test_names_that_cannot_be_file_names_are_refused(name, why):
    with pytest.raises(PresetError, match=why.replace("?", r"\?").replace("\\", r"\\")):
        check_name(name)


def test_builtins_are_listed_and_the_three_personas_differ(personas):
    assert {"default", "clinician", "teacher", "presenter"} <= set(personas.names())
    clinician, teacher, presenter = (personas.load(n) for n in ("clinician", "teacher", "presenter"))
    energies = [p.style.gesture_energy for p in (clinician, teacher, presenter)]
    assert energies == sorted(energies) and len(set(energies)) == 3, "calm < warm < energetic"
    assert clinician.style.blink_rate_per_min < teacher.style.blink_rate_per_min < presenter.style.blink_rate_per_min
    assert len({p.voice for p in (clinician, teacher, presenter)}) == 3
    assert len({p.colors["shirt"] for p in (clinician, teacher, presenter)}) == 3
    assert clinician.default_preset == "medical" and teacher.default_preset == "education"
    for persona in (clinician, teacher, presenter):
        assert persona.expressions and set(persona.hotkeys) <= set(persona.expressions) and len(persona.cue_lines) >= 3


def test_create_duplicate_rename_delete(personas, tmp_path):
    created = personas.create("host")
    assert created.name == "host" and (tmp_path / "personas" / "host.yaml").is_file()
    copy = personas.duplicate("teacher", "teacher 2")
    assert copy.voice == persona_by_name("teacher").voice and personas.is_user("teacher 2")
    with pytest.raises(PresetError, match="already exists"):
        personas.create("Teacher")
    with pytest.raises(PresetError, match="already exists"):
        personas.rename("host", "teacher 2")
    renamed = personas.rename("host", "anchor")
    assert renamed.name == "anchor" and not personas.is_user("host") and personas.load("anchor").name == "anchor"
    with pytest.raises(PresetError, match="built in and cannot be renamed"):
        personas.rename("clinician", "doc")
    with pytest.raises(PresetError, match="built in and cannot be deleted"):
        personas.delete("clinician")
    personas.delete("anchor")
    assert "anchor" not in personas.names()


def test_saving_a_builtin_writes_the_users_copy_which_then_wins(personas, tmp_path):
    teacher = personas.load("teacher").model_copy(update={"cue_lines": ["Mine now."]})
    personas.save(teacher)
    assert personas.load("teacher").cue_lines == ["Mine now."]
    builtin = personas.builtin_folder / "teacher.yaml"
    assert load_persona(builtin).cue_lines != ["Mine now."], "the shipped file is never written"


def test_a_failed_save_leaves_the_old_file_and_no_temp(personas, tmp_path, monkeypatch):
    personas.create("host")
    path = tmp_path / "personas" / "host.yaml"
    before = path.read_bytes()

    def full_disk(_fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space"):
        personas.save(Persona(name="host", cue_lines=["changed"]))
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == ["host.yaml"]


_SAVER = textwrap.dedent("""
    import sys
    from studio.presets import Persona, save_yaml
    lines = ["A line the avatar says, long enough to make the file big. " * 6] * 3000
    persona = Persona(name="big", cue_lines=lines)
    path = sys.argv[1]
    count = 0
    while True:
        save_yaml(persona.model_copy(update={"cue_lines": lines[count % 7:]}), path)
        count += 1
        print(count, flush=True)
""")


def test_a_kill_during_save_leaves_a_readable_file(tmp_path):
    path = tmp_path / "big.yaml"
    child = subprocess.Popen([sys.executable, "-c", _SAVER, str(path)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    try:
        for _ in range(5):
            assert child.stdout.readline(), "the saving process died before it was killed"
        child.send_signal(signal.SIGKILL)  # somewhere inside the next save
    finally:
        child.wait()
    assert child.returncode == -signal.SIGKILL
    persona = load_persona(path)
    assert persona.name == "big" and len(persona.cue_lines) >= 3000 - 7


def test_presets_library_lists_the_builtins(tmp_path, monkeypatch):
    monkeypatch.setenv("AVATAR_STUDIO_HOME", str(tmp_path))
    presets = Library(Preset)
    assert {"default", "medical", "education"} <= set(presets.names())
    mine = presets.duplicate("medical", "clinic 2")
    assert mine.render == presets.load("medical").render and presets.is_user("clinic 2")
