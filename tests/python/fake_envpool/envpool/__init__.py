"""A numpy stand-in for EnvPool (sail-sg/envpool) with the same Python API surface, for crl's tests.

What matches EnvPool 0.8:
  envpool.make(task_id, env_type="gymnasium" | "gym", **config), make_gymnasium, make_gym, make_spec,
  list_all_envs(); config keys num_envs, batch_size (0: num_envs), num_threads, seed (env i is seeded
  with seed + i), max_episode_steps, render_mode, render_width, render_height, gym_reset_return_info,
  and the task's own keys; an unknown key is an error.
  env.reset(env_id=None) -> (obs, info) (gymnasium; gym: obs, or (obs, info) with
  gym_reset_return_info=True); env.step(action, env_id=None) -> Gymnasium's 5-tuple, or gym's 4-tuple
  (obs, reward, done, info) with info["TimeLimit.truncated"]; env.send(action, env_id) / env.recv() /
  env.async_reset() for async mode (batch_size < num_envs); env.render(env_ids=None) -> uint8
  [k, H, W, 3]; info holds env_id (int32), players.env_id, elapsed_step (int32).  Results come back in
  the order EnvPool's worker threads finish them, which is not env order: callers must scatter rows by
  info["env_id"].  After an env ends, its next step is EnvPool's auto-reset: the action is ignored and the
  reset observation comes back with reward 0, elapsed_step 0 and both flags false.
What differs: recv() with fewer than batch_size results ready raises instead of blocking (a test must
not hang); the dynamics are numpy (CartPole-v1 and Pendulum-v1 with Gymnasium's equations; Faulty-v0 raises in step at
its config key fail_at, for error paths); each env's
random stream is numpy's default_rng(seed + env_id).
The counters `resets` (explicit and automatic resets per env) let tests check that nothing resets twice.
"""
import collections

import numpy as np

try:
    import gymnasium as _gymnasium
except ImportError:  # the gym flavour alone
    _gymnasium = None

__version__ = '0.8.4+crl.fake'


def _spaces(env_type):
    if env_type == 'gym':
        import gym
        return gym.spaces
    if _gymnasium is None:
        raise ImportError('envpool: env_type="gymnasium" needs gymnasium')
    return _gymnasium.spaces


