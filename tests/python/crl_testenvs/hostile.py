# Envs that take their whole process down (segfault, os._exit, a hang), for the processes executor's fault tests.
"""Hostile envs: failures no exception handler can catch, which only a worker process contains.

All behave like ``bad._BaseBadEnv`` (action ``Discrete(2)``, observation ``Box(-inf, inf, (4,),
float32)``, reward 1.0, truncation after ``max_episode_steps``) until step index ``at_step``
(0-based, counted from the last reset), where they:

KillingEnv(how="segv", at_step=3, exit_status=0, count_file=None, max_makes=None)
    how="segv": read address 0 (``ctypes.string_at(0)``): SIGSEGV;
    how="exit": ``os._exit(exit_status)`` (no exception, no atexit, no flush);
    how="hang": sleep forever;
    how="child_exit": fork a child that calls ``os._exit(7)`` and check it exited with 7 (a
    well-behaved use of os._exit, which must keep working in any process);
    how="none": never (a well-behaved env, for the limits below).
    With ``count_file``, each construction adds a line to that file and raises ``RuntimeError``
    once more than ``max_makes`` constructions were counted: the first makes succeed (crl's
    own), later ones (a worker process's) fail.
CloseRaisingEnv(exc_type="RuntimeError")
    well-behaved, but ``close()`` raises ``exc_type("boom in close")``.
"""

import builtins
import ctypes
import os
import time

from crl_testenvs.bad import _BaseBadEnv

_HOWS = ("segv", "exit", "hang", "child_exit", "none")


class KillingEnv(_BaseBadEnv):
    def __init__(self, how="segv", at_step=3, exit_status=0, count_file=None, max_makes=None,
                 max_episode_steps=50):
        if how not in _HOWS:
            raise ValueError(f"KillingEnv: how must be one of {_HOWS}, got {how!r}")
        if count_file is not None:
            with open(count_file, "a+", encoding="ascii") as f:
                f.write("make\n")
                f.seek(0)
                made = len(f.read().split())
            if max_makes is not None and made > max_makes:
                raise RuntimeError(f"KillingEnv: construction {made} > max_makes = {max_makes}")
        super().__init__(max_episode_steps)
        self.how = how
        self.at_step = int(at_step)
        self.exit_status = int(exit_status)

    def step(self, action):
        t, obs, reward, terminated, truncated, info = self._good_step(action)
        if t >= self.at_step:
            if self.how == "segv":
                ctypes.string_at(0)
            elif self.how == "exit":
                os._exit(self.exit_status)
            elif self.how == "hang":
                while True:
                    time.sleep(3600)
            elif self.how == "child_exit":
                pid = os.fork()
                if pid == 0:
                    os._exit(7)
                _, status = os.waitpid(pid, 0)
                if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 7:
                    raise RuntimeError(f"KillingEnv: the child's os._exit(7) gave wait status {status}")
        return obs, reward, terminated, truncated, info


class CloseRaisingEnv(_BaseBadEnv):
    def __init__(self, exc_type="RuntimeError", max_episode_steps=50):
        super().__init__(max_episode_steps)
        self._exc = getattr(builtins, exc_type)

    def close(self):
        raise self._exc("boom in close")
