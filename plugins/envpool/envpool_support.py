# The envpool plugin's Python half: build the pool, map its spaces (through the gym plugin's describe), and move
# batches between EnvPool and crl's buffers with numpy (rows scattered by info["env_id"]).
#
# Compiled into envpool.so as a string and defined once per process as _crl_envpool_1; the gym support module
# (_crl_gym_1, compiled in too) gives the space mapping.
import difflib

import _crl_pyembed_1 as pe
import _crl_gym_1 as gs

PLUGIN = 'envpool'


def _envpool():
    return pe.import_module('envpool', 'the envpool env backend', PLUGIN)


def _get(root, path):
    for k in path:
        root = root[k]
    return root


class Pool:
    """One EnvPool of num envs and the numpy views over crl's buffers (made once at bind)."""

    def __init__(self, task_id, num, env_type, kwargs, seed, max_episode_steps, num_threads, render, batch_size):
        self.np = gs.numpy()
        ep = _envpool()
        ids = list(ep.list_all_envs())
        if task_id not in ids:
            close = difflib.get_close_matches(task_id, ids, 3)
            raise pe.CrlError(pe.E_NOT_FOUND, "envpool %s has no env '%s'%s (envpool.list_all_envs() lists %d ids)"
                              % (getattr(ep, '__version__', '?'), task_id,
                                 '; did you mean %s?' % ', '.join(close) if close else '', len(ids)))
        self.task_id, self.num, self.env_type = task_id, num, env_type
        self.kwargs = dict(kwargs)
        self.kwargs['num_envs'] = num
        # batch_size < num_envs: EnvPool's async mode, driven by crl_env_send / crl_env_recv.
        self.batch = batch_size if 0 < batch_size < num else num
        self.kwargs['batch_size'] = self.batch
        self.in_flight = 0
        if num_threads:
            self.kwargs['num_threads'] = num_threads
        if max_episode_steps:
            self.kwargs['max_episode_steps'] = max_episode_steps
        if env_type == 'gym':
            # Without it gym's reset gives the observations alone and their env ids are lost.
            self.kwargs.setdefault('gym_reset_return_info', True)
        if render:
            self.kwargs.setdefault('render_mode', 'rgb_array')
        self.render_wanted = render
        self.env = None
        self.seed = None
        self.build(seed)
        self.used = False
        self.all_ids = self.np.arange(num, dtype=self.np.int32)
        self.ended = self.np.zeros(num, bool)   # ended in EnvPool: its next step is EnvPool's auto-reset
        self.fresh = self.np.zeros(num, bool)   # the last step was that auto-reset: the rows hold a reset

    def build(self, seed):
        if self.env is not None:
            self.close()
        self.in_flight = 0
        # EnvPool takes a C int seed: the chain seed mod 2**31.
        self.env = _envpool().make(self.task_id, env_type=self.env_type, seed=int(seed) % 2 ** 31, **self.kwargs)
        self.seed = seed
        self.used = False

    def describe(self):
        """(observation leaves, action leaves, max_episode_steps, (height, width) or None)."""
        env = self.env
        obs = gs.describe(env.observation_space, 'observation')
        act = gs.describe(env.action_space, 'action')
        if len(act) != 1:
            raise pe.CrlError(pe.E_UNSUPPORTED, 'envpool %s: the action space gives %d leaves; crl takes one'
                              % (self.task_id, len(act)))
        self.action_space = env.action_space
        start = getattr(env.action_space, 'start', None)
        self.action_start = None if start is None or not self.np.any(start) else self.np.asarray(start)
        self.action_dtype = self.np.dtype(env.action_space.dtype)
        cfg = env.config
        m = cfg.get('max_episode_steps') or 0
        size = None
        if self.render_wanted:
            env.reset()
            self.used = True
            frame = self.np.asarray(env.render(env_ids=self.np.zeros(1, self.np.int32)))
            if frame.ndim != 4 or frame.shape[0] != 1 or frame.shape[3] != 3 or frame.dtype != self.np.uint8:
                raise pe.CrlError(pe.E_UNSUPPORTED, 'envpool %s: render() gave a %s array of shape %s; crl takes '
                                  'uint8 frames [k, height, width, 3]' % (self.task_id, frame.dtype,
                                                                          tuple(frame.shape)))
            size = (int(frame.shape[1]), int(frame.shape[2]))
        return obs, act, int(m), size

    def bind(self, obs, action, reward, terminated, truncated):
        """obs: [(path, memoryview, dtype, shape)]; the others (memoryview, dtype, shape)."""
        np = self.np

        def view(mv, dt, shape):
            return np.frombuffer(mv, dtype=dt).reshape(shape)
        self.obs = [(path, view(mv, dt, shape)) for path, mv, dt, shape in obs]
        self.action = view(*action)
        self.reward = view(*reward)
        self.terminated = view(*terminated)
        self.truncated = view(*truncated)

    def _write_obs(self, obs, ids, what):
        for path, buf in self.obs:
            v = self.np.asarray(_get(obs, path))
            if v.shape[:1] != ids.shape:
                raise pe.CrlError(pe.E_RUNTIME, 'envpool %s: %s gave %s rows of observation for %d env ids'
                                  % (self.task_id, what, v.shape[:1], ids.size))
            buf[ids] = v.reshape((ids.size,) + buf.shape[1:])

    def _env_ids(self, info, asked, what):
        ids = info.get('env_id') if isinstance(info, dict) else None
        if ids is None:
            raise pe.CrlError(pe.E_RUNTIME, "envpool %s: %s gave no info['env_id'], so its rows cannot be placed"
                              % (self.task_id, what))
        ids = self.np.asarray(ids).astype(self.np.int64).reshape(-1)
        if ids.size != asked.size or not self.np.array_equal(self.np.sort(ids), self.np.sort(asked)):
            raise pe.CrlError(pe.E_RUNTIME, 'envpool %s: %s returned env ids %s for the envs %s'
                              % (self.task_id, what, ids.tolist(), asked.tolist()))
        return ids

    def reset(self, mask, seed):
        np = self.np
        ids = self.all_ids if mask is None else np.flatnonzero(np.frombuffer(mask, dtype=bool)).astype(np.int32)
        if seed is not None:
            if ids.size != self.num:
                raise pe.CrlError(pe.E_UNSUPPORTED, 'envpool %s: EnvPool seeds its envs only when the pool is built, '
                                  'so a new seed needs a reset of all %d envs together (this reset has %d); call '
                                  'set_seed before a full reset' % (self.task_id, self.num, ids.size))
            if self.used or seed != self.seed:
                self.build(seed)   # as TorchRL's MultiThreadedEnv: a reseed rebuilds the pool
            self.fresh[:] = False
        # An env whose last step was EnvPool's auto-reset already holds its reset: no second reset.
        need = ids[~self.fresh[ids]]
        self.fresh[ids] = False
        self.ended[ids] = False
        self.terminated[ids] = False
        self.truncated[ids] = False
        if need.size == 0:
            return
        self.used = True
        res = self.env.reset(need) if need.size != self.num else self.env.reset()
        if isinstance(res, tuple) and len(res) == 2 and isinstance(res[1], dict):
            obs, info = res
            rows = self._env_ids(info, need, 'reset')
        else:
            obs, rows = res, need   # gym without gym_reset_return_info: asked order
        self._write_obs(obs, rows, 'reset')

    def _actions(self, a):
        if self.action_start is not None:
            a = a + self.action_start
        return a if a.dtype == self.action_dtype else a.astype(self.action_dtype)

    def _split(self, res, what):
        """(obs, reward, terminated, truncated, info) of a Gymnasium 5-tuple or a gym 4-tuple."""
        np = self.np
        if not isinstance(res, tuple) or len(res) not in (4, 5):
            raise pe.CrlError(pe.E_RUNTIME, "envpool %s: %s returned %s; expected Gymnasium's (obs, reward, "
                              "terminated, truncated, info) or gym's (obs, reward, done, info)"
                              % (self.task_id, what, type(res).__name__ if not isinstance(res, tuple)
                                 else '%d values' % len(res)))
        if len(res) == 5:
            obs, rew, term, trunc, info = res
            return obs, rew, np.asarray(term, bool), np.asarray(trunc, bool), info
        obs, rew, done, info = res
        done = np.asarray(done, bool)
        tl = info.get('TimeLimit.truncated') if isinstance(info, dict) else None
        trunc = done & np.asarray(tl, bool) if tl is not None else np.zeros_like(done)
        return obs, rew, done & ~trunc, trunc, info

    # ---- EnvPool's async mode (batch_size < num_envs): crl_env_async_reset / send / recv ----

    def async_reset(self, seed):
        # EnvPool cannot drop results in flight, so a restart with some pending rebuilds the pool.
        if seed is not None or self.in_flight:
            self.build(self.seed if seed is None else seed)
        self.used = True
        self.env.async_reset()
        self.in_flight = self.num

    def send(self, ids, ended):
        np = self.np
        ids = np.frombuffer(ids, dtype=np.int64)
        # An ended env's send is EnvPool's own auto-reset: its action is ignored.
        self.env.send(self._actions(self.action[ids]), ids.astype(np.int32))
        self.in_flight += ids.size

    def recv(self, out):
        np = self.np
        obs, rew, term, trunc, info = self._split(self.env.recv(), 'recv')
        ids = np.asarray(info.get('env_id') if isinstance(info, dict) else None)
        if ids.ndim != 1 or ids.size != self.batch:
            raise pe.CrlError(pe.E_RUNTIME, "envpool %s: recv gave info['env_id'] %s for a batch of %d"
                              % (self.task_id, ids.tolist() if ids.ndim else ids, self.batch))
        ids = ids.astype(np.int64)
        self._write_obs(obs, ids, 'recv')
        self.reward[ids] = np.asarray(rew, np.float32).reshape(ids.size, 1)
        self.terminated[ids] = term.reshape(ids.size, 1)
        self.truncated[ids] = trunc.reshape(ids.size, 1)
        np.frombuffer(out, dtype=np.int64)[:] = ids
        self.in_flight -= ids.size

    def step(self):
        np = self.np
        self.used = True
        obs, rew, term, trunc, info = self._split(self.env.step(self._actions(self.action), self.all_ids), 'step')
        ids = self._env_ids(info, self.all_ids, 'step')
        self._write_obs(obs, ids, 'step')
        self.reward[ids] = np.asarray(rew, np.float32).reshape(ids.size, 1)
        self.terminated[ids] = term.reshape(ids.size, 1)
        self.truncated[ids] = trunc.reshape(ids.size, 1)
        # EnvPool resets an ended env at its next step (the action is ignored).
        self.fresh[ids] = self.ended[ids]
        self.ended[ids] = (term | trunc).reshape(-1)

    def render(self, i, mv):
        frame = self.np.asarray(self.env.render(env_ids=self.np.array([i], self.np.int32)))
        out = self.np.frombuffer(mv, dtype=self.np.uint8).reshape(frame.shape[1:])
        out[...] = frame[0]

    def close(self):
        env, self.env = self.env, None
        close = getattr(env, 'close', None)
        if callable(close):
            close()


def ids():
    """envpool.list_all_envs(), for crl's id list."""
    return [str(x) for x in _envpool().list_all_envs()]
