"""The calls added for NCCL 2.28 parity, from Python, in real processes:
PreMulSum ops against NumPy's arithmetic (2 and 3 ranks), rcoll.mem_alloc
(round trip, freeing, as a collective's buffer), scalable init through
several unique ids (4 ranks), group(simulate=True) against tests/bin/simulate
(the C driver) where it is built, and the algorithm / transport queries."""
import os
import subprocess
import unittest

import numpy as np

import rcoll
from spawn import run

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TYPES = ["float32", "float64", "int32", "float16"]
N = 999  # not a multiple of anything the algorithms cut by


def data(rank, dtype, n=N):
    return ((np.arange(n) * 7 + rank * 3) % 5 + 1).astype(dtype)


def scalar(rank, dtype):
    """This rank's factor: exact in every type here, so the result is exact too."""
    return rank + 2 if np.dtype(dtype).kind == "i" else 0.5 * (rank + 1)


def premul(rank, size, uid):
    out = {}
    with rcoll.Communicator(uid, rank, size) as c:
        for t in TYPES:
            # the scalar as a Python number with dtype=, as a NumPy scalar, as a 0-d array
            forms = [(scalar(rank, t), t), (np.dtype(t).type(scalar(rank, t)), None),
                     (np.array(scalar(rank, t), dtype=t), None)]
            for i, (s, dt) in enumerate(forms):
                with c.premul_sum_op(s, dt) as op:
                    x = data(rank, t)
                    y = np.empty_like(x)
                    c.all_reduce(x, y, op=op)
                    out["allreduce", t, i] = y
                    c.all_reduce(x, op=op)  # in place
                    out["allreduce-inplace", t, i] = x
                    z = data(rank, t)
                    c.reduce(z, op=op, root=1)
                    if rank == 1:
                        out["reduce", t, i] = z
                    r = np.empty(7, dtype=t)
                    c.reduce_scatter(data(rank, t, 7 * size), r, op=op)
                    out["reduce_scatter", t, i] = r
        # Ops are destroyed at the end of each block: far more than the
        # communicator's 64 slots are made one after another.
        for _ in range(100):
            with c.premul_sum_op(1.0, "float32") as op:
                pass
        out["ops-left"] = len(c._ops)
        errors = []
        op64 = c.premul_sum_op(2.0, np.float64)
        with rcoll.Communicator(rcoll.UniqueId(), 0, 1) as other:
            for bad in (lambda: c.all_reduce(np.zeros(4, np.float32), op=op64),  # made for float64
                        lambda: other.all_reduce(np.zeros(4, np.float64), op=op64),  # another comm
                        lambda: c.premul_sum_op(0.5, "int32"),  # would truncate
                        lambda: c.premul_sum_op(1.0),  # no dtype
                        lambda: c.premul_sum_op(2**40, "int32"),  # out of range
                        lambda: c.premul_sum_op(1.0, "complex64")):
                try:
                    bad()
                    errors.append(None)
                except rcoll.Error as e:
                    errors.append((type(e).__name__, str(e)))
        op64.destroy()
        try:
            c.all_reduce(np.zeros(4, np.float64), op=op64)
            errors.append(None)
        except rcoll.Error as e:
            errors.append((type(e).__name__, str(e)))
        kept = c.premul_sum_op(3.0, "float32")  # left for destroy() to clean up
        c.barrier()
    out["errors"] = errors
    out["kept-destroyed"] = kept._comm is None
    return out


class PreMulSum(unittest.TestCase):
    def check(self, size):
        res = run(premul, size, (rcoll.UniqueId(),))
        for t in TYPES:
            scaled = np.stack([data(r, t) * np.array(scalar(r, t), dtype=t) for r in range(size)])
            want = scaled.sum(0).astype(t)
            full = np.stack([data(r, t, 7 * size) * np.array(scalar(r, t), dtype=t)
                             for r in range(size)]).sum(0).astype(t)
            for i in range(3):
                for r in range(size):
                    for key in ("allreduce", "allreduce-inplace"):
                        np.testing.assert_array_equal(res[r][key, t, i], want, "%s %s form %d" % (key, t, i))
                    np.testing.assert_array_equal(res[r]["reduce_scatter", t, i], full[7 * r:7 * r + 7])
                np.testing.assert_array_equal(res[1]["reduce", t, i], want)
        for r in range(size):
            self.assertEqual(res[r]["ops-left"], 0)
            self.assertTrue(res[r]["kept-destroyed"])
            e = res[r]["errors"]
            self.assertTrue(all(x is not None for x in e), e)
            words = [("InvalidArgumentError", "made for datatype float64, not float32"),
                     ("InvalidUsageError", "another communicator"),
                     ("InvalidArgumentError", "not a int32 value"),
                     ("InvalidArgumentError", "give dtype="),
                     ("InvalidArgumentError", "not a int32 value"),
                     ("InvalidArgumentError", "complex64"),
                     ("InvalidUsageError", "destroyed")]
            for (name, text), (want_name, word) in zip(e, words):
                self.assertEqual(name, want_name, text)
                self.assertIn(word, text)

    def test_two_ranks(self):
        self.check(2)

    def test_three_ranks(self):
        self.check(3)


