# Envs with Dict and Tuple action spaces.
"""Composite action envs; each is deterministic given ``reset(seed=...)`` and the actions.

DictActionEnv
    action ``Dict(aim=MultiDiscrete([2, 3]), fire=Discrete(3, start=1), move=Box(-1, 1, (2,), float32))``
    (Dict sorts its keys); observation ``Box(-inf, inf, (6,), float64)`` = [move[0], move[1], fire, aim[0],
    aim[1], noise], noise drawn from the env's rng at every reset and step (the reset observation is zeros and
    the noise).  reward = move[0] * fire; terminates when aim == [1, 2]; truncates after ``max_episode_steps``
    (default 12).
TupleActionEnv
    action ``Tuple((Discrete(4), Box(-2, 2, (), float32), MultiBinary(3)))``; observation ``Box(-inf, inf, (6,),
    float64)`` = [index, value, bits[0], bits[1], bits[2], noise]; reward = value * index; terminates when every
    bit is set; truncates after ``max_episode_steps`` (default 12).
Both reject an action outside their space (AssertionError, as Gymnasium's envs do).
"""

import numpy as np

from crl_testenvs import spaces
from crl_testenvs.core import Env, TimeLimitMixin, check_action, check_max_episode_steps


class DictActionEnv(TimeLimitMixin, Env):
    def __init__(self, max_episode_steps=12):
        self.max_episode_steps = check_max_episode_steps(max_episode_steps)
        self.action_space = spaces.Dict({'move': spaces.Box(-1.0, 1.0, (2,), np.float32),
                                         'fire': spaces.Discrete(3, start=1),
                                         'aim': spaces.MultiDiscrete([2, 3])})
        self.observation_space = spaces.Box(-np.inf, np.inf, (6,), np.float64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._time_limit_reset()
        return np.array([0, 0, 0, 0, 0, self.np_random.random()]), {}

    def step(self, action):
        self._require_reset()
        check_action(self.action_space, action)
        truncated = self._time_limit_step()
        move, fire, aim = np.asarray(action['move'], np.float64), int(action['fire']), np.asarray(action['aim'])
        obs = np.array([move[0], move[1], fire, aim[0], aim[1], self.np_random.random()])
        return obs, float(move[0] * fire), bool(aim[0] == 1 and aim[1] == 2), truncated, {}


class TupleActionEnv(TimeLimitMixin, Env):
    def __init__(self, max_episode_steps=12):
        self.max_episode_steps = check_max_episode_steps(max_episode_steps)
        self.action_space = spaces.Tuple((spaces.Discrete(4), spaces.Box(-2.0, 2.0, (), np.float32),
                                          spaces.MultiBinary(3)))
        self.observation_space = spaces.Box(-np.inf, np.inf, (6,), np.float64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._time_limit_reset()
        return np.array([0, 0, 0, 0, 0, self.np_random.random()]), {}

    def step(self, action):
        self._require_reset()
        check_action(self.action_space, action)
        truncated = self._time_limit_step()
        index, value, bits = int(action[0]), float(np.asarray(action[1])), np.asarray(action[2])
        obs = np.array([index, value, bits[0], bits[1], bits[2], self.np_random.random()])
        return obs, value * index, bool(bits.all()), truncated, {}
