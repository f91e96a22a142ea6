"""Pytree arguments on the GPU, through both fronts: results against the
reference; runtime scalars inside a NamedTuple change per call with no new
compile and, in torch, no new specialization (the C++ launcher reads them
from the NamedTuple on its fast path); a compile-time field is another
specialization; an output inside a dict is written in place (torch) or
through an aliased input leaf (JAX)."""

import numpy as np
import pytest

import cutecall
from cutecall.examples import pytrees as pt

pytestmark = pytest.mark.gpu


def test_jax_namedtuple_scalars_and_an_output_in_a_dict(compiles):
    import jax
    import jax.numpy as jnp
    x = jax.random.normal(jax.random.key(0), (1000,), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (1000,), jnp.float32)
    add = cutecall.cutlass_call(pt.scaled_add, output_shape_dtype=lambda x, e: x)
    # alpha is a host value when the call is traced (a leaf of a jit
    # argument would be a tracer: the call says so, see test_pytrees.py).
    for alpha in (2.0, -0.5, 3.25):
        got = jax.jit(lambda x, b: add(x, pt.Epilogue(bias=b, alpha=alpha)))(x, b)
        np.testing.assert_allclose(got, pt.reference(x, b, alpha), rtol=1e-5, atol=1e-6)  # the kernel fuses a*x+b
    got = add(x, pt.Epilogue(bias=None, alpha=-1.0, relu=True))  # eager
    np.testing.assert_allclose(got, pt.reference(x, None, -1.0, True), rtol=1e-5, atol=1e-6)  # the kernel fuses a*x+b
    assert compiles() == 2  # one per compile-time form, none per alpha
    into = cutecall.cutlass_call(
        pt.scaled_add_into, output_shape_dtype=lambda x, e, d: x,
        input_output_aliases={(2, "out"): 0})
    got = jax.jit(lambda x, b, d: into(x, pt.Epilogue(bias=b, alpha=0.5), d))(
        x, b, {"out": jnp.zeros_like(x)})
    np.testing.assert_allclose(got, pt.reference(x, b, 0.5), rtol=1e-5, atol=1e-6)  # the kernel fuses a*x+b


def test_torch_namedtuple_scalars_stay_on_the_fast_path(compiles):
    torch = pytest.importorskip("torch")
    import cutecall.torch as ct
    x, b = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
    out = torch.empty_like(x)
    k = ct.kernel(pt.scaled_add)
    for alpha in (2.0, -0.5, 3.25):
        k(x, pt.Epilogue(bias=b, alpha=alpha), out)
        np.testing.assert_allclose(out.cpu(), pt.reference(x.cpu(), b.cpu(), alpha),
                                   rtol=1e-5, atol=1e-6)  # the kernel fuses a*x+b
    assert compiles() == 1 and len(k.launch) == 1  # no miss per alpha
    k(x, pt.Epilogue(bias=b, alpha=1.0, relu=True), out)
    np.testing.assert_allclose(out.cpu(), pt.reference(x.cpu(), b.cpu(), 1.0, True),
                               rtol=1e-5, atol=1e-6)  # the kernel fuses a*x+b
    assert len(k.launch) == 2  # relu is compiled in: another specialization
    into = ct.kernel(pt.scaled_add_into, outputs=0)
    sink = {"out": torch.zeros_like(x)}
    into(x, pt.Epilogue(alpha=-2.0), sink)
    np.testing.assert_allclose(sink["out"].cpu(), pt.reference(x.cpu(), None, -2.0),
                               rtol=1e-5, atol=1e-6)  # the kernel fuses a*x+b
    dc = ct.kernel(pt.scaled_add_dc)
    dc(x, pt.Scales(alpha=0.25, bias=b), out)
    dc(x, pt.Scales(alpha=0.75, bias=b), out)
    np.testing.assert_allclose(out.cpu(), pt.reference(x.cpu(), b.cpu(), 0.75), rtol=1e-5, atol=1e-6)  # the kernel fuses a*x+b
    assert len(dc.launch) == 1
