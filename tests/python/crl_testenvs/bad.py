# Misbehaving envs (raise, wrong shape, NaN, None, wrong tuple, loose dtypes) for error paths.
"""Envs that break the Env contract in one configurable way each, to test error handling.

All share the same well-behaved base: action ``Discrete(2)``, observation
``Box(-inf, inf, (4,), float32)``; reset draws the state from ``uniform(-0.05, 0.05, 4)`` of
``np_random``; each step adds ``(2a - 1) * [0.1, 0.05, 0.025, 0.0125]``; reward 1.0; never
terminates; truncates after ``max_episode_steps`` (default 50).

Step indices are 0-based and counted from the last reset: with ``..._at_step=K`` the first K
``step()`` calls of an episode behave, the (K+1)-th call (index K) misbehaves, and later ones
too. ``None`` disables a failure.

RaisingEnv(raise_at_step=3, raise_in_reset=False, raise_in_close=False, raise_in_init=False,
           raise_in_render=False, exc_type="ValueError")
    ``step`` raises ``exc_type("boom at step K")``; reset/close/__init__/render raise
    ``exc_type("boom in reset")`` etc. ``raise_in_reset`` may be True (every reset) or an int
    N >= 1 (only the N-th reset() call on this object). exc_type is one of ValueError,
    RuntimeError, TypeError, KeyError, SystemExit, KeyboardInterrupt.
WrongShapeEnv(bad_at_step=3, bad_in_reset=False, bad_shape=(5,))
    returns a float32 observation of shape ``bad_shape`` instead of (4,).
NaNEnv(nan_at_step=3, where="obs", value=nan)
    where="obs": observation[0] = value; "reward": reward = value; "both": both.
NoneEnv(none_at_step=3, none_in_reset=False)
    ``step`` (or ``reset``) returns None.
WrongTupleEnv(bad_at_step=3, length=3, bad_in_reset=False)
    ``step`` returns a tuple of ``length`` items (the first ones of the right 5-tuple, padded
    with None when longer); with bad_in_reset, reset returns (obs, info, None).
WrongDtypeEnv(mode="list")
    Not an error: loosely typed but valid returns that a consumer must accept and cast, as
    TorchRL does. mode="list": the observation is a Python list of 4 Python floats;
    mode="float64": a float64 ndarray where float32 is declared. In both modes the reward is
    an ``np.float32`` scalar and terminated/truncated are ``np.bool_``.
"""

import builtins

import numpy as np

from crl_testenvs import spaces
from crl_testenvs.core import Env, TimeLimitMixin, check_action, check_max_episode_steps

_STEP_DELTA = np.array([0.1, 0.05, 0.025, 0.0125])
_EXC_TYPES = ("ValueError", "RuntimeError", "TypeError", "KeyError", "SystemExit",
              "KeyboardInterrupt")


