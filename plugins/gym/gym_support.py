# The gym plugin's Python half: make envs, describe their spaces, infer info specs (make time only; steps stay in C).
#
# Compiled into gym.so as a string and defined once per process as the module
# _crl_gym_1.  Everything here runs inside make(); reset, step and render are
# driven from C without calling back into this module.
import difflib
import functools
import importlib
import inspect

import _crl_pyembed_1 as pe

PLUGIN = 'gym'
LEAF_KINDS = ('Box', 'Discrete', 'MultiDiscrete', 'MultiBinary', 'Dict', 'Tuple')
CRL_DTYPES = ('bool', 'uint8', 'int8', 'int16', 'int32', 'int64', 'float16', 'float32', 'float64')
# Observation dtypes crl has no type for, widened losslessly.
WIDER = {'uint16': 'int32', 'uint32': 'int64'}
# crl's own keys: an observation may not take them.
RESERVED = ('action', 'reward', 'done', 'terminated', 'truncated', 'next', '_reset')
# Exception classes (by name, in gym and gymnasium) that mean "no such id".
UNKNOWN_ID = ('UnregisteredEnv', 'NameNotFound', 'NamespaceNotFound', 'VersionNotFound', 'DeprecatedEnv')

_np = None


def numpy():
    global _np
    if _np is None:
        _np = pe.import_module('numpy', 'the gym env backend (numpy carries observations and actions)', PLUGIN)
    return _np


def _accepts(fn, name):
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == name or p.kind == p.VAR_KEYWORD for p in params)


def _version(mod):
    return getattr(mod, '__version__', '(unknown version)')


def _registry_ids(mod):
    for reg in (getattr(mod, 'registry', None), getattr(getattr(mod, 'envs', None), 'registry', None)):
        if reg is None:
            continue
        try:
            if hasattr(reg, 'env_specs'):
                return [str(k) for k in reg.env_specs]
            if hasattr(reg, 'keys'):
                return [str(k) for k in reg.keys()]
            if hasattr(reg, 'all'):
                return [s.id for s in reg.all()]
        except Exception:
            pass
    return []


def _unknown_id(exc):
    if any(c.__name__ in UNKNOWN_ID for c in type(exc).__mro__):
        return True
    # Both registries raise their plain Error for malformed ids.
    text = str(exc).lower()
    return type(exc).__name__ == 'Error' and ('malformed' in text or 'no registered env' in text)


def _entry_point(text):
    mod_name, sep, attr = text.partition(':')
    if not sep or not mod_name.strip() or not attr.strip():
        raise pe.CrlError(pe.E_CONFIG, "entry_point = '%s': expected package.module:Class" % text)
    mod = pe.import_module(mod_name.strip(), 'entry_point = %s' % text, PLUGIN)
    obj = mod
    for part in attr.strip().split('.'):
        if not hasattr(obj, part):
            names = [n for n in dir(obj) if not n.startswith('_')]
            close = difflib.get_close_matches(part, names, 3)
            raise pe.CrlError(pe.E_NOT_FOUND, "entry_point = %s: %s (%s) has no attribute '%s'%s"
                              % (text, mod_name, getattr(mod, '__file__', 'built in'), part,
                                 "; did you mean %s?" % ', '.join(close) if close else ''))
        obj = getattr(obj, part)
    if not callable(obj):
        raise pe.CrlError(pe.E_CONFIG, 'entry_point = %s is a %s, not a class or function'
                          % (text, type(obj).__name__))
    return obj


