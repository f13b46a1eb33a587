# Fake "gymnasium" package for tests: make()/spec()/register() over crl_testenvs' registry.
"""A stand-in for Gymnasium that exists only on the test's sys.path.

Put ``tests/python/fake_gymnasium`` and ``tests/python`` on ``sys.path`` (or PYTHONPATH) and
``import gymnasium`` gives this module: ``gymnasium.make(id, max_episode_steps=None,
disable_env_checker=None, **kwargs)`` builds crl_testenvs envs by id ("CartPole-v1",
"TestDict-v0", ...; see ``gymnasium.registry``), unknown ids raise
``gymnasium.error.NameNotFound`` / ``VersionNotFound`` / ``DeprecatedEnv`` with Gymnasium's
messages, and ``gymnasium.spaces`` / ``gymnasium.Env`` are crl_testenvs' duck-typed classes.
Unlike real Gymnasium, make() returns the env itself (no wrapper chain).
"""

from crl_testenvs.core import Env
from crl_testenvs.registration import (EnvSpec, make, pprint_registry, register, registry,
                                       spec)

from gymnasium import error, spaces
from gymnasium.spaces import Space

__version__ = "1.0.0-fake"

__all__ = ["Env", "EnvSpec", "Space", "error", "make", "pprint_registry", "register", "registry",
           "spaces", "spec"]
