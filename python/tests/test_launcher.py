"""fusejit._launcher's modes without building anything: "auto" (the default) falls back to the Python launcher
quietly where the C++ launcher does not build and remembers that for later processes; an explicit mode warns.
The build is replaced by one that fails (or counts its calls). Skips without torch."""
import warnings

import pytest

torch = pytest.importorskip("torch")
from torch.utils import cpp_extension  # noqa: E402

from fusejit import _launcher  # noqa: E402


@pytest.fixture
def clean(monkeypatch, tmp_path):
    """No module built or remembered in this process, failures remembered under tmp_path; restored after."""
    saved = dict(_launcher._built)
    _launcher._built.clear()
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("FUSEJIT_LAUNCHER", raising=False)
    calls = []

    def failing_load(**kwargs):
        calls.append(kwargs["name"])
        raise RuntimeError("no compiler here (test)")

    monkeypatch.setattr(cpp_extension, "load", failing_load)
    try:
        yield calls, tmp_path
    finally:
        _launcher.set_mode(None)
        _launcher._built.clear()
        _launcher._built.update(saved)


def test_default_mode_is_auto(monkeypatch):
    monkeypatch.delenv("FUSEJIT_LAUNCHER", raising=False)
    assert _launcher.mode() == "auto"
    monkeypatch.setenv("FUSEJIT_LAUNCHER", "python")
    assert _launcher.mode() == "python"
    monkeypatch.setenv("FUSEJIT_LAUNCHER", "nonsense")
    assert _launcher.mode() == "auto"


def test_set_mode_rejects_unknown_modes():
    with pytest.raises(ValueError, match="expected one of"):
        _launcher.set_mode("fast")


def test_auto_falls_back_quietly_and_remembers(clean):
    calls, cache = clean
    _launcher.set_mode("auto")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # auto does not warn
        assert _launcher.autograd_module() is None
        assert _launcher.module() is None
    assert sorted(calls) == ["fusejit_launcher", "fusejit_launcher_autograd"]
    markers = sorted(p.name for p in cache.iterdir())
    assert len(markers) == 2 and all(m.startswith("launcher-failed-") for m in markers), markers
    assert "no compiler here" in (cache / markers[0]).read_text()
    # a later process (a fresh registry) does not try again
    _launcher._built.clear()
    assert _launcher.autograd_module() is None and _launcher.module() is None
    assert len(calls) == 2


def test_explicit_mode_warns_and_tries(clean):
    calls, cache = clean
    _launcher.set_mode("cpp")
    with pytest.warns(UserWarning, match="did not build"):
        assert _launcher.module() is None
    assert _launcher.autograd_module() is None  # not asked for in mode cpp
    assert calls == ["fusejit_launcher"] and not list(cache.iterdir())


def test_python_mode_builds_nothing(clean):
    calls, _ = clean
    _launcher.set_mode("python")
    assert _launcher.module() is None and _launcher.autograd_module() is None
    assert calls == []
