"""Compiled inner loops of the delayed-hit simulator (numba when installed, plain Python otherwise).

Every function here works on dense item codes ``0..m-1`` (the simulator remaps user ids once), int64 fetch
latencies ``z`` and int64 sizes (all ones for unit-sized objects, then ``capacity`` counts objects). The
slot semantics are the module docstring's of :mod:`.simulator`; :mod:`.policies` holds the same rules as
plain-Python hooks, and the tests check that both give identical latencies.

Without numba the functions run as ordinary (slow) Python: same results, 50-200x lower throughput.
"""

from __future__ import annotations

import functools
import math

import numpy as np

try:  # numba is the `caching` extra; the simulator stays correct without it
    import numba

    njit = numba.njit(cache=True, nogil=True)
    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised only where numba is absent

    def njit(fn):  # type: ignore[no-redef]
        @functools.wraps(fn)
        def plain(*args):
            with np.errstate(over="ignore"):  # uint64 hashing wraps around by design
                return fn(*args)

        plain.py_func = fn  # type: ignore[attr-defined]
        return plain

    HAVE_NUMBA = False

# policy kinds of the scored kernel
LRU_MAD, UCB_DH, LA_FTPL = 2, 3, 4
HIT, DELAYED_HIT, MISS = 0, 1, 2
_MASK = (1 << 64) - 1


# ---------------------------------------------------------------------------------------------- id encoding
@njit
def factorize_u64(keys):
    """Code of each key by first appearance, and the distinct keys in that order: a linear-probing hash table
    (Fibonacci hashing) that doubles at half load, O(n) where np.unique's sort is O(n log n) (the sort was
    most of a whole LRU run on sparse 64-bit ids). ``keys`` are uint64 bit patterns: equal bits, equal id."""
    n = keys.size
    bits = 10
    table = np.full(1 << bits, -1, np.int64)  # slot -> code, -1 empty
    uniques = np.empty(n, np.uint64)
    codes = np.empty(n, np.int64)
    m = 0
    for t in range(n):
        x = keys[t]
        mask = (1 << bits) - 1
        h = np.int64((x * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - bits))
        while True:
            c = table[h]
            if c < 0:
                table[h] = m
                uniques[m] = x
                codes[t] = m
                m += 1
                break
            if uniques[c] == x:
                codes[t] = c
                break
            h = (h + 1) & mask
        if 2 * m > (1 << bits):  # rehash into twice the slots
            bits += 1
            mask = (1 << bits) - 1
            table = np.full(1 << bits, -1, np.int64)
            for c in range(m):
                h = np.int64((uniques[c] * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - bits))
                while table[h] >= 0:
                    h = (h + 1) & mask
                table[h] = c
    return codes, uniques[:m].copy()


# ---------------------------------------------------------------------------------------------- random bits
@njit
def _splitmix64(x):
    """One splitmix64 output for the 64-bit state ``x`` (a counter-based generator: same bits everywhere)."""
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    return x ^ (x >> np.uint64(31))


@njit
def uniform_index(seed, counter, n):
    """A uniform integer in ``[0, n)`` from (seed, counter)."""
    key = _splitmix64(np.uint64(seed) ^ _splitmix64(np.uint64(counter)))
    return np.int64(key % np.uint64(n))


@njit
def perturbations(seed, epoch, m):
    """``m`` standard normal draws for restart ``epoch`` (Box-Muller on counter-based uniforms)."""
    out = np.empty(m, dtype=np.float64)
    base = _splitmix64(np.uint64(seed) ^ _splitmix64(np.uint64(epoch) + np.uint64(0x5851F42D4C957F2D)))
    for i in range(m):
        a = _splitmix64(base ^ np.uint64(2 * i))
        b = _splitmix64(base ^ np.uint64(2 * i + 1))
        u1 = (np.float64(a >> np.uint64(11)) + 1.0) / 9007199254740993.0  # (0, 1]
        u2 = np.float64(b >> np.uint64(11)) / 9007199254740992.0  # [0, 1)
        out[i] = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
    return out


# ----------------------------------------------------------------------------------- completion event heap
@njit
def _heap_push(heap, size, key):
    heap[size] = key
    i = size
    while i > 0:
        p = (i - 1) >> 1
        if heap[p] <= heap[i]:
            break
        heap[p], heap[i] = heap[i], heap[p]
        i = p
    return size + 1


