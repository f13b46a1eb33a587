# Gymnasium-compatible space classes (Box, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple).
"""Duck-typed copies of ``gymnasium.spaces`` (1.x semantics), written from its documented behaviour.

Class names, constructor signatures, attributes (``low``/``high``/``shape``/``dtype``/``n``/
``start``/``nvec``/``spaces``), ``sample``/``contains``/``seed`` and the ordering rules are
Gymnasium's, so a consumer that works with these works with the real package unchanged:

* ``Dict`` built from a mapping keeps its keys sorted (Gymnasium sorts "for legacy reasons");
  built from a sequence of pairs it keeps the given order.
* ``Discrete.n``/``start`` are ``np.int64``; ``Discrete.shape == ()``; its dtype is int64.
* ``MultiBinary.dtype`` is int8; ``MultiDiscrete.dtype`` defaults to int64 and has ``start``.
* ``Box`` keeps ``+-inf`` bounds for float dtypes and maps them to the dtype's min/max for
  signed integer dtypes.
"""

import collections.abc

import numpy as np

from crl_testenvs import error
from crl_testenvs.core import np_random as _seeded_generator


class Space:
    """Common base: shape, dtype and a lazily created numpy Generator."""

    def __init__(self, shape=None, dtype=None, seed=None):
        self._shape = None if shape is None else tuple(shape)
        self.dtype = None if dtype is None else np.dtype(dtype)
        self._np_random = None
        if seed is not None:
            if isinstance(seed, np.random.Generator):
                self._np_random = seed
            else:
                self.seed(seed)

    @property
    def np_random(self):
        if self._np_random is None:
            self.seed()
        if self._np_random is None:
            self._np_random, _ = _seeded_generator()
        return self._np_random

    @property
    def shape(self):
        return self._shape

    @property
    def is_np_flattenable(self):
        raise NotImplementedError

    def seed(self, seed=None):
        self._np_random, seed = _seeded_generator(seed)
        return [seed]

    def sample(self, mask=None):
        raise NotImplementedError

    def contains(self, x):
        raise NotImplementedError

    def __contains__(self, x):
        return self.contains(x)


def _is_float_integer(var):
    return np.issubdtype(type(var), np.integer) or np.issubdtype(type(var), np.floating)


def _short_repr(arr):
    if arr.size != 0 and np.min(arr) == np.max(arr):
        return str(np.min(arr))
    return str(arr)


