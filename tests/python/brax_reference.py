"""The Python reference for tests/test_brax.c: drives brax.envs and jax as TorchRL's BraxEnv does (and crl's brax
backend should) and prints what crl must give, one line per env and step, floats as '%.9g'.

    brax_reference.py ENV STEPS MAX_STEPS START:COUNT:SEED[,...]
One batch per block (crl's executor blocks; inline is one block of all envs): key = PRNGKey(SEED mod 2**31),
key, *keys = split(key, 1 + COUNT), state = vmap(jit(reset))(keys); then STEPS steps of vmap(jit(step)) with
action(t, i); terminated = done != 0, truncated once an episode has MAX_STEPS steps; after a step where some env
ended, a new split, a reset of the whole batch and a merge of the ended envs' leaves (jnp.where, leaf by leaf).
Lines: "t i | next obs | reward terminated truncated | obs after the step (the reset one for an env that ended)".
"""
import sys

import numpy as np

import jax
from brax import envs


def action(t, i):
    return np.float32(((5 * t + 3 * i) % 9) / 4.0 - 1.0)


def fmt(v):
    return ' '.join('%.9g' % float(x) for x in np.asarray(v, np.float64).reshape(-1))


def main(argv):
    name, steps, max_steps = argv[0], int(argv[1]), int(argv[2])
    blocks = [tuple(int(x) for x in b.split(':')) for b in argv[3].split(',')]
    env = envs.get_environment(name)
    vreset, vstep = jax.vmap(jax.jit(env.reset)), jax.vmap(jax.jit(env.step))
    n = sum(c for _, c, _ in blocks)
    lines = [[None] * n for _ in range(steps)]
    for start, count, seed in blocks:
        key = jax.random.PRNGKey(seed % 2 ** 31)
        keys = jax.random.split(key, 1 + count)
        key, state = keys[0], vreset(keys[1:])
        elapsed = np.zeros(count, np.int64)
        for t in range(steps):
            act = np.array([[action(t, start + k)] for k in range(count)], np.float32)
            state = vstep(state, act)
            elapsed += 1
            nxt, rew = np.asarray(state.obs), np.asarray(state.reward)
            term = np.asarray(state.done) != 0
            trunc = elapsed >= max_steps
            ended = term | trunc
            if ended.any():
                keys = jax.random.split(key, 1 + count)
                key, new = keys[0], vreset(keys[1:])
                state = jax.tree_util.tree_map(
                    lambda a, b: jax.numpy.where(ended.reshape((-1,) + (1,) * (np.ndim(a) - 1)), a, b), new, state)
                elapsed[ended] = 0
            root = np.asarray(state.obs)
            for k in range(count):
                lines[t][start + k] = '%d %d | %s | %s %d %d | %s' % (t, start + k, fmt(nxt[k]), fmt(rew[k]),
                                                                      int(term[k]), int(trunc[k]), fmt(root[k]))
    sys.stdout.write('\n'.join(line for row in lines for line in row) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