def make(env_id, entry_point, kwargs, max_episode_steps, render_mode):
    """Make one env; returns (env, how), how being 'entry_point', 'gymnasium' or 'gym'."""
    if entry_point:
        cls = _entry_point(entry_point)
        kw = dict(kwargs)
        if render_mode is not None and 'render_mode' not in kw and _accepts(cls, 'render_mode'):
            kw['render_mode'] = render_mode
        return cls(**kw), 'entry_point'
    notes = []
    installed = 0
    for name in ('gymnasium', 'gym'):
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name != name:
                raise pe.missing_module(e.name or name, 'importing %s' % name, PLUGIN) from None
            notes.append('%s is not installed' % name)
            continue
        installed += 1
        kw = dict(kwargs)
        if max_episode_steps:
            kw['max_episode_steps'] = max_episode_steps
        try:
            if render_mode is not None and 'render_mode' not in kw:
                try:
                    return mod.make(env_id, render_mode=render_mode, **kw), name
                except TypeError as e:
                    # An env (or an old gym) without render_mode renders with render(mode=...).
                    if 'render_mode' not in str(e):
                        raise
            return mod.make(env_id, **kw), name
        except ModuleNotFoundError as e:
            # "module:Id" ids, and env modules whose imports are missing.
            raise pe.missing_module(e.name or '?', 'id = %s (%s.make)' % (env_id, name), PLUGIN) from None
        except Exception as e:
            if not _unknown_id(e):
                raise
            close = difflib.get_close_matches(env_id, _registry_ids(mod), 3)
            notes.append("%s %s has no env '%s' (%s: %s)%s"
                         % (name, _version(mod), env_id, type(e).__name__, e,
                            '; did you mean %s?' % ', '.join(close) if close else ''))
    if not installed:
        raise pe.CrlError(pe.E_NOT_FOUND,
                          "id = %s: neither gymnasium nor gym is importable in the embedded %s, so there is no "
                          "registry to make it from; sys.path searched: %s; fix: install gymnasium (pip install "
                          "gymnasium) into a virtualenv made with this Python and set VIRTUAL_ENV, or add its "
                          "directory to [plugin.gym] python_path or PYTHONPATH; or build an env class directly "
                          "with entry_point = package.module:Class"
                          % (env_id, pe.describe(), __import__('sys').path))
    raise pe.CrlError(pe.E_NOT_FOUND, "unknown env id '%s': %s; or build an env class directly with "
                      "entry_point = package.module:Class" % (env_id, '; '.join(notes)))


def methods(env):
    """Bound once at make: (step, reset, seed or None, reset takes seed=)."""
    for name in ('step', 'reset'):
        if not callable(getattr(env, name, None)):
            raise pe.CrlError(pe.E_INVALID, '%s has no %s() method; it is not a gym env' % (type(env).__name__, name))
    takes_seed = _accepts(env.reset, 'seed')
    seed = None if takes_seed else getattr(env, 'seed', None)
    return env.step, env.reset, seed if callable(seed) else None, takes_seed


def render_call(env):
    """What gives an RGB frame: render() under Gymnasium's API, render(mode='rgb_array') for old gym."""
    render = getattr(env, 'render', None)
    if not callable(render):
        return None
    if getattr(env, 'render_mode', None) is not None:
        return render
    try:
        params = inspect.signature(render).parameters
    except (TypeError, ValueError):
        return render
    return functools.partial(render, mode='rgb_array') if 'mode' in params else render


def max_steps(env):
    spec = getattr(env, 'spec', None)
    m = getattr(spec, 'max_episode_steps', None)
    return int(m) if isinstance(m, int) and m > 0 else 0


def _kind(space):
    for c in type(space).__mro__:
        if c.__name__ in LEAF_KINDS:
            return c.__name__
    return None


def _dtype(space, where, role):
    np = numpy()
    name = np.dtype(space.dtype).name
    if name in CRL_DTYPES:
        return name, name
    if role == 'observation' and name in WIDER:
        return WIDER[name], name
    raise pe.CrlError(pe.E_UNSUPPORTED, '%s: a %s of dtype %s has no crl dtype (crl has %s%s)'
                      % (where, type(space).__name__, name, ', '.join(CRL_DTYPES),
                         '; observations of uint16/uint32 widen to int32/int64' if role == 'action' else ''))


def _int64_bytes(a):
    return numpy().ascontiguousarray(a, dtype='int64').tobytes()


