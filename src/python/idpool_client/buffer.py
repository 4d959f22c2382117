"""The pure parts of the buffers (src/lib/buffer.h's mirror): how many IDs a
take asks for, below how many buffered IDs it is sent, and the measured
demand. No I/O, no locks (the caller holds the application's lock)."""

LOW_WATER_MAX = 1000000


def batch_next(prev, rate, target, min_batch, max_batch, hungry):
    """How many IDs the next take asks for (buffer.c's batch_next): enough
    for `target` seconds of the measured demand (rate, IDs/s), at least twice
    the previous batch when a caller had to wait since the last take
    (hungry), clamped to [min_batch, max_batch]."""
    want = rate * target
    if hungry and want < 2.0 * prev:
        want = 2.0 * prev
    if want < min_batch:
        want = min_batch
    if want > max_batch:
        want = max_batch
    return int(want)


def low_water_ids(batch, buffer, rate, target):
    """Below how many buffered IDs a take is sent (buffer.c's
    low_water_ids): `target` seconds of the measured demand (at most
    LOW_WATER_MAX), never less than one batch or the `buffer` option; above
    max_batch per target it is reached by several takes in a row."""
    want = min(rate * target, LOW_WATER_MAX)
    lw = batch if batch > buffer else buffer
    return int(want) if want > lw else lw


def rate_update(rate, ids, seconds):
    """Demand as an exponentially weighted rate (buffer.c's rate_update):
    `ids` consumed over `seconds`, weighted by the time covered."""
    if seconds <= 0:
        return rate
    now = ids / seconds
    w = min(seconds, 1.0)
    return rate * (1.0 - w) + now * w
