"""jax.tree_util of the fake JAX: pytrees of None, tuple, list, dict (sorted keys) and registered classes."""

_registry = {}


class PyTreeDef:
    """The structure of a pytree: (kind, node data, children defs); a leaf is kind '*'."""

    def __init__(self, kind, data, children):
        self.kind, self.data, self.children = kind, data, tuple(children)
        self.num_leaves = 1 if kind == '*' else sum(c.num_leaves for c in self.children)

    def __eq__(self, other):
        return (isinstance(other, PyTreeDef) and (self.kind, self.data, self.children)
                == (other.kind, other.data, other.children))

    def __hash__(self):
        return hash((self.kind, str(self.data), self.children))

    def __repr__(self):
        return 'PyTreeDef(%s, %d leaves)' % (self.kind if self.kind in ('*', 'None', 'tuple', 'list', 'dict')
                                            else self.kind.__name__, self.num_leaves)


def register_pytree_node(nodetype, flatten_func, unflatten_func):
    """flatten_func(x) -> (children, aux); unflatten_func(aux, children) -> x."""
    _registry[nodetype] = (flatten_func, unflatten_func)


def register_pytree_node_class(cls):
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def _flatten(x, leaves):
    if x is None:
        return PyTreeDef('None', None, ())
    t = type(x)
    if t in (tuple, list):
        return PyTreeDef(t.__name__, len(x), [_flatten(c, leaves) for c in x])
    if t is dict:
        keys = sorted(x)
        return PyTreeDef('dict', tuple(keys), [_flatten(x[k], leaves) for k in keys])
    if t in _registry:
        children, aux = _registry[t][0](x)
        return PyTreeDef(t, aux, [_flatten(c, leaves) for c in children])
    leaves.append(x)
    return PyTreeDef('*', None, ())


def tree_flatten(tree):
    leaves = []
    return leaves, _flatten(tree, leaves)


class GetAttrKey:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return '.%s' % self.name


class DictKey:
    def __init__(self, key):
        self.key = key

    def __repr__(self):
        return '[%r]' % (self.key,)


class SequenceKey:
    def __init__(self, idx):
        self.idx = idx

    def __repr__(self):
        return '[%d]' % self.idx


def _with_path(x, path, out):
    if x is None:
        return
    t = type(x)
    if t in (tuple, list):
        for i, c in enumerate(x):
            _with_path(c, path + (SequenceKey(i),), out)
    elif t is dict:
        for k in sorted(x):
            _with_path(x[k], path + (DictKey(k),), out)
    elif t in _registry:
        import dataclasses
        children, _ = _registry[t][0](x)
        names = [f.name for f in dataclasses.fields(x)] if dataclasses.is_dataclass(x) else None
        for i, c in enumerate(children):
            _with_path(c, path + ((GetAttrKey(names[i]) if names else SequenceKey(i)),), out)
    else:
        out.append((path, x))


def tree_flatten_with_path(tree):
    """([(key path, leaf)], treedef), the keys GetAttrKey (dataclass fields), DictKey and SequenceKey."""
    out = []
    _with_path(tree, (), out)
    return out, tree_structure(tree)


def tree_leaves(tree):
    return tree_flatten(tree)[0]


def tree_structure(tree):
    return tree_flatten(tree)[1]


def _unflatten(tdef, it):
    if tdef.kind == '*':
        return next(it)
    if tdef.kind == 'None':
        return None
    children = [_unflatten(c, it) for c in tdef.children]
    if tdef.kind == 'tuple':
        return tuple(children)
    if tdef.kind == 'list':
        return children
    if tdef.kind == 'dict':
        return dict(zip(tdef.data, children))
    return _registry[tdef.kind][1](tdef.data, children)


def tree_unflatten(treedef, leaves):
    it = iter(leaves)
    out = _unflatten(treedef, it)
    if next(it, None) is not None:
        raise ValueError('too many leaves for %r' % treedef)
    return out


def tree_map(f, tree, *rest):
    leaves, tdef = tree_flatten(tree)
    others = [tdef_leaves(tdef, r) for r in rest]
    return tree_unflatten(tdef, [f(x, *[o[i] for o in others]) for i, x in enumerate(leaves)])


def tdef_leaves(tdef, tree):
    leaves, other = tree_flatten(tree)
    if other != tdef:
        raise ValueError('tree_map: the trees have different structures: %r and %r' % (tdef, other))
    return leaves
