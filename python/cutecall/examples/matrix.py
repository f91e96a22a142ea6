"""2-D example kernels: ``scale_bias_act`` (``act(alpha * x + bias)``:
constexprs and broadcasting), ``transpose`` (through a padded shared-memory
tile) and ``row_sum`` (a warp-shuffle reduction).

Launchers follow NVIDIA's ``cutlass.jax.cutlass_call`` convention
(``launcher(stream, *inputs, *outputs, **constexprs)``); see
:mod:`cutecall.examples.kernels` for the conventions every example shares.
The DSL re-parses kernel sources, so kernels live in real source files.
"""

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
from cutlass.memory import SmemAllocator

__all__ = ["scale_bias_act", "transpose", "row_sum"]


# =============================================================================
# 3. scale_bias_act
# =============================================================================

_SBA_TILE = (32, 64)  # (rows, cols) per block
# Thread arrangement inside a block tile: 8 rows x 32 columns, consecutive
# thread ids along the contiguous (column) dimension -> coalesced accesses.
_SBA_THREADS = (8, 32)


@cute.kernel
def _scale_bias_act_kernel(
    mX: cute.Tensor,
    mBias: cute.Tensor,  # (M, N) broadcast view of the (N,) bias: stride (0, 1)
    mOut: cute.Tensor,
    alpha: cutlass.Constexpr,
    relu: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bm, bn, _ = cute.arch.block_idx()

    thr_layout = cute.make_layout(_SBA_THREADS, stride=(_SBA_THREADS[1], 1))
    coord = (bm, bn)
    # local_tile: this block's (32, 64) window; local_partition: this thread's
    # (4, 2) elements of it, 8 rows / 32 columns apart.
    tX = cute.local_partition(cute.local_tile(mX, _SBA_TILE, coord), thr_layout, tidx)
    tB = cute.local_partition(
        cute.local_tile(mBias, _SBA_TILE, coord), thr_layout, tidx
    )
    tO = cute.local_partition(
        cute.local_tile(mOut, _SBA_TILE, coord), thr_layout, tidx
    )
    # Same partitioning of the identity tensor gives each element's (m, n).
    tCrd = cute.local_partition(
        cute.local_tile(cute.make_identity_tensor(mOut.shape), _SBA_TILE, coord),
        thr_layout,
        tidx,
    )

    for i in cutlass.range_constexpr(cute.size(tO)):
        if cute.elem_less(tCrd[i], mOut.shape):
            v = cutlass.Float32(alpha) * tX[i].to(cutlass.Float32) + tB[i].to(
                cutlass.Float32
            )
            if cutlass.const_expr(relu):
                v = cute.arch.fmax(v, cutlass.Float32(0.0))
            tO[i] = v.to(mOut.element_type)


@cute.jit
def scale_bias_act(
    stream: cuda.CUstream,
    x: cute.Tensor,
    bias: cute.Tensor,
    out: cute.Tensor,
    *,
    alpha: cutlass.Constexpr,
    relu: cutlass.Constexpr,
):
    """``out = alpha * x + bias`` (row-broadcast bias), then ``max(., 0)`` if ``relu``.

    Inputs: ``x``: 2-D ``(M, N)``; ``bias``: 1-D ``(N,)``. Any float dtypes
    (math is done in float32).
    Outputs: ``out``: 2-D ``(M, N)``, any float dtype.
    Constexprs: ``alpha`` (Python float, baked into the kernel), ``relu``
    (bool; the ReLU is removed at compile time when False).
    Any ``M``, ``N`` (``N`` up to 65535 * 64, the grid.y limit); accesses
    are bounds-checked, scalar and coalesced.
    """
    M, N = out.shape
    # Broadcasting in CuTe is just a layout with a zero stride: the (N,) bias
    # is viewed as an (M, N) tensor whose row stride is 0.  No copy is made.
    bias_mn = cute.make_tensor(
        bias.iterator, cute.make_layout((M, N), stride=(0, bias.stride[0]))
    )
    grid = (
        cute.ceil_div(M, _SBA_TILE[0]),  # grid.x: up to 2^31-1 row tiles
        cute.ceil_div(N, _SBA_TILE[1]),  # grid.y: up to 65535 column tiles
        1,
    )
    if M > 0 and N > 0:
        _scale_bias_act_kernel(x, bias_mn, out, alpha, relu).launch(
            grid=grid,
            block=(_SBA_THREADS[0] * _SBA_THREADS[1], 1, 1),
            stream=stream,
        )


# =============================================================================
# 4. transpose
# =============================================================================

_TR_TILE = 32  # square tile edge
_TR_ROWS = 8  # thread rows per block (block = 32 x 8 threads)


@cute.kernel
def _transpose_kernel(mX: cute.Tensor, mOut: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bm, bn, _ = cute.arch.block_idx()
    T = _TR_TILE
    thr_layout = cute.make_layout((_TR_ROWS, T), stride=(T, 1))

    # Shared tile with one padding element per row: (32, 32):(33, 1). Reading
    # it column-wise later then hits 32 different banks.
    smem = SmemAllocator()
    sX = smem.allocate_tensor(
        mX.element_type, cute.make_layout((T, T), stride=(T + 1, 1)), 16
    )
    # The same storage viewed transposed, (n, m) -> offset m*33 + n.
    sXt = cute.make_tensor(sX.iterator, cute.make_layout((T, T), stride=(1, T + 1)))

    # Phase 1: x[bm*32 : , bn*32 :] -> sX, threads along the contiguous n.
    tXg = cute.local_partition(cute.local_tile(mX, (T, T), (bm, bn)), thr_layout, tidx)
    tXc = cute.local_partition(
        cute.local_tile(cute.make_identity_tensor(mX.shape), (T, T), (bm, bn)),
        thr_layout,
        tidx,
    )
    tXs = cute.local_partition(sX, thr_layout, tidx)
    for i in cutlass.range_constexpr(cute.size(tXs)):
        if cute.elem_less(tXc[i], mX.shape):
            tXs[i] = tXg[i]

    cute.arch.sync_threads()

    # Phase 2: sX^T -> out[bn*32 : , bm*32 :], threads along out's contiguous m.
    tOg = cute.local_partition(
        cute.local_tile(mOut, (T, T), (bn, bm)), thr_layout, tidx
    )
    tOc = cute.local_partition(
        cute.local_tile(cute.make_identity_tensor(mOut.shape), (T, T), (bn, bm)),
        thr_layout,
        tidx,
    )
    tOs = cute.local_partition(sXt, thr_layout, tidx)
    for i in cutlass.range_constexpr(cute.size(tOs)):
        if cute.elem_less(tOc[i], mOut.shape):
            tOg[i] = tOs[i]


@cute.jit
def transpose(stream: cuda.CUstream, x: cute.Tensor, out: cute.Tensor):
    """``out = x.T``.

    Inputs: ``x``: 2-D ``(M, N)``, any dtype of 8 bits or more.
    Outputs: ``out``: 2-D ``(N, M)``, same dtype.
    Any ``M``, ``N`` (``N`` up to 65535 * 32, the grid.y limit): 32x32 tiles
    are staged through padded shared memory so both the global reads and the
    global writes are coalesced.
    """
    M, N = x.shape
    if M > 0 and N > 0:
        _transpose_kernel(x, out).launch(
            grid=(cute.ceil_div(M, _TR_TILE), cute.ceil_div(N, _TR_TILE), 1),
            block=(_TR_TILE * _TR_ROWS, 1, 1),
            stream=stream,
        )


# =============================================================================
# 5. row_sum
# =============================================================================

_RS_WARPS = 8  # rows per block: one warp per row


@cute.kernel
def _row_sum_kernel(mX: cute.Tensor, mOut: cute.Tensor):
    warp = cute.arch.warp_idx()
    lane = cute.arch.lane_idx()
    bidx, _, _ = cute.arch.block_idx()
    M, N = mX.shape
    row = bidx * _RS_WARPS + warp
    # `row` is uniform across the warp, so the whole warp takes this branch
    # together (required by the shuffles in warp_reduction_sum).
    if row < M:
        acc = cutlass.Float32(0.0)
        # Lane l sums columns l, l+32, ...: each iteration is one coalesced
        # 32-element read of the row.
        for j in cutlass.range(lane, N, 32, unroll=4):
            acc = acc + mX[row, j].to(cutlass.Float32)
        acc = cute.arch.warp_reduction_sum(acc)
        if lane == 0:
            mOut[row] = acc.to(mOut.element_type)


@cute.jit
def row_sum(stream: cuda.CUstream, x: cute.Tensor, out: cute.Tensor):
    """``out[m] = sum_n x[m, n]``.

    Inputs: ``x``: 2-D ``(M, N)`` float32 (other float dtypes also work; the
    sum is accumulated in float32).
    Outputs: ``out``: 1-D ``(M,)``, float32 (or any float dtype).
    Any ``M``, ``N``: one warp per row, 8 rows per 256-thread block, lanes
    stride over the row and combine with a butterfly shuffle reduction. An
    empty row (``N == 0``) sums to 0.
    """
    M = x.shape[0]
    if M > 0:
        _row_sum_kernel(x, out).launch(
            grid=(cute.ceil_div(M, _RS_WARPS), 1, 1),
            block=(_RS_WARPS * 32, 1, 1),
            stream=stream,
        )
