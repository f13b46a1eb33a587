# DictObsEnv: nested Dict/Tuple observation with mixed dtypes, Box(2,) action, seeded length.
"""DictObsEnv exercises nested observation spaces.

Observation space (a Gymnasium Dict built from a dict, so keys are sorted)::

    Dict('pair':     Tuple(Discrete(3), Box(-1.0, 1.0, (1,), float32)),
         'position': Box(-inf, inf, (3,), float32),
         'sensors':  Dict('contact': MultiBinary(2), 'lidar': Box(0.0, 10.0, (8,), float32)),
         'velocity': Box(-inf, inf, (2,), float64))

Action space: ``Box(-1.0, 1.0, (2,), float32)``.

Dynamics (deterministic given the reset seed and the actions):
``velocity = 0.9 * velocity + 0.1 * clip(action, -1, 1)`` (float64);
``position[:2] += 0.5 * velocity``; ``position[2] = 0.1 * t`` (t = steps since reset);
``lidar[i]`` = distance from ``position[:2]`` to beacon i, clipped to [0, 10];
``contact[j] = |position[j]| > 1``; ``pair = (t % 3, [mean(action)])``;
reward ``= -||position[:2]||``. At reset the rng draws the beacons (uniform(-3, 3), 8x2),
the start position (uniform(-0.5, 0.5), 2) and the episode length L in [10, 20];
the episode terminates (``terminated=True``) on step L. info is ``{"length": L}``.
"""

import numpy as np

from crl_testenvs import error, spaces
from crl_testenvs.core import Env, check_action


class DictObsEnv(Env):
    metadata = {"render_modes": []}

    def __init__(self, min_length=10, max_length=20):
        if not (1 <= int(min_length) <= int(max_length)):
            raise ValueError(f"DictObsEnv: need 1 <= min_length <= max_length, got "
                             f"{min_length}, {max_length}")
        self.min_length = int(min_length)
        self.max_length = int(max_length)
        inf = np.inf
        self.observation_space = spaces.Dict({
            "position": spaces.Box(-inf, inf, (3,), np.float32),
            "velocity": spaces.Box(-inf, inf, (2,), np.float64),
            "sensors": spaces.Dict({
                "lidar": spaces.Box(0.0, 10.0, (8,), np.float32),
                "contact": spaces.MultiBinary(2),
            }),
            "pair": spaces.Tuple((spaces.Discrete(3), spaces.Box(-1.0, 1.0, (1,), np.float32))),
        })
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self._t = None

    def _obs(self, action_mean):
        pos2 = self._position[:2]
        lidar = np.linalg.norm(self._beacons - pos2[None, :], axis=1)
        return {
            "pair": (np.int64(self._t % 3), np.array([action_mean], dtype=np.float32)),
            "position": self._position.astype(np.float32),
            "sensors": {
                "contact": (np.abs(pos2) > 1.0).astype(np.int8),
                "lidar": np.clip(lidar, 0.0, 10.0).astype(np.float32),
            },
            "velocity": self._velocity.copy(),
        }

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        rng = self.np_random
        self._beacons = rng.uniform(-3.0, 3.0, size=(8, 2))
        self._position = np.zeros(3, dtype=np.float64)
        self._position[:2] = rng.uniform(-0.5, 0.5, size=2)
        self._velocity = np.zeros(2, dtype=np.float64)
        self._length = int(rng.integers(self.min_length, self.max_length + 1))
        self._t = 0
        return self._obs(0.0), {"length": self._length}

    def step(self, action):
        if self._t is None:
            raise error.ResetNeeded("Cannot call env.step() before calling env.reset()")
        check_action(self.action_space, action)
        a = np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0)
        self._t += 1
        self._velocity = 0.9 * self._velocity + 0.1 * a
        self._position[:2] += 0.5 * self._velocity
        self._position[2] = 0.1 * self._t
        reward = -float(np.linalg.norm(self._position[:2]))
        terminated = self._t >= self._length
        obs = self._obs(float(np.clip(a.mean(), -1.0, 1.0)))
        return obs, reward, terminated, False, {"length": self._length}
