"""A numpy stand-in for JAX with the API surface crl's brax backend uses, for crl's tests.

jax.jit is the identity (keyword arguments such as static_argnums accepted); jax.vmap maps a function over
axis 0 of its (pytree) arguments and stacks the (pytree) results; jax.tree_util flattens None, tuples, lists,
dicts (keys sorted, as JAX does) and registered classes; jax.random has PRNGKey, split, fold_in, bits and
uniform with JAX's threefry-2x32 (the classic, non-partitionable layout: jax_threefry_partitionable = False);
jax.numpy is numpy.  Arrays are numpy arrays, which carry __dlpack__ as JAX arrays do.
"""
import numpy as _np

from . import numpy  # noqa: F401
from . import random  # noqa: F401
from . import tree_util  # noqa: F401
from .tree_util import tree_map  # noqa: F401

__version__ = '0.4.30+crl.fake'

Array = _np.ndarray


def jit(fun=None, **kwargs):
    """The identity (also as a decorator with arguments)."""
    if fun is None:
        return lambda f: f
    return fun


def _axis_size(args, in_axes):
    sizes = set()
    for a, ax in zip(args, in_axes):
        if ax is None:
            continue
        for leaf in tree_util.tree_leaves(a):
            sizes.add(_np.shape(leaf)[ax])
    if len(sizes) != 1:
        raise ValueError('vmap got inconsistent sizes for the mapped axis: %s' % sorted(sizes))
    return sizes.pop()


def vmap(fun, in_axes=0, out_axes=0):
    """fun mapped over axis 0 (in_axes None: broadcast that argument)."""
    if out_axes != 0:
        raise NotImplementedError('fake jax.vmap: out_axes other than 0')

    def mapped(*args):
        axes = in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
        if any(ax not in (0, None) for ax in axes):
            raise NotImplementedError('fake jax.vmap: in_axes other than 0 or None')
        n = _axis_size(args, axes)
        outs = []
        for i in range(n):
            call = [a if ax is None else tree_util.tree_map(lambda x: _np.asarray(x)[i], a)
                    for a, ax in zip(args, axes)]
            outs.append(fun(*call))
        leaves0, tdef = tree_util.tree_flatten(outs[0])
        cols = [tree_util.tree_leaves(o) for o in outs]
        stacked = [_np.stack([_np.asarray(c[k]) for c in cols]) for k in range(len(leaves0))]
        return tree_util.tree_unflatten(tdef, stacked)
    return mapped
