"""Read ahead on a second thread, so that reading the source overlaps writing.

The drivers release the GIL while they do I/O (apsw around each step, the native
extension around hashing), so on two cores the reader's next batch is fetched while
the writer commits the current one. Memory stays bounded: at most ``depth`` batches
wait in the queue.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")
_DONE = object()


def prefetch(batches: Iterator[T], depth: int = 2) -> Iterator[T]:
    """Yield the items of ``batches``, produced on a worker thread ``depth`` ahead.

    An exception in the worker is raised here; leaving the loop early stops the worker
    after the item it is producing.
    """
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def run() -> None:
        try:
            for item in batches:
                while not stop.is_set():
                    try:
                        q.put((True, item), timeout=0.05)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put((False, _DONE))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            q.put((False, exc))

    worker = threading.Thread(target=run, name="statemigrate-reader", daemon=True)
    worker.start()
    try:
        while True:
            ok, item = q.get()
            if ok:
                yield item
            elif item is _DONE:
                return
            else:
                raise item
    finally:
        stop.set()
        while worker.is_alive():
            try:
                q.get(timeout=0.05)
            except queue.Empty:
                pass
        worker.join()