class Box(Space):
    """A (possibly unbounded) box: the product of closed intervals ``[low[i], high[i]]``."""

    def __init__(self, low, high, shape=None, dtype=np.float32, seed=None):
        if dtype is None:
            raise ValueError("Box dtype must be explicitly provided, cannot be None.")
        self.dtype = np.dtype(dtype)
        if not (np.issubdtype(self.dtype, np.integer) or np.issubdtype(self.dtype, np.floating)
                or self.dtype == np.bool_):
            raise ValueError(
                f"Invalid Box dtype ({self.dtype}), must be an integer, floating, or bool dtype")

        if shape is not None:
            if not isinstance(shape, collections.abc.Iterable):
                raise TypeError(f"Expected Box shape to be an iterable, actual type={type(shape)}")
            if not all(np.issubdtype(type(dim), np.integer) for dim in shape):
                raise TypeError("Expected all Box shape elements to be integer, actual type="
                                f"{tuple(type(dim) for dim in shape)}")
            shape = tuple(int(dim) for dim in shape)
        elif isinstance(low, np.ndarray) and isinstance(high, np.ndarray):
            if low.shape != high.shape:
                raise ValueError("Box low.shape and high.shape don't match, "
                                 f"low.shape={low.shape}, high.shape={high.shape}")
            shape = low.shape
        elif isinstance(low, np.ndarray):
            shape = low.shape
        elif isinstance(high, np.ndarray):
            shape = high.shape
        elif _is_float_integer(low) and _is_float_integer(high):
            shape = (1,)
        else:
            raise ValueError("Box shape is not specified, therefore inferred from low and high. "
                             "Expected low and high to be np.ndarray, integer, or float."
                             f"Actual types low={type(low)}, high={type(high)}")
        self._shape = tuple(shape)

        if self.dtype == np.bool_:
            dtype_min, dtype_max = 0, 1
        elif np.issubdtype(self.dtype, np.floating):
            dtype_min = float(np.finfo(self.dtype).min)
            dtype_max = float(np.finfo(self.dtype).max)
        else:
            dtype_min = int(np.iinfo(self.dtype).min)
            dtype_max = int(np.iinfo(self.dtype).max)

        self.low, self.bounded_below = self._cast_bound(low, dtype_min, "low")
        self.high, self.bounded_above = self._cast_bound(high, dtype_max, "high")

        if self.low.shape != self._shape:
            raise ValueError("Box low.shape doesn't match provided shape, "
                             f"low.shape={self.low.shape}, shape={self._shape}")
        if self.high.shape != self._shape:
            raise ValueError("Box high.shape doesn't match provided shape, "
                             f"high.shape={self.high.shape}, shape={self._shape}")
        if np.any(self.low > self.high):
            raise ValueError("Box all low values must be less than or equal to high (some values "
                             f"break this), low={self.low}, high={self.high}")

        self.low_repr = _short_repr(self.low)
        self.high_repr = _short_repr(self.high)
        super().__init__(self._shape, self.dtype, seed)

    def _cast_bound(self, value, dtype_limit, which):
        """Cast ``low``/``high`` to an array of ``self.dtype``; return it and its boundedness mask."""
        is_low = which == "low"
        infinite = np.isneginf if is_low else np.isposinf
        if _is_float_integer(value):
            as_float = np.full(self._shape, value, dtype=float)
            bounded = (-np.inf < as_float) if is_low else (as_float < np.inf)
            if np.isnan(value):
                raise ValueError(f"No {which} value can be equal to `np.nan`, {which}={value}")
            if infinite(value):
                if self.dtype.kind == "i":
                    value = dtype_limit
                elif self.dtype.kind in {"u", "b"}:
                    raise ValueError(f"Box unsigned int dtype don't support "
                                     f"`{'-' if is_low else ''}np.inf`, {which}={value}")
            elif (value < dtype_limit) if is_low else (value > dtype_limit):
                raise ValueError(f"Box {which} is out of bounds of the dtype range, "
                                 f"{which}={value}, {'min' if is_low else 'max'} "
                                 f"dtype={dtype_limit}")
            return np.full(self._shape, value, dtype=self.dtype), bounded

        if not isinstance(value, np.ndarray):
            raise ValueError(f"Box {which} must be a np.ndarray, integer, or float, "
                             f"actual type={type(value)}")
        if not (np.issubdtype(value.dtype, np.floating) or np.issubdtype(value.dtype, np.integer)
                or value.dtype == np.bool_):
            raise ValueError(f"Box {which} must be a floating, integer, or bool dtype, "
                             f"actual dtype={value.dtype}")
        if np.any(np.isnan(value)):
            raise ValueError(f"No {which} value can be equal to `np.nan`, {which}={value}")
        bounded = (-np.inf < value) if is_low else (value < np.inf)
        inf_mask = infinite(value)
        if np.any(inf_mask):
            if self.dtype.kind == "i":
                value = value.copy()
                value[inf_mask] = dtype_limit
            elif self.dtype.kind in {"u", "b"}:
                raise ValueError(f"Box unsigned int dtype don't support "
                                 f"`{'-' if is_low else ''}np.inf`, {which}={value}")
        elif value.dtype != self.dtype and np.any(
                (value < dtype_limit) if is_low else (value > dtype_limit)):
            raise ValueError(f"Box {which} is out of bounds of the dtype range, "
                             f"{which}={value}, {'min' if is_low else 'max'} dtype={dtype_limit}")
        return value.astype(self.dtype), np.asarray(bounded)

    @property
    def shape(self):
        return self._shape

    @property
    def is_np_flattenable(self):
        return True

    def is_bounded(self, manner="both"):
        below = bool(np.all(self.bounded_below))
        above = bool(np.all(self.bounded_above))
        if manner == "both":
            return below and above
        if manner == "below":
            return below
        if manner == "above":
            return above
        raise ValueError(f"manner is not in {{'below', 'above', 'both'}}, actual value: {manner}")

    def sample(self, mask=None):
        """Uniform on bounded coordinates, (shifted) exponential on half-bounded, normal on unbounded."""
        if mask is not None:
            raise error.Error(f"Box.sample cannot be provided a mask, actual value: {mask}")
        high = self.high if self.dtype.kind == "f" else self.high.astype("int64") + 1
        sample = np.empty(self._shape)
        unbounded = ~self.bounded_below & ~self.bounded_above
        upp_bounded = ~self.bounded_below & self.bounded_above
        low_bounded = self.bounded_below & ~self.bounded_above
        bounded = self.bounded_below & self.bounded_above
        sample[unbounded] = self.np_random.normal(size=unbounded[unbounded].shape)
        sample[low_bounded] = (self.np_random.exponential(size=low_bounded[low_bounded].shape)
                               + self.low[low_bounded])
        sample[upp_bounded] = (-self.np_random.exponential(size=upp_bounded[upp_bounded].shape)
                               + high[upp_bounded])
        sample[bounded] = self.np_random.uniform(low=self.low[bounded], high=high[bounded],
                                                 size=bounded[bounded].shape)
        if self.dtype.kind in ["i", "u", "b"]:
            sample = np.floor(sample)
        if np.issubdtype(self.dtype, np.signedinteger):
            info = np.iinfo(self.dtype)
            sample = sample.clip(min=info.min + 2, max=info.max - 2)
        elif np.issubdtype(self.dtype, np.unsignedinteger):
            info = np.iinfo(self.dtype)
            sample = sample.clip(min=info.min, max=info.max)
        sample = sample.astype(self.dtype)
        if self.dtype == np.int64:
            sample = sample.clip(min=self.low, max=self.high)
        return sample

    def contains(self, x):
        if not isinstance(x, np.ndarray):
            try:
                x = np.asarray(x, dtype=self.dtype)
            except (ValueError, TypeError):
                return False
        return bool(np.can_cast(x.dtype, self.dtype) and x.shape == self._shape
                    and np.all(x >= self.low) and np.all(x <= self.high))

    def __repr__(self):
        return f"Box({self.low_repr}, {self.high_repr}, {self._shape}, {self.dtype})"

    def __eq__(self, other):
        return (isinstance(other, Box) and self._shape == other.shape and self.dtype == other.dtype
                and np.allclose(self.low, other.low) and np.allclose(self.high, other.high))


