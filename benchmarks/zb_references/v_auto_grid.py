"""The grid passes of the authors' V auto-schedule (``v_auto.py`` searches with them), rewritten.

A schedule here is one row of cells per device, each cell one unit-time pass or a blank: ``F`` / ``f``
the forward of the device's first / second chunk, ``B`` / ``b`` the input backward of its second /
first chunk, ``W`` / ``w`` the matching weight passes. Upper-case passes flow from device 0 to
``p - 1``, lower-case ones back. Memory is counted the authors' way: ``F`` / ``f`` +1, ``W`` / ``w`` -1.
Wherever the authors' code asserts, these passes raise :class:`Unbuildable` and the building block is
skipped.
"""

from __future__ import annotations

from collections import Counter, deque
from itertools import accumulate

from .common import Unbuildable

PERIOD = 6
KINDS = "FfBbWw"
#: The pass a turn-around needs on its own device: B on device 0, f and b on the last one.
TURN = {"B": "f", "f": "F", "b": "B"}
Grid = list[list[str]]


DELTA = {"F": 1, "f": 1, "W": -1, "w": -1, "B": 0, "b": 0, " ": 0}


def peaks(grid: Grid) -> list[int]:
    """Each device's highest count of live activations (from 0, over its row)."""
    return [max(accumulate(map(DELTA.__getitem__, row)), default=0) if row else 0 for row in grid]


def _put(row: list[str], j: int, c: str) -> None:
    if not -len(row) <= j < len(row):
        raise Unbuildable("a pass fell off its row")
    row[j] = c


def repeat(block: list[list[int]], m: int) -> Grid:
    """Every device's 6-cell pattern laid end to end, then each kind cut to ``m`` copies starting at its
    microbatch 0: the first copy at or after a cursor that sweeps F down the devices, f back up, B down,
    b up (each device's W / w cut from the first one after its B / b)."""
    p = len(block)
    grid = []
    for slots in block:
        cell = [" "] * PERIOD
        for kind, at in zip(KINDS, slots, strict=True):
            if at >= 0:
                cell[at] = kind
        grid.append(cell * (4 * p + m + 1))

    def keep_m_from(i: int, j: int) -> None:
        row = grid[i]
        for k in range(j - PERIOD, -1, -PERIOD):
            row[k] = " "
        for k in range(j + PERIOD * m, len(row), PERIOD):
            row[k] = " "

    cursor = PERIOD
    for kind in "FfBb":
        order = range(p) if kind in "FB" else range(p - 1, -1, -1)
        for i in order:
            for _ in range(PERIOD):
                hit = grid[i][cursor] == kind
                cursor += 1
                if hit:
                    keep_m_from(i, cursor - 1)
                    if kind in "Bb":
                        weight = "W" if kind == "B" else "w"
                        j = next((cursor + k for k in range(PERIOD) if grid[i][cursor + k] == weight), None)
                        if j is not None:
                            keep_m_from(i, j)
                    break
    return grid


def compact(grid: Grid, m: int) -> Grid:
    """Each pass moved to its earliest cell keeping every device's order and one cell after the pass it
    needs from a neighbour (cells visited column by column, downward passes before upward ones)."""
    p = len(grid)
    width = len(grid[0])
    if any(len(r) != width for r in grid):
        raise Unbuildable("ragged grid")
    out = [[" "] * width for _ in range(p)]
    seen = [dict.fromkeys(KINDS, 0) for _ in range(p)]
    at: dict[tuple[int, str, int], int] = {}
    free = [0] * p
    for col in zip(*grid, strict=True):
        if col.count(" ") == p:
            continue
        cells = [(i, c) for i, c in enumerate(col) if c in "FBW"]
        cells += [(i, col[i]) for i in range(p - 1, -1, -1) if col[i] in "fbw"]
        for i, c in cells:
            n = seen[i][c]
            if n >= m:
                raise Unbuildable("more than m passes of a kind")
            cell = free[i]
            if c in "FB" and i > 0 or c in "fb" and i < p - 1:
                src = (i - 1 if c in "FB" else i + 1, c, n)
                if src not in at:
                    raise Unbuildable("input not placed")
                cell = max(cell, at[src] + 1)
            elif c in TURN and (c == "B") == (i == 0) and (i, TURN[c], n) not in at:
                raise Unbuildable("turn-around input not placed")
            out[i][cell] = c
            seen[i][c] = n + 1
            at[i, c, n] = cell
            free[i] = cell + 1
    new = max(free)
    return [r[:new] for r in out]


