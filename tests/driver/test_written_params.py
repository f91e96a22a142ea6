"""What a traced kernel writes (``mlir_writes``, on MLIR in the generic form
the DSL's module prints), by parameter (``outputs.writes``), and where the
outputs go from there (``placement.place_written``); annotated NamedTuples
(``pytree.as_annotated``). No DSL compile: the modules are written here, in
the shape the DSL traces them (host function of pointers, ``make_view``,
``cuda.launch_ex`` into a ``cuda.kernel``)."""

from typing import NamedTuple, Optional


from cutecall._driver import pytree, signature
from cutecall._driver.outputs import candidates, mlir_writes, placement
from cutecall._driver.outputs.writes import ParamWrites

PTR = "!cute.ptr<f32, gmem, align<16>>"
MEM = "!memref_gmem_f32"


def module(kernel_body: str, kernel_args: int = 3, host_extra: str = "") -> str:
    """A host entry taking 3 pointers (operands 0, 1, 2), viewing them as
    tensors and launching ``k`` on them; ``kernel_body`` uses %a0.. %a2."""
    args = ", ".join(f"%a{i}: {MEM}" for i in range(kernel_args))
    views = "\n".join(
        f'    %v{i} = "cute.make_view"(%arg{i + 1}, %lay) : ({PTR}, !cute.layout<"(?):(1)">) -> {MEM}'
        for i in range(3))
    return f'''{MEM} = !cute.memref<f32, gmem, align<16>, "(?):(1)">
"builtin.module"() ({{
  "gpu.module"() <{{sym_name = "kernels"}}> ({{
    "cuda.kernel"() <{{function_type = () -> (), sym_name = "k"}}> ({{
    ^bb0({args}):
{kernel_body}
      "cuda.return"() : () -> ()
    }}) : () -> ()
  }}) : () -> ()
  "func.func"() <{{function_type = () -> i32, sym_name = "entry"}}> ({{
  ^bb0(%arg0: !cuda.stream, %arg1: {PTR}, %arg2: {PTR}, %arg3: {PTR}, %arg4: i32):
    %lay = "cute.make_layout"(%arg4) : (i32) -> !cute.layout<"(?):(1)">
{views}
{host_extra}
    %r = "cuda.launch_ex"(%cfg, %v1, %v0, %v2) <{{callee = @kernels::@k}}> : (!cuda.launch_cfg<max_attrs = 17>, {MEM}, {MEM}, {MEM}) -> !cuda.result
    "func.return"(%c0) : (i32) -> ()
  }}) {{llvm.emit_c_interface}} : () -> ()
}}) : () -> ()
'''


def writes(text):
    return mlir_writes.analyze_text(text, "entry")


def test_a_store_into_a_kernel_argument_is_its_operand():
    # The launch passes operand 1 first: kernel argument %a0 is operand 1.
    body = f'''      %c = "cute.make_coord"(%i) : (i32) -> !cute.coord<"?">
      %x = "cute.memref.load"(%a1, %c) : ({MEM}, !cute.coord<"?">) -> f32
      "cute.memref.store"(%a0, %c, %x) : ({MEM}, !cute.coord<"?">, f32) -> ()'''
    assert writes(module(body)) == mlir_writes.Writes(frozenset({1}))


def test_a_copy_writes_its_destination_and_a_tma_store_its_atom():
    body = f'''      %s = "cute.make_view"(%p, %l) : (!cute.ptr<f32, smem, align<16>>, !cute.layout<"(8):(1)">) -> !cute.memref<f32, smem, align<16>, "(8):(1)">
      "cute.copy"(%atom, %a2, %s) : (!copy_simt, {MEM}, !cute.memref<f32, smem, align<16>, "(8):(1)">) -> ()
      "cute.copy"(%atom, %s, %a1) : (!copy_simt, !cute.memref<f32, smem, align<16>, "(8):(1)">, {MEM}) -> ()
      %t:2 = "cute_nvgpu.atom.make_non_exec_tiled_tma_store"(%a0) : ({MEM}) -> (!tma, !cute.coord_tensor<"(?)", "(?):(1@0)">)
      "cute.copy"(%t#0, %s, %crd) : (!cute_nvgpu.atom.tma_store<f32>, !cute.memref<f32, smem, align<16>, "(8):(1)">, !cute.coord_tensor<"(?)", "(?):(1@0)">) -> ()'''
    w = writes(module(body))
    assert w.written == {0, 1}  # a1 is operand 0, a0 operand 1; a2 is only read
    assert 2 not in w.written


