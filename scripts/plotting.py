"""The plotting helpers meshtp's scripts share (report.py, validate.py, reproduce_report.py):
matplotlib on its file-only backend, and the two bar charts they draw — bars side by side
(predicted beside simulated or measured) and bars stacked from parts (a step's compute,
communication, bubble, optimizer; a rank's memory).

matplotlib comes from Debian's python3-matplotlib, which installs for Debian's python3
(/usr/bin/python3): a python3 of pyenv or a virtual environment first on the PATH may lack it.
"""
import io
import os

MISSING = ("python3-matplotlib is not installed for {python}: install it with "
           "`apt-get install python3-matplotlib` (scripts/install.sh does)")


def check():
    """Raises ImportError when matplotlib cannot be imported (cheaper than pyplot(): the
    package alone, not its plotting module)."""
    import matplotlib  # noqa: F401


def pyplot():
    """matplotlib.pyplot on the Agg backend (PNG, no display), or ImportError naming the
    package to install."""
    import sys
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError(MISSING.format(python=sys.executable) + f" ({e})") from e
    return plt


def png(fig, dpi=100):
    """The figure as PNG bytes, cropped to what is drawn (a legend beside the axes
    included); the figure is closed."""
    import matplotlib.pyplot as plt
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, facecolor="white", bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def save(fig, path, dpi=100):
    """The figure as a PNG file at `path`, written whole or not at all; the figure is closed."""
    data = png(fig, dpi)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def side_by_side(ax, labels, series, log=False, rotation=30):
    """Vertical bars, one group per label, one bar per (name, values) of `series` in a group."""
    n = len(series)
    width = 0.8 / n
    xs = range(len(labels))
    for i, (name, values) in enumerate(series):
        ax.bar([x + (i - (n - 1) / 2) * width for x in xs], values, width, label=name)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, rotation=rotation, ha="right" if rotation else "center",
                       fontsize=8)
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside, not over


def stacked(ax, labels, parts, hatched=()):
    """Horizontal bars, the first label on top, each stacked from `parts`: (name, values,
    color) in order from the left. Rows whose index is in `hatched` are hatched (e.g. a
    layout that does not fit). Parts that are zero in every row are left out (and out of the
    legend)."""
    ys = list(range(len(labels)))[::-1]
    left = [0.0] * len(labels)
    for name, values, color in parts:
        if not any(v > 0 for v in values):
            continue
        bars = ax.barh(ys, values, left=left, color=color, label=name, edgecolor="white",
                       linewidth=0.5)
        for i in hatched:
            bars[i].set_hatch("//")
        left = [a + b for a, b in zip(left, values)]
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=8)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside, not over
    return left
