"""Compile services: compiling many specializations ahead of use and
picking the fastest of several configurations.

========================  =====================================================
module                    job
========================  =====================================================
``warmup``                ``cutecall.warmup``: tasks in worker processes,
                          results in the artifact store
``workers``               how warm-up workers start (fork, or a fork server)
``autotune``              ``cutecall.autotune``: the fastest config per key,
                          remembered across processes
``timing``                how a candidate is timed on the device (CUDA events
                          for torch, chained jitted calls for JAX)
========================  =====================================================

Each imports a framework only where the task needs it (a JAX task, a torch
tensor), never at import.
"""