def test_a_loop_carries_the_tensor_it_writes_position_by_position():
    body = f'''      %r:2 = "scf.for"(%lb, %ub, %st, %a2, %a1) ({{
      ^bb0(%iv: i32, %t0: {MEM}, %t1: {MEM}):
        "cute.memref.store"(%t1, %c, %x) : ({MEM}, !cute.coord<"?">, f32) -> ()
        "scf.yield"(%t0, %t1) : ({MEM}, {MEM}) -> ()
      }}) : (i32, i32, i32, {MEM}, {MEM}) -> ({MEM}, {MEM})'''
    assert writes(module(body)).written == {0}  # %t1 is %a1: operand 0


def test_inline_ptx_that_stores_is_a_maybe_or_unattributed():
    asm = f'''      %q = "cute.get_iter"(%a2) : ({MEM}) -> {PTR}
      "nvvm.inline_ptx"(%q, %n) <{{ptxCode = "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], $2;"}}> : ({PTR}, i32) -> ()'''
    w = writes(module(asm))
    assert w.maybe == {2} and not w.written and not w.unattributed
    lost = '''      "llvm.inline_asm"(%addr) <{asm_string = "st.global.f32 [$0], 1.0;"}> : (i64) -> ()'''
    assert writes(module(lost)).unattributed
    harmless = '''      %y = "llvm.inline_asm"(%z) <{asm_string = "cvt.rn.bf16x2.f32 $0, $2, $1;"}> : (f32) -> i32'''
    assert writes(module(harmless)) == mlir_writes.Writes()


def test_inline_ptx_at_an_address_made_of_a_pointer_is_attributed():
    # out.iterator.toint() + 4 * i, stored by st.global: operand 1 (%a0).
    body = f'''      %q = "cute.get_iter"(%a0) : ({MEM}) -> {PTR}
      %b = "cute.ptrtoint"(%q) : ({PTR}) -> i64
      %o = "arith.muli"(%i, %four) : (i64, i64) -> i64
      %addr = "arith.addi"(%b, %o) : (i64, i64) -> i64
      "llvm.inline_asm"(%addr, %x) <{{asm_string = "st.global.f32 [$0], $1;", constraints = "l,f", has_side_effects}}> : (i64, f32) -> ()'''
    w = writes(module(body))
    assert w.maybe == {1} and not w.unattributed
    # An integer compared (an alignment check) carries nothing further.
    check = f'''      %q = "cute.get_iter"(%a0) : ({MEM}) -> {PTR}
      %b = "cute.ptrtoint"(%q) : ({PTR}) -> i64
      %r = "arith.remui"(%b, %sixteen) : (i64, i64) -> i64
      "llvm.inline_asm"(%r, %x) <{{asm_string = "st.global.f32 [$0], $1;", constraints = "l,f", has_side_effects}}> : (i64, f32) -> ()'''
    assert writes(module(check)).unattributed


def test_outputs_no_write_reaches_are_unaccounted_when_an_address_was_lost():
    lost = ParamWrites(frozenset({"lse"}), frozenset(), True)
    assert lost.unaccounted(["out", "lse"]) == ["out"]
    assert lost.unaccounted(["lse"]) == []
    assert ParamWrites(frozenset(), frozenset(), False).unaccounted(["out"]) == []


def test_shapes_read_from_a_tensor_do_not_carry_it():
    # An index computed from a1's shape, stored into a0: only a0 is written.
    body = f'''      %l1 = "cute.get_layout"(%a1) : ({MEM}) -> !cute.layout<"(?):(1)">
      %sh = "cute.get_shape"(%l1) : (!cute.layout<"(?):(1)">) -> !cute.shape<"(?)">
      %c = "cute.make_coord"(%sh) : (!cute.shape<"(?)">) -> !cute.coord<"?">
      "cute.memref.store"(%a0, %c, %x) : ({MEM}, !cute.coord<"?">, f32) -> ()'''
    assert writes(module(body)).written == {1}


def test_no_entry_function_says_nothing():
    assert mlir_writes.analyze_text('"builtin.module"() ({\n}) : () -> ()\n').unattributed


def test_contradiction_needs_an_unwritten_output_and_another_written():
    w = ParamWrites(frozenset({"out"}), frozenset(), False)
    assert w.contradicts(["y"]) and not w.contradicts(["out"])
    assert not ParamWrites(frozenset(), frozenset(), False).contradicts(["y"])
    assert not ParamWrites(frozenset({"out"}), frozenset(), True).contradicts(["y"])


def sig_of(fn):
    return signature.analyze(fn)


def first(stream, out, x, y):
    pass


def two_outs(stream, a, b, c, d):
    pass


def test_place_written_puts_the_outputs_where_the_kernel_writes():
    sig = sig_of(first)
    kinds = [candidates.ARRAY, candidates.ARRAY]
    assert placement.place_written(sig, [1, 2, 3], kinds, 1, "inputs_first",
                                   frozenset({"out"})) == (1,)
    # Nothing written that fits: the rule decides.
    assert placement.place_written(sig, [1, 2, 3], kinds, 1, "inputs_first",
                                   frozenset({"nope"})) is None


