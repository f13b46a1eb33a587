# Fake old "gym" (0.21 API) package for tests: make() gives LegacyEnv for "LegacyCartPole-v0".
"""A stand-in for old gym that exists only on the test's sys.path (put ``tests/python/fake_gym``
and ``tests/python`` on it). ``gym.make("LegacyCartPole-v0", **kwargs)`` returns
``crl_testenvs.legacy.LegacyEnv(**kwargs)`` (old API: ``seed()``, ``reset() -> obs``,
``step() -> (obs, reward, done, info)``); any other id raises ``gym.error.UnregisteredEnv``
with gym 0.21's message (``gym.error.DeprecatedEnv`` for another version of a known name).
``gym.spaces`` re-exports crl_testenvs.spaces.
"""

import importlib
import re

from gym import error, spaces

__version__ = "0.21.0-fake"

_ENV_ID_RE = re.compile(r"^(?:[\w:-]+\/)?([\w:.-]+)-v(\d+)$")

_REGISTRY = {
    "LegacyCartPole-v0": ("crl_testenvs.legacy", "LegacyEnv", 30),
}


def make(id, **kwargs):
    """Build a registered env; ``max_episode_steps`` may override the registered limit."""
    if not _ENV_ID_RE.match(id):
        raise error.Error(f"Attempted to look up malformed environment ID: {id.encode('utf-8')}. "
                          f"(Currently all IDs must be of the form {_ENV_ID_RE.pattern}.)")
    if id not in _REGISTRY:
        name = _ENV_ID_RE.match(id).group(1)
        matching = [k for k in _REGISTRY if _ENV_ID_RE.match(k).group(1) == name]
        if matching:
            raise error.DeprecatedEnv(f"Env {id} not found (valid versions include {matching})")
        raise error.UnregisteredEnv(f"No registered env with id: {id}")
    module_name, class_name, max_episode_steps = _REGISTRY[id]
    cls = getattr(importlib.import_module(module_name), class_name)
    kwargs.setdefault("max_episode_steps", max_episode_steps)
    return cls(**kwargs)


__all__ = ["error", "make", "spaces"]
