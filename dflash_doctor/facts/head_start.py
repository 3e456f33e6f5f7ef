"""The run's first processes, started as soon as the command line is read, before the doctor imports its checks.

A run of every check asks the target interpreter two things before anything else: the environment probe's facts
(what every collector after it reads) and, in the run's one target process, the import of the target's stack
(`facts.probes.SharedTargetProcess`: torch, on the critical path of every layer that uses it). Neither needs anything
of the doctor but its command line, while the doctor's own modules (its checks, the facts' shapes: ~0.3 s of
imports) need nothing of them. So the run starts both first (`start`), imports the rest while they work, and its
collectors take them (`take_environment`, `take_target_process`) when they ask for the same thing: the same
interpreter, arguments, timeout and working directory, else they start their own. Whatever was not taken is ended
when the run is (`close`).

Started only for what the run is certain to ask: a run of every check (no --only, no --skip), in an interpreter that
passes the same check the collection makes before starting anything in it (`facts.python.interpreter.precheck`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from dflash_doctor.facts.probes import (
    SHARED_IMPORTS,
    Launched,
    ProbeOutcome,
    SharedTargetProcess,
    launch,
    probe_outcome,
)
from dflash_doctor.facts.python.environment_args import probe_args
from dflash_doctor.facts.python.interpreter import InterpreterError, precheck
from dflash_doctor.knowledge.stack import TORCH_USERS
from dflash_doctor.process import kill_group
from dflash_doctor.request import Request

__all__ = ["HeadStart", "start", "target_process_preload"]


def target_process_preload(gpu_layers: bool) -> tuple[str, ...] | None:
    """What the run's target process preloads only if the target has it (`preload_if_found`): the GPU layers use
    torch whatever is installed (None: always); the Python layers only through a package that loads it."""
    return None if gpu_layers else TORCH_USERS.value


class HeadStart:
    """The processes one run started early, each given to the first collector that asks for the same (once)."""

    CLOSE_WAIT_S = 5.0
    """How long `close` waits for the environment probe's thread once the probe is stopped (its process group is
    killed at once; a process stuck in the kernel may outlast that: the thread, a daemon, is then left to it)."""

    @classmethod
    def empty(cls) -> HeadStart:
        """A head start that started nothing: each collector starts its own."""
        return cls(time.monotonic())

    def __init__(self, started_at: float) -> None:
        self.started_at = started_at
        self._lock = threading.Lock()
        self._target: tuple[tuple[Any, ...], SharedTargetProcess] | None = None
        self._environment: tuple[tuple[Any, ...], threading.Thread] | None = None
        self._environment_outcome: ProbeOutcome | None = None
        self._stop = threading.Event()
        self._spans: dict[str, tuple[float, float]] = {}
        self._environment_launched: Launched | None = None
        self._taken: set[str] = set()

    # -- taken by the collection
    def take_target_process(self, python: str, preload: tuple[str, ...], preload_if_found: tuple[str, ...] | None,
                            timeout_s: float, cwd: str) -> SharedTargetProcess | None:
        with self._lock:
            if self._target is None or self._target[0] != (python, tuple(preload), preload_if_found, timeout_s, cwd):
                return None
            (_, process), self._target = self._target, None
        return process

    def take_environment(self, python: str, args: Mapping[str, Any], timeout_s: float, cwd: str) -> ProbeOutcome | None:
        with self._lock:
            if self._environment is None or self._environment[0] != (python, dict(args), timeout_s, cwd):
                return None
            (_, thread), self._environment = self._environment, None
            self._taken.add("environment")
        thread.join()
        return self._environment_outcome

    def spans(self) -> dict[str, tuple[float, float]]:
        """When each probe a collector took ran (time.monotonic() at its start and end), by the collector's name:
        the report's timeline shows them as `head-start` steps."""
        with self._lock:
            return {name: span for name, span in self._spans.items() if name in self._taken}

    # -- the run's end
    def close(self) -> None:
        """End what no collector took: the environment probe (stopped), the target process (its group killed)."""
        with self._lock:
            target, self._target = self._target, None
            environment, self._environment = self._environment, None
        self._stop.set()
        if environment is not None:
            environment[1].join(self.CLOSE_WAIT_S)
        if target is not None:
            target[1].abort()

    def __enter__(self) -> HeadStart:  # noqa: PYI034 - typing.Self is 3.11+
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- started by `start`
    def _start_environment(self, python: str, args: dict[str, Any], timeout_s: float, cwd: str) -> None:
        # Launched here, in the thread that starts the run, so that `kill_now` knows every process there is; only
        # the exchange with it goes on in a thread.
        began = time.monotonic()
        try:
            launched = launch(python, "environment", cwd=cwd)
        except OSError:
            return  # the collector starts its own, and says why it could not
        self._environment_launched = launched

        def ask() -> None:
            self._environment_outcome = probe_outcome(launched, python, args, timeout_s=timeout_s, started=began,
                                                      stop=self._stop)
            with self._lock:
                self._spans["environment"] = (began, time.monotonic())

        thread = threading.Thread(target=ask, name="dflash-doctor-head-start-environment", daemon=True)
        self._environment = ((python, args, timeout_s, cwd), thread)
        thread.start()

    def kill_now(self) -> None:
        """Kill what it started and remove their carriers, taking no lock: for a signal handler that ends the doctor
        right after (`commands.run`)."""
        self._stop.set()
        launched = self._environment_launched
        if launched is not None:
            kill_group(launched.proc)
            launched.remove_carrier()
        target = self._target
        if target is not None:
            target[1].kill_now()

    def _start_target_process(self, python: str, preload_if_found: tuple[str, ...] | None, timeout_s: float,
                              cwd: str) -> None:
        process = SharedTargetProcess(python, preload=SHARED_IMPORTS, timeout_s=timeout_s, cwd=cwd,
                                      preload_if_found=preload_if_found).start()
        self._target = ((python, tuple(SHARED_IMPORTS), preload_if_found, timeout_s, cwd), process)


def start(request: Request) -> HeadStart:
    """The head start of the run `request` asks for: both processes for a run of every check, nothing otherwise
    (an empty HeadStart, whose collectors start their own)."""
    head = HeadStart.empty()
    if request.only or request.skip:
        return head
    python = request.interpreter
    try:
        precheck(python)
    except InterpreterError:
        return head  # the collection says why, as ever
    try:
        head._start_target_process(python, target_process_preload(not request.no_gpu), request.timeout_s, request.cwd)
        head._start_environment(python, probe_args(request.verify_hashes), request.timeout_s, request.cwd)
    except BaseException:
        head.close()  # what had started is ended with it
        raise
    return head