class _CartPole:
    """Gymnasium's CartPole-v1 equations in float32 observations."""
    max_episode_steps = 500
    reward_threshold = 475.0

    @staticmethod
    def spaces(sp):
        high = np.array([4.8, np.finfo(np.float32).max, 0.41887903, np.finfo(np.float32).max], np.float32)
        return sp.Box(-high, high, dtype=np.float32), sp.Discrete(2)

    def __init__(self, rng, config):
        self.rng = rng
        self.state = np.zeros(4)

    def reset(self):
        self.state = self.rng.uniform(-0.05, 0.05, size=4)
        return self.state.astype(np.float32)

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if int(action) == 1 else -10.0
        costheta, sintheta = np.cos(theta), np.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * sintheta) / 1.1
        thetaacc = (9.8 * sintheta - costheta * temp) / (0.5 * (4.0 / 3.0 - 0.1 * costheta ** 2 / 1.1))
        xacc = temp - 0.05 * thetaacc * costheta / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * xacc
        theta, theta_dot = theta + 0.02 * theta_dot, theta_dot + 0.02 * thetaacc
        self.state = np.array([x, x_dot, theta, theta_dot])
        term = bool(x < -2.4 or x > 2.4 or theta < -0.20943951 or theta > 0.20943951)
        return self.state.astype(np.float32), 1.0, term

    def frame(self, h, w):
        img = np.full((h, w, 3), 255, np.uint8)
        col = int(np.clip((self.state[0] + 2.4) / 4.8 * (w - 1), 0, w - 1))
        img[h // 2:, col] = (0, 0, 0)
        tip = int(np.clip((self.state[2] + 0.21) / 0.42 * (w - 1), 0, w - 1))
        img[:h // 2, tip] = (200, 80, 40)
        return img


class _Pendulum:
    """Gymnasium's Pendulum-v1: obs (cos, sin, thetadot) float32, action Box(-2, 2, (1,)) float32."""
    max_episode_steps = 200
    reward_threshold = None

    @staticmethod
    def spaces(sp):
        high = np.array([1.0, 1.0, 8.0], np.float32)
        return sp.Box(-high, high, dtype=np.float32), sp.Box(-2.0, 2.0, (1,), np.float32)

    def __init__(self, rng, config):
        self.rng = rng
        self.state = np.zeros(2)

    def reset(self):
        self.state = self.rng.uniform([-np.pi, -1.0], [np.pi, 1.0])
        return self._obs()

    def _obs(self):
        th, thdot = self.state
        return np.array([np.cos(th), np.sin(th), thdot], np.float32)

    def step(self, action):
        th, thdot = self.state
        u = float(np.clip(np.asarray(action, np.float64).reshape(-1)[0], -2.0, 2.0))
        ang = ((th + np.pi) % (2 * np.pi)) - np.pi
        cost = ang ** 2 + 0.1 * thdot ** 2 + 0.001 * u ** 2
        thdot = np.clip(thdot + (3 * 10.0 / 2 * np.sin(th) + 3.0 * u) * 0.05, -8.0, 8.0)
        self.state = np.array([th + thdot * 0.05, thdot])
        return self._obs(), -cost, False

    def frame(self, h, w):
        img = np.zeros((h, w, 3), np.uint8)
        c, s = np.cos(self.state[0]), np.sin(self.state[0])
        for r in np.linspace(0.0, 0.45, 12):
            y, x = int(h / 2 - r * h * c), int(w / 2 + r * w * s)
            img[min(max(y, 0), h - 1), min(max(x, 0), w - 1)] = (255, 255, 255)
        return img


class _Faulty(_CartPole):
    """CartPole whose step raises RuntimeError (as EnvPool relays a C++ exception) at elapsed step fail_at (config
    key, 0: never): a hostile env for the error paths."""
    config = {'fail_at': 0}

    def __init__(self, rng, config):
        super().__init__(rng, config)
        self.fail_at = int(config['fail_at'])
        self.elapsed = 0

    def reset(self):
        self.elapsed = 0
        return super().reset()

    def step(self, action):
        self.elapsed += 1
        if self.fail_at and self.elapsed >= self.fail_at:
            raise RuntimeError('Faulty-v0: the simulator failed at step %d' % self.elapsed)
        return super().step(action)


_TASKS = {'CartPole-v1': _CartPole, 'Pendulum-v1': _Pendulum, 'Faulty-v0': _Faulty}
_COMMON = {'num_envs': 1, 'batch_size': 0, 'num_threads': 0, 'seed': 42, 'max_episode_steps': None,
           'thread_affinity_offset': -1, 'max_num_players': 1, 'render_mode': None, 'render_width': 64,
           'render_height': 48, 'gym_reset_return_info': False}


def list_all_envs():
    """Every registered task id."""
    return sorted(_TASKS)


class EnvSpec:
    """What make_spec gives: config and the observation / action spaces of both flavours."""

    def __init__(self, task_id, config):
        self.task_id = task_id
        self.config = collections.namedtuple('Config', sorted(config))(**config)
        self.reward_threshold = _TASKS[task_id].reward_threshold

    def _sp(self, env_type):
        return _TASKS[self.task_id].spaces(_spaces(env_type))

    @property
    def gym_observation_space(self):
        return self._sp('gym')[0]

    @property
    def gym_action_space(self):
        return self._sp('gym')[1]

    @property
    def gymnasium_observation_space(self):
        return self._sp('gymnasium')[0]

    @property
    def gymnasium_action_space(self):
        return self._sp('gymnasium')[1]

    @property
    def observation_space(self):
        return self.gymnasium_observation_space if _gymnasium is not None else self.gym_observation_space

    @property
    def action_space(self):
        return self.gymnasium_action_space if _gymnasium is not None else self.gym_action_space


def _config(task_id, kwargs):
    if task_id not in _TASKS:
        raise ValueError('%s is not a registered env in envpool; list_all_envs() gives %s' % (task_id, list_all_envs()))
    config = dict(_COMMON, **getattr(_TASKS[task_id], 'config', {}))
    unknown = sorted(set(kwargs) - set(config))
    if unknown:
        raise KeyError('envpool %s: unknown config keys %s (known: %s)' % (task_id, unknown, sorted(config)))
    config.update(kwargs)
    if config['max_episode_steps'] is None:
        config['max_episode_steps'] = _TASKS[task_id].max_episode_steps
    n = int(config['num_envs'])
    if n < 1:
        raise ValueError('num_envs must be at least 1')
    if config['batch_size'] in (0, None):
        config['batch_size'] = n
    if not 1 <= config['batch_size'] <= n:
        raise ValueError('batch_size must be in 1..num_envs')
    if config['render_mode'] not in (None, 'rgb_array', 'human'):
        raise ValueError("render_mode must be None, 'rgb_array' or 'human'")
    return config


def make_spec(task_id, **kwargs):
    """The EnvSpec of task_id under these config values."""
    return EnvSpec(task_id, _config(task_id, kwargs))


class EnvPool:
    """A batch of num_envs envs of one task, stepped together (sync) or by batches (async)."""

    def __init__(self, task_id, env_type, kwargs):
        self._env_type = env_type
        self.spec = make_spec(task_id, **kwargs)
        c = self.spec.config
        self._config = c._asdict()
        sp = _TASKS[task_id].spaces(_spaces(env_type))
        self.observation_space, self.action_space = sp
        self._action_dtype = np.dtype(self.action_space.dtype)
        n = c.num_envs
        self._envs = [_TASKS[task_id](np.random.default_rng(int(c.seed) + i), self._config) for i in range(n)]
        self._obs = [None] * n
        self._elapsed = np.zeros(n, np.int32)
        self._done = np.ones(n, bool)       # the first step of an env never reset resets it
        self._ready = collections.deque()
        self._calls = 0
        self.resets = np.zeros(n, np.int64)
        self.all_env_ids = np.arange(n, dtype=np.int32)
        self._closed = False

    @property
    def config(self):
        return dict(self._config)

    @property
    def is_async(self):
        return self._config['batch_size'] != self._config['num_envs']

    def __len__(self):
        return self._config['num_envs']

    def _ids(self, env_id):
        if env_id is None:
            return self.all_env_ids
        ids = np.asarray(env_id).astype(np.int32).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= len(self)):
            raise IndexError('env_id out of range')
        return ids

    def _reset_one(self, i):
        self._obs[i] = self._envs[i].reset()
        self._elapsed[i] = 0
        self._done[i] = False
        self.resets[i] += 1
        return (i, self._obs[i], 0.0, False, False)

    def _step_one(self, i, a):
        if self._done[i]:
            return self._reset_one(i)   # EnvPool's auto-reset: the action is ignored
        obs, rew, term = self._envs[i].step(a)
        self._obs[i] = obs
        self._elapsed[i] += 1
        trunc = bool(self._elapsed[i] >= self._config['max_episode_steps'])
        self._done[i] = term or trunc
        return (i, obs, float(rew), term, trunc)

    def _order(self, rows):
        # Worker threads finish in no set order: a deterministic shuffle of the rows.
        self._calls += 1
        key = [(r[0] * 2654435761 + self._calls * 40503) % 4294967291 for r in rows]
        return [rows[k] for k in np.argsort(key, kind='stable')]

    def _pack(self, rows, reset, return_info=True):
        ids = np.array([r[0] for r in rows], np.int32)
        obs = np.stack([r[1] for r in rows]).astype(self.observation_space.dtype)
        info = {'env_id': ids, 'players': {'env_id': ids.copy()}, 'elapsed_step': self._elapsed[ids].copy()}
        if reset:
            return (obs, info) if return_info else obs
        rew = np.array([r[2] for r in rows], np.float32)
        term = np.array([r[3] for r in rows], bool)
        trunc = np.array([r[4] for r in rows], bool)
        if self._env_type == 'gym':
            info['TimeLimit.truncated'] = trunc
            return obs, rew, term | trunc, info
        return obs, rew, term, trunc, info

    def _actions(self, action, ids):
        a = np.asarray(action)
        if a.shape[:1] != ids.shape:
            raise RuntimeError('Expected %d actions for env_id %s, got shape %s' % (ids.size, ids.tolist(), a.shape))
        if a.dtype != self._action_dtype:
            a = a.astype(self._action_dtype)
        return a

    def _check_open(self):
        if self._closed:
            raise RuntimeError('envpool: the pool is closed')

    def reset(self, env_id=None, *, seed=None, options=None):
        """Reset the envs in env_id (all by default); the seed is fixed at make and seed= is ignored."""
        self._check_open()
        ids = self._ids(env_id)
        rows = self._order([self._reset_one(int(i)) for i in ids])
        ret_info = self._env_type != 'gym' or self._config['gym_reset_return_info']
        return self._pack(rows, True, ret_info)

    def step(self, action, env_id=None):
        """Step the envs in env_id (all by default) with action[k] for env_id[k]."""
        self._check_open()
        ids = self._ids(env_id)
        a = self._actions(action, ids)
        return self._pack(self._order([self._step_one(int(i), a[k]) for k, i in enumerate(ids)]), False)

    def async_reset(self):
        """Reset every env; recv() then gives them batch_size at a time."""
        self._check_open()
        self._ready.extend(self._order([self._reset_one(int(i)) for i in self.all_env_ids]))

    def send(self, action, env_id=None):
        self._check_open()
        ids = self._ids(env_id)
        a = self._actions(action, ids)
        self._ready.extend(self._order([self._step_one(int(i), a[k]) for k, i in enumerate(ids)]))

    def recv(self, reset=False, return_info=True):
        self._check_open()
        b = self._config['batch_size']
        if len(self._ready) < b:
            raise RuntimeError('envpool fake: recv() would block: %d results ready, batch_size %d'
                               % (len(self._ready), b))
        return self._pack([self._ready.popleft() for _ in range(b)], reset, return_info)

    def render(self, env_ids=None, camera_id=None):
        if self._config['render_mode'] not in ('rgb_array', 'human'):
            raise RuntimeError("render_mode must be set to 'rgb_array' or 'human' when creating this env")
        ids = self._ids(0 if env_ids is None else env_ids)
        h, w = self._config['render_height'], self._config['render_width']
        return np.stack([self._envs[int(i)].frame(h, w) for i in ids])

    def seed(self, seed=None):
        import warnings
        warnings.warn('The `seed` function in envpool is abandoned. You can set seed by envpool.make(..., seed=seed) '
                      'instead.')

    def close(self):
        self._closed = True


def make(task_id, env_type, **kwargs):
    """envpool.make: a pool of task_id envs with the gymnasium or gym API ("dm" is not part of this fake)."""
    if env_type not in ('gymnasium', 'gym'):
        raise NotImplementedError('envpool fake: env_type %r (this fake offers gymnasium and gym)' % env_type)
    return EnvPool(task_id, env_type, kwargs)


def make_gymnasium(task_id, **kwargs):
    return make(task_id, 'gymnasium', **kwargs)


def make_gym(task_id, **kwargs):
    return make(task_id, 'gym', **kwargs)
