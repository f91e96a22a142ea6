"""``cutecall cache``: the artifact store's tiers from the command line.

    cutecall cache stats [--json]    both tiers: location, entries, bytes, bound
    cutecall cache list [--json]     one line per entry: key, kernel, arch, size, age, status
    cutecall cache verify [--json]   check every digest; remove corrupt entries (exit 1 if any)
    cutecall cache clear             remove every entry of the local tier
"""

from __future__ import annotations

import contextlib
import json
import time

from .._driver import store as _store
from .._driver.store import backlog, stamps


def _store_or_exit() -> _store.ArtifactStore:
    store = _store.default_store()
    if store is None:
        raise SystemExit("cutecall: the artifact store is off (CUTECALL_CACHE=0)")
    return store


def _stamp_for(entry: _store.Entry) -> dict:
    return stamps.stamp_of(entry)


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _remote_stats() -> dict | None:
    """The remote tier's stats, or None when none is set; a tier that
    cannot be reached says so (``error``) instead of failing the command."""
    from .._driver.store import config
    tier = config.remote_tier()
    if tier is None:
        return None
    out = {"url": tier.url, "mode": "read" if tier.read_only else "readwrite",
           "signed": tier.signing_key is not None}
    try:
        out.update(tier.backend.stats())
    except Exception as e:  # noqa: BLE001 (reported, the local tier still shown)
        out["error"] = f"{type(e).__name__}: {e}"
    return out


def cache_stats(args) -> int:
    store = _store_or_exit()
    stats = store.stats()
    remote = _remote_stats()
    if remote is not None:
        remote["unpublished"] = len(backlog.pending(store))
    if args.json:
        print(json.dumps({**stats, "remote": remote}, indent=2))
        return 0
    print(f"location   {stats['root']}\nentries    {stats['entries']}\n"
          f"size       {_size(stats['bytes'])} of {_size(stats['max_bytes'])}")
    if remote is None:
        print("remote     none (CUTECALL_CACHE_REMOTE is not set)")
    elif "error" in remote:
        print(f"remote     {remote['url']}: unreachable ({remote['error']})")
    else:
        print(f"remote     {remote['url']} ({remote['mode']}"
              f"{', signed' if remote['signed'] else ''})\n"
              f"           {remote['entries']} entries, {_size(remote['bytes'])}")
    if remote and remote["unpublished"]:
        print(f"           {remote['unpublished']} kernels compiled here while it was "
              f"down, published at the next contact")
    return 0


def _listing(store, repair: bool) -> list[dict]:
    rows, now = [], time.time()
    by_key = dict(store.scan())
    for key, status, size in store.verify(_stamp_for, repair=repair):
        row = {"key": key, "status": status, "bytes": size,
               "age_s": round(now - by_key[key].st_mtime, 1) if key in by_key else None}
        if not status.startswith("corrupt"):
            with contextlib.suppress(FileNotFoundError, _store.CorruptEntry):
                entry = store.read(key)
                row.update(kernel=entry.meta.get("name"), arch=entry.stamp.get("arch"),
                           dsl=entry.stamp.get("dsl"), cutecall=entry.stamp.get("cutecall"))
                if entry.meta.get("rejected"):  # a form the DSL rejected
                    row.update(kind="rejected", cause=entry.meta.get("cause"))
                elif entry.meta.get("autotune"):  # an autotuning winner
                    row.update(kind="autotune", config=entry.meta.get("config"),
                               tuned_key=entry.meta.get("key"))
        rows.append(row)
    return sorted(rows, key=lambda r: r["age_s"] or 0)


def cache_list(args) -> int:
    rows = _listing(_store_or_exit(), repair=False)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    # The kernel last, whole: names such as FlashAttentionForwardSm90 are
    # longer than any fixed column.
    print(f"{'key':16}  {'arch':8}  {'size':>10}  {'used':>5}  {'status':8}  kernel")
    for r in rows:
        kernel = str(r.get("kernel", "?"))
        if r.get("kind") == "rejected":
            kernel += " (rejected)"
        elif r.get("kind") == "autotune":
            kernel = f"{r.get('kernel')} {json.dumps(r.get('config'))}"
        print(f"{r['key'][:16]:16}  {str(r.get('arch', '?')):8}  "
              f"{_size(r['bytes']):>10}  {_age(r['age_s'] or 0):>5}  "
              f"{r['status']:8}  {kernel}")
    print(f"{len(rows)} entries")
    return 0


def cache_verify(args) -> int:
    rows = _listing(_store_or_exit(), repair=True)
    bad = [r for r in rows if r["status"].startswith("corrupt")]
    stale = [r for r in rows if r["status"] == "stale"]
    if args.json:
        print(json.dumps({"checked": len(rows), "corrupt_removed": bad,
                          "stale": len(stale)}, indent=2))
    else:
        for r in bad:
            print(f"removed {r['key']}: {r['status']}")
        print(f"{len(rows)} entries checked: {len(rows) - len(bad) - len(stale)} ok, "
              f"{len(stale)} stale (other versions), {len(bad)} corrupt (removed)")
    return 1 if bad else 0


def cache_clear(args) -> int:
    store = _store_or_exit()
    removed, skipped = store.clear()
    print(f"removed {removed} entries from {store.root}"
          + (f"; {skipped} skipped (being built by another process)" if skipped else ""))
    return 0
