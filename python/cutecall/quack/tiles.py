"""QuACK's GEMM configurations per target arch: the :class:`Tile` every
``cutecall.quack`` GEMM takes, QuACK's tuning spaces (:data:`SM90_TILES`,
:data:`SM100_TILES`, :func:`tiles`), and which of QuACK's kernels a target
runs (:func:`capacity`).

    import cutecall
    from cutecall.quack import tiles as qt

    qt.tiles()                                       # the current target's space
    qt.tiles(cutecall.current_target("sm_100a"))     # SM100_TILES
    qt.capacity(cutecall.current_target("sm_100a"))  # (10, 0): QuACK's GemmSm100
    qt.check(qt.Tile(128, 192, 2, 1, pingpong=True), cutecall.current_target("sm_100a"))
    # ValueError: ... QuACK has no pingpong GEMM on sm100 ...

The target is ``cutecall.current_target()`` unless given: ``$CUTECALL_ARCH``,
else the GPU, else sm_90a. QuACK's kernels cutecall runs:

=======================  ==================  ==========================================
target arch              QuACK's capacity    GEMM class, tiles
=======================  ==================  ==========================================
sm_90a (H100, H200)      (9, 0)              ``GemmDefaultSm90``: cooperative or
                                             pingpong, persistent or one CTA per tile
sm_100a, sm_103a         (10, 0), (10, 3)    ``GemmDefaultSm100``: tcgen05 MMA, 2-CTA
(B200, GB200, B300)                          MMA for an even cluster M, always
                                             persistent (static or CLC scheduler)
=======================  ==================  ==========================================

Any other arch is refused with a ValueError naming it. Tiles are plain
hashable values and this module imports neither QuACK nor the CuTe DSL.
"""

from __future__ import annotations

import dataclasses
import itertools

__all__ = ["Tile", "SM90_TILES", "SM100_TILES", "SM90", "tiles", "capacity", "check",
           "default_tile", "tag", "one_cta_per_tile", "resolve"]

SM90 = (9, 0)  # QuACK's device capacity of its Hopper GEMMs


@dataclasses.dataclass(frozen=True)
class Tile:
    """One GEMM configuration: CTA tile (M, N) -- on sm100 the MMA tile,
    split over a CTA pair when :attr:`two_cta` --, cluster (M, N), and:

    - `pingpong` (sm90 only): two consumer warp groups on alternate tiles,
      else cooperative ("coop");
    - `persistent`: QuACK's default, one CTA per SM, each looping over
      tiles; False (sm90 only): one CTA per tile, so CTAs leave as their
      tile ends and a kernel on another stream (NCCL's) finds SMs;
    - `clc` (sm100 only): QuACK's dynamic persistent scheduler, Blackwell's
      cluster launch control (a grid of every tile; running clusters take
      the tiles of clusters not yet launched); else the static scheduler.

    :func:`check` tells whether a target runs it."""

    tile_m: int
    tile_n: int
    cluster_m: int = 1
    cluster_n: int = 1
    pingpong: bool = False
    persistent: bool = True
    clc: bool = False

    def __post_init__(self):
        for what in ("pingpong", "clc"):
            if getattr(self, what) and not self.persistent:
                raise ValueError(f"cutecall.quack.Tile: {what}=True needs persistent=True "
                                 f"(QuACK's {what} GEMM is persistent), got {self!r}")

    def __str__(self):
        kind = "pingpong" if self.pingpong else "coop"
        return (f"{self.tile_m}x{self.tile_n} cluster {self.cluster_m}x{self.cluster_n} "
                f"{kind}" + ("" if self.persistent else " non-persistent")
                + (" clc" if self.clc else ""))

    @property
    def suffix(self) -> str:
        """The kernel-name part of the configuration on sm90:
        ``128x192_c2x1_pp`` (:func:`tag` names it per arch)."""
        return (f"{self.tile_m}x{self.tile_n}_c{self.cluster_m}x{self.cluster_n}"
                f"_{'pp' if self.pingpong else 'coop'}" + ("" if self.persistent else "_np")
                + ("_clc" if self.clc else ""))

    @property
    def two_cta(self) -> bool:
        """On sm100: whether QuACK runs the 2-CTA MMA (tcgen05 ``cta_group::2``),
        two CTAs of a cluster sharing one tile_m x tile_n MMA (each holds
        tile_m / 2 rows). QuACK picks it for an even cluster M and tile M 128
        or 256 (``GemmSm100.use_2cta_instrs``)."""
        return self.cluster_m % 2 == 0 and self.tile_m in (128, 256)


def _sm90_tiles() -> tuple:
    # quack.gemm_config._get_sm90_configs(): cooperative (256, n) and
    # (128, 224/256); pingpong (128, n) and (192, 128); clusters 1x2 and 2x1.
    tile_n = (128, 160, 192, 208)
    coop = [(256, n) for n in tile_n] + [(128, 224), (128, 256)]
    pingpong = [(128, n) for n in tile_n] + [(192, 128)]
    mn = [(m, n, False) for m, n in coop] + [(m, n, True) for m, n in pingpong]
    return tuple(Tile(m, n, cm, cn, pp)
                 for (m, n, pp), (cm, cn) in itertools.product(mn, [(1, 2), (2, 1)]))


