// tensor_launcher.h — registers `_core.TensorLauncher` (see the .cc).
#ifndef CUTECALL_PYTHON_TENSOR_LAUNCHER_H_
#define CUTECALL_PYTHON_TENSOR_LAUNCHER_H_

#include <nanobind/nanobind.h>

namespace cutecall::py {
void BindTensorLauncher(nanobind::module_& m);
}  // namespace cutecall::py

#endif  // CUTECALL_PYTHON_TENSOR_LAUNCHER_H_
