"""Bad input through the torch front (on a machine without a GPU, through
``Kernel.compile`` and ``TensorDesc``): each gets an error naming the
argument and its value, before any compile where the call alone shows it is
bad (docs/reliability.md, "Bad input")."""

import re
import types

import pytest
import torch

import cutecall
import cutecall.torch as ct
from cutecall.examples import kernels
from cutecall.examples import torch_kernels as tk


def desc(shape, dtype=torch.float32, strides=None):
    return ct.TensorDesc(shape, dtype, strides)


@pytest.mark.parametrize("strides, view", [((0, 1), "expand()"), ((1, 1), "as_strided")])
def test_an_overlapping_output_is_refused_naming_it(strides, view, compiles):
    k = ct.kernel(tk.axpby_2d)
    x = desc((4, 8))
    out = desc((4, 8), strides=strides)
    with pytest.raises(ValueError, match=r"output 'out' of 'axpby_2d' \(shape \(4, 8\), "
                                         r"strides \(%d, 1\)\) has elements that several "
                                         r"indices reach" % strides[0]):
        k.compile(x, x, out, 2.0)
    assert compiles() == 0


def test_an_expanded_input_is_fine(compiles):
    k = ct.kernel(tk.axpby_2d)
    row = desc((4, 8), strides=(0, 1))  # a broadcast row, read only
    k.compile(row, row, desc((4, 8)), 2.0)
    assert compiles() == 1


def test_overlap_is_what_cpp_signs_apart():
    owned = ct._describe.tensor_props(desc((4, 8)))
    expanded = ct._describe.tensor_props(desc((4, 8), strides=(0, 1)))
    assert not owned.overlap and expanded.overlap


def test_a_rank0_tensor_desc_is_refused():
    with pytest.raises(ValueError, match=r"TensorDesc shape \(\): rank-0 tensors are not "
                                         r"supported; describe a shape-\(1,\) tensor"):
        desc(())


def test_a_complex_tensor_names_the_argument_and_dtype():
    # A CUDA tensor as check_tensor sees it (this machine has no GPU).
    t = types.SimpleNamespace(device=torch.device("cuda", 0), dtype=torch.complex64,
                              dim=lambda: 1)
    with pytest.raises(TypeError, match=r"argument 'a' of 'add3' has dtype "
                                        r"torch.complex64, which has no CuTe DSL type"):
        ct._describe.check_tensor(t, "argument 'a' of 'add3'", None)


def test_a_rank_mismatch_names_the_odd_argument(compiles):
    k = ct.kernel(tk.axpby_2d)
    with pytest.raises(cutecall.CompileError,
                       match=r"argument 'y' is float32\[8\] but 'x', 'out' are rank 2 "
                             r"\(the call's arrays differ in rank\); the DSL says"):
        k.compile(desc((8, 8)), desc((8,)), desc((8, 8)), 2.0)


def test_a_plain_function_is_refused_by_name(compiles):
    def not_jitted(a, b, c):
        pass
    with pytest.raises(TypeError, match=r"launcher 'not_jitted' .* is not a @cute.jit"):
        ct.kernel(not_jitted).compile(desc((8,)), desc((8,)), desc((8,)))
    assert compiles() == 0


def test_the_readme_example_guards_its_extents_with_dims():
    add = ct.kernel(kernels.vector_add, dims={"a": ("n",), "b": ("n",), "c": ("n",)})
    with pytest.raises(ValueError, match=r"operand 'b' dim 0 = 10 must equal operand "
                                         r"'a' dim 0 = 4096"):
        add.compile(desc((4096,)), desc((10,)), desc((4096,)))


def test_1d_tensors_into_a_2d_kernel_name_the_arguments_and_rank(compiles):
    """A 2-D kernel's first call with 1-D tensors: the launcher's own
    ``m, n = out.shape`` fails; the first line names the array that line
    reads and its rank, and the line's place."""
    k = ct.kernel(tk.axpby_2d)
    with pytest.raises(cutecall.CompileError) as e:
        k.compile(desc((8,)), desc((8,)), desc((8,)), 2.0)
    first = str(e.value).splitlines()[0]
    assert re.match(r"cutecall: kernel 'axpby_2d' failed to compile for sm_\w+ at "
                    r"\S*torch_kernels.py:\d+ \(in axpby_2d\): argument 'out' is rank 1 "
                    r"\(float32\[8\]\) but the kernel unpacks 2 extents from a shape: it "
                    r"likely takes rank-2 arrays", first), first
    assert "not enough values to unpack" in first  # the DSL's words follow


def test_1d_tensors_into_a_users_2d_kernel_name_the_unpacked_one(compiles):
    """In the user's own launcher the failing line is known: the argument
    it unpacks is the one named."""
    import cuda.bindings.driver as cuda
    import cutlass
    import cutlass.cute as cute

    @cute.jit
    def users_axpby(stream: cuda.CUstream, x: cute.Tensor, y: cute.Tensor,
                    out: cute.Tensor, alpha: cutlass.Float32):
        m, n = out.shape
        tk._axpby_2d_kernel(x, y, out, alpha).launch(
            grid=(n, m, 1), block=(128, 1, 1), stream=stream)

    k = ct.kernel(users_axpby)
    with pytest.raises(cutecall.CompileError,
                       match=r"^cutecall: kernel 'users_axpby' failed to compile for "
                             r"sm_\w+ at \S*test_bad_input_torch.py:\d+ \(in users_axpby\): "
                             r"argument 'out' is rank 1 \(float32\[8\]\) but the "
                             r"kernel unpacks 2 extents"):
        k.compile(desc((8,)), desc((8,)), desc((8,)), 2.0)


def test_a_complex_tensor_is_named_before_compiling(compiles):
    """Ahead of time (meta tensors, TensorDesc-free): the argument, its
    dtype, before anything is measured or compiled."""
    k = ct.kernel(tk.add3)
    c = torch.empty(4, dtype=torch.complex64, device="meta")
    f = torch.empty(4, device="meta")
    with pytest.raises(TypeError) as e:
        k.compile(f, c, f)
    assert str(e.value).splitlines()[0].startswith(
        "cutecall: argument 'b' of 'add3' has dtype torch.complex64, which has no "
        "CuTe DSL type")
    assert compiles() == 0