@njit
def _heap_pop(heap, size):
    top = heap[0]
    size -= 1
    heap[0] = heap[size]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= size:
            break
        c = left
        if left + 1 < size and heap[left + 1] < heap[left]:
            c = left + 1
        if heap[i] <= heap[c]:
            break
        heap[i], heap[c] = heap[c], heap[i]
        i = c
    return top, size


# ------------------------------------------------------------------------------------------ shadow losses
@njit
def shadow_process(tr, z):
    """Shadow loss per request (latency if the item were never cached) and a first-miss-episode mask."""
    m = z.shape[0]
    due = np.full(m, -1, dtype=np.int64)
    first_due = np.full(m, -1, dtype=np.int64)
    out = np.empty(tr.shape[0], dtype=np.int64)
    first = np.zeros(tr.shape[0], dtype=np.bool_)
    for t in range(tr.shape[0]):
        i = tr[t]
        d = due[i]
        if d > t:
            out[t] = d - t
            first[t] = first_due[i] == d
        else:
            out[t] = z[i]
            due[i] = t + z[i]
            if first_due[i] < 0:
                first_due[i] = t + z[i]
                first[t] = True
    return out, first


# ---------------------------------------------------------------------------------------------- LRU, FIFO
@njit
def run_list(tr, z, sizes, capacity, move_on_hit):
    """LRU (``move_on_hit``) or FIFO on a doubly linked list; O(1) per request."""
    m = z.shape[0]
    T = tr.shape[0]
    prev = np.full(m, -1, dtype=np.int64)
    nxt_ = np.full(m, -1, dtype=np.int64)
    incache = np.zeros(m, dtype=np.bool_)
    due = np.full(m, -1, dtype=np.int64)
    heap = np.empty(m, dtype=np.int64)
    hsize = 0
    head = -1  # least recent / oldest
    tail = -1  # most recent / newest
    used = 0
    lat = np.zeros(T, dtype=np.int64)
    out = np.full(T, HIT, dtype=np.int8)
    adm = 0
    # every Z = 0 (classic caching): a miss arrives at the next slot, alone, so it is admitted there without
    # the event heap (the same order as the heap would give: one item due per slot)
    instant = z.max() == 0
    pending = -1
    for t in range(T):
        while True:
            if pending >= 0:
                j = pending
                pending = -1
            elif hsize > 0 and heap[0] < (t + 1) * m:  # due time key // m <= t, without a division
                key, hsize = _heap_pop(heap, hsize)
                j = key % m
            else:
                break
            sj = sizes[j]
            if sj > capacity:
                continue
            while used + sj > capacity:  # evict from the head
                v = head
                head = nxt_[v]
                if head >= 0:
                    prev[head] = -1
                else:
                    tail = -1
                nxt_[v] = -1
                incache[v] = False
                used -= sizes[v]
            prev[j] = tail
            nxt_[j] = -1
            if tail >= 0:
                nxt_[tail] = j
            else:
                head = j
            tail = j
            incache[j] = True
            used += sj
            adm += 1
        i = tr[t]
        if incache[i]:
            if move_on_hit and tail != i:
                p = prev[i]
                q = nxt_[i]
                if p >= 0:
                    nxt_[p] = q
                else:
                    head = q
                prev[q] = p
                prev[i] = tail
                nxt_[i] = -1
                nxt_[tail] = i
                tail = i
            continue
        if instant:
            out[t] = MISS
            pending = i
            continue
        d = due[i]
        if d > t:
            lat[t] = d - t
            out[t] = DELAYED_HIT
        else:
            lat[t] = z[i]
            out[t] = MISS
            due[i] = t + z[i]
            hsize = _heap_push(heap, hsize, (t + z[i]) * m + i)
    return lat, out, adm


