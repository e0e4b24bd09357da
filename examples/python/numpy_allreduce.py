"""The smallest complete rcoll program in NumPy: every rank adds its array.

    PYTHONPATH=python python3 examples/python/numpy_allreduce.py          # 2 ranks, spawned here
    mpiexec -n 4 env PYTHONPATH=python RCOLL_COMM_ID=127.0.0.1:29555 python3 examples/python/numpy_allreduce.py
    torchrun --nproc-per-node 4 examples/python/numpy_allreduce.py   (MASTER_ADDR/PORT, RANK, WORLD_SIZE)
"""
import multiprocessing as mp
import os

import numpy as np
import rcoll


def work(comm):
    x = np.arange(8, dtype=np.float32) * (comm.rank + 1)
    comm.all_reduce(x)  # in place; comm.all_reduce(x, y) writes y instead
    expect = np.arange(8, dtype=np.float32) * sum(range(1, comm.size + 1))
    assert np.array_equal(x, expect), (x, expect)
    print("rank %d of %d: %s" % (comm.rank, comm.size, x))


def spawned(uid, rank, size):
    with rcoll.Communicator(uid, rank, size) as comm:
        work(comm)


if __name__ == "__main__":
    if any(v in os.environ for v in ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID")):
        with rcoll.Communicator.from_env() as comm:  # launched by mpiexec, torchrun or srun
            work(comm)
    else:
        uid = rcoll.UniqueId()  # rank 0's process makes the id; here every rank is a child
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=spawned, args=(uid, r, 2)) for r in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        raise SystemExit(max(p.exitcode for p in procs))