class Discrete(Space):
    """The integers ``{start, ..., start + n - 1}``; elements are ``np.int64`` scalars."""

    def __init__(self, n, seed=None, start=0):
        if not np.issubdtype(type(n), np.integer):
            raise AssertionError(f"Expects `n` to be an integer, actual dtype: {type(n)}")
        if not n > 0:
            raise AssertionError("n (counts) have to be positive")
        if not np.issubdtype(type(start), np.integer):
            raise AssertionError(f"Expects `start` to be an integer, actual type: {type(start)}")
        self.n = np.int64(n)
        self.start = np.int64(start)
        super().__init__((), np.int64, seed)

    @property
    def is_np_flattenable(self):
        return True

    def sample(self, mask=None):
        if mask is not None:
            mask = np.asarray(mask)
            if mask.dtype != np.int8 or mask.shape != (self.n,):
                raise AssertionError(f"The expected mask is int8 of shape {(self.n,)}, "
                                     f"actual: {mask.dtype} {mask.shape}")
            valid = mask == 1
            if np.any(valid):
                return self.start + self.np_random.choice(np.where(valid)[0])
            return self.start
        return self.start + self.np_random.integers(self.n)

    def contains(self, x):
        if isinstance(x, int):
            as_int64 = np.int64(x)
        elif isinstance(x, (np.generic, np.ndarray)) and (
                np.issubdtype(x.dtype, np.integer) and x.shape == ()):
            as_int64 = np.int64(x)
        else:
            return False
        return bool(self.start <= as_int64 < self.start + self.n)

    def __repr__(self):
        if self.start != 0:
            return f"Discrete({self.n}, start={self.start})"
        return f"Discrete({self.n})"

    def __eq__(self, other):
        return isinstance(other, Discrete) and self.n == other.n and self.start == other.start


