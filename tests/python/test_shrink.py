"""Communicator.shrink after a rank dies: 3 processes, rank 1 exits without a
word after the first all-reduce; ranks 0 and 2 see the error, shrink without
rank 1, and all-reduce on the 2-rank result."""
import os
import unittest

import numpy as np

import rcoll
from spawn import run


def survive(rank, size, uid):
    c = rcoll.Communicator(uid, rank, size, timeout_ms=20000)
    c.all_reduce(np.ones(1 << 16, np.float32))  # connected, then rank 1 dies
    if rank == 1:
        os._exit(0)
    try:
        for _ in range(100000):
            c.all_reduce(np.ones(1 << 16, np.float32))
        return "no call failed"
    except rcoll.Error as e:
        err = type(e).__name__
    async_error = c.async_error()
    sub = c.shrink([1], abort=True)
    x = np.full(8, rank + 1, np.int32)
    sub.all_reduce(x)
    out = (err, async_error != 0, sub.rank, sub.size, x.tolist())
    sub.destroy()
    c.destroy()
    return out


class ShrinkAfterDeath(unittest.TestCase):
    def test_survivors_go_on(self):
        res = run(survive, 3, (rcoll.UniqueId(),), ranks=[0, 2])
        for r, new_rank in ((0, 0), (2, 1)):
            err, saw_async, got_rank, got_size, x = res[r]
            self.assertTrue(saw_async, "rank %d: no async error after %s" % (r, err))
            self.assertEqual((got_rank, got_size), (new_rank, 2))
            self.assertEqual(x, [1 + 3] * 8)


if __name__ == "__main__":
    unittest.main()