def _relay(row: list[str], i: int, p: int, have: Counter[str], n_f: int, n_ff: int, m: int) -> None:
    """Device ``i``'s warm-up passes ``have`` laid from cell ``i``: Fs, then F / f pairs, then (B, W,
    f-or-F) triples until all are placed."""
    used = Counter[str]()
    j = i

    def take(c: str, limit: int, j: int) -> None:
        if used[c] < limit and used[c] < have[c]:
            _put(row, j, c)
            used[c] += 1

    for _ in range(2 * (p - 1 - i)):
        take("F", n_f, j)
        j += 1
    for _ in range(i + 1):
        take("F", n_f, j)
        take("f", n_ff, j + 1)
        j += 2
    while any(used[c] < have[c] for c in "FfBW"):
        take("B", m, j)
        take("W", m, j + 1)
        if used["f"] < have["f"]:
            if used["f"] >= used["F"]:
                raise Unbuildable("an f before its F")
            take("f", m, j + 2)
        else:
            take("F", m, j + 2)
        j += 3


def warm_up(grid: Grid, m: int) -> Grid:
    """Everything before each device's first ``b`` re-laid: its Fs and fs staggered so device ``i`` holds
    ``min(i + 1, peak // 2)`` fs and the rest of the peak in Fs, then repeats of (B, W, f-or-F)."""
    p = len(grid)
    peak = min(max(peaks(grid)), 2 * p)
    for i, row in enumerate(grid):
        have = Counter[str]()
        for j, c in enumerate(row):
            if c == "b":
                break
            if c not in "FfBW ":
                raise Unbuildable("a w before the first b")
            have[c] += 1
            row[j] = " "
        n_ff = min(i + 1, peak // 2, m)
        _relay(row, i, p, have, min(peak - n_ff, m), n_ff, m)
    return grid


def drop_extra(grid: Grid, m: int) -> Grid:
    """Blank every pass of a kind after its first ``m`` on a device (the padding microbatches)."""
    for row in grid:
        seen = Counter[str]()
        for j, c in enumerate(row):
            if c != " ":
                if seen[c] >= m:
                    row[j] = " "
                else:
                    seen[c] += 1
    return grid


def release_early_w(grid: Grid, peak: int) -> Grid:
    """With few microbatches, a device below ``peak`` defers its first Ws to its end until its own peak
    would reach it (memory it has spare buys an earlier start for the rest)."""
    own = peaks(grid)
    low = min(own)
    for i, row in enumerate(grid):
        tail = [" "] * (peak - low)
        moved = 0
        for j, c in enumerate(row):
            if own[i] + moved >= peak:
                break
            if c in "Ww":
                tail[moved] = c
                row[j] = " "
                moved += 1
        row.extend(tail)
    return grid


def cool_down(grid: Grid, m: int) -> Grid:
    """The tail re-laid: each device's last Bs and bs at fixed distances from device 0's last f, the Ws
    they leave pending put into the first blanks after the last remaining W, then compacted."""
    p = len(grid)
    peak = max(peaks(grid))
    if peak > 2 * p:
        raise Unbuildable("peak above 2p")
    n_bb = min((peak + 1) // 2, m)
    n_b = min(peak - n_bb, m)
    anchor = -1
    for i, row in enumerate(grid):
        got = Counter[str]()
        last_f = -1
        for j in range(len(row) - 1, -1, -1):
            c = row[j]
            if c == "f" and last_f == -1:
                last_f = j
            if c == "B" and got["B"] < min(i + 1, n_b):
                row[j] = " "
                got["B"] += 1
            if c == "b" and got["b"] < n_bb:
                row[j] = " "
                got["b"] += 1
        for j in range(len(row) - 1, -1, -1):
            if got["W"] >= got["B"] and got["w"] >= got["b"] and got["W"] + got["w"] >= peak:
                break
            if row[j] in "Ww":
                got[row[j]] += 1
                row[j] = " "
        if i == 0:
            anchor = last_f
        for k in range(got["b"]):
            j = anchor - i + 2 * p - 2 * k
            if not -len(row) <= j < len(row) or row[j] != " ":
                raise Unbuildable("cool-down b cell taken")
            row[j] = "b"
        for k in range(got["B"]):
            _put(row, anchor + 1 + i - 2 * k, "B")
    width = 0
    for row in grid:
        owed = Counter[str]()
        last_w = max((j for j, c in enumerate(row) if c in "Ww"), default=-1)
        for j, c in enumerate(row):
            if c in "Bb":
                owed["W" if c == "B" else "w"] += 1
            elif c in "Ww":
                owed[c] -= 1
            elif c == " " and j > last_w:
                for w in "Ww":
                    if owed[w] > 0:
                        row[j] = w
                        owed[w] -= 1
                        break
        row.extend(["W"] * max(owed["W"], 0) + ["w"] * max(owed["w"], 0))
        width = max(width, len(row))
    for row in grid:
        row.extend([" "] * (width - len(row)))
    return compact(grid, m)


def fill_gaps(grid: Grid, m: int) -> Grid:
    """Left to right, each blank cell takes the first later pass of some kind on its device that is
    ready there (its input placed in an earlier column) and, if a forward, does not raise the peak."""
    p = len(grid)
    peak = max(peaks(grid))
    width = len(grid[0])
    last = [{c: len(row) - 1 - row[::-1].index(c) if c in row else -1 for c in KINDS} for row in grid]
    reach = [max(x.values()) for x in last]
    level = [0] * p
    seen = [dict.fromkeys(KINDS, 0) for _ in range(p)]
    at: dict[tuple[int, str, int], int] = {}

    def record(i: int, c: str, j: int) -> None:
        at[i, c, seen[i][c]] = j
        seen[i][c] += 1
        level[i] += DELTA[c]

    def ready(i: int, c: str, j: int) -> bool:
        n = seen[i][c]
        if c in "FB" and i > 0 or c in "fb" and i < p - 1:
            src = at.get((i - 1 if c in "FB" else i + 1, c, n), -1)
            return 0 <= src < j
        if c in "Ww":
            return seen[i]["B" if c == "W" else "b"] > n
        return c not in TURN or seen[i][TURN[c]] > n

    for j in range(width):
        for i in range(p):
            row = grid[i]
            if row[j] != " ":
                record(i, row[j], j)
                continue
            if j >= reach[i]:  # no kind has a pass left after this cell
                continue
            wanted = {c for c in KINDS if last[i][c] > j}
            delta = top = 0
            for k in range(j + 1, width):
                if not wanted:
                    break
                c = row[k]
                delta += DELTA[c]
                before = top
                if delta > top:
                    top = delta
                if c not in wanted:
                    continue
                wanted.discard(c)
                if c in "Ff" and level[i] + before >= peak:
                    continue
                if ready(i, c, j):
                    row[j], row[k] = c, " "
                    record(i, c, j)
                    break
    return grid


def relabel_weights(grid: Grid, m: int) -> Grid:
    """Weight cells re-labelled to run their chunks' backwards first in, first out."""
    for row in grid:
        count = Counter(c for c in row if c != " ")
        if any(count[c] != m for c in KINDS):
            raise Unbuildable("a kind does not have m passes")
        queue: deque[str] = deque()
        for j, c in enumerate(row):
            if c in "Bb":
                queue.append("W" if c == "B" else "w")
            elif c in "Ww":
                row[j] = queue.popleft()
    return grid


def consistent(grid: Grid, m: int) -> bool:
    """The authors' final check: m of each kind, W after its B, the turn-arounds in order on the end
    devices, and on the middle devices each input after its neighbour's."""
    p = len(grid)
    pos: dict[tuple[int, str, int], int] = {}
    for i, row in enumerate(grid):
        seen = Counter[str]()
        for j, c in enumerate(row):
            if c != " ":
                pos[i, c, seen[c]] = j
                seen[c] += 1
        if any(seen[c] != m for c in KINDS):
            return False
    for i in range(p):
        for n in range(m):
            x = {c: pos[i, c, n] for c in KINDS}
            if x["B"] >= x["W"] or x["b"] >= x["w"]:
                return False
            if i == 0:
                ok = x["f"] < x["B"]
            elif i == p - 1:
                ok = x["F"] < x["f"] and x["B"] < x["b"]
            else:
                ok = (pos[i - 1, "F", n] < x["F"] and pos[i - 1, "B", n] < x["B"]
                      and pos[i + 1, "f", n] < x["f"] and pos[i + 1, "b", n] < x["b"])
            if not ok:
                return False
    return True