def _check_step_index(name, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer or None, got {value!r}")
    return int(value)


class _BaseBadEnv(TimeLimitMixin, Env):
    """The well-behaved dynamics every bad env starts from."""

    def __init__(self, max_episode_steps=50):
        self.max_episode_steps = check_max_episode_steps(max_episode_steps)
        self.action_space = spaces.Discrete(2)
        self.observation_space = spaces.Box(-np.inf, np.inf, (4,), np.float32)
        self._state = None

    def _good_reset(self, seed):
        Env.reset(self, seed=seed)
        self._state = self.np_random.uniform(-0.05, 0.05, size=4)
        self._time_limit_reset()
        return self._state.astype(np.float32), {}

    def _good_step(self, action):
        """Advance; return (t, obs, reward, terminated, truncated, info), t the 0-based index."""
        self._require_reset()
        check_action(self.action_space, action)
        t = self._elapsed_steps
        self._state = self._state + (2 * int(action) - 1) * _STEP_DELTA
        truncated = self._time_limit_step()
        return t, self._state.astype(np.float32), 1.0, False, truncated, {}

    def reset(self, *, seed=None, options=None):
        return self._good_reset(seed)

    def step(self, action):
        return self._good_step(action)[1:]


def _due(at_step, t):
    return at_step is not None and t >= at_step


class RaisingEnv(_BaseBadEnv):
    def __init__(self, raise_at_step=3, raise_in_reset=False, raise_in_close=False,
                 raise_in_init=False, raise_in_render=False, exc_type="ValueError",
                 max_episode_steps=50):
        if exc_type not in _EXC_TYPES:
            raise ValueError(f"RaisingEnv: exc_type must be one of {_EXC_TYPES}, got {exc_type!r}")
        self._exc = getattr(builtins, exc_type)
        if raise_in_init:
            raise self._exc("boom in __init__")
        super().__init__(max_episode_steps)
        self.raise_at_step = _check_step_index("raise_at_step", raise_at_step)
        if not isinstance(raise_in_reset, bool) and (
                not isinstance(raise_in_reset, int) or raise_in_reset < 1):
            raise ValueError("raise_in_reset must be a bool or an int >= 1, "
                             f"got {raise_in_reset!r}")
        self.raise_in_reset = raise_in_reset
        self.raise_in_close = bool(raise_in_close)
        self.raise_in_render = bool(raise_in_render)
        self.render_mode = "rgb_array" if raise_in_render else None
        self.reset_calls = 0

    def reset(self, *, seed=None, options=None):
        self.reset_calls += 1
        nth = not isinstance(self.raise_in_reset, bool) and self.reset_calls == self.raise_in_reset
        if self.raise_in_reset is True or nth:
            raise self._exc("boom in reset")
        return self._good_reset(seed)

    def step(self, action):
        self._require_reset()
        t = self._elapsed_steps
        if _due(self.raise_at_step, t):
            raise self._exc(f"boom at step {t}")
        return self._good_step(action)[1:]

    def render(self):
        if self.raise_in_render:
            raise self._exc("boom in render")
        return None

    def close(self):
        if self.raise_in_close:
            raise self._exc("boom in close")


class WrongShapeEnv(_BaseBadEnv):
    def __init__(self, bad_at_step=3, bad_in_reset=False, bad_shape=(5,), max_episode_steps=50):
        super().__init__(max_episode_steps)
        self.bad_at_step = _check_step_index("bad_at_step", bad_at_step)
        self.bad_in_reset = bool(bad_in_reset)
        self.bad_shape = tuple(int(d) for d in bad_shape)
        if self.bad_shape == self.observation_space.shape:
            raise ValueError("WrongShapeEnv: bad_shape must differ from (4,)")

    def _bad_obs(self):
        return np.resize(self._state, self.bad_shape).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        obs, info = self._good_reset(seed)
        return (self._bad_obs() if self.bad_in_reset else obs), info

    def step(self, action):
        t, obs, reward, terminated, truncated, info = self._good_step(action)
        if _due(self.bad_at_step, t):
            obs = self._bad_obs()
        return obs, reward, terminated, truncated, info


class NaNEnv(_BaseBadEnv):
    def __init__(self, nan_at_step=3, where="obs", value=float("nan"), max_episode_steps=50):
        super().__init__(max_episode_steps)
        if where not in ("obs", "reward", "both"):
            raise ValueError(f"NaNEnv: where must be 'obs', 'reward' or 'both', got {where!r}")
        self.nan_at_step = _check_step_index("nan_at_step", nan_at_step)
        self.where = where
        self.value = float(value)

    def step(self, action):
        t, obs, reward, terminated, truncated, info = self._good_step(action)
        if _due(self.nan_at_step, t):
            if self.where in ("obs", "both"):
                obs[0] = self.value
            if self.where in ("reward", "both"):
                reward = self.value
        return obs, reward, terminated, truncated, info


class NoneEnv(_BaseBadEnv):
    def __init__(self, none_at_step=3, none_in_reset=False, max_episode_steps=50):
        super().__init__(max_episode_steps)
        self.none_at_step = _check_step_index("none_at_step", none_at_step)
        self.none_in_reset = bool(none_in_reset)

    def reset(self, *, seed=None, options=None):
        result = self._good_reset(seed)
        return None if self.none_in_reset else result

    def step(self, action):
        t, *result = self._good_step(action)
        return None if _due(self.none_at_step, t) else tuple(result)


class WrongTupleEnv(_BaseBadEnv):
    def __init__(self, bad_at_step=3, length=3, bad_in_reset=False, max_episode_steps=50):
        super().__init__(max_episode_steps)
        self.bad_at_step = _check_step_index("bad_at_step", bad_at_step)
        if length in (5,) or length < 0:
            raise ValueError(f"WrongTupleEnv: length must be >= 0 and not 5, got {length!r}")
        self.length = int(length)
        self.bad_in_reset = bool(bad_in_reset)

    def reset(self, *, seed=None, options=None):
        obs, info = self._good_reset(seed)
        return (obs, info, None) if self.bad_in_reset else (obs, info)

    def step(self, action):
        t, *result = self._good_step(action)
        if _due(self.bad_at_step, t):
            result = (result + [None] * self.length)[:self.length]
        return tuple(result)


class WrongDtypeEnv(_BaseBadEnv):
    def __init__(self, mode="list", max_episode_steps=50):
        super().__init__(max_episode_steps)
        if mode not in ("list", "float64"):
            raise ValueError(f"WrongDtypeEnv: mode must be 'list' or 'float64', got {mode!r}")
        self.mode = mode

    def _loose(self, obs32):
        # Built from the float32 values so the cast back to float32 is exact.
        if self.mode == "list":
            return [float(v) for v in obs32]
        return obs32.astype(np.float64)

    def reset(self, *, seed=None, options=None):
        obs, info = self._good_reset(seed)
        return self._loose(obs), info

    def step(self, action):
        _, obs, reward, terminated, truncated, info = self._good_step(action)
        return (self._loose(obs), np.float32(reward), np.bool_(terminated), np.bool_(truncated),
                info)
