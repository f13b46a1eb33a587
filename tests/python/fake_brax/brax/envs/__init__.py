"""brax.envs of the fake Brax: get_environment / register_environment and the inverted_pendulum env."""
from brax.envs.base import Env, PipelineState, State  # noqa: F401
from brax.envs.inverted_pendulum import InvertedPendulum

_envs = {'inverted_pendulum': InvertedPendulum}


def register_environment(env_name, env_class):
    _envs[env_name] = env_class


def get_environment(env_name, **kwargs):
    """An env of a registered name; KeyError for an unknown one, as Brax raises."""
    return _envs[env_name](**kwargs)
