"""The binding rule (cutecall._driver.binding): positional call arguments fill
the launcher's parameters that are neither the stream nor outputs, in order,
wherever the outputs sit -- the same in the JAX and torch fronts."""

from typing import Optional

import cuda.bindings.driver as cuda
import jax
import jax.numpy as jnp
import pytest
import torch

import cutecall
import cutecall.torch as ct
import cutlass
import cutlass.cute as cute
from cutecall._driver import signature as _signature
from cutecall._driver.outputs import candidates, placement
from cutecall.examples import signatures

f32 = jnp.float32


def s(*shape):
    return jax.ShapeDtypeStruct(shape, f32)


def rule(call, args, kwargs):
    """The binding rule alone, as ``CutlassCall`` binds a call whose
    outputs are named or where the rule puts them (these signatures have no
    body a placement question could trace)."""
    from cutecall.jax import _args
    outs = call._outputs(args)
    return call.launcher.bind(args, kwargs, num_outputs=outs[2] - len(outs[3]),
                              order=call.operand_order, output_names=call.output_params,
                              scalar_value=_args.scalar_value, is_array=_args.is_array)[0]


def slots(call, *args, **kwargs):
    """{parameter: (slot kind, index)} ((kind,) for stream, None, default)."""
    binding = rule(call, args, kwargs)
    view = [(s.kind.value, s.index) if s.kind.value in ("in", "out", "scalar")
            else (s.kind.value,) for s in binding.slots]
    return dict(zip([p.name for p in call.launcher.sig.params], view)), binding


# Signatures of real third-party launchers (bodies never run here).

def rmsnorm_like(mX: cute.Tensor, mW: Optional[cute.Tensor],
                 mB: Optional[cute.Tensor], mRes: Optional[cute.Tensor],
                 mO: cute.Tensor, mResO: Optional[cute.Tensor],
                 mRstd: Optional[cute.Tensor], mMean: Optional[cute.Tensor],
                 eps: cutlass.Float32, stream: cuda.CUstream):
    """QuACK's RMSNorm.__call__: optionals interleaved with outputs, a
    runtime scalar after them."""


def fa4_like(mQ: cute.Tensor, mK: cute.Tensor, mV: cute.Tensor,
             mO: cute.Tensor, mLSE: Optional[cute.Tensor],
             softmax_scale: cutlass.Float32,
             mCuSeqlensQ: Optional[cute.Tensor] = None,
             mCuSeqlensK: Optional[cute.Tensor] = None,
             window_size_left: cutlass.Int32 | int | None = None,
             stream: cuda.CUstream = None):
    """FA4's FlashAttentionForwardSm90.__call__ (abridged)."""


def test_unannotated_scalar_after_the_outputs_binds_to_its_parameter():
    f = lambda x, w, o, rstd, eps, stream: None  # noqa: E731
    call = cutecall.cutlass_call(f, output_shape_dtype=(s(4, 8), s(4)))
    bound, binding = slots(call, s(4, 8), s(8), 1e-6)
    assert bound == {"x": ("in", 0), "w": ("in", 1), "o": ("out", 0),
                     "rstd": ("out", 1), "eps": ("scalar", 0),
                     "stream": ("stream",)}
    assert binding.scalars[0].scalar_type == "Float32"
    # By keyword: the same binding, so the same compile.
    assert rule(call, (s(4, 8), s(8)), {"eps": 1e-6}) == binding


def test_quack_rmsnorm_signature_with_none_optionals():
    call = cutecall.cutlass_call(rmsnorm_like,
                                 output_shape_dtype=(s(4, 8), None, s(4), None))
    bound, _ = slots(call, s(4, 8), s(8), None, None, 1e-6)
    assert bound["mO"] == ("out", 0) and bound["mResO"] == ("out", 1)
    assert bound["mRstd"] == ("out", 2) and bound["mMean"] == ("out", 3)
    assert bound["mB"] == ("none",) and bound["eps"] == ("scalar", 0)


