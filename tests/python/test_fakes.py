"""Self-tests of the library stand-ins in tests/python (fake_envpool, ...) and the composite-action envs."""
import os
import sys
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
for sub in ('', 'fake_envpool', 'fake_gymnasium', 'fake_gym', 'fake_jax', 'fake_brax'):
    path = os.path.join(HERE, sub)
    if path not in sys.path:
        sys.path.insert(0, path)

import envpool  # noqa: E402
import jax  # noqa: E402
from brax import envs as brax_envs  # noqa: E402
from crl_testenvs.compositeaction import DictActionEnv, TupleActionEnv  # noqa: E402


class CompositeActionTest(unittest.TestCase):
    def test_dict_action_echo(self):
        env = DictActionEnv()
        obs, _ = env.reset(seed=3)
        self.assertEqual(obs[:5].tolist(), [0, 0, 0, 0, 0])
        a = {'move': np.array([0.5, -0.25], np.float32), 'fire': 2, 'aim': np.array([1, 2])}
        obs, rew, term, trunc, _ = env.step(a)
        self.assertEqual(obs[:5].tolist(), [0.5, -0.25, 2, 1, 2])
        self.assertEqual((rew, term, trunc), (1.0, True, False))
        with self.assertRaises(AssertionError):
            env.step({'move': np.zeros(2, np.float32), 'fire': 0, 'aim': np.array([0, 0])})  # fire starts at 1

    def test_tuple_action_echo(self):
        env = TupleActionEnv(max_episode_steps=2)
        env.reset(seed=1)
        obs, rew, term, trunc, _ = env.step((3, np.float32(1.5), np.array([1, 0, 1], np.int8)))
        self.assertEqual(obs[:5].tolist(), [3, 1.5, 1, 0, 1])
        self.assertEqual((rew, term, trunc), (4.5, False, False))
        _, _, term, trunc, _ = env.step((0, np.float32(0), np.ones(3, np.int8)))
        self.assertEqual((term, trunc), (True, True))


class FakeEnvPoolTest(unittest.TestCase):
    def test_api_surface(self):
        self.assertIn('CartPole-v1', envpool.list_all_envs())
        spec = envpool.make_spec('Pendulum-v1', num_envs=2)
        self.assertEqual(spec.config.num_envs, 2)
        self.assertEqual(spec.config.max_episode_steps, 200)
        self.assertEqual(spec.action_space.shape, (1,))
        with self.assertRaises(KeyError):
            envpool.make('CartPole-v1', env_type='gymnasium', no_such_key=1)
        with self.assertRaises(ValueError):
            envpool.make('Nope-v0', env_type='gymnasium')

    def test_rows_come_in_worker_order_with_env_ids(self):
        env = envpool.make('CartPole-v1', env_type='gymnasium', num_envs=5, seed=3)
        obs, info = env.reset()
        self.assertEqual(sorted(info['env_id'].tolist()), list(range(5)))
        self.assertNotEqual(info['env_id'].tolist(), list(range(5)))
        self.assertEqual(info['env_id'].dtype, np.int32)
        self.assertEqual(info['players']['env_id'].tolist(), info['env_id'].tolist())
        # Env i is seeded with seed + i, whatever the pool size.
        one = envpool.make('CartPole-v1', env_type='gymnasium', num_envs=1, seed=5)
        o1, _ = one.reset()
        self.assertEqual(obs[info['env_id'].tolist().index(2)].tolist(), o1[0].tolist())

    def test_autoreset_and_truncation(self):
        env = envpool.make('Pendulum-v1', env_type='gymnasium', num_envs=2, seed=0, max_episode_steps=3)
        env.reset()
        act = np.zeros((2, 1), np.float32)
        for t in range(3):
            _, _, term, trunc, info = env.step(act)
        self.assertEqual(trunc.tolist(), [True, True])
        self.assertEqual(info['elapsed_step'].tolist(), [3, 3])
        # The step after the end is EnvPool's auto-reset: action ignored, reward 0, elapsed_step 0.
        _, rew, term, trunc, info = env.step(act)
        self.assertEqual((rew.tolist(), trunc.tolist(), info['elapsed_step'].tolist()), ([0, 0], [False] * 2, [0, 0]))
        self.assertEqual(env.resets.tolist(), [2, 2])

    def test_gym_four_tuple(self):
        env = envpool.make('Pendulum-v1', env_type='gym', num_envs=1, seed=0, max_episode_steps=1)
        self.assertFalse(isinstance(env.reset(), tuple))
        _, _, done, info = env.step(np.zeros((1, 1), np.float32))
        self.assertEqual((done.tolist(), info['TimeLimit.truncated'].tolist()), ([True], [True]))

    def test_async_send_recv(self):
        env = envpool.make('CartPole-v1', env_type='gymnasium', num_envs=4, batch_size=2, seed=1)
        self.assertTrue(env.is_async)
        env.async_reset()
        seen = []
        for _ in range(2):
            obs, rew, term, trunc, info = env.recv()
            self.assertEqual(obs.shape, (2, 4))
            seen += info['env_id'].tolist()
        self.assertEqual(sorted(seen), [0, 1, 2, 3])
        with self.assertRaises(RuntimeError):
            env.recv()
        env.send(np.array([1, 0]), np.array([3, 1]))
        _, _, _, _, info = env.recv()
        self.assertEqual(sorted(info['env_id'].tolist()), [1, 3])

    def test_render(self):
        env = envpool.make('CartPole-v1', env_type='gymnasium', num_envs=2, render_mode='rgb_array',
                           render_width=20, render_height=10)
        env.reset()
        frames = env.render(env_ids=[0, 1])
        self.assertEqual((frames.shape, frames.dtype), ((2, 10, 20, 3), np.uint8))
        with self.assertRaises(RuntimeError):
            envpool.make('CartPole-v1', env_type='gymnasium').render()



