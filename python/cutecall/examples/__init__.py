"""Small CuTe DSL kernels (launchers) that the docs, the demo and the tests
teach with: ``kernels``, ``layouts``, ``signatures``, ``pytrees``,
``autodiff``, ``torch_kernels`` and others.

The products built on cutecall live elsewhere: FlashAttention-4 in JAX in
:mod:`cutecall.attention`, QuACK in JAX in :mod:`cutecall.quack`.
The QuACK/FA4 test corpus is in the repository's ``tests/external/corpus``,
not in the package."""