class MultiDiscrete(Space):
    """A product of Discrete spaces: ``start[i] <= x[i] < start[i] + nvec[i]``."""

    def __init__(self, nvec, dtype=np.int64, seed=None, start=None):
        if dtype is None:
            raise ValueError("MultiDiscrete dtype must be explicitly provided, cannot be None.")
        self.dtype = np.dtype(dtype)
        if not np.issubdtype(self.dtype, np.integer):
            raise ValueError(f"Invalid MultiDiscrete dtype ({self.dtype}), "
                             "must be an integer dtype")
        self.nvec = np.array(nvec, dtype=dtype, copy=True)
        if start is not None:
            self.start = np.array(start, dtype=dtype, copy=True)
        else:
            self.start = np.zeros(self.nvec.shape, dtype=dtype)
        if self.start.shape != self.nvec.shape:
            raise AssertionError("start and nvec (counts) should have the same shape")
        if not (self.nvec > 0).all():
            raise AssertionError("nvec (counts) have to be positive")
        super().__init__(self.nvec.shape, self.dtype, seed)

    @property
    def shape(self):
        return self._shape

    @property
    def is_np_flattenable(self):
        return True

    def sample(self, mask=None):
        if mask is not None:
            raise error.Error("crl_testenvs MultiDiscrete.sample does not implement masks")
        return (self.np_random.random(self.nvec.shape) * self.nvec).astype(self.dtype) + self.start

    def contains(self, x):
        if isinstance(x, collections.abc.Sequence):
            x = np.array(x)
        return bool(isinstance(x, np.ndarray) and x.shape == self._shape and x.dtype != object
                    and np.all(self.start <= x) and np.all(x - self.start < self.nvec))

    def __len__(self):
        return len(self.nvec)

    def __repr__(self):
        if np.any(self.start != 0):
            return f"MultiDiscrete({self.nvec}, start={self.start})"
        return f"MultiDiscrete({self.nvec})"

    def __eq__(self, other):
        return bool(isinstance(other, MultiDiscrete) and self.dtype == other.dtype
                    and self.shape == other.shape and np.all(self.nvec == other.nvec)
                    and np.all(self.start == other.start))


class MultiBinary(Space):
    """Binary arrays of a fixed shape; ``n`` is an int (flat) or a tuple (several axes)."""

    def __init__(self, n, seed=None):
        if isinstance(n, (collections.abc.Sequence, np.ndarray)):
            self.n = input_n = tuple(int(i) for i in n)
        else:
            self.n = n = int(n)
            input_n = (n,)
        if not (np.asarray(input_n) > 0).all():
            raise AssertionError("n (counts) have to be positive")
        super().__init__(input_n, np.int8, seed)

    @property
    def shape(self):
        return self._shape

    @property
    def is_np_flattenable(self):
        return True

    def sample(self, mask=None):
        if mask is not None:
            mask = np.asarray(mask)
            if mask.dtype != np.int8 or mask.shape != self._shape:
                raise AssertionError(f"The expected mask is int8 of shape {self._shape}, "
                                     f"actual: {mask.dtype} {mask.shape}")
            return np.where(mask == 2,
                            self.np_random.integers(low=0, high=2, size=self.n, dtype=self.dtype),
                            mask.astype(self.dtype))
        return self.np_random.integers(low=0, high=2, size=self.n, dtype=self.dtype)

    def contains(self, x):
        if isinstance(x, collections.abc.Sequence):
            x = np.array(x)
        return bool(isinstance(x, np.ndarray) and self._shape == x.shape
                    and np.all(np.logical_or(x == 0, x == 1)))

    def __repr__(self):
        return f"MultiBinary({self.n})"

    def __eq__(self, other):
        return isinstance(other, MultiBinary) and self.n == other.n


