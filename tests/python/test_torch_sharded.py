"""What trainers use beyond plain DDP, through "rcoll" and through "gloo" on
the same inputs: DDP's communication hooks (allreduce, fp16 and, on torch
2.x, bf16 compression: futures chained with then()), the object collectives (all_gather_object, broadcast_object_list,
gather_object, scatter_object_list), and on torch 2.x the functional
collectives and DTensor (a sharded tensor gathered by redistribute) and FSDP2
(fully_shard, which builds a DeviceMesh from the group and runs
all_gather_into_tensor and reduce_scatter_tensor on flat shards). Losses must be bit-identical between
the two backends at 2 ranks, where a sum of two has one order."""
import os
import unittest

from spawn import run

SIZE = 2


def train(rank, size, port, backend):
    import torch
    import torch.distributed as dist
    import rcoll.torch  # noqa: F401
    dist.init_process_group(backend, init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=size)
    objs = [None] * size
    dist.all_gather_object(objs, {"rank": rank, "x": [rank] * (rank + 1)})
    bcast = [("hello", rank)]
    dist.broadcast_object_list(bcast, src=size - 1)
    gathered = [None] * size if rank == 0 else None
    dist.gather_object(("g", rank), gathered, dst=0)
    scattered = [None]
    dist.scatter_object_list(scattered, [("s", q) for q in range(size)] if rank == 1 else None, src=1)
    losses = None
    try:
        from torch.distributed.fsdp import fully_shard
    except (ImportError, ValueError):  # torch 1.13 has no FSDP2 (and its FSDP1
        fully_shard = None  # fails to import on Python 3.11; 2.5's, elsewhere, wants CUDA)
    funcs = None
    if fully_shard is not None:
        import torch.distributed._functional_collectives as funcol
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Replicate, Shard, distribute_tensor
        summed = funcol.wait_tensor(funcol.all_reduce(torch.full((4,), rank + 1.0), "sum",
                                                      dist.group.WORLD))
        mesh = init_device_mesh("cpu", (size,))
        whole = distribute_tensor(torch.arange(8.0), mesh, [Shard(0)]).redistribute(
            mesh, [Replicate()]).to_local()
        funcs = (summed.tolist(), whole.tolist())
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer)
        fully_shard(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        torch.manual_seed(1 + rank)
        losses = []
        for _ in range(4):
            loss = model(torch.randn(8, 16)).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            total = loss.detach().clone()
            dist.all_reduce(total)
            losses.append(total.item())
    dist.barrier()
    dist.destroy_process_group()
    return objs, bcast, gathered, scattered, funcs, losses


def hooked(rank, size, port, backend):
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    import rcoll.torch  # noqa: F401
    dist.init_process_group(backend, init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=size)
    hooks = ["allreduce_hook", "fp16_compress_hook"]
    if int(torch.__version__.split(".")[0]) >= 2:  # 1.13 refuses bf16 without CUDA and NCCL
        hooks.append("bf16_compress_hook")
    losses = {}
    for name in hooks:
        torch.manual_seed(0)
        net = torch.nn.parallel.DistributedDataParallel(
            torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)))
        net.register_comm_hook(None, getattr(default_hooks, name))
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        torch.manual_seed(1 + rank)
        losses[name] = []
        for _ in range(3):
            loss = net(torch.randn(8, 16)).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses[name].append(loss.item())
    dist.destroy_process_group()
    return losses


class Sharded(unittest.TestCase):
    def test_ddp_comm_hooks_match_gloo(self):
        import torch
        if int(torch.__version__.split(".")[0]) < 2:
            # Seen here: gloo's own run of hooked() hung in 2 of 5 tries on
            # 1.13 (rcoll's in 0 of 5), which failed a CI run; 2.x's gloo does not.
            self.skipTest("torch 1.13's gloo hangs in this test, so there is no reference")
        port = 29050 + os.getpid() % 40
        mine = run(hooked, SIZE, (port, "rcoll"), timeout=300)
        ref = run(hooked, SIZE, (port + 1, "gloo"), timeout=300)
        self.assertEqual(mine, ref)
        print("\n  DDP losses with %s: bit-identical to gloo's" % ", ".join(sorted(mine[0])))

    def test_objects_and_fsdp_match_gloo(self):
        port = 29100 + os.getpid() % 400
        mine = run(train, SIZE, (port, "rcoll"), timeout=300)
        ref = run(train, SIZE, (port + 1, "gloo"), timeout=300)
        for rank in range(SIZE):
            objs, bcast, gathered, scattered, funcs, losses = mine[rank]
            self.assertEqual(objs, [{"rank": q, "x": [q] * (q + 1)} for q in range(SIZE)])
            self.assertEqual(bcast, [("hello", SIZE - 1)])
            self.assertEqual(gathered, [("g", q) for q in range(SIZE)] if rank == 0 else None)
            self.assertEqual(scattered, [("s", rank)])
            if funcs is not None:
                self.assertEqual(funcs, ([3.0] * 4, [float(i) for i in range(8)]))
            self.assertEqual(mine[rank][:5], ref[rank][:5])
            self.assertEqual(losses, ref[rank][5], "FSDP losses of rank %d, rcoll vs gloo" % rank)
        if mine[0][5] is None:
            print("\n  object collectives equal to gloo's; no FSDP2 in this torch")
        else:
            print("\n  object collectives, functional all_reduce and DTensor equal to gloo's; "
                  "FSDP2 losses bit-identical: %s" % mine[0][5])


if __name__ == "__main__":
    unittest.main()
