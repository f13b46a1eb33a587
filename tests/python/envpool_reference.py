"""The Python reference for tests/test_envpool.c: drives the envpool module directly, as crl's envpool backend
should, and prints what crl must give, one line per env and step, floats as '%.9g'.

    envpool_reference.py sync TASK ENV_TYPE STEPS MAX_STEPS START:COUNT:SEED[,...]
        One pool per block (crl's executor blocks: inline is one block of all envs), made with
        seed = SEED mod 2**31; reset; then STEPS steps of every env with action(t, i); an env that ends is
        reset by itself (EnvPool reset(env_ids)).  Lines: "t i | next obs | reward terminated truncated |
        obs after the step (the reset one for an env that ended)".
    envpool_reference.py async TASK ENV_TYPE SENDS MAX_STEPS SEED0,SEED1,...
        One pool of one env per seed (crl's async executor: an instance per env); each env's results in
        order: the first reset, then per send either the step with action(j, k) (j: the env's step count) or,
        after an end, the reset (reward 0, flags false).  Lines: "k j | obs | reward terminated truncated".
    envpool_reference.py native TASK ENV_TYPE RECVS MAX_STEPS NUM:BATCH:SEED
        One pool of NUM envs in EnvPool's async mode (batch_size = BATCH), as crl's envpool backend drives it
        with executor = inline: async_reset, then RECVS times recv and a send to the envs received, with
        action(j, k) (j: the env's step count in its episode; ignored for an env that ended, whose send is
        EnvPool's auto-reset).  Lines in recv order: "k j | obs | reward terminated truncated".
Rows are placed by info["env_id"], never by position.
"""
import sys

import numpy as np

import envpool


def action(task, t, i):
    if task == 'CartPole-v1':
        return (3 * t + 5 * i + t // 7) % 2
    return np.float32(((7 * t + 3 * i) % 9) / 4.0 - 1.0)


def fmt(v):
    return ' '.join('%.9g' % float(x) for x in np.asarray(v, np.float64).reshape(-1))


def scatter(dst, ids, rows):
    for k, i in enumerate(np.asarray(ids).reshape(-1)):
        dst[int(i)] = np.asarray(rows[k])


def split_step(res):
    if len(res) == 5:
        obs, rew, term, trunc, info = res
    else:
        obs, rew, done, info = res
        trunc = np.asarray(done) & np.asarray(info['TimeLimit.truncated'])
        term = np.asarray(done) & ~trunc
    return obs, rew, term, trunc, info


def reset(pool, ids=None):
    res = pool.reset(ids) if ids is not None else pool.reset()
    return res if isinstance(res, tuple) else (res, {'env_id': ids})


def sync(task, env_type, steps, max_steps, blocks):
    out = []
    pools = []
    n = sum(c for _, c, _ in blocks)
    obs = [None] * n
    for start, count, seed in blocks:
        kw = {'gym_reset_return_info': True} if env_type == 'gym' else {}
        p = envpool.make(task, env_type=env_type, num_envs=count, batch_size=count, seed=seed % 2 ** 31,
                         max_episode_steps=max_steps, **kw)
        o, info = reset(p)
        scatter(obs[start:start + count], info['env_id'], o)
        pools.append((start, count, p))
    for t in range(steps):
        lines = [None] * n
        for start, count, p in pools:
            acts = np.array([action(task, t, start + k) for k in range(count)])
            o, rew, term, trunc, info = split_step(p.step(acts, np.arange(count, dtype=np.int32)))
            nxt, r, te, tr = [None] * count, [0] * count, [0] * count, [0] * count
            scatter(nxt, info['env_id'], o)
            scatter(r, info['env_id'], rew)
            scatter(te, info['env_id'], term)
            scatter(tr, info['env_id'], trunc)
            ended = np.array([int(i) for i in range(count) if te[i] or tr[i]], np.int32)
            root = list(nxt)
            if ended.size:
                ro, rinfo = reset(p, ended)
                scatter(root, rinfo['env_id'], ro)
            for k in range(count):
                obs[start + k] = root[k]
                lines[start + k] = '%d %d | %s | %s %d %d | %s' % (t, start + k, fmt(nxt[k]), fmt(r[k]), int(te[k]),
                                                                   int(tr[k]), fmt(root[k]))
        out.extend(lines)
    return out


def asynchronous(task, env_type, sends, max_steps, seeds):
    out = []
    for k, seed in enumerate(seeds):
        kw = {'gym_reset_return_info': True} if env_type == 'gym' else {}
        p = envpool.make(task, env_type=env_type, num_envs=1, batch_size=1, seed=seed % 2 ** 31,
                         max_episode_steps=max_steps, **kw)
        o, _ = reset(p)
        out.append('%d 0 | %s | 0 0 0' % (k, fmt(o[0])))
        ended = False
        steps = 0
        for j in range(1, sends + 1):
            if ended:
                o, _ = reset(p, np.zeros(1, np.int32))
                out.append('%d %d | %s | 0 0 0' % (k, j, fmt(o[0])))
                ended = False
                steps = 0
                continue
            o, rew, term, trunc, _ = split_step(p.step(np.array([action(task, steps, k)]), np.zeros(1, np.int32)))
            steps += 1
            out.append('%d %d | %s | %s %d %d' % (k, j, fmt(o[0]), fmt(rew[0]), int(term[0]), int(trunc[0])))
            ended = bool(term[0] or trunc[0])
    return out


def native(task, env_type, recvs, max_steps, num, batch, seed):
    kw = {'gym_reset_return_info': True} if env_type == 'gym' else {}
    p = envpool.make(task, env_type=env_type, num_envs=num, batch_size=batch, seed=seed % 2 ** 31,
                     max_episode_steps=max_steps, **kw)
    p.async_reset()
    out = []
    count = [0] * num
    steps = [0] * num
    ended = [False] * num
    for _ in range(recvs):
        o, rew, term, trunc, info = split_step(p.recv())
        ids = [int(i) for i in info['env_id']]
        acts = []
        for m, k in enumerate(ids):
            out.append('%d %d | %s | %s %d %d' % (k, count[k], fmt(o[m]), fmt(rew[m]), int(term[m]), int(trunc[m])))
            count[k] += 1
            end = bool(term[m] or trunc[m])
            if ended[k]:
                steps[k] = 0
            ended[k] = end
            acts.append(action(task, steps[k], k))
            if not end:
                steps[k] += 1
        p.send(np.array(acts), np.array(ids, np.int32))
    return out


def main(argv):
    mode, task, env_type, steps, max_steps = argv[0], argv[1], argv[2], int(argv[3]), int(argv[4])
    if mode == 'native':
        num, batch, seed = (int(x) for x in argv[5].split(':'))
        sys.stdout.write('\n'.join(native(task, env_type, steps, max_steps, num, batch, seed)) + '\n')
        return 0
    if mode == 'sync':
        blocks = [tuple(int(x) for x in b.split(':')) for b in argv[5].split(',')]
        lines = sync(task, env_type, steps, max_steps, blocks)
    else:
        lines = asynchronous(task, env_type, steps, max_steps, [int(s) for s in argv[5].split(',')])
    sys.stdout.write('\n'.join(lines) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
