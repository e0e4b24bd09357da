"""NCCL through lib/libnccl-net-rcoll.so, one rank of it (tests/gpu/run.sh).

run.sh starts two of these on the one GPU with NCCL_HOSTID different per
rank, so NCCL takes them for two hosts and has to carry every byte through
its network plugin: NCCL_NET_PLUGIN=rcoll loads ours and NCCL_NET=rcoll makes
NCCL fail rather than fall back to its own sockets if ours does not load.
Each rank all-reduces and all-gathers device tensors, checks every element,
then times all-reduce at a few sizes and prints the bus bandwidth
(2 * (n-1)/n * bytes / time, as nccl-tests counts it).

Exit status 0 when every check passed.
"""
import os
import sys
import time

import torch
import torch.distributed as dist


def check_allreduce(rank, world, numel):
    t = torch.full((numel,), float(rank + 1), device="cuda", dtype=torch.float32)
    t[::7] += rank  # not the same value everywhere, so a wrong offset shows
    dist.all_reduce(t)
    want = torch.full((numel,), float(world * (world + 1) // 2), device="cuda")
    want[::7] += world * (world - 1) // 2
    bad = int((t != want).sum().item())
    print(f"rank {rank}: all_reduce {numel} floats: {bad} wrong", flush=True)
    return bad == 0


def check_allgather(rank, world, numel):
    mine = torch.arange(numel, device="cuda", dtype=torch.int32) + rank * 1000003
    out = torch.empty(world * numel, device="cuda", dtype=torch.int32)
    dist.all_gather_into_tensor(out, mine)
    want = torch.cat([torch.arange(numel, device="cuda", dtype=torch.int32) + r * 1000003
                      for r in range(world)])
    bad = int((out != want).sum().item())
    print(f"rank {rank}: all_gather {numel} ints per rank: {bad} wrong", flush=True)
    return bad == 0


def time_allreduce(rank, world, nbytes, iters):
    t = torch.ones(nbytes // 4, device="cuda", dtype=torch.float32)
    for _ in range(3):
        dist.all_reduce(t)
    torch.cuda.synchronize()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    torch.cuda.synchronize()
    sec = (time.perf_counter() - start) / iters
    busbw = 2 * (world - 1) / world * nbytes / sec / 1e9
    if rank == 0:
        print(f"nccl+rcoll all_reduce {nbytes:>10} B: {sec * 1e6:10.1f} us  busbw {busbw:6.2f} GB/s",
              flush=True)


def main():
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            device_id=torch.device("cuda", 0))
    ok = True
    for numel in (1, 1000, 1 << 20, 25 << 20):
        ok = check_allreduce(rank, world, numel) and ok
    for numel in (3, 1 << 20):
        ok = check_allgather(rank, world, numel) and ok
    for nbytes in (8, 1 << 20, 16 << 20, 128 << 20):
        time_allreduce(rank, world, nbytes, 20 if nbytes <= (16 << 20) else 5)
    dist.destroy_process_group()
    print(f"rank {rank}: {'all checks passed' if ok else 'CHECKS FAILED'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
