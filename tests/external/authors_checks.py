"""The GPU check the issue-37 families share (tests/external/test_gpu_*):
a case's outputs through both of cutecall's fronts against its reference
and, bit for bit, against the authors' own path on the same inputs."""

import jax

from corpus_checks import assert_close, assert_same


def torch_outputs(case, args) -> list:
    """What the torch call wrote (clones), in the case's output order."""
    return [args[i].clone() for i in case.torch_outputs]


def check_against_authors(case, jax_args_from_torch, bitwise: bool = True,
                          as_jax_layout=None) -> None:
    """Runs `case` through cutecall's torch front, the authors' torch path
    (fresh NaN-filled outputs, same seed: the same inputs) and cutecall's
    JAX front, eager and under ``jax.jit``, on the torch call's inputs
    (`jax_args_from_torch(args)`). Outputs match the reference within the
    case's tolerances and the authors' bit for bit (`bitwise`) or within
    them. `as_jax_layout(outputs)`: the torch outputs as the JAX call
    returns them (cuDNN's permuted views back to BHSD); default as they
    are."""
    import torch
    k, args = case.torch("cuda", 0)
    k(*args)
    ours = torch_outputs(case, args)
    for got, want in zip(ours, case.torch_reference(*args)):
        assert_close(got, want, case, "torch vs reference")

    _, theirs_args = case.torch("cuda", 0)
    case.authors_torch(*theirs_args)
    torch.cuda.synchronize()
    same = assert_same if bitwise else assert_close
    theirs = [theirs_args[i] for i in case.torch_outputs]
    for got, want in zip(ours, theirs):
        same(got, want, case, "torch vs authors")

    call, _ = case.jax(False, 0)
    jargs = jax_args_from_torch(args)
    positions = [i for i, a in enumerate(jargs) if hasattr(a, "shape")]

    def run(*arrays):
        full = list(jargs)
        for i, a in zip(positions, arrays):
            full[i] = a
        return call(*full)
    eager = jax.tree.leaves(call(*jargs))
    jitted = jax.tree.leaves(jax.jit(run)(*[jargs[i] for i in positions]))
    assert len(eager) == len(theirs), case.name
    if as_jax_layout is not None:
        theirs = as_jax_layout(theirs)
    for e, j, want in zip(eager, jitted, theirs):
        same(e, want, case, "JAX vs authors")
        same(j, want, case, "JAX jit vs authors")
