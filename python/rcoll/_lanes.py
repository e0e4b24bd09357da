"""A lane is one rcoll communicator and the one thread that calls it, in the
order operations were submitted, so that every rank issues them in the same
order (rcoll communicators are not for concurrent use). Small operations run
in the submitting thread when the lane is idle, which saves a thread handoff;
large ones run on the lane's thread so that the caller (DDP's backward) goes on.

After a failure the lane is broken: later operations fail at once with the
first error, instead of waiting on peers that are gone."""
import collections
import threading


class Lane:
    def __init__(self, name, make_comm=None, comm=None, inline_bytes=0):
        self.name = name
        self.comm = comm
        self._make_comm = make_comm
        self._inline_bytes = inline_bytes
        self._q = collections.deque()
        self._cv = threading.Condition()
        self._busy = False
        self._closed = False
        self.error = None
        self._thread = threading.Thread(target=self._loop, name="rcoll-" + name, daemon=True)
        self._thread.start()

    def submit(self, fn, done, nbytes):
        """Runs fn(comm) in order; then done(None) or done(exception). When it
        runs here (inline) or the lane is already broken, a failure is also
        raised here, to the caller."""
        with self._cv:
            if self._closed:
                raise RuntimeError("rcoll: the process group was shut down (lane %s)" % self.name)
            inline = (self.comm is not None and not self._q and not self._busy
                      and (nbytes <= self._inline_bytes or self.error is not None))
            if inline:
                self._busy = True
            else:
                self._q.append((fn, done))
                self._cv.notify_all()
        if inline:
            try:
                err = self._run(fn, done)
            finally:
                with self._cv:
                    self._busy = False
                    if self._q:  # only then is the lane's thread waiting for us
                        self._cv.notify_all()
            if err is not None:
                raise err

    def _run(self, fn, done):
        err = self.error
        if err is None:
            try:
                if self.comm is None:
                    self.comm = self._make_comm()
                fn(self.comm)
            except BaseException as e:  # noqa: B902 - handed to the waiter, not swallowed
                err = e
                if self.error is None:
                    self.error = e
        elif not isinstance(err, _Earlier):
            err = _Earlier("rcoll: an earlier operation on this process group failed, so this one "
                           "did not run; the first error was: %s" % err)
        done(err)
        return err

    def _loop(self):
        while True:
            with self._cv:
                while not self._q or self._busy:
                    if self._closed and not self._q:
                        return
                    self._cv.wait()
                fn, done = self._q.popleft()
                self._busy = True
            try:
                self._run(fn, done)
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()

    def close(self):
        with self._cv:
            self._closed = True
            self._cv.notify_all()


class _Earlier(RuntimeError):
    pass
