# InfoEnv: typed info entries (float score, int lives, bool[2] flags) for env.info_keys.
"""InfoEnv returns an info dict with three typed entries on reset and on every step.

action ``Discrete(2)``; observation ``Box(-inf, inf, (4,), float32)`` =
[t, score, lives, last action] (t = steps since reset). At reset the rng draws a 0/1 bonus
pattern of length ``max_episode_steps``; the reward of step t is ``1.0 + 0.5 * bonus[t]``
when the action is 1, else 0.5.

info (same keys and types at reset and on every step):

* ``"score"``: Python float, the sum of rewards so far (0.0 at reset);
* ``"lives"``: Python int, 3 at reset, minus one every 5 steps; the episode terminates when
  it reaches 0 (on step 15);
* ``"flags"``: ``np.ndarray`` of ``np.bool_``, shape (2,): [t is even, last action == 1].

``drop_key_at_step=K`` (default None) removes ``"score"`` from the info of step index K
(0-based), for testing the missing-key error.
"""

import numpy as np

from crl_testenvs import spaces
from crl_testenvs.core import Env, TimeLimitMixin, check_action, check_max_episode_steps


class InfoEnv(TimeLimitMixin, Env):
    def __init__(self, max_episode_steps=50, drop_key_at_step=None):
        self.max_episode_steps = check_max_episode_steps(max_episode_steps)
        self.drop_key_at_step = drop_key_at_step
        self.action_space = spaces.Discrete(2)
        self.observation_space = spaces.Box(-np.inf, np.inf, (4,), np.float32)

    def _obs(self, last_action):
        return np.array([self._elapsed_steps, self._score, self._lives, last_action],
                        dtype=np.float32)

    def _info(self, last_action):
        flags = np.array([self._elapsed_steps % 2 == 0, last_action == 1], dtype=np.bool_)
        return {"score": float(self._score), "lives": int(self._lives), "flags": flags}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        n = self.max_episode_steps if self.max_episode_steps is not None else 1000
        self._bonus = self.np_random.integers(0, 2, size=n)
        self._score = 0.0
        self._lives = 3
        self._time_limit_reset()
        return self._obs(0), self._info(0)

    def step(self, action):
        self._require_reset()
        check_action(self.action_space, action)
        t = self._elapsed_steps
        a = int(action)
        reward = 1.0 + 0.5 * float(self._bonus[t % len(self._bonus)]) if a == 1 else 0.5
        self._score += reward
        truncated = self._time_limit_step()
        if self._elapsed_steps % 5 == 0:
            self._lives -= 1
        terminated = self._lives <= 0
        info = self._info(a)
        if self.drop_key_at_step is not None and t == self.drop_key_at_step:
            del info["score"]
        return self._obs(a), reward, terminated, truncated, info