def test_place_written_keeps_the_rule_when_its_outputs_are_written():
    sig = sig_of(two_outs)
    kinds = [candidates.ARRAY, candidates.ARRAY]
    # An in-place input (a) is written too: the rule's c, d stand.
    assert placement.place_written(sig, [1, 2, 3, 4], kinds, 2, "inputs_first",
                                   frozenset({"a", "c", "d"})) == (3, 4)
    # The outputs written are b and c: the best placement among them.
    assert placement.place_written(sig, [1, 2, 3, 4], kinds, 2, "inputs_first",
                                   frozenset({"b", "c"})) == (2, 3)


class Pair(NamedTuple):
    a: object
    b: object = None


def test_a_plain_tuple_becomes_the_annotated_namedtuple():
    assert pytree.as_annotated((1, 2), Pair) == Pair(1, 2)
    assert pytree.as_annotated([1], Optional[Pair]) == Pair(1, None)
    assert pytree.as_annotated((1, 2, 3), Pair) == (1, 2, 3)  # does not fit
    assert pytree.as_annotated((1, 2), None) == (1, 2)


def annotated(stream, x, pair: Optional[Pair] = None):
    pass


def test_the_signature_knows_the_namedtuple_class():
    assert sig_of(annotated).params[2].container is Pair
    assert sig_of(first).params[2].container is None


def test_copy_atom_call_and_src_dst_copies_write_their_destination():
    body = f'''      "cute.copy_atom_call"(%atom, %a2, %a1, %a0) <{{operandSegmentSizes = array<i32: 1, 1, 1, 1>}}> : (!copy_simt, {MEM}, {MEM}, {MEM}) -> ()
      "lir.copy"(%a2, %a0) : ({MEM}, {MEM}) -> ()'''
    # copy_atom_call writes a1 (operand 0; a0 is its predicate); lir.copy a0.
    assert writes(module(body)).written == {0, 1}


def symmetric(stream, mA, mB, mD, mC, epilogue_args, scheduler_args=None):
    pass


def test_a_parameter_written_only_through_a_leaf_is_a_container():
    from types import SimpleNamespace
    from cutecall._driver.outputs.writes import param_writes
    operands = [SimpleNamespace(name=n) for n in
                ("mA", "mB", "mD", "epilogue_args.mAuxOut", "epilogue_args.mBias")]
    spec = SimpleNamespace(param_names=["mA", "mB", "mD", "epilogue_args"], operands=operands)
    found = param_writes(spec, mlir_writes.Writes(frozenset({2, 3})))
    assert found.written == {"mD", "epilogue_args"}
    assert found.in_leaves == {"epilogue_args"}
    assert param_writes(spec, mlir_writes.Writes(frozenset({2}))).in_leaves == set()


def test_a_tensor_output_goes_to_a_whole_written_tensor_before_a_container():
    # QuACK's symmetric GEMM writes mD and epilogue_args.mAuxOut (D^T): the
    # convention alone ranks epilogue_args (fewer parameters after it) first.
    sig = sig_of(symmetric)
    written = frozenset({"mD", "epilogue_args"})
    assert placement.written_params(sig, [1, 2, 3, 4, 5, 6], 1, "sym", written) == \
        ["epilogue_args"]
    assert placement.written_params(sig, [1, 2, 3, 4, 5, 6], 1, "sym", written,
                                    frozenset({"epilogue_args"})) == ["mD"]
    # Both outputs asked for: both written parameters, the container too.
    assert placement.written_params(sig, [1, 2, 3, 4, 5, 6], 2, "sym", written,
                                    frozenset({"epilogue_args"})) == ["mD", "epilogue_args"]


def test_the_rule_gives_way_when_its_output_is_written_only_through_a_leaf():
    # The JAX front's binding (kinds from the call's values): the rule puts
    # the one output at epilogue_args, which the trace saw written only
    # through epilogue_args.mAuxOut; mD, written whole, is the output.
    import numpy as np
    from cutecall._driver import binding
    sig = sig_of(symmetric)
    kinds = [candidates.ARRAY, candidates.ARRAY, candidates.NONE_ARG, candidates.CONTAINER]
    written = frozenset({"mD", "epilogue_args"})
    assert placement.place_written(sig, [1, 2, 3, 4, 5, 6], kinds, 1, "inputs_first",
                                   written) == (5,)
    assert placement.place_written(sig, [1, 2, 3, 4, 5, 6], kinds, 1, "inputs_first",
                                   written, in_leaves=frozenset({"epilogue_args"})) == (3,)
    a = np.zeros((4, 4), np.float32)
    evidence = placement.Evidence(written, frozenset({"epilogue_args"}))
    assert binding.output_positions(sig, [1, 2, 3, 4, 5, 6], [a, a, None, (a,)], 1,
                                    "inputs_first", None, evidence) == (3,)