def _leaf(space, kind, key, path, role):
    """(key, path, kind, crl dtype, space dtype, shape, low, high, n, nvec, start)."""
    np = numpy()
    where = "%s '%s'" % (role, key)
    if kind == 'Box':
        dt, sdt = _dtype(space, where, role)
        shape = tuple(int(d) for d in space.shape)
        low = np.broadcast_to(np.asarray(space.low, dtype=np.float64), shape)
        high = np.broadcast_to(np.asarray(space.high, dtype=np.float64), shape)
        if np.isinf(low).all() and np.isinf(high).all():
            lo = hi = None  # TorchRL: Unbounded
        else:
            lo, hi = np.ascontiguousarray(low).tobytes(), np.ascontiguousarray(high).tobytes()
        return (key, path, 'box', dt, sdt, shape, lo, hi, 0, None, None)
    if kind == 'Discrete':
        start = getattr(space, 'start', None)
        start = 0 if start is None else int(start)
        return (key, path, 'discrete', 'int64', 'int64', (), None, None, int(space.n), None,
                _int64_bytes([start]) if start else None)
    if kind == 'MultiDiscrete':
        dt, sdt = _dtype(space, where, role)
        if dt not in ('int8', 'int16', 'int32', 'int64', 'uint8'):
            raise pe.CrlError(pe.E_UNSUPPORTED, '%s: MultiDiscrete of dtype %s; crl takes integer dtypes' % (where, sdt))
        nvec = np.asarray(space.nvec, dtype=np.int64)
        if nvec.ndim == 0:
            nvec = nvec.reshape(1)
        rows = nvec.reshape(-1, nvec.shape[-1])
        if not (rows == rows[0]).all():
            raise pe.CrlError(pe.E_UNSUPPORTED, "%s: MultiDiscrete with nvec %s: crl's MultiCategorical takes one "
                              'nvec for the last dim, the same in every row' % (where, nvec.tolist()))
        start = getattr(space, 'start', None)
        start = np.broadcast_to(np.asarray(0 if start is None else start, dtype=np.int64), nvec.shape)
        return (key, path, 'multi_discrete', dt, sdt, tuple(nvec.shape), None, None, 0, _int64_bytes(rows[0]),
                _int64_bytes(start) if start.any() else None)
    if kind == 'MultiBinary':
        dt, sdt = _dtype(space, where, role)
        shape = tuple(int(d) for d in space.shape)
        if not shape:
            raise pe.CrlError(pe.E_UNSUPPORTED, '%s: MultiBinary of shape ()' % where)
        return (key, path, 'multi_binary', dt, sdt, shape, None, None, shape[-1], None, None)
    raise AssertionError(kind)


def describe(space, role):
    """The leaves of an observation or action space, depth first, each as _leaf gives it."""
    out = []

    def walk(sp, keys, path):
        kind = _kind(sp)
        where = "%s space%s" % (role, " at '%s'" % '.'.join(keys) if keys else '')
        if kind is None:
            raise pe.CrlError(pe.E_UNSUPPORTED, '%s is a %s.%s, which has no crl spec; crl maps Box, Discrete, '
                              'MultiDiscrete, MultiBinary, Dict and Tuple'
                              % (where, type(sp).__module__, type(sp).__qualname__))
        if kind in ('Dict', 'Tuple'):
            items = list(sp.spaces.items()) if kind == 'Dict' else list(enumerate(sp.spaces))
            if not items:
                raise pe.CrlError(pe.E_UNSUPPORTED, '%s is an empty %s' % (where, kind))
            for k, sub in items:
                name = str(k)
                if not name or '.' in name:
                    raise pe.CrlError(pe.E_UNSUPPORTED, "%s: key '%s' cannot be a crl key (empty, or a '.', which "
                                      'crl reads as nesting)' % (where, name))
                if not keys and name in RESERVED and role != 'action':
                    raise pe.CrlError(pe.E_UNSUPPORTED, "%s: key '%s' clashes with crl's own '%s'"
                                      % (where, name, name))
                walk(sub, keys + (name,), path + (k,))
            return
        # A Dict / Tuple action is a Composite under "action" (action.KEY, action.0, ...).
        key = ('action.' if role == 'action' and keys else '') + '.'.join(keys) if keys else role
        out.append(_leaf(sp, kind, key, path, role))

    walk(space, (), ())
    return out


class ActionComposer:
    """The value a Dict / Tuple action space's env gets from crl's action leaves: made at make, bound to the
    leaves' buffers at bind; arg(i) builds env i's dict / tuple (Discrete leaves as ints, start added, one-hot
    rows decoded as their first maximum, as for a single leaf)."""

    def __init__(self, space, onehot):
        self.space = space
        self.onehot = onehot
        self.leaves = {}

    def bind(self, leaves):
        """leaves: (path, memoryview, dtype, shape of the [num, ...] buffer) per action leaf."""
        np = numpy()
        self.leaves = {}
        for path, mv, dt, shape in leaves:
            sub = self.space
            for k in path:
                sub = sub.spaces[k]
            kind = _kind(sub)
            start = getattr(sub, 'start', None)
            start = None if start is None or not np.any(start) else np.asarray(start, dtype=np.int64)
            nvec = np.asarray(sub.nvec, dtype=np.int64) if kind == 'MultiDiscrete' else None
            self.leaves[tuple(path)] = (np.frombuffer(mv, dtype=dt).reshape(shape), kind, sub, start, nvec)

    def arg(self, i):
        return self._build(self.space, (), i)

    def _build(self, sp, path, i):
        kind = _kind(sp)
        if kind == 'Dict':
            return {k: self._build(s, path + (k,), i) for k, s in sp.spaces.items()}
        if kind == 'Tuple':
            return tuple(self._build(s, path + (j,), i) for j, s in enumerate(sp.spaces))
        np = numpy()
        buf, kind, sub, start, nvec = self.leaves[path]
        row = buf[i]
        if kind == 'Discrete':
            idx = int(np.argmax(row)) if self.onehot else int(row)
            return idx + (int(start) if start is not None else 0)
        if kind == 'MultiDiscrete':
            if self.onehot:
                groups = np.split(row, np.cumsum(nvec.reshape(-1))[:-1])
                row = np.array([int(np.argmax(g)) for g in groups], np.int64)
            v = row.reshape(nvec.shape)
            if start is not None:
                v = v + start
            return np.asarray(v, dtype=sub.dtype)
        return row.reshape(tuple(sub.shape))


