"""The fake Brax's inverted_pendulum: a cart-pole with a continuous force, in numpy.

pipeline_state: q = [cart x, pole angle], qd = their velocities (float32 [2] each); obs = [x, angle, x', angle']
(float32 [4]); action [1] in [-1, 1] scaled by 3 to the force; reward 1; done 1.0 when |angle| > 0.2 (as Brax's);
metrics {'distance': |x|}; info {'rng': the key left after reset}.  reset draws q and qd uniformly in
[-0.01, 0.01] from jax.random (threefry), so a key gives the same start as in JAX.
"""
import numpy as np
import jax

from brax.envs.base import Env, PipelineState, State


class InvertedPendulum(Env):
    def __init__(self, backend='generalized', dt=0.04, **kwargs):
        if kwargs:
            raise TypeError('InvertedPendulum got unexpected keyword arguments %s' % sorted(kwargs))
        self._backend = backend
        self.dt = np.float32(dt)

    @property
    def action_size(self):
        return 1

    @property
    def backend(self):
        return self._backend

    def reset(self, rng):
        rng, rng1, rng2 = jax.random.split(rng, 3)
        q = jax.random.uniform(rng1, (2,), minval=-0.01, maxval=0.01)
        qd = jax.random.uniform(rng2, (2,), minval=-0.01, maxval=0.01)
        ps = PipelineState(q=q, qd=qd)
        zero = np.float32(0.0)
        return State(ps, self._obs(ps), zero, zero, {'distance': np.float32(abs(q[0]))}, {'rng': rng})

    def _obs(self, ps):
        return np.concatenate([ps.q, ps.qd]).astype(np.float32)

    def step(self, state, action):
        a = np.clip(np.asarray(action, np.float32).reshape(-1)[0], -1.0, 1.0)
        q, qd = np.asarray(state.pipeline_state.q, np.float32), np.asarray(state.pipeline_state.qd, np.float32)
        force = np.float32(3.0) * a
        x_acc = force - np.float32(0.1) * qd[1]
        th_acc = np.float32(9.81) * np.sin(q[1]) - x_acc * np.cos(q[1])
        qd = (qd + self.dt * np.array([x_acc, th_acc], np.float32)).astype(np.float32)
        q = (q + self.dt * qd).astype(np.float32)
        ps = PipelineState(q=q, qd=qd)
        done = np.float32(1.0) if abs(q[1]) > 0.2 else np.float32(0.0)
        metrics = dict(state.metrics, distance=np.float32(abs(q[0])))
        return state.replace(pipeline_state=ps, obs=self._obs(ps), reward=np.float32(1.0), done=done,
                             metrics=metrics)
