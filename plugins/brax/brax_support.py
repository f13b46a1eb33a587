# The brax plugin's Python half: brax.envs.get_environment, vmap(jit(reset)) / vmap(jit(step)), the State pytree
# flattened into crl's state leaves, keys from crl's seed, arrays out through DLPack.
#
# Compiled into brax.so as a string and defined once per process as _crl_brax_1.
import difflib

import _crl_pyembed_1 as pe

PLUGIN = 'brax'
CRL_DTYPES = ('bool', 'uint8', 'int8', 'int16', 'int32', 'int64', 'float16', 'float32', 'float64')
WIDER = {'uint16': 'int32', 'uint32': 'int64'}   # JAX's PRNG keys are uint32


def _name(k):
    for attr in ('name', 'key', 'idx'):
        v = getattr(k, attr, None)
        if v is not None:
            return str(v)
    return str(k).strip('.[]\'"')


class BraxEnv:
    """num envs of one Brax env, stepped together as one vmapped batch."""

    def __init__(self, env_name, num, kwargs):
        self.np = pe.import_module('numpy', 'the brax env backend', PLUGIN)
        self.jax = pe.import_module('jax', 'the brax env backend (Brax runs on JAX)', PLUGIN)
        envs = pe.import_module('brax.envs', 'the brax env backend', PLUGIN)
        self.jnp = self.jax.numpy
        try:
            self.env = envs.get_environment(env_name, **kwargs)
        except KeyError:
            known = sorted(getattr(envs, '_envs', {}) or [])
            close = difflib.get_close_matches(env_name, known, 3)
            raise pe.CrlError(pe.E_NOT_FOUND, "brax %s has no env '%s'%s" % (
                getattr(pe.import_module('brax', 'the brax env backend', PLUGIN), '__version__', '?'), env_name,
                '; did you mean %s?' % ', '.join(close) if close else '; it has %s' % ', '.join(known)
                if known else '')) from None
        self.num = num
        self.vreset = self.jax.vmap(self.jax.jit(self.env.reset))
        self.vstep = self.jax.vmap(self.jax.jit(self.env.step))
        self.key = self.jax.random.PRNGKey(0)
        self.state = None

    def _key_from(self, seed):
        # PRNGKey takes a C int under JAX's default 32-bit mode: the chain seed mod 2**31.
        return self.jax.random.PRNGKey(int(seed) % 2 ** 31)

    def describe(self):
        """(observation size, action size, [(crl key, crl dtype, shape after [num])]) from one batched reset."""
        np, tu = self.np, self.jax.tree_util
        probe = self.vreset(self.jax.random.split(self.jax.random.PRNGKey(0), self.num))
        obs = self.to_np(probe.obs)
        if obs.ndim != 2 or obs.shape[0] != self.num:
            raise pe.CrlError(pe.E_UNSUPPORTED, 'brax: the observation is %s of shape %s; crl takes a flat array per '
                              'env' % (type(probe.obs).__name__, getattr(obs, 'shape', '?')))
        with_path, self.treedef = tu.tree_flatten_with_path(probe)
        leaves = []
        self.state_dtypes = []
        for path, leaf in with_path:
            a = self.to_np(leaf)
            name = np.dtype(a.dtype).name
            dt = WIDER.get(name, name)
            key = 'state.' + '.'.join(_name(k) for k in path)
            if dt not in CRL_DTYPES:
                raise pe.CrlError(pe.E_UNSUPPORTED, "brax: state leaf '%s' is %s, which has no crl dtype" % (key, name))
            if a.ndim < 1 or a.shape[0] != self.num:
                raise pe.CrlError(pe.E_UNSUPPORTED, "brax: state leaf '%s' has shape %s, not batched by vmap"
                                  % (key, a.shape))
            leaves.append((key, dt, tuple(int(d) for d in a.shape[1:])))
            self.state_dtypes.append(a.dtype)
        return int(obs.shape[1]), int(self.env.action_size), leaves

    def to_np(self, x):
        """A numpy view of a JAX array through DLPack (no copy on the CPU), else a copy."""
        np = self.np
        if hasattr(x, '__dlpack__'):
            try:
                return np.from_dlpack(x)
            except (TypeError, RuntimeError, BufferError, ValueError):
                pass
        return np.asarray(x)

    def bind(self, obs, action, reward, terminated, truncated, state):
        np = self.np

        def view(mv, dt, shape):
            return np.frombuffer(mv, dtype=dt).reshape(shape)
        self.obs = view(*obs)
        self.action = view(*action)
        self.reward = view(*reward)
        self.terminated = view(*terminated)
        self.truncated = view(*truncated)
        self.state_bufs = [view(*s) for s in state]

    def _put(self, buf, value, rows):
        v = self.to_np(value).reshape(buf.shape)
        if rows is None:
            buf[...] = v
        else:
            buf[rows] = v[rows]

    def _write(self, rows):
        st = self.state
        self._put(self.obs, st.obs, rows)
        self._put(self.reward, st.reward, rows)
        done = self.to_np(st.done).reshape(self.terminated.shape) != 0
        if rows is None:
            self.terminated[...] = done
        else:
            self.terminated[rows] = done[rows]
        for buf, leaf in zip(self.state_bufs, self.jax.tree_util.tree_leaves(st)):
            self._put(buf, leaf, rows)

    def reset(self, mask, seed, from_state):
        np, jnp, jax = self.np, self.jnp, self.jax
        rows = None if mask is None else np.frombuffer(mask, dtype=bool).copy()
        if from_state:
            leaves = [jnp.asarray(buf.astype(dt)) for buf, dt in zip(self.state_bufs, self.state_dtypes)]
            new = jax.tree_util.tree_unflatten(self.treedef, leaves)
        else:
            if seed is not None:
                self.key = self._key_from(seed)
            keys = jax.random.split(self.key, 1 + self.num)   # as TorchRL's BraxEnv
            self.key = keys[0]
            new = self.vreset(keys[1:])
        if rows is not None and self.state is not None:
            m = jnp.asarray(rows)

            def merge(n, o):
                return jnp.where(m.reshape((-1,) + (1,) * (jnp.ndim(n) - 1)), n, o)
            new = jax.tree_util.tree_map(merge, new, self.state)
        self.state = new
        self._write(rows)
        if rows is None:
            self.terminated[...] = False
            self.truncated[...] = False
        else:
            self.terminated[rows] = False
            self.truncated[rows] = False

    def step(self):
        if self.state is None:
            raise pe.CrlError(pe.E_INVALID, 'brax: step before the first reset; reset first')
        self.state = self.vstep(self.state, self.jnp.array(self.action))
        self._write(None)
        self.truncated[...] = False   # Brax's envs have no time limit of their own: the host's max_episode_steps
