"""Bus bandwidth and time against message size, one line per bench run.

The size axis is log2 with labels as the bench's -b/-e flags read them (8B,
1K, 1M ...); bus bandwidth is linear, so that a link's limit (--limit) is a
straight line the curve should approach; time is log, since it spans
microseconds at 8 bytes to seconds at gigabytes.
"""
import math
import os

import matplotlib.pyplot as plt
import matplotlib.ticker as ticker

# (axis title, index in a row's (busbw, time)); the time ticks carry their unit
PANELS = {"busbw": ("bus bandwidth (GB/s)", 0), "time": ("time per call", 1)}


def size_label(n):
    """8 -> '8B', 1024 -> '1K', 3 << 20 -> '3M': binary units, as -b/-e take them."""
    for shift, unit in ((40, "T"), (30, "G"), (20, "M"), (10, "K")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return f"{n}B"


def size_ticks(sizes, most=13):
    """(major, minor) ticks of the size axis: every power of two is a minor
    tick; the labelled ones fall on the sweep's own sizes (8B, 32B, 128B for
    -f 4) and are thinned, a whole number of sweep steps apart, to `most`."""
    exps = sorted({int(math.log2(s)) for s in sizes if s & (s - 1) == 0})
    lo = int(math.floor(math.log2(min(sizes))))
    hi = int(math.ceil(math.log2(max(sizes))))
    step = 0
    for e in exps[1:]:
        step = math.gcd(step, e - exps[0])
    step = step or 1
    first = exps[0] if exps and len(exps) == len(set(sizes)) else lo
    k = step
    while (hi - first) // k + 1 > most:
        k += step
    return [1 << e for e in range(first, hi + 1, k)], [1 << e for e in range(lo, hi + 1)]


def time_label(us, _pos=None):
    """A tick of the time axis: '5 us', '200 us', '1.5 ms', '2 s'."""
    for scale, unit in ((1e6, "s"), (1e3, "ms")):
        if us >= scale:
            return f"{us / scale:g} {unit}"
    return f"{us:g} us"


def _time_axis(ax):
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(time_label))
    lo, hi = ax.get_ylim()
    if hi / lo < 1e4:
        # over four decades or fewer, one label per decade is too few: add 2x and 5x
        ax.yaxis.set_minor_locator(ticker.LogLocator(base=10, subs=(2.0, 5.0)))
        ax.yaxis.set_minor_formatter(ticker.FuncFormatter(time_label))
    else:
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())


def default_labels(runs):
    """'all_reduce shm ring' per run, with the rank count when runs differ in it
    and the file name when two runs would still read the same."""
    ranks_differ = len({r["nranks"] for r in runs}) > 1
    labels = []
    for r in runs:
        algos = r["algorithms"]
        # the tuner may pick another algorithm per size: name them all
        algo = algos[0] if len(algos) == 1 else "tuned: " + ",".join(algos) if algos else ""
        parts = [r["collective"], r["transport"], algo]
        if ranks_differ and r["nranks"]:
            parts.append(f"{r['nranks']} ranks")
        labels.append(" ".join(p for p in parts if p))
    return [f"{label} ({os.path.basename(r['path'])})" if labels.count(label) > 1 else label
            for label, r in zip(labels, runs)]


def _points(run, place, panel):
    xs, ys = [], []
    for size, halves in run["rows"]:
        v = halves[place][panel]
        # log axes cannot show 0 bytes or a zero time; nan is a missing value
        if size > 0 and not math.isnan(v) and (panel == 0 or v > 0):
            xs.append(size)
            ys.append(v)
    return xs, ys


def _size_axis(ax, runs):
    sizes = [s for r in runs for s, _ in r["rows"] if s > 0]
    ax.set_xscale("log", base=2)
    major, minor = size_ticks(sizes)
    ax.set_xticks(minor, minor=True)
    ax.set_xticks(major)
    ax.set_xticklabels([size_label(s) for s in major])
    ax.set_xticklabels([], minor=True)
    ax.set_xlim(min(sizes) / 1.3, max(sizes) * 1.3)


def _limits(ax, limits):
    for value, text in limits:
        ax.axhline(value, color="firebrick", linestyle="--", linewidth=1.2, zorder=1)
        # at the right end: the legend sits at the upper left
        ax.annotate(text, xy=(0.99, value), xycoords=("axes fraction", "data"),
                    xytext=(0, 3), textcoords="offset points", color="firebrick",
                    fontsize=9, ha="right", va="bottom")
    if limits:
        lo, hi = ax.get_ylim()
        ax.set_ylim(min(lo, 0), max(hi, max(v for v, _ in limits) * 1.1))


def _title(runs):
    colls = sorted({r["collective"] for r in runs})
    ranks = sorted({r["nranks"] for r in runs if r["nranks"]})
    who = ", ".join(colls)
    if len(ranks) == 1:
        who += f", {ranks[0]} ranks"
    return who


def plot(runs, labels, out, metric, place, limits, title):
    panels = ["busbw", "time"] if metric == "both" else [metric]
    fig, axes = plt.subplots(len(panels), 1, sharex=True, squeeze=False,
                             figsize=(9, 3.6 * len(panels) + 0.8))
    axes = [a[0] for a in axes]
    for ax, panel in zip(axes, panels):
        name, index = PANELS[panel]
        if panel == "time" and runs[0]["time_key"] == "cpu_time":
            name = "CPU time per call"
        for i, (run, label) in enumerate(zip(runs, labels)):
            xs, ys = _points(run, place, index)
            # the gid names the line's group in an SVG (tests/check_plot.sh reads it)
            ax.plot(xs, ys, marker="o", markersize=3.5, linewidth=1.5, label=label,
                    gid=f"run{i}-{panel}")
        ax.set_ylabel(name)
        ax.grid(True, which="major", alpha=0.35)
        ax.grid(True, which="minor", axis="x", alpha=0.12)
        if panel == "time":
            _time_axis(ax)
        else:
            ax.set_ylim(bottom=0)
            _limits(ax, limits)
        _size_axis(ax, runs)
    axes[-1].set_xlabel("message size (bytes, log2 scale)")
    axes[0].legend(loc="upper left", fontsize=9, framealpha=0.9)
    what = {"busbw": "bus bandwidth", "time": "time"}
    head = title or f"{_title(runs)}: " + \
        " and ".join(what[p] for p in panels) + " against size"
    note = "in-place" if place == "in_place" else "out-of-place"
    if "busbw" in panels:
        note += "; busbw as nccl-tests counts it"
    fig.suptitle(f"{head}\n({note})", fontsize=11)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
