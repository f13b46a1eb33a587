# Env base class and seeding helper of crl_testenvs, duck-typing gymnasium.Env.
"""A minimal stand-in for ``gymnasium.Env`` and ``gymnasium.utils.seeding``.

Seeding is bit-for-bit Gymnasium's: ``np.random.Generator(np.random.PCG64(SeedSequence(seed)))``,
so ``reset(seed=s)`` draws the same numbers here as in real Gymnasium.
"""

import warnings

import numpy as np

from crl_testenvs import error


def np_random(seed=None):
    """Return ``(generator, entropy)`` for ``seed`` exactly like ``gymnasium.utils.seeding.np_random``."""
    if seed is not None and not (isinstance(seed, int) and 0 <= seed):
        if isinstance(seed, int) is False:
            raise error.Error(f"Seed must be a python integer, actual type: {type(seed)}")
        raise error.Error(f"Seed must be greater or equal to zero, actual value: {seed}")
    seed_seq = np.random.SeedSequence(seed)
    return np.random.Generator(np.random.PCG64(seed_seq)), seed_seq.entropy


def warn(message):
    """Gymnasium's logger.warn goes through the warnings module; so do we."""
    warnings.warn(message, stacklevel=3)


class Env:
    """Base class with the attributes and seeding behaviour of ``gymnasium.Env`` (1.x)."""

    metadata = {"render_modes": []}
    render_mode = None
    spec = None
    action_space = None
    observation_space = None
    _np_random = None
    _np_random_seed = None

    def step(self, action):
        raise NotImplementedError

    def reset(self, *, seed=None, options=None):
        """Re-seed ``np_random`` when ``seed`` is given; a seedless reset keeps the current stream."""
        if seed is not None:
            self._np_random, self._np_random_seed = np_random(seed)

    def render(self):
        return None

    def close(self):
        pass

    @property
    def unwrapped(self):
        return self

    @property
    def np_random(self):
        # Lazily seeded from OS entropy, as in Gymnasium: unseeded envs are not reproducible.
        if self._np_random is None:
            self._np_random, self._np_random_seed = np_random()
        return self._np_random

    @np_random.setter
    def np_random(self, value):
        self._np_random = value
        self._np_random_seed = -1

    @property
    def np_random_seed(self):
        if self._np_random_seed is None:
            self._np_random, self._np_random_seed = np_random()
        return self._np_random_seed

    def __str__(self):
        if self.spec is None:
            return f"<{type(self).__name__} instance>"
        return f"<{type(self).__name__}<{self.spec.id}>>"

    def __enter__(self):
        return self

    def __exit__(self, *args):
        self.close()
        return False


class TimeLimitMixin:
    """The TimeLimit wrapper's bookkeeping, done inside the env so a bare constructor truncates too.

    ``truncated`` becomes True on the step where the episode length reaches ``max_episode_steps``
    (also when that step terminates), exactly as ``gymnasium.wrappers.TimeLimit`` does.
    """

    max_episode_steps = None
    _elapsed_steps = None

    def _time_limit_reset(self):
        self._elapsed_steps = 0

    def _require_reset(self):
        if self._elapsed_steps is None:
            raise error.ResetNeeded("Cannot call env.step() before calling env.reset()")

    def _time_limit_step(self):
        """Count one step; return True when the time limit cuts the episode here."""
        self._require_reset()
        self._elapsed_steps += 1
        return self.max_episode_steps is not None and self._elapsed_steps >= self.max_episode_steps


def check_action(space, action):
    """Reject an action outside ``space`` the way Gymnasium's envs do (AssertionError, same text)."""
    if not space.contains(action):
        raise AssertionError(f"{action!r} ({type(action)}) invalid")


def check_max_episode_steps(value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"max_episode_steps must be a positive integer or None, got {value!r}")
    return int(value)
