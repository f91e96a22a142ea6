"""Compile services: compiling many specializations ahead of use and
picking the fastest of several configurations.

========================  =====================================================
module                    job
========================  =====================================================
``warmup``                ``cutecall.warmup``: tasks in worker processes,
                          results in the artifact store
``workers``               warm-up's worker processes: how they start (fork, or a
                          fork server), what each imports, runs and reports
``warmup_job``            ``warmup(distributed=True)``: each process of a job
                          compiles its share, then all copy the others'
``cluster``               the job's processes as warm-up sees them: rank,
                          size, a barrier, a gather
``warmup_cli``            ``cutecall warmup`` on the command line
``autotune``              ``cutecall.autotune``: the fastest config per key,
                          remembered across processes
``timing``                how a candidate is timed on the device (CUDA events
                          for torch, chained jitted calls for JAX)
========================  =====================================================

Each imports a framework only where the task needs it (a JAX task, a torch
tensor), never at import.
"""
