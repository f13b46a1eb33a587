"""jax.random of the fake JAX: threefry-2x32 keys (uint32[2]) as JAX makes and splits them."""
import numpy as np

_M = 0xFFFFFFFF
_ROT = ((13, 15, 26, 6), (17, 29, 16, 24))


def _rotl(x, r):
    return ((x << np.uint32(r)) | (x >> np.uint32(32 - r))) & np.uint32(_M)


def threefry_2x32(key, count):
    """Threefry-2x32 with 20 rounds of key (uint32[2]) over count (uint32 array), JAX's layout: the flattened
    count is split in halves (padded to an even size), each pair (x0[i], x1[i]) one block."""
    key = np.asarray(key, np.uint32)
    count = np.asarray(count, np.uint32)
    flat = count.ravel()
    odd = flat.size % 2
    if odd:
        flat = np.concatenate([flat, np.zeros(1, np.uint32)])
    half = flat.size // 2
    x = [flat[:half].copy(), flat[half:].copy()]
    ks = [key[0], key[1], np.uint32(key[0] ^ key[1] ^ np.uint32(0x1BD11BDA))]
    with np.errstate(over='ignore'):
        x[0] = x[0] + ks[0]
        x[1] = x[1] + ks[1]
        for i in range(5):
            for r in _ROT[i % 2]:
                x[0] = x[0] + x[1]
                x[1] = _rotl(x[1], r)
                x[1] = x[0] ^ x[1]
            x[0] = x[0] + ks[(i + 1) % 3]
            x[1] = x[1] + ks[(i + 2) % 3] + np.uint32(i + 1)
    out = np.concatenate(x)
    return (out[:-1] if odd else out).reshape(count.shape)


def PRNGKey(seed):
    """The key of an integer seed: [seed >> 32, seed & 0xFFFFFFFF] as uint32."""
    seed = int(seed)
    if not -2 ** 63 <= seed < 2 ** 64:
        raise OverflowError('seed %d does not fit in 64 bits' % seed)
    seed &= 2 ** 64 - 1
    return np.array([(seed >> 32) & _M, seed & _M], np.uint32)


key = PRNGKey


def split(key, num=2):
    """num new keys, uint32 [num, 2]."""
    return threefry_2x32(key, np.arange(num * 2, dtype=np.uint32)).reshape(num, 2)


def fold_in(key, data):
    return threefry_2x32(key, PRNGKey(data))


def bits(key, shape=(), dtype=np.uint32):
    if np.dtype(dtype) != np.uint32:
        raise NotImplementedError('fake jax.random.bits: uint32 only')
    shape = tuple(shape)
    return threefry_2x32(key, np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.uint32)).reshape(shape)


def uniform(key, shape=(), dtype=np.float32, minval=0.0, maxval=1.0):
    """Floats in [minval, maxval): the 23 high bits of bits() as the mantissa of a float in [1, 2), minus 1."""
    if np.dtype(dtype) != np.float32:
        raise NotImplementedError('fake jax.random.uniform: float32 only')
    shape = tuple(shape)
    b = bits(key, shape)
    f = ((b >> np.uint32(9)) | np.uint32(0x3F800000)).view(np.float32) - np.float32(1.0)
    lo, hi = np.float32(minval), np.float32(maxval)
    return np.maximum(lo, (f * (hi - lo) + lo).reshape(shape)).astype(np.float32)