def test_fa4_signature_scalar_and_trailing_optionals():
    call = cutecall.cutlass_call(fa4_like, output_shape_dtype=(s(2, 4), s(2)))
    bound, _ = slots(call, s(2, 4), s(2, 4), s(2, 4), 0.125)
    assert bound["mO"] == ("out", 0) and bound["mLSE"] == ("out", 1)
    assert bound["softmax_scale"] == ("scalar", 0)
    assert bound["mCuSeqlensQ"] == ("default",)
    bound, _ = slots(call, s(2, 4), s(2, 4), s(2, 4), 0.125, s(3))
    assert bound["mCuSeqlensQ"] == ("in", 3) and bound["mO"] == ("out", 0)
    # The Int32 | int | None annotation takes a runtime scalar.
    bound, b = slots(call, s(2, 4), s(2, 4), s(2, 4), 0.125, None, None, 64)
    assert bound["window_size_left"] == ("scalar", 1)
    assert b.scalars[1].scalar_type == "Int32"


def test_a_scalar_never_fills_a_tensor_parameter(compiles):
    call = cutecall.cutlass_call(signatures.scale_outputs_first,
                                 output_shape_dtype=s(8),
                                 operand_order="outputs_first")
    with pytest.raises(TypeError, match=r"argument 'x' \(position 0\) of "
                                        r"'scale_outputs_first' is the float 2.0, but "
                                        r"parameter 'x' is annotated as a tensor"):
        call.lower(2.0)
    assert compiles() == 0


def test_an_array_never_fills_a_scalar_parameter():
    call = cutecall.cutlass_call(signatures.affine, output_shape_dtype=s(8))
    with pytest.raises(TypeError, match=r"launcher 'affine' takes 2 tensor parameter\(s\) "
                                        r"\(x, out\), but the call passes 2 array\(s\) and 1 "
                                        r"output\(s\)"):
        call.lower(s(8), s(8), 1, 2, False)


def test_equally_good_bindings_are_ambiguous():
    # By position the output would land on `eps`, a scalar: no fit. By rank
    # o1 and o2 are equally good.
    def launcher(x: cute.Tensor, eps: cutlass.Float32, o1: cute.Tensor = None,
                 o2: cute.Tensor = None):
        pass
    sig = _signature.analyze(launcher)
    with pytest.raises(TypeError, match=r"binds to its parameters \(x, eps, o1, o2\) "
                                        r"in more than one way .*Annotate"):
        placement.place_outputs(sig, [0, 1, 2, 3],
                                [candidates.ARRAY, candidates.SCALAR_ARG], 1,
                                "inputs_first", [s(4), 2.0])


def combine_like(mO_partial: cute.Tensor, mLSE_partial: cute.Tensor,
                 mO: cute.Tensor, mLSE: Optional[cute.Tensor] = None,
                 cu_seqlens: Optional[cute.Tensor] = None,
                 seqused: Optional[cute.Tensor] = None,
                 stream: cuda.CUstream = None):
    """FA4's FlashAttentionForwardCombine.__call__ (abridged): an optional
    trailing output."""


def test_outputs_follow_the_last_array_by_position():
    # FA4 calls combine(out_partial, lse_partial, out, lse): the outputs are
    # the parameters right after the inputs, defaults or not.
    call = cutecall.cutlass_call(combine_like, output_shape_dtype=(s(2, 4), s(2)))
    bound, _ = slots(call, s(3, 2, 4), s(3, 2))
    assert bound["mO_partial"] == ("in", 0) and bound["mLSE_partial"] == ("in", 1)
    assert bound["mO"] == ("out", 0) and bound["mLSE"] == ("out", 1)
    assert bound["cu_seqlens"] == ("default",)
    # One output: mO; mLSE stays at its default (None).
    call = cutecall.cutlass_call(combine_like, output_shape_dtype=s(2, 4))
    bound, _ = slots(call, s(3, 2, 4), s(3, 2))
    assert bound["mO"] == ("out", 0) and bound["mLSE"] == ("default",)


def test_outputs_first_mirrors_the_rule():
    call = cutecall.cutlass_call(signatures.scale_outputs_first,
                                 output_shape_dtype=s(8),
                                 operand_order="outputs_first")
    bound, _ = slots(call, s(8))
    assert bound["out"] == ("out", 0) and bound["x"] == ("in", 0)


def test_positional_and_keyword_scalars_compile_once(compiles):
    call = cutecall.cutlass_call(signatures.axpby_stream_last,
                                 output_shape_dtype=s(64))
    a = call.lower(s(64), s(64), 2.0, 3.0).as_text()
    n = compiles()
    b = call.lower(s(64), s(64), alpha=2.0, beta=3.0).as_text()
    c = call.lower(s(64), s(64), 2.0, beta=3.0).as_text()
    assert compiles() == n and a == b == c