def mem_collective(rank, size, uid):
    with rcoll.Communicator(uid, rank, size) as c, rcoll.mem_alloc(4 * N) as m:
        a = m.numpy("float32", N)
        a[:] = data(rank, "float32")
        c.all_reduce(a)  # the view as a collective's buffer
        b = rcoll.mem_alloc(64)
        b.numpy()[:] = rank + 1
        c.all_reduce(b, op="max")  # the MemBuffer itself, as bytes
        got = (a.copy(), b.numpy().copy(), m.ptr % 4096)
        b.close()
        return got


class MemAlloc(unittest.TestCase):
    def test_round_trip_and_free(self):
        m = rcoll.mem_alloc(10000)
        self.assertIsNone(m.device)
        self.assertEqual(m.ptr % 4096, 0)  # page-aligned, as rcollMemAlloc promises for host memory
        v = m.numpy("int64")
        self.assertEqual(v.size, 10000 // 8)
        v[:] = np.arange(v.size)
        np.testing.assert_array_equal(m.numpy("int64"), np.arange(v.size))
        self.assertEqual(m.numpy("uint8", 16).tobytes(), np.arange(2, dtype=np.int64).tobytes())
        p = m.ptr
        m.close()
        m.close()  # twice is nothing
        self.assertTrue(m.closed)
        with self.assertRaises(rcoll.InvalidUsageError):
            m.numpy()
        # A view keeps the memory: it is not freed (and handed out again) while v lives.
        m2 = rcoll.mem_alloc(10000)
        self.assertNotEqual(m2.ptr, p)
        np.testing.assert_array_equal(v, np.arange(v.size))
        del v  # the last view: now rcollMemFree, and rcoll's pool gives the same pages back
        m3 = rcoll.mem_alloc(10000)
        self.assertEqual(m3.ptr, p)
        m2.close()
        m3.close()
        with rcoll.mem_alloc(0) as z:  # size 0: NULL, as rcollMemAlloc gives
            self.assertEqual(z.ptr, 0)
            self.assertEqual(z.numpy().size, 0)
        with self.assertRaises(rcoll.InvalidArgumentError):
            rcoll.mem_alloc(-1)
        with rcoll.mem_alloc(64) as m4, self.assertRaises(rcoll.InvalidArgumentError):
            m4.numpy("float64", 9)

    def test_in_a_collective(self):
        res = run(mem_collective, 3, (rcoll.UniqueId(),))
        want = np.stack([data(r, "float32") for r in range(3)]).sum(0)
        for a, b, offset in res:
            np.testing.assert_array_equal(a, want)
            np.testing.assert_array_equal(b, np.full(64, 3, np.uint8))
            self.assertEqual(offset, 0)


def scalable(rank, size, uids):
    with rcoll.Communicator.from_unique_ids(uids, rank, size) as c:
        x = np.full(5, rank + 1, np.int64)
        c.all_reduce(x)
        g = np.empty(size, np.int32)
        c.all_gather(np.array([rank * 10], np.int32), g)
        return c.rank, c.size, x.tolist(), g.tolist()


class Scalable(unittest.TestCase):
    def test_two_ids_four_ranks(self):
        res = run(scalable, 4, ([rcoll.UniqueId(), rcoll.UniqueId()],))
        self.assertEqual(res, [(r, 4, [10] * 5, [0, 10, 20, 30]) for r in range(4)])

    def test_three_ids_four_ranks_as_bytes(self):
        res = run(scalable, 4, ([bytes(rcoll.UniqueId()) for _ in range(3)],))
        self.assertEqual([x[2] for x in res], [[10] * 5] * 4)

    def test_bad_ids(self):
        with self.assertRaises(rcoll.InvalidArgumentError):
            rcoll.Communicator.from_unique_ids([], 0, 1)
        with self.assertRaises(rcoll.InvalidArgumentError) as e:  # more ids than ranks
            rcoll.Communicator.from_unique_ids([rcoll.UniqueId(), rcoll.UniqueId()], 0, 1)
        self.assertIn("nId", str(e.exception))


SIM_BYTES = [8, 65536, 16777216]


def simulate(rank, size, uid):
    out = []
    with rcoll.Communicator(uid, rank, size) as c:
        for nbytes in SIM_BYTES:
            x = np.full(nbytes // 4, 1.0, np.float32)
            y = np.full(nbytes // 4, -7.0, np.float32)
            with rcoll.group(simulate=True) as sim:
                c.all_reduce(x, y)
            ran = bool((y != -7.0).any() or (x != 1.0).any())
            out.append((nbytes, sim.estimated_us, ran, c.algorithm("allreduce", nbytes)))
        with rcoll.group(simulate=True) as sim:  # two calls: the sum of both
            c.all_reduce(np.zeros(16384, np.float32))
            c.all_reduce(np.zeros(16384, np.float32))
        two = sim.estimated_us
        with rcoll.group(simulate=True) as sim:
            c.all_reduce(np.zeros(16384, np.float32))
        one = sim.estimated_us
        # Still usable: the same call, run.
        x = np.ones(1000, np.float32)
        c.all_reduce(x)
        other = (rank + 1) % size
        return out, (one, two), x.tolist() == [float(size)] * 1000, c.peer_transport(other), size


class Simulate(unittest.TestCase):
    def test_predicts_and_runs_nothing(self):
        res = run(simulate, 2, (rcoll.UniqueId(),))
        sim_bin = os.path.join(ROOT, "tests", "bin", "simulate")
        for out, (one, two), usable, peer, size in res:
            self.assertTrue(usable)
            self.assertEqual(peer, ("shm", True))
            times = [t for _, t, _, _ in out]
            self.assertTrue(all(t > 0 for t in times), out)
            self.assertTrue(times[0] < times[1] < times[2], "the estimate must grow with size: %s" % out)
            self.assertFalse(any(ran for _, _, ran, _ in out), "a simulated group ran: %s" % out)
            self.assertAlmostEqual(two, 2 * one, delta=0.01 * two)
            self.assertEqual(out, res[0][0])  # every rank predicts the same
            for nbytes, t, _, algo in out:
                self.assertTrue(algo.name and algo.chunk_bytes > 0, algo)
            if not os.access(sim_bin, os.X_OK):
                print("\n  %s not built (make tests): estimates checked for growth only: %s"
                      % (sim_bin, times))
                continue
            for nbytes, t, _, algo in out:
                # The C driver: the same all-reduce, 2 ranks of one process over shared memory.
                line = subprocess.run([sim_bin, str(size), str(nbytes)], capture_output=True, text=True,
                                      timeout=120, env=dict(os.environ, RCOLL_DEBUG="WARN"))
                self.assertEqual(line.returncode, 0, line.stderr)
                f = line.stdout.split()
                c_us, c_algo = float(f[f.index("estimated_us") + 1]), f[f.index("algorithm") + 1]
                self.assertEqual(algo.name, c_algo, nbytes)
                self.assertAlmostEqual(t, c_us, delta=0.0011, msg="%d B: Python %s us, C %s us"
                                       % (nbytes, t, c_us))
        print("\n  simulated all-reduce at 2 ranks: %s" % ", ".join(
            "%d B %.3f us (%s)" % (n, t, a.name) for n, t, _, a in res[0][0]))


def queries(rank, size, uid):
    with rcoll.Communicator(uid, rank, size) as c:
        errs = []
        for bad in (lambda: c.algorithm("sendrecv", 8), lambda: c.peer_transport(size),
                    lambda: c.algorithm("allreduce", -1)):
            try:
                bad()
                errs.append(None)
            except rcoll.Error as e:
                errs.append(type(e).__name__)
        return [c.peer_transport(p) for p in range(size)], errs


class Queries(unittest.TestCase):
    def test_transport_and_errors(self):
        res = run(queries, 2, (rcoll.UniqueId(),))
        for peers, errs in res:
            self.assertEqual([p.same_node for p in peers], [True, True])
            self.assertTrue(all(p.transport for p in peers), peers)
            self.assertEqual(errs, ["InvalidArgumentError"] * 3)


if __name__ == "__main__":
    unittest.main()
