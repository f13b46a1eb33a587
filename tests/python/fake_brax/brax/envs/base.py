"""brax.envs.base of the fake Brax: State (a dataclass pytree, as flax.struct.dataclass makes it) and Env."""
import dataclasses
from typing import Any, Dict

import jax


def _dataclass_pytree(cls):
    """A frozen dataclass registered as a pytree whose children are its fields, in order (flax.struct)."""
    cls = dataclasses.dataclass(frozen=True)(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    jax.tree_util.register_pytree_node(cls, lambda x: ([getattr(x, n) for n in names], None),
                                       lambda aux, children: cls(*children))
    cls.replace = lambda self, **kw: dataclasses.replace(self, **kw)
    return cls


@_dataclass_pytree
class PipelineState:
    """The physics state: generalized positions q and velocities qd."""
    q: Any
    qd: Any


@_dataclass_pytree
class State:
    """Environment state for training and inference (brax.envs.base.State)."""
    pipeline_state: Any
    obs: Any
    reward: Any
    done: Any
    metrics: Dict[str, Any] = dataclasses.field(default_factory=dict)
    info: Dict[str, Any] = dataclasses.field(default_factory=dict)


class Env:
    """brax.envs.base.Env: reset(rng) -> State, step(state, action) -> State, observation_size, action_size."""

    def reset(self, rng):
        raise NotImplementedError

    def step(self, state, action):
        raise NotImplementedError

    @property
    def observation_size(self):
        rng = jax.random.PRNGKey(0)
        return int(self.reset(rng).obs.shape[-1])

    @property
    def action_size(self):
        raise NotImplementedError

    @property
    def backend(self):
        return 'numpy'

    @property
    def unwrapped(self):
        return self
