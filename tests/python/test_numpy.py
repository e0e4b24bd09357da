"""Every collective, rcoll type and op on NumPy arrays, 3 processes, against
NumPy's own arithmetic on the same inputs; plus split, group, errors."""
import os
import pickle
import unittest

import numpy as np

import rcoll
from spawn import run

TYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64"]
OPS = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}
N = 1000


def data(rank, dtype, n=N):
    x = (np.arange(n) * 7 + rank * 3) % 5 + 1  # small positive values: no overflow in prod
    return x.astype(dtype)


def collectives(rank, size, uid):
    out = {}
    with rcoll.Communicator(uid, rank, size) as c:
        for t in TYPES:
            for op in OPS:
                x = data(rank, t)
                y = np.empty_like(x)
                c.all_reduce(x, y, op=op)
                out["allreduce", t, op] = y
                c.all_reduce(x, op=op)  # in place
                out["allreduce-inplace", t, op] = x
                r = np.empty(N // 10 * 0 + 10, dtype=t)
                c.reduce_scatter(data(rank, t, 10 * size), r, op=op)
                out["reduce_scatter", t, op] = r
                z = data(rank, t)
                c.reduce(z, op=op, root=1)
                if rank == 1:
                    out["reduce", t, op] = z
            g = np.empty(N * size, dtype=t)
            c.all_gather(data(rank, t), g)
            out["allgather", t] = g
            b = data(rank, t)
            c.broadcast(b, root=size - 1)
            out["broadcast", t] = b
            a2a = np.empty(N * size, dtype=t)
            c.all_to_all(data(rank, t, N * size), a2a)
            out["alltoall", t] = a2a
            out["gather", t] = c.gather(data(rank, t), g if rank == 0 else None, root=0)
            sc = np.empty(N, dtype=t)
            c.scatter(data(rank, t, N * size) if rank == 1 else None, sc, root=1)
            out["scatter", t] = sc
        a = data(rank, "float32")
        c.all_reduce(a, op="avg")
        out["avg"] = a
        # a ring shift in a group: every rank sends right and receives from the left
        s, r = data(rank, "int64"), np.empty(N, dtype="int64")
        with rcoll.group():
            c.send(s, (rank + 1) % size)
            c.recv(r, (rank - 1) % size)
        out["ring"] = r
        sub = c.split(rank % 2)
        v = np.array([rank], dtype="int32")
        sub.all_reduce(v)
        out["split"] = (sub.rank, sub.size, int(v[0]))
        sub.destroy()
        c.barrier()
    return out


class NumpyCollectives(unittest.TestCase):
    SIZE = 3

    @classmethod
    def setUpClass(cls):
        uid = rcoll.UniqueId()
        cls.res = run(collectives, cls.SIZE, (uid,))

    def test_all(self):
        n = self.SIZE
        for t in TYPES:
            stack = np.stack([data(r, t) for r in range(n)])
            for op, f in OPS.items():
                want = f(stack, axis=0).astype(t)
                for r in range(n):
                    np.testing.assert_array_equal(self.res[r]["allreduce", t, op], want, "%s %s" % (t, op))
                    np.testing.assert_array_equal(self.res[r]["allreduce-inplace", t, op], want)
                    full = f(np.stack([data(q, t, 10 * n) for q in range(n)]), axis=0).astype(t)
                    np.testing.assert_array_equal(self.res[r]["reduce_scatter", t, op], full[10 * r:10 * r + 10])
                np.testing.assert_array_equal(self.res[1]["reduce", t, op], want)
            for r in range(n):
                np.testing.assert_array_equal(self.res[r]["allgather", t], stack.reshape(-1))
                np.testing.assert_array_equal(self.res[r]["broadcast", t], data(n - 1, t))
                # block r of every rank's all-to-all input, in rank order
                blocks = [data(q, t, N * n)[N * r:N * (r + 1)] for q in range(n)]
                np.testing.assert_array_equal(self.res[r]["alltoall", t], np.concatenate(blocks))
                np.testing.assert_array_equal(self.res[r]["scatter", t], data(1, t, N * n)[N * r:N * (r + 1)])
            np.testing.assert_array_equal(self.res[0]["gather", t], stack.reshape(-1))
            self.assertIsNone(self.res[1]["gather", t])
        avg = np.mean(np.stack([data(r, "float32") for r in range(n)]), axis=0, dtype=np.float32)
        for r in range(n):
            np.testing.assert_allclose(self.res[r]["avg"], avg, rtol=1e-6)
            np.testing.assert_array_equal(self.res[r]["ring"], data((r - 1) % n, "int64"))
        self.assertEqual([x["split"] for x in self.res], [(0, 2, 2), (0, 1, 1), (1, 2, 2)])


def bad_calls(rank, size, uid):
    msgs = []
    with rcoll.Communicator(uid, rank, size) as c:
        for call in (lambda: c.all_reduce(np.zeros(4, np.float32), np.zeros(3, np.float32)),
                     lambda: c.all_reduce(np.zeros(4, np.complex64)),
                     lambda: c.all_reduce(np.zeros((4, 4), np.float32)[:, 0]),
                     lambda: c.all_reduce(np.zeros(4, np.float32), op="xor"),
                     lambda: c.broadcast(np.zeros(4, np.float32), root=size)):
            try:
                call()
                msgs.append(None)
            except rcoll.InvalidArgumentError as e:
                msgs.append((e.code, str(e)))
    return msgs


def dead_peer(rank, size, uid):
    import time
    c = rcoll.Communicator(uid, rank, size, timeout_ms=3000)
    c.all_reduce(np.zeros(1 << 20, np.float32))  # connected, then rank 1 dies
    if rank == 1:
        os._exit(0)  # gone without a word
    t = time.monotonic()
    try:
        c.all_reduce(np.zeros(1 << 20, np.float32))
    except rcoll.Error as e:
        return type(e).__name__, str(e), time.monotonic() - t
    return None


class DirStore:
    """The least a store needs: set(key, bytes) and a get(key) that waits (bounded)."""

    def __init__(self, path):
        self.path = path

    def set(self, key, value):
        tmp = os.path.join(self.path, key.replace("/", "_") + ".tmp")
        with open(tmp, "wb") as f:
            f.write(value)
        os.rename(tmp, os.path.join(self.path, key.replace("/", "_")))

    def get(self, key):
        import time
        path = os.path.join(self.path, key.replace("/", "_"))
        for _ in range(3000):
            if os.path.exists(path):
                with open(path, "rb") as f:
                    return f.read()
            time.sleep(0.01)
        raise KeyError(key)


def from_store(rank, size, path):
    with rcoll.Communicator.from_store(DirStore(path), rank, size) as c:
        x = np.full(3, rank + 1, np.int32)
        c.all_reduce(x)
        return x.tolist()


def from_env(rank, size, port):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(size), RCOLL_COMM_ID="127.0.0.1:%d" % port)
    with rcoll.Communicator.from_env() as c:
        x = np.full(3, rank + 1, np.float64)
        c.all_reduce(x, op="max")
        return (c.rank, c.size, x.tolist())


