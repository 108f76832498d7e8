// fusejit's launcher below Python (docs/python.md, "Host overhead"; FUSEJIT_LAUNCHER auto, cpp, cpp-autograd): the
// eager training path's forward kernel and backward program, each one call from Python that allocates the outputs with
// ATen and launches through fj_kernel_launch (its address handed over from ctypes once). Errors: a launch's
// fj_status comes back to Python, which raises fusejit's error for it (fj_last_error is per thread).
#include "launcher.h"

using fusejit_launcher::Forward;
using fusejit_launcher::Program;
using fusejit_launcher::Shape;

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "fusejit's launcher below Python: the eager training path's kernels, one call a forward or backward";
  m.def("set_launch", &fusejit_launcher::set_launch, "fj_kernel_launch's address (ctypes)");
  pybind11::class_<Forward>(m, "Forward")
      .def(pybind11::init<uint64_t, std::vector<Shape>, const std::vector<std::string>&>())
      .def("run", &Forward::run);
  pybind11::class_<Program>(m, "Program")
      .def(pybind11::init<int64_t, std::vector<int64_t>, std::vector<Program::GradSpec>, std::vector<Program::StageSpec>,
                          std::vector<int64_t>>())
      .def("run", &Program::run);
}