# ------------------------------------------------------------------------------------------------ Marker
@njit
def run_marker(tr, z, sizes, capacity, seed):
    """Randomized marking: evict a uniformly random unmarked item; unmark all when none is left."""
    m = z.shape[0]
    T = tr.shape[0]
    incache = np.zeros(m, dtype=np.bool_)
    marked = np.zeros(m, dtype=np.bool_)
    cached = np.empty(m, dtype=np.int64)
    cpos = np.full(m, -1, dtype=np.int64)
    nc = 0
    unmarked = np.empty(m, dtype=np.int64)
    upos = np.full(m, -1, dtype=np.int64)
    nu = 0
    due = np.full(m, -1, dtype=np.int64)
    heap = np.empty(m, dtype=np.int64)
    hsize = 0
    used = 0
    draws = 0
    lat = np.zeros(T, dtype=np.int64)
    out = np.full(T, HIT, dtype=np.int8)
    adm = 0
    for t in range(T):
        while hsize > 0 and heap[0] < (t + 1) * m:  # due time key // m <= t, without a division
            key, hsize = _heap_pop(heap, hsize)
            j = key % m
            sj = sizes[j]
            if sj > capacity:
                continue
            while used + sj > capacity:
                if nu == 0:  # new phase: unmark every cached item (in cache order)
                    for q in range(nc):
                        c = cached[q]
                        marked[c] = False
                        upos[c] = nu
                        unmarked[nu] = c
                        nu += 1
                v = unmarked[uniform_index(seed, draws, nu)]
                draws += 1
                p = upos[v]  # remove v from the unmarked list
                nu -= 1
                last = unmarked[nu]
                unmarked[p] = last
                upos[last] = p
                upos[v] = -1
                p = cpos[v]  # and from the cache list
                nc -= 1
                last = cached[nc]
                cached[p] = last
                cpos[last] = p
                cpos[v] = -1
                incache[v] = False
                used -= sizes[v]
            cached[nc] = j
            cpos[j] = nc
            nc += 1
            incache[j] = True
            marked[j] = True
            used += sj
            adm += 1
        i = tr[t]
        if incache[i]:
            if not marked[i]:
                marked[i] = True
                p = upos[i]
                nu -= 1
                last = unmarked[nu]
                unmarked[p] = last
                upos[last] = p
                upos[i] = -1
            continue
        d = due[i]
        if d > t:
            lat[t] = d - t
            out[t] = DELAYED_HIT
        else:
            lat[t] = z[i]
            out[t] = MISS
            due[i] = t + z[i]
            hsize = _heap_push(heap, hsize, (t + z[i]) * m + i)
    return lat, out, adm


# ------------------------------------------------------------------------------------------------- LFU
@njit
def _lfu_less(a, b, cnt, stamp):
    return cnt[a] < cnt[b] or (cnt[a] == cnt[b] and stamp[a] < stamp[b])


@njit
def _lfu_sift_up(hp, hpos, i, cnt, stamp):
    while i > 0:
        p = (i - 1) >> 1
        if not _lfu_less(hp[i], hp[p], cnt, stamp):
            break
        hp[i], hp[p] = hp[p], hp[i]
        hpos[hp[i]] = i
        hpos[hp[p]] = p
        i = p


@njit
def _lfu_sift_down(hp, hpos, nh, i, cnt, stamp):
    while True:
        left = 2 * i + 1
        if left >= nh:
            break
        c = left
        if left + 1 < nh and _lfu_less(hp[left + 1], hp[left], cnt, stamp):
            c = left + 1
        if not _lfu_less(hp[c], hp[i], cnt, stamp):
            break
        hp[i], hp[c] = hp[c], hp[i]
        hpos[hp[i]] = i
        hpos[hp[c]] = c
        i = c


