"""The GPU test modules' common start: torch with a CUDA device that fusejit sees too, or a module-level skip."""
import pytest


def cuda_torch():
    """(torch, torch's current CUDA device); skips the calling module without torch, a CUDA device for torch, or
    one that fusejit sees."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch", allow_module_level=True)
    import fusejit
    if fusejit.device_count() == 0:
        pytest.skip("fusejit sees no CUDA device", allow_module_level=True)
    return torch, torch.device("cuda", torch.cuda.current_device())
