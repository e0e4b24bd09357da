"""The rcoll_linkcheck matrix as heat maps: bandwidth and latency per
sender (row) and receiver (column), each cell with its value, the links the
tool found out of line outlined in red, and its outlier lines under the maps.

Both maps are coloured so that dark means bad (low bandwidth, high latency),
on scales anchored at zero and at the tool's threshold rather than at the
smallest and largest value: a spread of a few percent between healthy links
stays one colour, and only a link the tool would flag turns dark.
"""
import matplotlib.pyplot as plt
import numpy as np

from rcoll_plot.bench import size_label

MAX_NOTES = 6  # outlier and slow-node lines printed under the maps


def _matrix(cells):
    return np.array([[np.nan if v is None else v for v in row] for row in cells], dtype=float)


def _cell_text(ax, m, fmt, norm, cmap):
    n = m.shape[0]
    for s in range(n):
        for d in range(n):
            v = m[s, d]
            if s == d:
                text, color = "-", "dimgray"
            elif np.isnan(v):  # the file had no such link
                text, color = "n/a", "dimgray"
            else:
                r, g, b, _ = cmap(norm(v))
                # dark text on light cells, light text on dark ones
                color = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
                text = fmt.format(v)
            ax.text(d, s, text, ha="center", va="center", color=color,
                    fontsize=max(6, 11 - n // 3))


def _scale(lc, what, m):
    """(vmin, vmax): bandwidth from 0 to the best link; latency from 0 to a
    bit past the threshold (median / threshold), or the worst link if above."""
    t = lc["threshold"] if isinstance(lc["threshold"], (int, float)) and \
        0 < lc["threshold"] < 1 else 0.5
    top = np.nanmax(m) if np.any(~np.isnan(m)) else 1.0
    if what == "bandwidth":
        return 0.0, max(top, lc["median"]["bandwidth_gbps"])
    return 0.0, max(top, lc["median"]["latency_us"] / t * 1.25)


def _panel(fig, ax, lc, key, title, unit, fmt, cmap_name, what):
    m = _matrix(lc[key])
    cmap = plt.get_cmap(cmap_name).copy()
    cmap.set_bad("lightgray")
    vmin, vmax = _scale(lc, what, m)
    im = ax.imshow(np.ma.masked_invalid(m), cmap=cmap, vmin=vmin, vmax=vmax,
                   interpolation="nearest")
    names = [f"{r} {h}" for r, h in enumerate(lc["hosts"])]
    n = lc["ranks"]
    ax.set_xticks(range(n))
    ax.set_yticks(range(n))
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=9)
    ax.set_yticklabels(names, fontsize=9)
    ax.set_xlabel("receiver (dst rank, host)")
    ax.set_ylabel("sender (src rank, host)")
    ax.set_title(title, fontsize=10)
    if n <= 16:  # beyond that the numbers no longer fit in a cell
        _cell_text(ax, m, fmt, im.norm, cmap)
    for o in lc["outliers"]:
        if o["what"] == what:
            ax.add_patch(plt.Rectangle((o["dst"] - 0.5, o["src"] - 0.5), 1, 1, fill=False,
                                       edgecolor="red", linewidth=3,
                                       gid=f"outlier-{what}-{o['src']}-{o['dst']}"))
    fig.colorbar(im, ax=ax, shrink=0.8).set_label(unit)


def _notes(lc):
    notes = [o.get("text") or f"rank {o['src']} -> rank {o['dst']}: {o['what']}"
             for o in lc["outliers"]]
    notes += [s["text"] for s in lc["slow_nodes"] if isinstance(s, dict) and s.get("text")]
    if len(notes) > MAX_NOTES:
        notes = notes[:MAX_NOTES] + [f"... and {len(notes) - MAX_NOTES} more"]
    return notes


def plot(lc, out, metric, title):
    panels = []
    if metric in ("both", "busbw"):
        panels.append(("bw", "bandwidth (GB/s), sender to receiver", "GB/s", "{:.2f}",
                       "viridis", "bandwidth"))
    if metric in ("both", "time"):
        panels.append(("lat", "latency (us, one way)", "us", "{:.1f}", "viridis_r", "latency"))
    n = lc["ranks"]
    notes = _notes(lc)
    side = max(4.0, 0.5 * n + 2.0)
    fig, axes = plt.subplots(1, len(panels), squeeze=False, layout="constrained",
                             figsize=(side * len(panels) + 1.5, side + 1.0 + 0.2 * len(notes)))
    for ax, p in zip(axes[0], panels):
        _panel(fig, ax, lc, *p)
    med = lc["median"]
    hosts = len(set(lc["hosts"]))
    size = f", {size_label(lc['bytes'])} messages" if isinstance(lc["bytes"], int) else ""
    head = title or f"rcoll_linkcheck: {n} ranks on {hosts} host{'s' if hosts != 1 else ''}{size}"
    fig.suptitle(f"{head}\nmedian {med['bandwidth_gbps']:.3g} GB/s, {med['latency_us']:.3g} us"
                 "; outlined in red: out of line", fontsize=11)
    # supxlabel, unlike fig.text, gets room from the constrained layout
    fig.supxlabel("\n".join(notes) if notes else "every link within the threshold",
                  x=0.02, ha="left", fontsize=9, color="firebrick" if notes else "darkgreen")
    fig.savefig(out, dpi=120)
    plt.close(fig)