@njit
def run_lfu(tr, z, sizes, capacity, in_cache):
    """LFU on an indexed min-heap of (count, stamp of the last count change): O(log K) per request.

    ``in_cache=False``: every request counts and counts survive eviction ("perfect" LFU). ``in_cache=True``
    (libCacheSim's LFU): an admitted item starts at count 1 and counts its hits. Ties go to the item that
    reached its count first (libCacheSim evicts the oldest of the lowest-frequency bucket).
    """
    m = z.shape[0]
    T = tr.shape[0]
    cnt = np.zeros(m, dtype=np.int64)
    stamp = np.zeros(m, dtype=np.int64)
    hp = np.empty(m, dtype=np.int64)
    hpos = np.full(m, -1, dtype=np.int64)
    nh = 0
    clock = 0
    used = 0
    due = np.full(m, -1, dtype=np.int64)
    heap = np.empty(m, dtype=np.int64)
    hsize = 0
    lat = np.zeros(T, dtype=np.int64)
    out = np.full(T, HIT, dtype=np.int8)
    adm = 0
    for t in range(T):
        while hsize > 0 and heap[0] < (t + 1) * m:  # due time key // m <= t, without a division
            key, hsize = _heap_pop(heap, hsize)
            j = key % m
            sj = sizes[j]
            if sj > capacity:
                continue
            while used + sj > capacity:  # pop the minimum
                v = hp[0]
                nh -= 1
                hp[0] = hp[nh]
                hpos[hp[0]] = 0
                hpos[v] = -1
                if nh > 0:
                    _lfu_sift_down(hp, hpos, nh, 0, cnt, stamp)
                used -= sizes[v]
            if in_cache:
                cnt[j] = 1
                clock += 1
                stamp[j] = clock
            hp[nh] = j
            hpos[j] = nh
            nh += 1
            _lfu_sift_up(hp, hpos, nh - 1, cnt, stamp)
            used += sj
            adm += 1
        i = tr[t]
        cached = hpos[i] >= 0
        if cached or not in_cache:
            cnt[i] += 1
            clock += 1
            stamp[i] = clock
            if cached:
                _lfu_sift_down(hp, hpos, nh, hpos[i], cnt, stamp)
        if cached:
            continue
        d = due[i]
        if d > t:
            lat[t] = d - t
            out[t] = DELAYED_HIT
        else:
            lat[t] = z[i]
            out[t] = MISS
            due[i] = t + z[i]
            hsize = _heap_push(heap, hsize, (t + z[i]) * m + i)
    return lat, out, adm


# --------------------------------------------------------------------- score-ranked (LRU-MAD ... LA-FTPL)
@njit
def ucb_index(count, inv_tt, lg_tt, c, zj):
    """UCB-DH index: the slotted shadow value at the Bernstein upper confidence bound of the rate.

    ``inv_tt = 1 / t`` and ``lg_tt = log(t + 1) / t`` for the ``t`` slots since the last (re)start:
    ``lam = n / t + c (sqrt(2 (n / t) log(t + 1) / t) + log(t + 1) / t)``, capped at 1.
    """
    lam = count * inv_tt
    lam = lam + c * (math.sqrt(2.0 * lam * lg_tt) + lg_tt)
    if lam > 1.0:
        lam = 1.0
    w = zj - 1.0 if zj > 1.0 else 0.0
    return lam * zj * (1.0 + lam * w / 2.0) / (1.0 + lam * w)


