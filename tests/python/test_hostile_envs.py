# Self-test of crl_testenvs.hostile and crl_testenvs.benchenv (unittest; each hostile case in a child process).
"""Run with: /usr/bin/python3 -m unittest discover -s tests/python -p 'test_*.py'"""

import os
import signal
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from crl_testenvs.benchenv import CostlyCartPoleEnv  # noqa: E402
from crl_testenvs.cartpole import CartPoleEnv  # noqa: E402
from crl_testenvs.hostile import CloseRaisingEnv, KillingEnv  # noqa: E402


def _in_child(fn, timeout=None):
    """Run fn() in a forked child; its wait status (the child is killed after `timeout` seconds)."""
    pid = os.fork()
    if pid == 0:
        try:
            if timeout:
                signal.alarm(timeout)
            fn()
        finally:
            os._exit(99)
    _, status = os.waitpid(pid, 0)
    return status


def _steps(env, n):
    env.reset(seed=1)
    for i in range(n):
        env.step(i & 1)


class KillingEnvTest(unittest.TestCase):
    def test_segv_at_step(self):
        status = _in_child(lambda: _steps(KillingEnv(how="segv", at_step=2), 3))
        self.assertTrue(os.WIFSIGNALED(status))
        self.assertEqual(os.WTERMSIG(status), signal.SIGSEGV)

    def test_exit_at_step_with_status(self):
        status = _in_child(lambda: _steps(KillingEnv(how="exit", at_step=2, exit_status=5), 3))
        self.assertTrue(os.WIFEXITED(status))
        self.assertEqual(os.WEXITSTATUS(status), 5)

    def test_behaves_before_at_step(self):
        # Two steps pass; the child then ends itself with 99 (not by the env).
        status = _in_child(lambda: _steps(KillingEnv(how="exit", at_step=2, exit_status=5), 2))
        self.assertEqual(os.WEXITSTATUS(status), 99)

    def test_hang_never_returns(self):
        status = _in_child(lambda: _steps(KillingEnv(how="hang", at_step=0), 1), timeout=1)
        self.assertTrue(os.WIFSIGNALED(status))
        self.assertEqual(os.WTERMSIG(status), signal.SIGALRM)

    def test_child_exit_and_none_step_normally(self):
        for how in ("child_exit", "none"):
            env = KillingEnv(how=how, at_step=0)
            env.reset(seed=3)
            obs, reward, terminated, truncated, info = env.step(1)
            self.assertEqual(obs.shape, (4,))
            self.assertEqual(reward, 1.0)

    def test_make_limit(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "count")
            KillingEnv(how="none", count_file=path, max_makes=2)
            KillingEnv(how="none", count_file=path, max_makes=2)
            with self.assertRaisesRegex(RuntimeError, "construction 3 > max_makes = 2"):
                KillingEnv(how="none", count_file=path, max_makes=2)

    def test_bad_how(self):
        with self.assertRaises(ValueError):
            KillingEnv(how="explode")


class CloseRaisingEnvTest(unittest.TestCase):
    def test_close_raises(self):
        env = CloseRaisingEnv()
        env.reset(seed=0)
        env.step(0)
        with self.assertRaisesRegex(RuntimeError, "boom in close"):
            env.close()


class CostlyCartPoleTest(unittest.TestCase):
    def test_same_dynamics_as_cartpole(self):
        a, b = CartPoleEnv(), CostlyCartPoleEnv(work=3)
        oa, _ = a.reset(seed=42)
        ob, _ = b.reset(seed=42)
        np.testing.assert_array_equal(oa, ob)
        for i in range(300):
            act = (i * 7) % 2
            ra, rb = a.step(act), b.step(act)
            np.testing.assert_array_equal(ra[0], rb[0])
            self.assertEqual(ra[1:4], rb[1:4])
            self.assertIn("feature", rb[4])
            if ra[2] or ra[3]:
                oa, _ = a.reset()
                ob, _ = b.reset()
                np.testing.assert_array_equal(oa, ob)

    def test_bad_work(self):
        with self.assertRaises(ValueError):
            CostlyCartPoleEnv(work=-1)


if __name__ == "__main__":
    unittest.main()
