# LegacyEnv: CartPole behind the old gym 0.21 API (seed(), reset() -> obs, 4-tuple step).
"""LegacyEnv speaks the pre-0.26 gym API, as ``gym.make("CartPole-v0")`` did in gym 0.21.

* ``seed(seed=None) -> [seed]`` seeds the generator; ``reset()`` takes no arguments and
  returns the observation only (a ``seed=`` keyword raises TypeError, as in gym 0.21).
* ``step(a) -> (obs, reward, done, info)``. The time limit (``max_episode_steps``, default 30)
  is applied like gym 0.21's TimeLimit wrapper: on the step that reaches the limit
  ``info["TimeLimit.truncated"] = not done`` and ``done = True``. When the pole falls first,
  the key is absent.
* Dynamics, spaces and initial-state distribution are CartPoleEnv's (Discrete(2) action,
  Box(4,) float32 observation); after ``seed(s)`` the first ``reset()`` returns the same
  observation as ``CartPoleEnv().reset(seed=s)``.
* ``render(mode="rgb_array")`` returns CartPoleEnv's frame; other modes raise
  NotImplementedError. ``metadata`` uses the old keys (``render.modes``).

A consumer maps this to the new API as Gymnasium's compatibility layer does:
``terminated = done and not info.get("TimeLimit.truncated", False)``,
``truncated = done and info.get("TimeLimit.truncated", False)``.
"""

from crl_testenvs.cartpole import CartPoleEnv
from crl_testenvs.core import check_max_episode_steps, np_random


class LegacyEnv:
    metadata = {"render.modes": ["rgb_array"], "video.frames_per_second": 50}
    reward_range = (-float("inf"), float("inf"))
    spec = None

    def __init__(self, max_episode_steps=30):
        self.max_episode_steps = check_max_episode_steps(max_episode_steps)
        self._inner = CartPoleEnv(render_mode="rgb_array", max_episode_steps=None)
        self.action_space = self._inner.action_space
        self.observation_space = self._inner.observation_space
        self.np_random = None
        self._elapsed_steps = None

    def seed(self, seed=None):
        self.np_random, seed = np_random(seed)
        self._inner.np_random = self.np_random
        return [seed]

    def reset(self):
        if self.np_random is None:
            self.seed()
        obs, _ = self._inner.reset()
        self._elapsed_steps = 0
        return obs

    def step(self, action):
        if self._elapsed_steps is None:
            raise AssertionError("Cannot call env.step() before calling reset()")
        obs, reward, terminated, _, info = self._inner.step(action)
        done = bool(terminated)
        info = dict(info)
        self._elapsed_steps += 1
        if self.max_episode_steps is not None and self._elapsed_steps >= self.max_episode_steps:
            info["TimeLimit.truncated"] = not done
            done = True
        return obs, reward, done, info

    def render(self, mode="human"):
        if mode != "rgb_array":
            raise NotImplementedError(f"LegacyEnv.render: mode {mode!r} is not supported, "
                                      "use mode='rgb_array'")
        return self._inner.render()

    def close(self):
        self._inner.close()

    @property
    def unwrapped(self):
        return self

    def __str__(self):
        return "<LegacyEnv instance>"

    def __enter__(self):
        return self

    def __exit__(self, *args):
        self.close()
        return False

