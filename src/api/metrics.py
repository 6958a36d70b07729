"""/metrics through prometheus-client: this process's HTTP requests (count and latency by method,
route template and status), the deployment's readings (`Operations.readings`, read at scrape time),
and the process's own (CPU, memory, file descriptors, garbage collection)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
    multiprocess,
    values,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from engram.service.operations import Operations, Reading
from engram.service.tally import Tally

from .lifecycle import MULTIPROCESS_DIR  # set: several serving processes count in files there (ADR 0037)

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
# Seconds: most answers take milliseconds; a 503 comes within 5 s; the statement timeout is 10 s.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

disable_created_metrics()  # a *_created series beside every counter and histogram doubles the series for nothing


class _Readings(Collector):
    """The deployment's readings as metric families, read at each scrape (never at registration)."""

    def __init__(self, read: Callable[[], list[Reading]]) -> None:
        self.read = read

    def describe(self) -> Iterable[Metric]:
        return ()

    def collect(self) -> Iterable[Metric]:
        for reading in self.read():
            family = Metric(reading.name.removesuffix("_total") if reading.kind == "counter" else reading.name,
                            reading.help, reading.kind)
            for labels, value in reading.samples:
                family.add_sample(reading.name, labels, value)
            yield family


class Metrics:
    """One registry per app. Label values are bounded: a method from METHODS (or `other`), a route
    template (never the path: ids stay out), a status code.

    Under `engram serve --processes N` (ADR 0037) every serving process writes its request counts to
    files in PROMETHEUS_MULTIPROC_DIR, and the registry reads them all: any process answers the sum.
    The process's own CPU, memory and garbage collection are left out then (they would be one
    process's, whichever answered)."""

    def __init__(self, operations: Operations) -> None:
        self.registry = CollectorRegistry()
        shared = bool(os.environ.get(MULTIPROCESS_DIR))
        own = None if shared else self.registry  # shared: the files are read, not these objects
        labels = ("method", "route", "status")
        self.requests = Counter("engram_http_requests", "HTTP requests answered by Engram's serving processes, by "
                                "method, route template and status", labels, registry=own)
        self.latency = Histogram("engram_http_request_duration_seconds", "Time to answer an HTTP request, by method, "
                                 "route template and status", labels, buckets=LATENCY_BUCKETS, registry=own)
        if shared:
            count_in_files(operations.tallies())
            self.registry.register(_Readings(lambda: operations.readings(tallies=False)))
            multiprocess.MultiProcessCollector(self.registry)
        else:
            self.registry.register(_Readings(operations.readings))
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
            GCCollector(registry=self.registry)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        labels = (method, route, str(status))
        self.requests.labels(*labels).inc()
        self.latency.labels(*labels).observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def count_in_files(tallies: list[tuple[str, str, Tally]]) -> None:
    """Under several serving processes: every later count of these tallies also goes to the shared
    files, so /metrics in any process answers their sum over the processes (the main process's
    learning failures included, though it serves no HTTP)."""
    if values.ValueClass.__name__ != "MmapedValue":  # what the library chose when it was first imported
        raise RuntimeError(f"{MULTIPROCESS_DIR} must be set before prometheus-client is imported")
    for name, help, tally in tallies:
        counter = Counter(name.removesuffix("_total"), help, registry=None)
        tally.mirror(counter.inc)
