"""bench/external's part ``losses`` on the CPU: the feeding chain (each
output fed to the next call's input of its shape, nothing else kept) runs
the calls it says, its optimized HLO can be read, and the report's rows
have the shape ``tools/gpu/gpu ab`` tabulates. The GPU timing itself runs
on the device (bench/results/external.md)."""

import sys

import pytest

from shared import ROOT

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402


@pytest.fixture(scope="module")
def bench():
    sys.path.append(ROOT)
    try:
        from bench.external import losses_profile, losses_report
        yield losses_profile, losses_report
    finally:
        sys.path.remove(ROOT)


def gate(x, g, eps):
    return x * jax.nn.sigmoid(g) + eps


def test_the_feeding_chain_feeds_each_output_to_the_next_call(bench):
    profile, _ = bench
    x, g = jnp.full((4, 8), 2.0, jnp.float32), jnp.zeros((4, 8), jnp.float32)
    args = (x, g, 1.0)
    pairs = profile.feedable(args, jax.eval_shape(lambda a, b: gate(a, b, 1.0), x, g))
    assert pairs == [(0, 0)]  # the output takes x's place, not g's
    out = profile.feed_chain(gate, args, 3, pairs)()
    assert float(out[0, 0]) == ((2.0 * 0.5 + 1.0) * 0.5 + 1.0) * 0.5 + 1.0
    assert "HloModule" in profile.hlo_text(profile.feed_chain(gate, args, 2, pairs))


def test_an_output_of_another_shape_feeds_nothing(bench):
    profile, _ = bench
    x = jnp.zeros((4, 8), jnp.bfloat16)
    outs = (jax.ShapeDtypeStruct((4, 2), jnp.bfloat16), jax.ShapeDtypeStruct((4, 2), jnp.int32))
    assert profile.feedable((x,), outs) == []


def test_the_rows_are_what_gpu_ab_tabulates(bench):
    _, report = bench
    med = lambda v: {"median": v, "min": v, "all": [v]}  # noqa: E731
    rec = {"name": "repro.gate_vec8[f16 (8, 8)]", "errors": {"xla": "boom"},
           "paths": {"authors_torch": {"device_us": med(50.0), "busy_us": med(48.0)},
                     "cutecall_jax": {"span_us": med(100.0), "busy_us": med(49.0)}}}
    assert report.rows([rec]) == [
        {"path": "repro.gate_vec8 authors_torch", "us": 50.0, "busy_us": 48.0},
        {"path": "repro.gate_vec8 cutecall_jax", "us": 100.0, "busy_us": 49.0}]
    text = report.table([rec])
    assert "| 0.50x | 0.98x |" in text and "error: boom" in text
