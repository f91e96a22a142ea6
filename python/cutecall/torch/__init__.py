"""cutecall for PyTorch: CuTe DSL kernels launched from C++ on torch's stream.

Two ways in, both through the same C++ launcher as cutecall's JAX path:

* Launch objects for ``@cute.jit`` launchers (the functions the JAX front
  takes)::

      import cutecall.torch
      add = cutecall.torch.kernel(vector_add, dims={"a": ("n",), "b": ("n",), "c": ("n",)})
      add(a, b, out)

* Helion's CuTe launcher, argument for argument::

      from cutecall.torch import default_cute_launcher
      default_cute_launcher(my_cute_kernel, grid, x, y, out, block=(256, 1, 1))

With ``recipe=`` (``kernel(build, recipe=values)``), a process whose
store or pack holds the kernel launches it with neither ``build``'s
library nor the CuTe DSL imported (docs/cache.md, recipes).

Launches are capturable by ``torch.cuda.graph``; launch objects carry a
``torch.library`` custom op so ``torch.compile(fullgraph=True)`` traces
through them, while eager calls skip the op dispatcher.
"""

from ._helion import BackendUnsupported, default_cute_launcher
from ._api import kernel
from ._kernel import Kernel
from ._recipe import RecipeKernel
from ._describe import TensorDesc

__all__ = ["kernel", "Kernel", "RecipeKernel", "TensorDesc", "default_cute_launcher",
           "BackendUnsupported"]
