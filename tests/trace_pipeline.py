#!/usr/bin/env python3
"""Checks a merged rcoll trace (scripts/rcoll-trace-merge) for what
tests/check_trace.sh promises: 4 ranks, ring all-reduce calls, and on every
rank the pipeline overlap of a ring all-reduce: a chunk received from a peer
while an earlier chunk from that peer was still being received or reduced
(message k+1 posted before message k was done), which the viewer shows as a
second lane of that connection. Messages k and k+1 on one
connection are different chunks: each chunk is one message.

    trace_pipeline.py MERGED.json NRANKS     exit 0: all hold; 1: says which does not
    trace_pipeline.py --selftest             the checks reject traces that lack them
"""
import json
import sys


def overlaps(doc):
    """{pid: (overlapping, all) pairs of messages k, k+1 received from one peer in one call}."""
    recvs = {}
    for e in doc["traceEvents"]:
        if e.get("cat") == "step" and e["name"] in ("recv", "recv-reduce"):
            a = e["args"]
            recvs.setdefault((e["pid"], a["call"], a["peer"]), []).append(
                (a["msg"], e["ts"], e["ts"] + e["dur"]))
    found = {}
    for (pid, _, _), ms in recvs.items():
        ms.sort()
        n, pairs = found.get(pid, (0, 0))
        for (m0, _, done0), (m1, post1, _) in zip(ms, ms[1:]):
            n += m1 == m0 + 1 and post1 < done0
            pairs += 1
        found[pid] = (n, pairs)
    return found


def check(doc, nranks):
    problems = []
    calls = [e for e in doc["traceEvents"] if e.get("cat") == "call"]
    pids = {e["pid"] for e in calls}
    if len(pids) != nranks:
        problems.append(f"calls from {len(pids)} ranks, expected {nranks}")
    if not any(e["name"] == "rcollAllReduce" and e["args"]["algo"] == "ring" for e in calls):
        problems.append("no ring all-reduce call in the trace")
    found = overlaps(doc)
    # Many pairs overlap when the engine posts ahead (check_trace.sh's runs:
    # 70-95% on shared memory, 25-40% over sockets, whose staging slots
    # bound the receives in flight); a trace whose post times were taken at completion has a few
    # by accident of completion order (measured: 0-3 of 230 and 0-1 of 950).
    # A tenth is the line.
    for pid in sorted(pids):
        n, pairs = found.get(pid, (0, 0))
        if n == 0 or 10 * n < pairs:
            problems.append(f"rank {pid}: only {n} of {pairs} chunks were in flight while the "
                            "previous one from the same peer was still received or reduced "
                            "(no pipelining)")
    # What a viewer shows: a connection with chunks in flight at once has a
    # second lane ("recv from rank p (2)") with slices on it.
    deep = {e["pid"] for e in doc["traceEvents"]
            if e.get("ph") == "M" and e["name"] == "thread_name"
            and e["args"]["name"].startswith("recv from rank")
            and e["args"]["name"].endswith(" (2)")}
    for pid in sorted(pids - deep):
        problems.append(f"rank {pid}: no receive lane shows a second chunk in flight")
    return problems, found


def step(pid, call, peer, msg, ts, dur):
    return {"name": "recv-reduce", "cat": "step", "ph": "X", "pid": pid, "tid": 101, "ts": ts,
            "dur": dur, "args": {"call": call, "peer": peer, "msg": msg, "bytes": 8, "step": msg}}


def selftest():
    call = {"name": "rcollAllReduce", "cat": "call", "ph": "X", "pid": 0, "tid": 1, "ts": 0,
            "dur": 100, "args": {"call": 1, "algo": "ring"}}
    lane = {"name": "thread_name", "ph": "M", "pid": 0, "tid": 133,
            "args": {"name": "recv from rank 1 (2)"}}
    serial = {"traceEvents": [call, lane, step(0, 1, 1, 0, 0, 10), step(0, 1, 1, 1, 10.5, 10)]}
    piped = {"traceEvents": [call, lane, step(0, 1, 1, 0, 0, 10), step(0, 1, 1, 1, 5, 10)]}
    other_call = {"traceEvents": [call, lane, step(0, 1, 1, 0, 0, 10), step(0, 2, 1, 1, 5, 10)]}
    one_lane = {"traceEvents": [call, step(0, 1, 1, 0, 0, 10), step(0, 1, 1, 1, 5, 10)]}
    assert check(piped, 1)[0] == [], check(piped, 1)
    assert check(one_lane, 1)[0], "a trace without a second receive lane passed"
    assert check(serial, 1)[0], "a serialized trace passed the pipeline check"
    assert check(other_call, 1)[0], "steps of two calls passed as one pipeline"
    assert check(piped, 4)[0], "a 1-rank trace passed as 4 ranks"
    print("trace_pipeline.py: self-test passed (serialized steps, other calls, missing ranks and "
          "a single receive lane are rejected)")
    return 0


def main():
    if sys.argv[1:] == ["--selftest"]:
        return selftest()
    with open(sys.argv[1]) as fh:
        doc = json.load(fh)
    problems, found = check(doc, int(sys.argv[2]))
    for p in problems:
        print("trace_pipeline.py: " + p)
    print("trace_pipeline.py: chunks in flight while the previous one was received or reduced: "
          + ", ".join(f"rank {p}: {n} of {k}" for p, (n, k) in sorted(found.items())))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