def is_tuple2(space):
    """A 2-Tuple observation space makes (obs, info) ambiguous; see split_reset."""
    return _kind(space) == 'Tuple' and len(space.spaces) == 2


def split_reset(result, tuple2):
    """(obs, info or None) of what reset returned, Gymnasium's (obs, info) or old gym's obs."""
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict):
        if not tuple2 or isinstance(result[0], (tuple, list)):
            return result[0], result[1]
    return result, None


def info_leaves(info, keys):
    """Leaves for info_keys, typed by the first reset's values (float: float32 [1], int: int64 [1], bool: bool
    [1], numpy scalars and arrays: their dtype and shape); the dots of a key become '_'."""
    np = numpy()
    out = []
    for k in keys:
        if k not in info:
            raise pe.CrlError(pe.E_NOT_FOUND, "info_keys: '%s' is not in the info the first reset returned (it has: "
                              "%s); crl types each info key from there, so the env must report it at reset too"
                              % (k, ', '.join(sorted(map(str, info))) or 'nothing'))
        v = info[k]
        if isinstance(v, (bool, np.bool_)):
            dt, shape = 'bool', ()
        elif isinstance(v, int):
            dt, shape = 'int64', ()
        elif isinstance(v, float):
            dt, shape = 'float32', ()
        else:
            try:
                a = np.asarray(v)
            except Exception:
                a = None
            if a is None or a.dtype.name not in CRL_DTYPES:
                raise pe.CrlError(pe.E_UNSUPPORTED, "info_keys: '%s' holds a %s%s; crl takes numbers, booleans and "
                                  'numeric arrays' % (k, type(v).__name__,
                                                      ' of dtype %s' % a.dtype if a is not None else ''))
            dt, shape = a.dtype.name, tuple(a.shape)
        out.append((k.replace('.', '_'), (k,), 'info', dt, dt, shape, None, None, 0, None, None))
    return out


def probe(env, render, tuple2, want_info):
    """Reset a fresh env once inside make: (info or None, (height, width) or None)."""
    obs, info = split_reset(env.reset(), tuple2)
    if want_info and info is None:
        raise pe.CrlError(pe.E_UNSUPPORTED, "info_keys needs the info dict Gymnasium's reset returns, but this env's "
                          'reset returns the observation alone (old gym API)')
    size = None
    if render is not None:
        frame = render()
        if frame is None:
            raise pe.CrlError(pe.E_UNSUPPORTED, "render() returned None: make the env with render_mode='rgb_array' "
                              '(kwargs.render_mode = rgb_array) or leave from_pixels off')
        a = numpy().asarray(frame)
        if a.ndim != 3 or a.shape[2] not in (3, 4) or a.dtype != numpy().uint8:
            raise pe.CrlError(pe.E_UNSUPPORTED, 'render() gave a %s array of shape %s; crl takes uint8 RGB frames of '
                              'shape (height, width, 3)' % (a.dtype, tuple(a.shape)))
        size = (int(a.shape[0]), int(a.shape[1]))
    return info, size


def action_view(memory, dtype, shape):
    """A numpy array over crl's action buffer of one env (made once at bind, reused every step)."""
    return numpy().frombuffer(memory, dtype=dtype).reshape(shape)


def cast(value, dtype):
    """The fallback for values of another type than the space says: numpy.asarray(value, dtype=dtype)."""
    return numpy().asarray(value, dtype=dtype)
