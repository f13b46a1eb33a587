# A numpy CartPole with a realistic per-step cost, for crl bench python (executors side by side).
"""CostlyCartPoleEnv(work=8): ``CartPoleEnv`` whose every step also runs ``work`` rounds of a small
dense layer (a 64x64 float64 matrix-vector product and ``tanh``) on the state, as a Python env's
sensor model or observation features would.  Dynamics, seeding and observation are
CartPole-v1's exactly (the extra work feeds ``info["feature"]``, which crl does not read unless
asked), so rollouts stay comparable with ``CartPole-v1``.
"""

import numpy as np

from crl_testenvs.cartpole import CartPoleEnv


class CostlyCartPoleEnv(CartPoleEnv):
    def __init__(self, work=8, **kwargs):
        super().__init__(**kwargs)
        if int(work) < 0:
            raise ValueError(f"CostlyCartPoleEnv: work must be >= 0, got {work!r}")
        self.work = int(work)
        g = np.random.default_rng(0)
        self._w = g.standard_normal((64, 64)) / 8.0
        self._x = np.zeros(64)

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        x = self._x
        x[:4] = obs
        for _ in range(self.work):
            x = np.tanh(self._w @ x)
        self._x = x
        return obs, reward, terminated, truncated, {"feature": float(x[0])}