@njit
def run_scored(tr, z, sizes, capacity, kind, c, burst, ewma, restart, seed):
    """LRU-MAD (always admits), UCB-DH and LA-FTPL (admit if better than the victims).

    Their scores change with t, so the victim, the cached item with the lowest (score, item code), is found by
    a fresh scan at every decision: O(cached items) per completed fetch. UCB-DH and LA-FTPL admit a completed
    item only if its score exceeds the summed scores of the victims it would displace, choosing victims by
    increasing score per unit size (with unit sizes: one victim, the lowest score).
    """
    m = z.shape[0]
    T = tr.shape[0]
    zf = z.astype(np.float64)
    zmax = 0.0
    for j in range(m):
        if zf[j] > zmax:
            zmax = zf[j]
    cnt = np.zeros(m, dtype=np.int64)
    last = np.zeros(m, dtype=np.int64)
    agg_est = zf.copy()
    agg_cur = np.zeros(m, dtype=np.float64)
    cum = np.zeros(m, dtype=np.float64)
    sdue = np.full(m, -1, dtype=np.int64)
    epoch = 0
    gamma = np.zeros(m, dtype=np.float64)
    eta_den = 1.0
    auto_burst = burst < 0  # LA-FTPL burst=None: the largest shadow miss episode seen so far
    cb = 1.0 if auto_burst else burst
    episode = np.zeros(m, dtype=np.int64)
    if kind == LA_FTPL:
        gamma = perturbations(seed, epoch, m)
        eta_den = math.sqrt(capacity_items(sizes, capacity) * math.log(max(m, 2)))
    always_admit = kind == LRU_MAD
    incache = np.zeros(m, dtype=np.bool_)
    cached = np.empty(m, dtype=np.int64)
    cpos = np.full(m, -1, dtype=np.int64)
    chosen = np.zeros(m, dtype=np.bool_)
    nc = 0
    used = 0
    due = np.full(m, -1, dtype=np.int64)
    heap = np.empty(m, dtype=np.int64)
    hsize = 0
    t0 = 0
    next_restart = restart if restart > 0 else T + 1
    lat = np.zeros(T, dtype=np.int64)
    out = np.full(T, HIT, dtype=np.int8)
    adm = 0
    victims = np.empty(m, dtype=np.int64)
    for t in range(T):
        if t >= next_restart:
            t0 = t
            next_restart += restart
            cnt[:] = 0
            cum[:] = 0.0
            sdue[:] = -1
            if kind == LA_FTPL:
                epoch += 1
                gamma = perturbations(seed, epoch, m)
        if hsize > 0 and heap[0] < (t + 1) * m:
            tt = float(t - t0 + 1)
            inv_tt = 1.0 / tt
            lg_tt = math.log(tt + 1.0) * inv_tt
            eta = c * (zmax + math.sqrt(cb * zmax)) / eta_den * math.sqrt(tt)
            while hsize > 0 and heap[0] < (t + 1) * m:  # due time key // m <= t, without a division
                key, hsize = _heap_pop(heap, hsize)
                j = key % m
                if kind == LRU_MAD:
                    agg_est[j] = (1.0 - ewma) * agg_est[j] + ewma * agg_cur[j]
                sj = sizes[j]
                if sj > capacity:
                    continue
                if used + sj > capacity:
                    nv = 0
                    freed = 0
                    vsum = 0.0
                    while used - freed + sj > capacity:  # pick victims one by one, lowest key first
                        best = -1
                        bk1 = 0.0
                        bk2 = 0
                        bs = 0.0
                        for q in range(nc):
                            v = cached[q]
                            if chosen[v]:
                                continue
                            if kind == LRU_MAD:
                                s = agg_est[v] / (t - last[v] + 1)
                            elif kind == UCB_DH:
                                s = ucb_index(cnt[v], inv_tt, lg_tt, c, zf[v])
                            else:
                                s = cum[v] + eta * gamma[v]
                            k1 = s if always_admit else s / sizes[v]
                            k2 = v
                            if best < 0 or k1 < bk1 or (k1 == bk1 and k2 < bk2):
                                best = v
                                bk1 = k1
                                bk2 = k2
                                bs = s
                        chosen[best] = True
                        victims[nv] = best
                        nv += 1
                        freed += sizes[best]
                        if not always_admit:
                            vsum += bs
                    admit = True
                    if not always_admit:
                        if kind == UCB_DH:
                            sc = ucb_index(cnt[j], inv_tt, lg_tt, c, zf[j])
                        else:
                            sc = cum[j] + eta * gamma[j]
                        admit = sc > vsum
                    for q in range(nv):
                        v = victims[q]
                        chosen[v] = False
                        if admit:
                            p = cpos[v]
                            nc -= 1
                            lastc = cached[nc]
                            cached[p] = lastc
                            cpos[lastc] = p
                            cpos[v] = -1
                            incache[v] = False
                            used -= sizes[v]
                    if not admit:
                        continue
                cached[nc] = j
                cpos[j] = nc
                nc += 1
                incache[j] = True
                used += sj
                adm += 1
        i = tr[t]
        # statistics every request feeds (the policy sees all requests, cached or not)
        if kind == UCB_DH:
            cnt[i] += 1
        elif kind == LRU_MAD:
            last[i] = t
        elif kind == LA_FTPL:
            d = sdue[i]
            if d > t:
                cum[i] += d - t
                episode[i] += 1
                if auto_burst and episode[i] > cb:
                    cb = float(episode[i])
            else:
                cum[i] += zf[i]
                sdue[i] = t + z[i]
                episode[i] = 1
        if incache[i]:
            continue
        d = due[i]
        if d > t:
            lat[t] = d - t
            out[t] = DELAYED_HIT
            if kind == LRU_MAD:
                agg_cur[i] += d - t
        else:
            lat[t] = z[i]
            out[t] = MISS
            if kind == LRU_MAD:
                agg_cur[i] = zf[i]
            due[i] = t + z[i]
            hsize = _heap_push(heap, hsize, (t + z[i]) * m + i)
    return lat, out, adm


@njit
def capacity_items(sizes, capacity):
    """The cache size K in objects used by LA-FTPL's perturbation scale (capacity / mean size, >= 1)."""
    total = 0.0
    for j in range(sizes.shape[0]):
        total += sizes[j]
    k = capacity / (total / sizes.shape[0])
    return k if k >= 1.0 else 1.0
