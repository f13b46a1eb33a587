# Envs with MultiDiscrete, MultiBinary and Discrete(start=-1) action spaces.
"""Action-space coverage envs; each is deterministic given ``reset(seed=...)`` and the actions.

MultiDiscreteEnv
    action ``MultiDiscrete([3, 4, 2])``; observation ``Box(0, [2, 3, 1, max_episode_steps], (4,),
    int64)`` = the last action followed by the step counter (zeros after reset). The rng draws a
    hidden target action at reset; reward = number of components equal to the target (float).
    Truncates after ``max_episode_steps`` (default 10); never terminates.
MultiBinaryEnv
    action ``MultiBinary(5)``; observation ``MultiBinary(5)`` = action XOR a hidden pattern drawn
    at reset (the reset observation is the pattern itself). Reward = number of zero bits in the
    observation; terminates when the action equals the pattern; truncates after
    ``max_episode_steps`` (default 20).
DiscreteStartEnv
    action ``Discrete(3, start=-1)`` (values -1, 0, 1); observation ``Box(-inf, inf, (2,),
    float32)`` = [position, last action]. position starts at 0 and moves by the action; the rng
    draws a target in {-3, -2, -1, 1, 2, 3} at reset; reward = -|position - target|; terminates
    on reaching the target; truncates after ``max_episode_steps`` (default 20).
"""

import numpy as np

from crl_testenvs import spaces
from crl_testenvs.core import Env, TimeLimitMixin, check_action, check_max_episode_steps


class MultiDiscreteEnv(TimeLimitMixin, Env):
    def __init__(self, max_episode_steps=10):
        self.max_episode_steps = check_max_episode_steps(max_episode_steps)
        self.action_space = spaces.MultiDiscrete([3, 4, 2])
        counter_high = self.max_episode_steps if self.max_episode_steps is not None else 2**31 - 1
        self.observation_space = spaces.Box(low=np.zeros(4, dtype=np.int64),
                                            high=np.array([2, 3, 1, counter_high], dtype=np.int64),
                                            dtype=np.int64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._target = self.np_random.integers(self.action_space.nvec)
        self._time_limit_reset()
        return np.zeros(4, dtype=np.int64), {}

    def step(self, action):
        self._require_reset()
        check_action(self.action_space, action)
        truncated = self._time_limit_step()
        a = np.asarray(action, dtype=np.int64)
        obs = np.concatenate([a, [self._elapsed_steps]]).astype(np.int64)
        reward = float(np.sum(a == self._target))
        return obs, reward, False, truncated, {}


class MultiBinaryEnv(TimeLimitMixin, Env):
    def __init__(self, max_episode_steps=20):
        self.max_episode_steps = check_max_episode_steps(max_episode_steps)
        self.action_space = spaces.MultiBinary(5)
        self.observation_space = spaces.MultiBinary(5)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._pattern = self.np_random.integers(0, 2, size=5, dtype=np.int8)
        self._time_limit_reset()
        return self._pattern.copy(), {}

    def step(self, action):
        self._require_reset()
        check_action(self.action_space, action)
        truncated = self._time_limit_step()
        a = np.asarray(action).astype(np.int8)
        obs = np.bitwise_xor(a, self._pattern).astype(np.int8)
        reward = float(np.sum(obs == 0))
        terminated = bool(np.all(obs == 0))
        return obs, reward, terminated, truncated, {}


class DiscreteStartEnv(TimeLimitMixin, Env):
    def __init__(self, max_episode_steps=20):
        self.max_episode_steps = check_max_episode_steps(max_episode_steps)
        self.action_space = spaces.Discrete(3, start=-1)
        self.observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._target = int(self.np_random.choice([-3, -2, -1, 1, 2, 3]))
        self._position = 0
        self._time_limit_reset()
        return np.array([0.0, 0.0], dtype=np.float32), {}

    def step(self, action):
        self._require_reset()
        check_action(self.action_space, action)
        truncated = self._time_limit_step()
        a = int(action)
        self._position += a
        reward = 0.0 - abs(self._position - self._target)  # 0.0, never -0.0
        terminated = self._position == self._target
        return (np.array([self._position, a], dtype=np.float32), reward, terminated, truncated,
                {"target": self._target})
