"""Closed integer intervals: (start, end) includes both ends."""


def merge(intervals):
    """Merges overlapping intervals (sharing at least one point); returns them sorted."""
    merged = []
    for start, end in sorted(intervals):
        if start > end:
            raise ValueError(f"empty interval ({start}, {end})")
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def covered(intervals):
    """How many integers the intervals cover together."""
    return sum(end - start + 1 for start, end in merge(intervals))


def contains(intervals, point):
    """Whether any interval includes `point`."""
    return any(start <= point <= end for start, end in merge(intervals))
