"""A rank killed (SIGKILL) mid-training under DDP with "rcoll": the others
must raise an error that names it within RCOLL_TIMEOUT + 5 s, not hang."""
import os
import signal
import time
import unittest

from spawn import run

TIMEOUT_S = 10


def train(rank, size, port):
    os.environ["RCOLL_TIMEOUT"] = str(TIMEOUT_S)
    import torch
    import torch.distributed as dist
    import rcoll.torch  # noqa: F401
    dist.init_process_group("rcoll", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=size)
    torch.manual_seed(0)
    net = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(256, 256))
    for step in range(1000):
        if rank == size - 1 and step == 5:
            os.kill(os.getpid(), signal.SIGKILL)
        t0 = time.time()
        try:
            net(torch.randn(8, 256)).sum().backward()
        except Exception as e:  # noqa: B902 - what the test looks at
            return step, time.time() - t0, "%s: %s" % (type(e).__name__, e)
    return None


class KilledRank(unittest.TestCase):
    def test_survivors_name_the_dead_rank(self):
        size = 3
        res = run(train, size, (29500 + os.getpid() % 400,), timeout=TIMEOUT_S + 60,
                  ranks=range(size - 1))
        for rank in range(size - 1):
            self.assertIsNotNone(res[rank], "rank %d trained on after its peer died" % rank)
            step, took, text = res[rank]
            print("\n  rank %d, step %d, after %.1f s: %s" % (rank, step, took, text[:300]))
            self.assertLessEqual(took, TIMEOUT_S + 5)
        # The first to notice names the killed rank; a survivor can also see
        # another survivor leave after its own error (this test ends them).
        self.assertTrue(any("rank %d " % (size - 1) in res[r][2] for r in range(size - 1)), res)


if __name__ == "__main__":
    unittest.main()
