"""Work spread over this machine's cores, its results taken in the order it was given.

The index built from a whole log (a fresh clone's first command, `qem verify`'s fresh
replay, a pull of packs, a big load) checks every record it reads and replays every note:
work in Python that one process does a piece at a time.  Here the pieces run in worker
processes (forked, so they start in milliseconds with every module already imported)
while this process writes their results into the index, in the order the pieces were
given, a bounded number of them in flight.  With one core, or `QEM_WORKERS=1`, the very
same pieces run here, one after the other: the two ways differ in where, never in what.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

Piece = tuple[Callable[..., Any] | None, Any]  # (function, its arguments), or (None, a value passed through)
IN_FLIGHT = 2  # pieces given to each worker ahead of the one this process is taking


def count() -> int:
    """How many processes a spread uses: `QEM_WORKERS` where set (1: none, the work runs
    here), else the cores this process may run on."""
    raw = os.environ.get("QEM_WORKERS", "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class Spread:
    """Worker processes, or none (the pieces then run in this process)."""

    def __init__(self, pool: Any = None, workers: int = 1) -> None:
        self.pool, self.workers = pool, workers

    def in_order(self, pieces: Iterable[Piece]) -> Iterator[Any]:
        """Each piece's result, in the order given: a `(function, args)` piece is run by
        a worker, a `(None, value)` piece's result is its value.  `pieces` is read from
        this process as room frees (so it may read files and the index as it goes), at
        most IN_FLIGHT per worker ahead; a worker's exception is raised here, in its turn.
        A worker that dies (killed, out of memory) loses nothing: its pieces and every
        later one run here."""
        waiting: deque[tuple[Callable[..., Any] | None, Any, Any]] = deque()
        running = 0
        for function, args in pieces:
            future = self._start(function, args)
            waiting.append((function, args, future))
            running += future is not None
            while running > IN_FLIGHT * self.workers or (waiting and waiting[0][2] is None):
                running -= waiting[0][2] is not None
                yield self._result(*waiting.popleft())
        while waiting:
            yield self._result(*waiting.popleft())

    def _start(self, function: Callable[..., Any] | None, args: Any) -> Any:
        """A piece given to a worker (its future), or None: it is done here, in its turn."""
        if function is None or self.pool is None:
            return None
        from concurrent.futures.process import BrokenProcessPool

        try:
            return self.pool.submit(function, *args)
        except (BrokenProcessPool, OSError):  # a worker died, or none could be started (a process limit)
            self.pool = None  # the rest is done here
            return None

    def _result(self, function: Callable[..., Any] | None, args: Any, future: Any) -> Any:
        if function is None:
            return args
        if future is not None:
            from concurrent.futures.process import BrokenProcessPool

            try:
                return future.result()
            except BrokenProcessPool:
                self.pool = None  # a worker died: its pieces and the rest are done here
        return function(*args)


@contextmanager
def spread(wanted: bool = True) -> Iterator[Spread]:
    """A spread over `count()` worker processes when `wanted` (the work is big enough to
    pay for starting them) and there is more than one core; else a spread of none.  The
    workers end with the block: waited for when it ends well, the work not started
    dropped when it fails."""
    workers = count() if wanted else 1
    if workers < 2 or not hasattr(os, "fork"):
        yield Spread()
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    try:
        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"), initializer=_worker_starts)
    except (OSError, ImportError, NotImplementedError, ValueError):  # no semaphores here (no /dev/shm), say
        yield Spread()
        return
    try:
        yield Spread(pool, workers)
    except BaseException:  # Ctrl-C, or the work failed: the workers are stopped, not waited for
        # The pool's own thread, which sees its workers gone, is let end before this process
        # does: the interpreter's exit wakes each pool's thread through a pipe that thread
        # closes as it ends, unguarded in Python 3.11 (a traceback after "interrupted").
        # (Taken before the shutdown, which forgets it.)
        manager = getattr(pool, "_executor_manager_thread", None)
        for process in list((getattr(pool, "_processes", None) or {}).values()):  # (3.14: terminate_workers)
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        if manager is not None:
            manager.join(timeout=5)
        raise
    pool.shutdown()


def _worker_starts() -> None:
    """A worker leaves Ctrl-C to the process it works for (which stops the work and says
    so once), rather than each printing its own interruption."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
