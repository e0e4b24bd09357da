"""Lab exercise 01, reference solution: read a bench table, fit the
alpha-beta model t(S) = alpha + beta * S by least squares, predict."""


def parse_table(text):
    """(size in bytes, out-of-place time in us) for every data row of an
    nccl-tests style table; comment lines (#) and log lines are skipped."""
    points = []
    for line in text.splitlines():
        fields = line.split()
        if not fields or line.lstrip().startswith("#"):
            continue
        try:  # size count type redop root time algbw busbw #wrong ...
            size, time = int(fields[0]), float(fields[5])
        except (ValueError, IndexError):
            continue  # a log line ("vm:123 rcoll WARN ..."), not a row
        points.append((size, time))
    return points


def fit(points):
    """(alpha in us, beta in us per byte) minimising the squared error of
    alpha + beta * size over the points."""
    if len({s for s, _ in points}) < 2:
        raise ValueError("fit needs times at two different sizes at least, got %d point(s)" % len(points))
    n = len(points)
    mean_s = sum(s for s, _ in points) / n
    mean_t = sum(t for _, t in points) / n
    sxx = sum((s - mean_s) ** 2 for s, _ in points)
    sxy = sum((s - mean_s) * (t - mean_t) for s, t in points)
    beta = sxy / sxx
    return mean_t - beta * mean_s, beta


def predict(alpha, beta, size):
    """The model's time in us for a message of size bytes."""
    return alpha + beta * size
