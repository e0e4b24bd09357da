"""A small model on synthetic data, trained with DistributedDataParallel.
Prints the loss of every step (rank 0), in full precision, so that runs can
be compared bit for bit; ends with the mean step time.

    PYTHONPATH=python python3 examples/python/ddp_train.py --backend rcoll --nproc 2
    PYTHONPATH=python python3 examples/python/ddp_train.py --backend gloo  --nproc 4
    torchrun --nproc-per-node 2 examples/python/ddp_train.py --backend rcoll   (torchrun sets RANK...)
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


def model():
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def batch(step, rank, n=32):
    g = torch.Generator().manual_seed(1000 * step + rank)  # each rank its own shard
    x = torch.randn(n, 64, generator=g)
    y = (x[:, :10].sum(1) * 3).long().remainder(10)
    return x, y


def train(rank, size, args):
    if args.backend == "rcoll":
        import rcoll.torch  # noqa: F401 - registers the backend
    torch.manual_seed(0)
    torch.set_num_threads(1)
    if "MASTER_ADDR" not in os.environ:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port))
    dist.init_process_group(args.backend, rank=rank, world_size=size)
    net = nn.parallel.DistributedDataParallel(model())
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    times = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        x, y = batch(step, rank)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        # the mean loss over ranks, itself all-reduced: what every rank trains on
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        if rank == 0:
            print("step %3d loss %.17g" % (step, mean.item() / size), flush=True)
    if rank == 0:
        warm = times[2:] or times
        print("# %s %d ranks: mean step %.3f ms" % (args.backend, size, 1e3 * sum(warm) / len(warm)),
              flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="rcoll", choices=["rcoll", "gloo"])
    p.add_argument("--nproc", type=int, default=2, help="processes to spawn (without torchrun)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--port", type=int, default=29650)
    args = p.parse_args()
    if "RANK" in os.environ:  # torchrun
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
    else:
        mp.spawn(train, args=(args.nproc, args), nprocs=args.nproc)


if __name__ == "__main__":
    main()