def _sm100_tiles() -> tuple:
    # quack.gemm_config._get_sm100_configs(): tile M 128 with clusters 1x1,
    # 1x2, 2x1, 2x2 and tile M 256 with 2x1, 2x2 (2-CTA), tile N 16..256,
    # plus 256x512 2x1; each with the CLC and the static scheduler. QuACK's
    # default (256x256, cluster 2x1, CLC) first: the tile an untuned call runs.
    tile_n = (16, 32, 64, 128, 160, 192, 224, 256)
    mn = ([(128, n, c) for c in ((1, 1), (1, 2), (2, 1), (2, 2)) for n in tile_n]
          + [(256, n, c) for c in ((2, 1), (2, 2)) for n in tile_n] + [(256, 512, (2, 1))])
    space = tuple(Tile(m, n, cm, cn, clc=clc)
                  for (m, n, (cm, cn)), clc in itertools.product(mn, (True, False)))
    first = Tile(256, 256, 2, 1, clc=True)
    return (first,) + tuple(t for t in space if t != first)


SM90_TILES = _sm90_tiles()    # QuACK's sm90 space without swap_ab: 22 tiles
SM100_TILES = _sm100_tiles()  # QuACK's sm100 space without swap_ab and TMA gather: 98


def resolve(target=None):
    """`target` (a ``cutecall.Target``), or ``cutecall.current_target()``."""
    if target is not None:
        return target
    import cutecall
    return cutecall.current_target()


def capacity(target=None) -> tuple:
    """QuACK's device capacity for `target` ((9, 0), (10, 0), (10, 3)): the
    ``device_capacity`` QuACK's compile functions take, which picks the
    kernel class. A ValueError naming the arch for any other target."""
    t = resolve(target)
    major, minor = t.capability
    if (major, minor) == SM90 or major == 10:
        return (major, minor)
    raise ValueError(f"cutecall.quack: QuACK has no GEMM kernel cutecall runs for target "
                     f"arch {t.arch!r}; cutecall.quack runs QuACK's sm90 GEMM on sm_90a "
                     f"(H100, H200) and its sm100 GEMM on sm_100a/sm_103a (B200, B300): set "
                     f"CUTECALL_ARCH or compile on such a GPU")


def tiles(target=None) -> tuple:
    """QuACK's tuning space for `target`: :data:`SM90_TILES` on sm_90a,
    :data:`SM100_TILES` on sm_100a/sm_103a."""
    return SM90_TILES if capacity(target)[0] == 9 else SM100_TILES


def default_tile(target=None) -> Tile:
    """The tile of an untuned call: sm90 128x192 cluster 2x1 pingpong,
    sm100 QuACK's default 256x256 cluster 2x1 (2-CTA) with CLC."""
    return Tile(128, 192, 2, 1, pingpong=True) if capacity(target)[0] == 9 else SM100_TILES[0]


def one_cta_per_tile(target=None) -> bool:
    """Whether QuACK's GEMM on `target` has a one-CTA-per-tile form
    (``Tile(persistent=False)``): sm90 yes; sm100 no, always persistent."""
    return capacity(target)[0] == 9


def check(tile, target=None, name: str = "cutecall.quack") -> Tile:
    """`tile`, or a ValueError naming the argument and the arch when the
    target's QuACK GEMM has no such configuration."""
    t = resolve(target)
    if not isinstance(tile, Tile):
        raise ValueError(f"{name}: tile must be a cutecall.quack.Tile, got {tile!r}")
    sm90 = capacity(t)[0] == 9
    why = None
    if sm90 and tile.clc:
        why = ("QuACK's dynamic scheduler on sm90 needs a tile-count semaphore in global "
               "memory, which cutecall does not pass: use clc=False")
    elif not sm90 and tile.pingpong:
        why = "QuACK has no pingpong GEMM on sm100: use pingpong=False"
    elif not sm90 and not tile.persistent:
        why = ("QuACK's sm100 GEMM is always persistent (static or CLC scheduler): "
               "use persistent=True")
    if why:
        raise ValueError(f"{name}: tile {tile} is not a configuration of QuACK's GEMM for "
                         f"target arch {t.arch!r}: {why}")
    return tile


def tag(tile: Tile, target=None) -> str:
    """The kernel-name part of `tile` on `target`: :attr:`Tile.suffix` on
    sm90 (``128x192_c2x1_pp``); on sm100 the arch, tile, cluster, 2-CTA and
    scheduler (``sm100_256x256_c2x1_2cta_clc``)."""
    major, minor = capacity(target)
    if major == 9:
        return tile.suffix
    return (f"sm{major}{minor}_{tile.tile_m}x{tile.tile_n}_c{tile.cluster_m}x{tile.cluster_n}"
            + ("_2cta" if tile.two_cta else "") + ("_clc" if tile.clc else ""))
