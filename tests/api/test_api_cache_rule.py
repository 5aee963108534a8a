"""One rule decides which cache entry answers a solve request, whether the cache-hit fast path (in
front of FastAPI, memory only) or the route (which reads the store) answers it: the two agree byte
for byte, ``auto`` answered by a proven-optimal entry of another method included."""

from __future__ import annotations

from api_servers import Server

FAST = "pipesched_cache_hits_fast_total"
HITS = "pipesched_cache_hits_total"


def test_a_hit_answered_by_the_route_and_by_the_fast_path_agree_auto_included(make_server) -> None:  # noqa: ANN001
    server: Server = make_server().start()
    problem = {"devices": 1, "microbatches": 3}  # one device: no bubble, GPipe is provably optimal
    solved = server.post({"problem": problem, "method": "gpipe"}).json()
    assert solved["cached"] is False and solved["schedule"]["status"] == "optimal"
    for method in ("gpipe", "auto"):
        server.restart()  # the memo is empty; the entry is in the store only
        body = {"problem": problem, "method": method, "time_limit_s": 100}
        fast, hits = server.metric(FAST), server.metric(HITS)
        by_route = server.post(body)  # not in memory yet: the route reads the store (and memoises it)
        assert (server.metric(FAST), server.metric(HITS)) == (fast, hits + 1), method
        by_memo = server.post(body)  # now the fast path answers from memory
        assert (server.metric(FAST), server.metric(HITS)) == (fast + 1, hits + 2), method
        assert by_route.status_code == by_memo.status_code == 200
        assert by_route.content == by_memo.content, method
        assert by_memo.json()["cached"] is True and by_memo.json()["schedule"] == solved["schedule"]
