"""The status bar says where the face model runs, once the engine has started."""


def test_the_status_bar_names_the_provider_the_face_model_runs_on(studio_window, qtbot):
    window = studio_window(real_engine=True)
    assert window.provider_label.text() == "", "nothing is said before the engine runs"
    assert window.speak_text("Hello.", rate_wpm=200), window.engine.state
    qtbot.waitUntil(lambda: window.engine.engine is not None, timeout=10000)
    running_on = window.engine.engine.face_provider.removesuffix("ExecutionProvider")
    assert running_on in ("CPU", "CUDA")
    qtbot.waitUntil(lambda: window.provider_label.text() == f"Face: {running_on}", timeout=10000)
    assert window.provider_label.isVisible()