class Dict(Space, collections.abc.Mapping):
    """A dictionary of spaces; elements are dicts with the same keys, in ``spaces`` order."""

    def __init__(self, spaces=None, seed=None, **spaces_kwargs):
        if isinstance(spaces, collections.abc.Mapping):
            try:
                spaces = dict(sorted(spaces.items()))
            except TypeError:
                spaces = dict(spaces.items())
        elif isinstance(spaces, collections.abc.Sequence):
            spaces = dict(spaces)
        elif spaces is None:
            spaces = dict()
        else:
            raise TypeError("Unexpected Dict space input, expecting dict, OrderedDict or Sequence, "
                            f"actual type: {type(spaces)}")
        for key, space in spaces_kwargs.items():
            if key in spaces:
                raise ValueError(f"Dict space keyword '{key}' already exists in the spaces "
                                 "dictionary.")
            spaces[key] = space
        self.spaces = spaces
        for key, space in self.spaces.items():
            if not isinstance(space, Space):
                raise AssertionError("Dict space element is not an instance of Space: "
                                     f"key='{key}', space={space}")
        super().__init__(None, None, seed)

    @property
    def is_np_flattenable(self):
        return all(space.is_np_flattenable for space in self.spaces.values())

    def seed(self, seed=None):
        """int: seeds this space, which draws one int32 sub-seed per subspace (in key order);
        dict: one seed per key; None: every subspace seeded from OS entropy."""
        seeds = []
        if isinstance(seed, dict):
            if seed.keys() != self.spaces.keys():
                raise AssertionError(f"The seed keys: {seed.keys()} are not identical to space "
                                     f"keys: {self.spaces.keys()}")
            for key in seed.keys():
                seeds += self.spaces[key].seed(seed[key])
        elif isinstance(seed, int):
            seeds = super().seed(seed)
            subseeds = self.np_random.integers(np.iinfo(np.int32).max, size=len(self.spaces))
            for subspace, subseed in zip(self.spaces.values(), subseeds):
                seeds += subspace.seed(int(subseed))
        elif seed is None:
            for space in self.spaces.values():
                seeds += space.seed(None)
        else:
            raise TypeError(f"Expected seed type: dict, int or None, actual type: {type(seed)}")
        return seeds

    def sample(self, mask=None):
        if mask is not None:
            return {k: space.sample(mask=mask[k]) for k, space in self.spaces.items()}
        return {k: space.sample() for k, space in self.spaces.items()}

    def contains(self, x):
        if isinstance(x, dict) and x.keys() == self.spaces.keys():
            return all(x[key] in self.spaces[key] for key in self.spaces.keys())
        return False

    def __getitem__(self, key):
        return self.spaces[key]

    def __setitem__(self, key, value):
        if not isinstance(value, Space):
            raise AssertionError(f"Trying to set {key} to Dict space with value that is not a "
                                 f"space, actual type: {type(value)}")
        self.spaces[key] = value

    def __iter__(self):
        yield from self.spaces

    def __len__(self):
        return len(self.spaces)

    def keys(self):
        return collections.abc.KeysView(self.spaces)

    def __repr__(self):
        return "Dict(" + ", ".join([f"{k!r}: {s}" for k, s in self.spaces.items()]) + ")"

    def __eq__(self, other):
        return isinstance(other, Dict) and self.spaces == other.spaces

    __hash__ = None


class Tuple(Space, collections.abc.Sequence):
    """A tuple of spaces; elements are tuples."""

    def __init__(self, spaces, seed=None):
        self.spaces = tuple(spaces)
        for space in self.spaces:
            if not isinstance(space, Space):
                raise AssertionError("Elements of the tuple must be instances of gym.Space")
        super().__init__(None, None, seed)

    @property
    def is_np_flattenable(self):
        return all(space.is_np_flattenable for space in self.spaces)

    def seed(self, seed=None):
        seeds = []
        if isinstance(seed, collections.abc.Sequence):
            if len(seed) != len(self.spaces):
                raise AssertionError("Expects that the subspaces of seeds equals the number of "
                                     f"subspaces. Actual length of seeds: {len(seed)}, length of "
                                     f"subspaces: {len(self.spaces)}")
            for subseed, space in zip(seed, self.spaces):
                seeds += space.seed(subseed)
        elif isinstance(seed, int):
            seeds = super().seed(seed)
            subseeds = self.np_random.integers(np.iinfo(np.int32).max, size=len(self.spaces))
            for subspace, subseed in zip(self.spaces, subseeds):
                seeds += subspace.seed(int(subseed))
        elif seed is None:
            for space in self.spaces:
                seeds += space.seed(None)
        else:
            raise TypeError("Expected seed type: list, tuple, int or None, "
                            f"actual type: {type(seed)}")
        return seeds

    def sample(self, mask=None):
        if mask is not None:
            return tuple(space.sample(mask=m) for space, m in zip(self.spaces, mask))
        return tuple(space.sample() for space in self.spaces)

    def contains(self, x):
        if isinstance(x, (list, np.ndarray)):
            x = tuple(x)
        return (isinstance(x, tuple) and len(x) == len(self.spaces)
                and all(space.contains(part) for space, part in zip(self.spaces, x)))

    def __getitem__(self, index):
        return self.spaces[index]

    def __len__(self):
        return len(self.spaces)

    def __repr__(self):
        return "Tuple(" + ", ".join([str(s) for s in self.spaces]) + ")"

    def __eq__(self, other):
        return isinstance(other, Tuple) and self.spaces == other.spaces

    __hash__ = None


__all__ = ["Space", "Box", "Discrete", "MultiDiscrete", "MultiBinary", "Dict", "Tuple"]
