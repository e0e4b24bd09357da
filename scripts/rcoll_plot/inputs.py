"""Reading and checking rcoll-plot's inputs, before anything is drawn.

Two kinds of file: a bench -J file (nccl-tests' JSON schema, file version 3,
with rcoll's own fields under "rcoll"), and the file `rcoll_linkcheck -J`
writes ({"tool": "rcoll_linkcheck", ...}). Only the fields the plots use are
checked, so that nccl-tests' own files plot too. Every problem is one
InputError whose text names the file and what was wrong; the script prints it
on one line and exits 2.
"""
import json
import math
import os


class InputError(Exception):
    pass


def _num(v):
    """A number from the file: ints, floats, and nccl-tests' string "nan"."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if v == "nan":
        return math.nan
    return None


def read_json(path):
    """(kind, data): kind is "bench" or "linkcheck"."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not JSON: not UTF-8 text") from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise InputError(f"{path}: not JSON: {e}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: wrong schema: the top level is not an object")
    if "tool" in data:
        if data["tool"] != "rcoll_linkcheck":
            raise InputError(f"{path}: wrong schema: tool {data['tool']!r}, "
                             "expected 'rcoll_linkcheck'")
        return "linkcheck", linkcheck(path, data)
    if "results" in data:
        return "bench", bench(path, data)
    raise InputError(f"{path}: wrong schema: neither a bench -J file (no 'results') "
                     "nor an rcoll_linkcheck file (no 'tool')")


# ------------------------------------------------------------------ bench -J

def _collective(data):
    rc = data.get("config", {}).get("rcoll", {})
    if isinstance(rc, dict) and isinstance(rc.get("collective"), str):
        return rc["collective"]
    # nccl-tests' own file: the program's name, all_reduce_perf -> all_reduce
    args = data.get("args")
    if isinstance(args, list) and args and isinstance(args[0], str):
        name = os.path.basename(args[0])
        return name[:-5] if name.endswith("_perf") else name
    return "?"


def _transport(data):
    """'shm', or 'shm+socket' when peers of several classes use different ones."""
    rc = data.get("config", {}).get("rcoll", {})
    names = []
    for t in (rc.get("transports") or []) if isinstance(rc, dict) else []:
        word = str(t.get("transport", "")).split(" ")[0] if isinstance(t, dict) else ""
        if word and word not in names:
            names.append(word)
    return "+".join(names)


def _nranks(data):
    rc = data.get("config", {}).get("rcoll", {})
    n = rc.get("nranks") if isinstance(rc, dict) else None
    return n if isinstance(n, int) else None


def bench(path, data):
    """A run: {path, collective, transport, algorithms, nranks, rows}, where
    rows holds (size, {"out_of_place": (busbw, time), "in_place": ...})."""
    results = data["results"]
    if not isinstance(results, list):
        raise InputError(f"{path}: wrong schema: 'results' is not a list")
    if not results:
        raise InputError(f"{path}: no results to plot (an empty sweep?)")
    rows, algos, time_key = [], [], None
    for i, r in enumerate(results):
        where = f"{path}: wrong schema: results[{i}]"
        if not isinstance(r, dict):
            raise InputError(f"{where} is not an object")
        size = r.get("size")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise InputError(f"{where}: 'size' is {size!r}, expected a byte count")
        halves = {}
        for half in ("out_of_place", "in_place"):
            h = r.get(half)
            if not isinstance(h, dict):
                raise InputError(f"{where}: no '{half}' object")
            key = "cpu_time" if "cpu_time" in h else "time"
            time_key = time_key or key
            busbw, t = _num(h.get("bus_bw")), _num(h.get(key))
            if busbw is None or t is None:
                missing = "bus_bw" if busbw is None else key
                raise InputError(f"{where}.{half}: '{missing}' is {h.get(missing)!r}, "
                                 "expected a number")
            halves[half] = (busbw, t)
        rows.append((size, halves))
        rc = r.get("rcoll")
        algo = rc.get("algorithm") if isinstance(rc, dict) else None
        if isinstance(algo, str) and algo not in algos:
            algos.append(algo)
    if not any(size > 0 for size, _ in rows):
        raise InputError(f"{path}: no results to plot: every size is 0 bytes")
    return {"path": path, "collective": _collective(data), "transport": _transport(data),
            "algorithms": algos, "nranks": _nranks(data), "rows": rows,
            "time_key": time_key}


# ------------------------------------------------------------------ linkcheck

def _need(path, obj, where, key, check, expected):
    v = obj.get(key) if isinstance(obj, dict) else None
    if not check(v):
        raise InputError(f"{path}: wrong schema: {where}'{key}' is {v!r}, expected {expected}")
    return v


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v):
    return _num(v) is not None and not math.isnan(_num(v))


def linkcheck(path, data):
    """{path, ranks, hosts, bytes, threshold, median, bw, lat (n x n lists,
    None on the diagonal and for a pair the file lacks), outliers, slow_nodes}."""
    version = _need(path, data, "", "version", _is_int, "an integer")
    if version != 1:
        raise InputError(f"{path}: wrong schema: rcoll_linkcheck version {version}, "
                         "this script reads version 1")
    n = _need(path, data, "", "ranks", lambda v: _is_int(v) and v >= 2, "2 or more ranks")
    hosts = _need(path, data, "", "hosts",
                  lambda v: isinstance(v, list) and len(v) == n and
                  all(isinstance(h, str) for h in v), f"a list of {n} host names")
    median = _need(path, data, "", "median", lambda v: isinstance(v, dict), "an object")
    for key in ("latency_us", "bandwidth_gbps"):
        _need(path, median, "median.", key, _is_num, "a number")
    links = _need(path, data, "", "links", lambda v: isinstance(v, list), "a list")
    bw = [[None] * n for _ in range(n)]
    lat = [[None] * n for _ in range(n)]
    for i, link in enumerate(links):
        where = f"links[{i}]."
        if not isinstance(link, dict):
            raise InputError(f"{path}: wrong schema: links[{i}] is not an object")
        s = _need(path, link, where, "src", lambda v: _is_int(v) and 0 <= v < n, f"a rank 0..{n - 1}")
        d = _need(path, link, where, "dst", lambda v: _is_int(v) and 0 <= v < n and v != s,
                  f"a rank 0..{n - 1} other than src")
        bw[s][d] = float(_need(path, link, where, "bandwidth_gbps", _is_num, "a number"))
        lat[s][d] = float(_need(path, link, where, "latency_us", _is_num, "a number"))
    outliers = _need(path, data, "", "outliers", lambda v: isinstance(v, list), "a list")
    for i, o in enumerate(outliers):
        where = f"outliers[{i}]."
        _need(path, o, where, "src", lambda v: _is_int(v) and 0 <= v < n, f"a rank 0..{n - 1}")
        _need(path, o, where, "dst", lambda v: _is_int(v) and 0 <= v < n, f"a rank 0..{n - 1}")
        _need(path, o, where, "what", lambda v: v in ("bandwidth", "latency"),
              "'bandwidth' or 'latency'")
    slow = data.get("slow_nodes", [])
    if not isinstance(slow, list):
        raise InputError(f"{path}: wrong schema: 'slow_nodes' is not a list")
    return {"path": path, "ranks": n, "hosts": hosts, "bytes": data.get("bytes"),
            "threshold": data.get("threshold"), "median": median, "bw": bw, "lat": lat,
            "outliers": outliers, "slow_nodes": slow}
