"""The Python bridge without a GPU: the library loads through ctypes, specs
parse, errors map to exceptions, CUBIN compiles, lazy kernels list their
arguments, the seed spec builders produce valid specs. No torch needed."""
import re
from pathlib import Path

import pytest

import fusejit
from fusejit import specs

REPO = Path(__file__).resolve().parents[2]

SMALL = """\
name: py_small
inputs:
  - {name: x, shape: [2, 3, 8, 9]}
  - {name: w, shape: [4, 3, 3, 3]}
  - {name: b, shape: [4]}
  - {name: bias, shape: [4, 1, 1], init: normal}
ops:
  - {name: conv, op: conv2d, args: [x, w, b]}
  - {name: act, op: OPNAME, args: [conv]}
  - {name: y, op: add, args: [act, bias]}
outputs: [y]
"""


def small_spec(op="relu"):
    return SMALL.replace("OPNAME", op)


def gpu_present():
    return fusejit.device_count() > 0


def conv_out(size, k, stride=1, padding=0, dilation=1):
    return (size + 2 * padding - dilation * (k - 1) - 1) // stride + 1


def test_version_matches_header():
    header = (REPO / "include" / "fusejit" / "fusejit.h").read_text()
    parts = [re.search(rf"#define FJ_VERSION_{p} (\d+)", header).group(1)
             for p in ("MAJOR", "MINOR", "PATCH")]
    assert fusejit.version() == ".".join(parts)


def test_spec_from_text_lists_arguments():
    spec = fusejit.Spec(small_spec(), filename="small.yaml")
    assert spec.name == "py_small"
    assert [a.name for a in spec.inputs] == ["x", "w", "b", "bias"]
    assert [a.name for a in spec.outputs] == ["y"]
    assert spec.inputs[1] == fusejit.Arg("w", "f32", (4, 3, 3, 3), False)
    assert spec.outputs[0].shape == (2, 4, conv_out(8, 3), conv_out(9, 3))
    assert "conv2d" in spec.ir()


def test_spec_from_file():
    path = REPO / "examples" / "seed1_conv_relu_bias.yaml"
    for source in (path, str(path)):
        spec = fusejit.Spec(source)
        x, w = spec.inputs[0].shape, spec.inputs[1].shape
        assert spec.outputs[0].shape == (x[0], w[0], conv_out(x[2], w[2]), conv_out(x[3], w[3]))


def test_spec_error_names_line():
    text = small_spec("relux")
    line = text[:text.index("relux")].count("\n") + 1
    with pytest.raises(fusejit.SpecError) as info:
        fusejit.Spec(text, filename="bad.yaml")
    assert f"bad.yaml:{line}:" in str(info.value)
    assert info.value.status_name == "FJ_ERR_SPEC"
    assert isinstance(info.value, ValueError)


def test_missing_spec_file():
    with pytest.raises(fusejit.SpecFileError, match="no_such_spec.yaml"):
        fusejit.Spec("/nonexistent/no_such_spec.yaml")


def test_compile_cubin_for_sm90a(tmp_path):
    cubin = fusejit.compile_cubin(small_spec(), "sm_90a")
    assert cubin[:4] == b"\x7fELF"
    out = tmp_path / "k.cubin"
    assert fusejit.compile_cubin(small_spec(), "sm_90a", path=out) is None
    assert out.read_bytes()[:4] == b"\x7fELF"


def test_emit_source_and_plan():
    assert "__global__" in fusejit.emit(small_spec(), "source", arch="sm_90a")
    assert fusejit.emit(small_spec(), "plan", arch="sm_90a").strip()
    with pytest.raises(ValueError):
        fusejit.emit(small_spec(), "ptx")


def test_bad_options():
    with pytest.raises(fusejit.InvalidArgumentError, match="sm_1"):
        fusejit.compile_cubin(small_spec(), "sm_1")
    with pytest.raises(ValueError, match="autotune"):
        fusejit.compile(small_spec(), autotune="sometimes", lazy=True)


@pytest.mark.skipif(gpu_present(), reason="checks behaviour without a GPU")
def test_without_gpu_lazy_kernel_and_launch_errors():
    kernel = fusejit.compile(small_spec(), lazy=True, device=0)
    assert not kernel.loaded
    assert [a.name for a in kernel.args] == ["x", "w", "b", "bias", "y"]
    with pytest.raises(fusejit.InvalidArgumentError, match="5 device pointers"):
        kernel.launch([0x1000])
    with pytest.raises(fusejit.NoDeviceError):
        kernel.launch([0x1000, 0x2000, 0x3000, 0x4000, 0x5000])
    with pytest.raises(fusejit.NoDeviceError):
        kernel.load()
    with pytest.raises(fusejit.NoDeviceError):
        fusejit.compile(small_spec(), device=0)
    with pytest.raises(fusejit.NoDeviceError):
        fusejit.compile_cubin(small_spec(), "auto")


def test_seed_spec_builders():
    f32 = "f32"
    n, cin, h, w, cout, k = 2, 3, 17, 18, 8, 3
    s1 = fusejit.Spec(specs.conv_relu_bias(((n, cin, h, w), f32), ((cout, cin, k, k), f32),
                                           ((cout,), f32), ((cout, 1, 1), f32)))
    assert s1.outputs[0].shape == (n, cout, conv_out(h, k), conv_out(w, k))

    s2 = fusejit.Spec(specs.gemm_bias_relu(((5, 32), f32), ((48, 32), f32), ((48,), f32)))
    assert s2.outputs[0].shape == (5, 48)
    assert [a.name for a in s2.inputs] == ["x", "gemm_w", "bias"]

    pool = 4
    s3 = fusejit.Spec(specs.conv_tanh_scale_bias_maxpool(
        ((n, cin, h, w), f32), ((cout, cin, k, k), f32), ((cout,), f32), ((cout, 1, 1), f32),
        2.5, pool))
    ho, wo = conv_out(h, k), conv_out(w, k)
    assert s3.outputs[0].shape == (n, cout, conv_out(ho, pool, pool), conv_out(wo, pool, pool))
    assert "constant value=2.5" in s3.ir()


def test_spec_builder_numbers():
    assert specs.number(float("inf")) == ".inf"
    assert specs.number(-float("inf")) == "-.inf"
    assert specs.number(float("nan")) == ".nan"
    assert float(specs.number(1e-5)) == 1e-5


def test_library_candidates(monkeypatch):
    pkg = Path(fusejit.__file__).resolve().parent
    monkeypatch.setenv("FUSEJIT_LIB", "/somewhere/libfusejit_c.so")
    assert fusejit.library_candidates() == ["/somewhere/libfusejit_c.so"]  # the override, alone
    monkeypatch.delenv("FUSEJIT_LIB")
    found = fusejit.library_candidates()
    assert found[0] == str(pkg / "libfusejit_c.so")  # where pip install ./python puts it
    assert found[-1] == "libfusejit_c.so"  # the system loader, last