def test_annotations_are_read_through_unions_and_strings():
    sig = _signature.analyze(fa4_like)
    kinds = {p.name: (p.kind, p.annotated, p.scalar_type) for p in sig.params}
    assert kinds["mLSE"] == ("tensor", True, None)
    assert kinds["softmax_scale"] == ("scalar", False, "Float32")
    assert kinds["window_size_left"] == ("scalar", False, "Int32")
    assert kinds["stream"][0] == "stream"

    def stringly(x: "cute.Tensor", eps: "cutlass.Float32",
                 b: "Optional[cute.Tensor]" = None):
        pass
    kinds = {p.name: (p.kind, p.annotated) for p in _signature.analyze(stringly).params}
    assert kinds == {"x": ("tensor", True), "eps": ("scalar", False),
                     "b": ("tensor", True)}


# -- the torch front ----------------------------------------------------------

def test_torch_outputs_are_placed_by_the_same_rule():
    assert ct.kernel(rmsnorm_like, outputs=4).output_params == \
        ["mO", "mResO", "mRstd", "mMean"]
    assert ct.kernel(fa4_like, outputs=2).output_params == ["mO", "mLSE"]
    assert ct.kernel(signatures.scale_no_stream).output_params == ["out"]
    named = ct.kernel(lambda x, w, o, rstd, eps: None, outputs=("o", "rstd"))
    assert named.output_params == ["o", "rstd"]
    with pytest.raises(ValueError, match="outputs names 'nope'"):
        ct.kernel(fa4_like, outputs=("nope",))


def test_torch_none_and_scalars_bind_positionally():
    # The outputs the rule puts (test above) named: a bodiless signature
    # has no trace to ask where they are.
    k = ct.kernel(rmsnorm_like, outputs=("mO", "mResO", "mRstd", "mMean"))
    x, w, o = torch.ones(4, 8), torch.ones(8), torch.ones(4, 8)
    rstd = torch.ones(4)
    args = (x, w, None, None, o, None, rstd, None, 1e-6)
    props = [ct._describe.tensor_props(a) if isinstance(a, torch.Tensor) else None
             for a in args]
    spec, uses = k.spec_of(args, props, "sm_90a")
    assert [slot.kind.value for slot in spec.slots] == \
        ["in", "in", "none", "none", "in", "none", "in", "none", "scalar", "stream"]
    # 0: input tensor, 3: output tensor, 2: None, 1: scalar.
    assert [int(u.kind) for u in uses] == [0, 0, 2, 2, 3, 2, 3, 2, 1]
    assert spec.scalar_types == ("Float32",)
    with pytest.raises(TypeError, match="no binding fits"):
        k.spec_of((x, w, None, None, 1e-6, None, rstd, None, 1e-6),
                     props, "sm_90a")


def cross_entropy_bwd_like(mX: cute.Tensor, mTarget: cute.Tensor,
                           mDLoss: cute.Tensor, mdX: cute.Tensor,
                           mLSE: cute.Tensor, mWeight: Optional[cute.Tensor],
                           ignore_index: cutlass.Int32, stream: cuda.CUstream):
    """QuACK's CrossEntropyBackward.__call__: the output between inputs."""


def test_output_params_name_outputs_that_sit_between_inputs():
    call = cutecall.cutlass_call(cross_entropy_bwd_like,
                                 output_shape_dtype=s(4, 8),
                                 output_params=("mdX",))
    bound, _ = slots(call, s(4, 8), s(4), s(4), s(4), None, -100)
    assert bound["mdX"] == ("out", 0) and bound["mLSE"] == ("in", 3)
    assert bound["mWeight"] == ("none",) and bound["ignore_index"] == ("scalar", 0)
    for bad, match in [(("nope",), "names 'nope'"), (("mdX", "mdX"), "distinct"),
                       (("mX", "mdX"), "must name 1")]:
        c = cutecall.cutlass_call(cross_entropy_bwd_like, output_shape_dtype=s(4, 8),
                                  output_params=bad)
        with pytest.raises(TypeError, match=match):
            rule(c, (s(4, 8), s(4), s(4), s(4), None, -100), {})
    with pytest.raises(TypeError, match="sequence of parameter names"):
        cutecall.cutlass_call(cross_entropy_bwd_like, output_shape_dtype=s(4, 8),
                              output_params="mdX")
