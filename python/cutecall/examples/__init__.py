"""Example CuTe DSL kernels (launchers) for cutecall tests and benchmarks."""