class FakeJaxTest(unittest.TestCase):
    def test_threefry_known_answers(self):
        # Random123's known-answer vectors for threefry2x32 with 20 rounds.
        tf = jax.random.threefry_2x32
        u = np.uint32
        self.assertEqual(tf(np.zeros(2, u), np.zeros(2, u)).tolist(), [0x6b200159, 0x99ba4efe])
        self.assertEqual(tf(np.full(2, 0xffffffff, u), np.full(2, 0xffffffff, u)).tolist(), [0x1cb996fc, 0xbb002be7])
        self.assertEqual(tf(np.array([0x13198a2e, 0x03707344], u), np.array([0x243f6a88, 0x85a308d3], u)).tolist(),
                         [0xc4923a9c, 0x483df7a0])

    def test_keys_as_jax_makes_them(self):
        self.assertEqual(jax.random.PRNGKey(42).tolist(), [0, 42])
        # jax.random.split(jax.random.PRNGKey(0)) with jax_threefry_partitionable = False.
        self.assertEqual(jax.random.split(jax.random.PRNGKey(0)).tolist(),
                         [[4146024105, 967050713], [2718843009, 1272950319]])
        self.assertEqual(jax.random.split(jax.random.PRNGKey(0), 3).shape, (3, 2))
        self.assertEqual(float(jax.random.uniform(jax.random.PRNGKey(0))), 0.41845703125)
        u = jax.random.uniform(jax.random.PRNGKey(1), (1000,), minval=-2.0, maxval=3.0)
        self.assertTrue(((u >= -2.0) & (u < 3.0)).all())

    def test_tree_util_and_vmap(self):
        tree = {'b': (np.ones(2), None), 'a': [np.zeros(3)]}
        leaves, tdef = jax.tree_util.tree_flatten(tree)
        self.assertEqual([x.shape for x in leaves], [(3,), (2,)])   # dict keys sorted
        self.assertEqual(tdef.num_leaves, 2)
        back = jax.tree_util.tree_unflatten(tdef, [x + 1 for x in leaves])
        self.assertEqual(back['b'][0].tolist(), [2, 2])
        self.assertIsNone(back['b'][1])
        f = jax.vmap(jax.jit(lambda x, y: {'s': x + y, 'p': x * y}))
        out = f(np.arange(3.0), np.full(3, 2.0))
        self.assertEqual((out['s'].tolist(), out['p'].tolist()), ([2, 3, 4], [0, 2, 4]))
        paths, _ = jax.tree_util.tree_flatten_with_path(tree)
        self.assertEqual([p[0].key for p, _ in paths], ['a', 'b'])


class FakeBraxTest(unittest.TestCase):
    def test_state_pytree_and_batch(self):
        env = brax_envs.get_environment('inverted_pendulum')
        self.assertEqual((env.observation_size, env.action_size), (4, 1))
        keys = jax.random.split(jax.random.PRNGKey(3), 4)
        state = jax.vmap(jax.jit(env.reset))(keys)
        self.assertEqual(state.obs.shape, (4, 4))
        self.assertEqual(state.obs.dtype, np.float32)
        names = ['.'.join(getattr(k, 'name', None) or str(getattr(k, 'key', '')) for k in p)
                 for p, _ in jax.tree_util.tree_flatten_with_path(state)[0]]
        self.assertEqual(names, ['pipeline_state.q', 'pipeline_state.qd', 'obs', 'reward', 'done',
                                 'metrics.distance', 'info.rng'])
        # One env of the batch is the same env reset alone with its key.
        one = env.reset(keys[2])
        self.assertEqual(one.obs.tolist(), state.obs[2].tolist())
        nxt = jax.vmap(env.step)(state, np.ones((4, 1), np.float32))
        self.assertEqual(nxt.reward.tolist(), [1, 1, 1, 1])
        with self.assertRaises(KeyError):
            brax_envs.get_environment('nope')


if __name__ == '__main__':
    unittest.main()
