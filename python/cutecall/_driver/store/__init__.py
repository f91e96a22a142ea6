"""Where compiled kernels are kept, tier by tier, each module one job.

A kernel is looked up in the process (``memory``), then on this machine's
disk (``local``), then in a store the cluster shares (``remote``, when the
environment sets ``CUTECALL_CACHE_REMOTE``), and compiled only when no tier
has it. Every tier holds the same verified bytes (``entry``).

========================  =====================================================
module                    job
========================  =====================================================
``memory``                the in-process tier: a bounded LRU of
                          ``CompiledKernel``\\ s, the compile lock, the counters
                          (``compile_stats``), rejected and failed keys
``lookup``                a kernel through the tiers: ``load_or_compile``,
                          ``load_kernel`` (no compile), ``prefetch``
``stamps``                what an entry is stamped with (versions, arch,
                          ``CompiledKernel``'s fields): a differing stamp
                          is a miss
``records``               small records in the local tier: rejected
                          specializations, autotuning winners
``entry``                 one entry as bytes (both digests), the same in
                          every tier
``local``                 ``ArtifactStore``: the local tier, one directory,
                          atomic writes, ``flock`` single flight on one host
``local_files``           the local tier's errors, private dirs, file locks
``config``                the process's store from the environment
``remote_tier``           ``RemoteTier``: behind the local tier; fetch, verify,
                          publish; a backend that fails warns once
``backlog``               kernels compiled while the remote tier was down,
                          published when it answers again
``lease``                 one compile per key across hosts: signed leases,
                          wait, take over a dead or refused one
``signing``               HMAC signatures of published entries and leases
``remote``                the backend interface (get/put/lease) and URL schemes
``redis_backend``         ``redis://`` (redis-py)
``file_backend``          ``file://`` on a shared filesystem (no ``flock``)
``fsspec_backend``        any fsspec URL (``gs://``, ``s3://``, ...)
``jax_cache``             where JAX's own compile cache goes beside the
                          remote tier (``share_jax_cache``)
========================  =====================================================

What is stored is defined beside this package, in ``compiled``: a kernel
(``CompiledKernel``) is an entry's object plus its ``meta``; how a bundle
records one kernel, outside any store, is ``call_record``.
"""

from .entry import CorruptEntry, Entry
from .local import ArtifactStore
from .local_files import CacheError, StoreUnavailable
from .config import default_store

__all__ = ["ArtifactStore", "CacheError", "CorruptEntry", "Entry",
           "StoreUnavailable", "default_store"]