class NumpyInit(unittest.TestCase):
    def test_from_store(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(run(from_store, 3, (d,)), [[6, 6, 6]] * 3)

    def test_from_env(self):
        res = run(from_env, 2, (29200 + os.getpid() % 500,))
        self.assertEqual(res, [(0, 2, [2.0] * 3), (1, 2, [2.0] * 3)])


class NumpyErrors(unittest.TestCase):
    def test_bad_arguments_name_the_problem(self):
        msgs = run(bad_calls, 2, (rcoll.UniqueId(),))[0]
        self.assertTrue(all(m is not None and m[0] == 4 for m in msgs), msgs)
        for m, word in zip(msgs, ("recvbuf has 3", "complex64", "contiguous", "xor", "root")):
            self.assertIn(word, m[1])

    def test_dead_peer_is_named_within_timeout(self):
        name, text, took = run(dead_peer, 2, (rcoll.UniqueId(),), timeout=60, ranks=[0])[0]
        self.assertIn(name, ("RemoteError", "TimeoutError", "SystemCallError"), text)
        print("\n  dead peer: %s after %.2f s: %s" % (name, took, text))
        self.assertIn("rank 1", text)
        self.assertLess(took, 3 + 5)

    def test_unique_id(self):
        u = rcoll.UniqueId()
        self.assertEqual(len(bytes(u)), rcoll.UNIQUE_ID_BYTES)
        self.assertEqual(pickle.loads(pickle.dumps(u)), u)
        self.assertEqual(rcoll.UniqueId.from_str(str(u)), u)
        with self.assertRaises(rcoll.InvalidArgumentError):
            rcoll.UniqueId(b"short")


if __name__ == "__main__":
    unittest.main()
