# Self-test of crl_testenvs, the fake gymnasium/gym packages and reference_rollout.py (unittest).
"""Run with: /usr/bin/python3 -m unittest discover -s tests/python -p 'test_*.py'"""

import io
import json
import math
import os
import subprocess
import sys
import unittest
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import crl_testenvs  # noqa: E402
from crl_testenvs import bad, error, spaces  # noqa: E402
from crl_testenvs.cartpole import CartPoleEnv  # noqa: E402
from crl_testenvs.dictenv import DictObsEnv  # noqa: E402
from crl_testenvs.imageenv import ImageEnv, PixelObsEnv  # noqa: E402
from crl_testenvs.infoenv import InfoEnv  # noqa: E402
from crl_testenvs.legacy import LegacyEnv  # noqa: E402
from crl_testenvs.multiaction import DiscreteStartEnv, MultiBinaryEnv, MultiDiscreteEnv  # noqa: E402


def _import_fake(dirname, modname):
    """Import a fake package from tests/python/DIRNAME, shadowing any installed one."""
    path = os.path.join(HERE, dirname)
    if path not in sys.path:
        sys.path.insert(0, path)
    module = __import__(modname)
    if not module.__file__.startswith(path):
        raise AssertionError(f"{modname} resolved to {module.__file__}, not the fake in {path}")
    return module


def rollout(env, seed, actions):
    """Reset with seed, step through actions, reset unseeded on episode end; return all events."""
    events = [("reset", env.reset(seed=seed)[0])]
    for a in actions:
        obs, reward, terminated, truncated, info = env.step(a)
        events.append(("step", obs, reward, terminated, truncated))
        if terminated or truncated:
            events.append(("reset", env.reset()[0]))
    return events


def same_value(a, b):
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    a_arr, b_arr = np.asarray(a), np.asarray(b)
    return a_arr.dtype == b_arr.dtype and np.array_equal(a_arr, b_arr,
                                                         equal_nan=a_arr.dtype.kind == "f")


def same_events(e1, e2):
    return len(e1) == len(e2) and all(same_value(list(x), list(y)) for x, y in zip(e1, e2))


class BoxTest(unittest.TestCase):
    def test_scalar_bounds_with_shape(self):
        b = spaces.Box(-1.0, 2.0, shape=(3, 4))
        self.assertEqual(b.shape, (3, 4))
        self.assertEqual(b.dtype, np.dtype(np.float32))
        self.assertIsInstance(b.dtype, np.dtype)
        self.assertEqual(b.low.shape, (3, 4))
        self.assertEqual(b.low.dtype, np.float32)
        self.assertTrue(np.all(b.low == -1.0) and np.all(b.high == 2.0))
        self.assertEqual(repr(b), "Box(-1.0, 2.0, (3, 4), float32)")
        self.assertTrue(b.is_bounded())

    def test_array_bounds_elementwise_and_inf(self):
        high = np.array([4.8, np.inf, 0.42, np.inf], dtype=np.float32)
        b = spaces.Box(-high, high, dtype=np.float32)
        self.assertEqual(b.shape, (4,))
        self.assertTrue(np.isinf(b.high[1]) and np.isneginf(b.low[3]))
        self.assertEqual(b.bounded_above.tolist(), [True, False, True, False])
        self.assertFalse(b.is_bounded())
        self.assertTrue(b.contains(np.array([1.0, 1e30, -0.4, -1e30], dtype=np.float32)))
        self.assertFalse(b.contains(np.array([4.9, 0, 0, 0], dtype=np.float32)))

    def test_shape_from_scalars_is_1(self):
        self.assertEqual(spaces.Box(0, 1).shape, (1,))

    def test_int_dtype_inf_maps_to_dtype_limits(self):
        b = spaces.Box(-np.inf, np.inf, (2,), np.int32)
        self.assertEqual(b.low.tolist(), [np.iinfo(np.int32).min] * 2)
        self.assertEqual(b.high.tolist(), [np.iinfo(np.int32).max] * 2)
        self.assertFalse(b.is_bounded("below"))

    def test_invalid_boxes(self):
        with self.assertRaisesRegex(ValueError, "low values must be less than or equal to high"):
            spaces.Box(1.0, 0.0, (2,))
        with self.assertRaisesRegex(ValueError, "low.shape and high.shape don't match"):
            spaces.Box(np.zeros(2), np.ones(3))
        with self.assertRaisesRegex(ValueError, "np.nan"):
            spaces.Box(float("nan"), 1.0, (2,))
        with self.assertRaisesRegex(ValueError, "unsigned int dtype don't support"):
            spaces.Box(0, np.inf, (2,), np.uint8)
        with self.assertRaisesRegex(ValueError, "dtype must be explicitly provided"):
            spaces.Box(0, 1, (2,), None)

    def test_contains_checks_shape_dtype_bounds(self):
        b = spaces.Box(0.0, 1.0, (2,), np.float32)
        self.assertTrue(b.contains(np.array([0.0, 1.0], dtype=np.float32)))
        self.assertTrue(b.contains([0.5, 0.5]))  # lists are cast, as in Gymnasium
        self.assertFalse(b.contains(np.array([0.5, 0.5, 0.5], dtype=np.float32)))
        self.assertFalse(b.contains(np.array([0.5, 1.5], dtype=np.float32)))
        self.assertFalse(b.contains(np.array([0.5, 0.5], dtype=np.float64)))  # cannot cast safely
        self.assertTrue(np.array([0.1, 0.2], dtype=np.float32) in b)

    def test_sample_in_space_and_seeded(self):
        for box in (spaces.Box(-1.0, 1.0, (5,)),
                    spaces.Box(np.array([-np.inf, 0.0, -np.inf]), np.array([np.inf, np.inf, 0.0]),
                               dtype=np.float64),
                    spaces.Box(0, 255, (3, 3), np.uint8),
                    spaces.Box(-5, 5, (4,), np.int64)):
            box.seed(7)
            first = [box.sample() for _ in range(20)]
            for s in first:
                self.assertEqual(s.dtype, box.dtype)
                self.assertTrue(box.contains(s), f"{s} not in {box}")
            box.seed(7)
            self.assertTrue(all(np.array_equal(a, box.sample()) for a in first))


class DiscreteTest(unittest.TestCase):
    def test_attributes(self):
        d = spaces.Discrete(3, start=-1)
        self.assertIsInstance(d.n, np.int64)
        self.assertIsInstance(d.start, np.int64)
        self.assertEqual((int(d.n), int(d.start)), (3, -1))
        self.assertEqual(d.shape, ())
        self.assertEqual(d.dtype, np.dtype(np.int64))
        self.assertEqual(repr(d), "Discrete(3, start=-1)")
        self.assertEqual(repr(spaces.Discrete(2)), "Discrete(2)")

    def test_contains(self):
        d = spaces.Discrete(3, start=-1)
        for ok in (-1, 0, 1, np.int64(1), np.int32(-1), np.array(0)):
            self.assertTrue(d.contains(ok), repr(ok))
        for bad_value in (2, -2, 0.0, np.array([0]), "0", None, np.float64(1)):
            self.assertFalse(d.contains(bad_value), repr(bad_value))

    def test_sample_range_and_seed(self):
        d = spaces.Discrete(3, seed=5, start=-1)
        samples = [d.sample() for _ in range(200)]
        self.assertEqual(set(int(s) for s in samples), {-1, 0, 1})
        self.assertTrue(all(isinstance(s, np.int64) for s in samples))
        d.seed(5)
        self.assertEqual(samples[:10], [d.sample() for _ in range(10)])
        self.assertEqual(d.sample(mask=np.array([0, 0, 1], dtype=np.int8)), 1)

    def test_invalid(self):
        with self.assertRaises(AssertionError):
            spaces.Discrete(0)
        with self.assertRaises(AssertionError):
            spaces.Discrete(2.0)


class MultiSpacesTest(unittest.TestCase):
    def test_multidiscrete(self):
        m = spaces.MultiDiscrete([3, 4, 2], seed=1)
        self.assertEqual(m.shape, (3,))
        self.assertEqual(m.dtype, np.dtype(np.int64))
        self.assertEqual(m.nvec.tolist(), [3, 4, 2])
        self.assertEqual(m.start.tolist(), [0, 0, 0])
        self.assertTrue(m.contains([2, 3, 1]))
        self.assertTrue(m.contains(np.array([0, 0, 0])))
        self.assertFalse(m.contains([3, 0, 0]))
        self.assertFalse(m.contains([0, 0]))
        self.assertFalse(m.contains([-1, 0, 0]))
        for _ in range(50):
            self.assertTrue(m.contains(m.sample()))
        self.assertEqual(repr(m), "MultiDiscrete([3 4 2])")

    def test_multibinary(self):
        b = spaces.MultiBinary(5, seed=2)
        self.assertEqual((b.n, b.shape, b.dtype), (5, (5,), np.dtype(np.int8)))
        self.assertTrue(b.contains([0, 1, 1, 0, 1]))
        self.assertFalse(b.contains([0, 2, 1, 0, 1]))
        self.assertFalse(b.contains([0, 1]))
        s = b.sample()
        self.assertEqual(s.dtype, np.int8)
        self.assertTrue(b.contains(s))
        b2 = spaces.MultiBinary([3, 2])
        self.assertEqual((b2.n, b2.shape), ((3, 2), (3, 2)))

    def test_dict_sorts_mapping_keys_like_gymnasium(self):
        d = spaces.Dict({"velocity": spaces.Box(0, 1, (2,)), "alpha": spaces.Discrete(2),
                         "mid": spaces.MultiBinary(1)})
        self.assertIsInstance(d.spaces, dict)
        self.assertEqual(list(d.spaces), ["alpha", "mid", "velocity"])
        self.assertEqual(list(d.keys()), ["alpha", "mid", "velocity"])
        self.assertIsNone(d.shape)
        self.assertIsNone(d.dtype)
        self.assertIs(d["alpha"], d.spaces["alpha"])

    def test_dict_keeps_sequence_order_and_kwargs(self):
        d = spaces.Dict([("z", spaces.Discrete(2)), ("a", spaces.Discrete(3))])
        self.assertEqual(list(d.spaces), ["z", "a"])
        d2 = spaces.Dict(b=spaces.Discrete(2), a=spaces.Discrete(2))
        self.assertEqual(list(d2.spaces), ["b", "a"])
        with self.assertRaisesRegex(ValueError, "already exists"):
            spaces.Dict({"a": spaces.Discrete(2)}, a=spaces.Discrete(2))

    def test_dict_contains_sample_seed(self):
        d = spaces.Dict({"pos": spaces.Box(-1, 1, (2,)), "n": spaces.Discrete(4),
                         "inner": spaces.Dict({"bits": spaces.MultiBinary(3)})})
        d.seed(11)
        s1 = [d.sample() for _ in range(5)]
        for s in s1:
            self.assertEqual(list(s), ["inner", "n", "pos"])
            self.assertTrue(d.contains(s))
        d.seed(11)
        self.assertTrue(same_value(s1, [d.sample() for _ in range(5)]))
        bad_sample = dict(s1[0])
        del bad_sample["n"]
        self.assertFalse(d.contains(bad_sample))
        self.assertFalse(d.contains([1, 2]))

    def test_composite_seed_draws_gymnasium_subseeds(self):
        d = spaces.Dict({"a": spaces.Discrete(1000), "b": spaces.Discrete(1000)})
        ref = np.random.Generator(np.random.PCG64(np.random.SeedSequence(0)))
        subseeds = ref.integers(np.iinfo(np.int32).max, size=2).tolist()
        self.assertEqual(d.seed(0), [0] + subseeds)
        samples = [d.sample() for _ in range(10)]
        self.assertNotEqual([s["a"] for s in samples], [s["b"] for s in samples])
        t = spaces.Tuple((spaces.Discrete(1000), spaces.Discrete(1000)))
        self.assertEqual(t.seed(0), [0] + subseeds)
        self.assertEqual(t.seed([5, 6]), [5, 6])

    def test_tuple(self):
        t = spaces.Tuple((spaces.Discrete(3), spaces.Box(-1, 1, (1,))), seed=3)
        self.assertIsInstance(t.spaces, tuple)
        self.assertEqual(len(t), 2)
        s = t.sample()
        self.assertIsInstance(s, tuple)
        self.assertTrue(t.contains(s))
        self.assertTrue(t.contains([1, np.array([0.5], dtype=np.float32)]))
        self.assertFalse(t.contains((3, np.array([0.5], dtype=np.float32))))
        self.assertFalse(t.contains((1,)))
        with self.assertRaises(AssertionError):
            spaces.Tuple((spaces.Discrete(2), "not a space"))

    def test_class_names_match_gymnasium(self):
        self.assertEqual([c.__name__ for c in (spaces.Box, spaces.Discrete, spaces.MultiDiscrete,
                                                spaces.MultiBinary, spaces.Dict, spaces.Tuple)],
                         ["Box", "Discrete", "MultiDiscrete", "MultiBinary", "Dict", "Tuple"])


class SeedingTest(unittest.TestCase):
    def test_generator_is_gymnasiums(self):
        rng, entropy = crl_testenvs.core.np_random(42)
        ref = np.random.Generator(np.random.PCG64(np.random.SeedSequence(42)))
        self.assertEqual(entropy, 42)
        self.assertTrue(np.array_equal(rng.uniform(size=8), ref.uniform(size=8)))

    def test_bad_seeds(self):
        with self.assertRaisesRegex(error.Error, "Seed must be a python integer"):
            crl_testenvs.core.np_random(1.5)
        with self.assertRaisesRegex(error.Error, "Seed must be greater or equal to zero"):
            crl_testenvs.core.np_random(-1)
        with self.assertRaises(error.Error):
            CartPoleEnv().reset(seed=-3)


class CartPoleTest(unittest.TestCase):
    def test_spaces_and_metadata(self):
        env = CartPoleEnv()
        self.assertEqual(type(env.action_space).__name__, "Discrete")
        self.assertEqual(int(env.action_space.n), 2)
        ob = env.observation_space
        self.assertEqual((ob.shape, ob.dtype), ((4,), np.dtype(np.float32)))
        theta2 = np.float32(2 * 12 * 2 * math.pi / 360)
        self.assertEqual(ob.high.tolist(), [np.float32(4.8), np.inf, theta2, np.inf])
        self.assertEqual(ob.low.tolist(), [-np.float32(4.8), -np.inf, -theta2, -np.inf])
        self.assertEqual(env.metadata["render_fps"], 50)
        self.assertEqual(env.spec.id, "CartPole-v1")
        self.assertEqual(env.spec.max_episode_steps, 500)
        self.assertEqual(env.spec.reward_threshold, 475.0)
        self.assertIsNone(env.render_mode)
        self.assertIs(env.unwrapped, env)
        self.assertEqual(str(env), "<CartPoleEnv<CartPole-v1>>")

    def test_reset_matches_gymnasium_docstring(self):
        # Gymnasium's CartPole docstring: env.reset(seed=123, options={"low": -0.1, "high": 0.1})
        obs, info = CartPoleEnv().reset(seed=123, options={"low": -0.1, "high": 0.1})
        self.assertEqual(info, {})
        self.assertEqual(obs.dtype, np.float32)
        np.testing.assert_allclose(obs, [0.03647037, -0.0892358, -0.05592803, -0.06312564],
                                   rtol=0, atol=5e-8)

    def test_reset_uniform_default_bounds_and_float64_state(self):
        env = CartPoleEnv()
        for seed in range(20):
            obs, _ = env.reset(seed=seed)
            self.assertEqual(env.state.dtype, np.float64)
            self.assertTrue(np.all(np.abs(env.state) < 0.05))
            self.assertTrue(np.array_equal(obs, env.state.astype(np.float32)))
        with self.assertRaisesRegex(ValueError, "must be lower than higher bound"):
            env.reset(options={"low": 1.0, "high": 0.0})

    def test_hand_computed_step_from_rest(self):
        env = CartPoleEnv()
        env.reset(seed=0)
        env.state = np.zeros(4)
        obs, reward, terminated, truncated, info = env.step(1)
        # force +10: temp = 100/11, thetaacc = -600/41, xacc = 4400/451, tau = 0.02 (Euler)
        expected = [0.0, 0.02 * 4400 / 451, 0.0, 0.02 * -600 / 41]
        np.testing.assert_allclose(env.state, expected, rtol=1e-14, atol=0)
        self.assertAlmostEqual(env.state[1], 88 / 451, places=15)
        self.assertAlmostEqual(env.state[3], -12 / 41, places=15)
        self.assertTrue(np.array_equal(obs, np.array(expected, dtype=np.float32)))
        self.assertEqual((reward, terminated, truncated, info), (1.0, False, False, {}))
        self.assertIsInstance(reward, float)
        self.assertIsInstance(terminated, bool)

    def test_hand_computed_step_general_state(self):
        env = CartPoleEnv()
        env.reset(seed=0)
        x, x_dot, theta, theta_dot = 0.1, -0.3, 0.05, 0.4
        env.state = np.array([x, x_dot, theta, theta_dot])
        env.step(0)
        f = -10.0
        temp = (f + 0.05 * theta_dot ** 2 * math.sin(theta)) / 1.1
        thetaacc = (9.8 * math.sin(theta) - math.cos(theta) * temp) / (
            0.5 * (4.0 / 3.0 - 0.1 * math.cos(theta) ** 2 / 1.1))
        xacc = temp - 0.05 * thetaacc * math.cos(theta) / 1.1
        expected = [x + 0.02 * x_dot, x_dot + 0.02 * xacc, theta + 0.02 * theta_dot,
                    theta_dot + 0.02 * thetaacc]
        np.testing.assert_allclose(env.state, expected, rtol=1e-13, atol=1e-15)

    def test_termination_and_steps_beyond(self):
        env = CartPoleEnv()
        env.reset(seed=0)
        env.state = np.array([0.0, 0.0, 0.2094, 1.0])  # crosses 12 degrees this step
        _, reward, terminated, truncated, _ = env.step(1)
        self.assertEqual((reward, terminated, truncated), (1.0, True, False))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _, reward, terminated, _, _ = env.step(1)
        self.assertEqual((reward, terminated), (0.0, True))
        self.assertTrue(any("already returned terminated = True" in str(w.message) for w in caught))
        env.reset(seed=0)
        env.state = np.array([2.39, 1.0, 0.0, 0.0])
        self.assertTrue(env.step(1)[2])

    def test_sutton_barto_reward(self):
        env = CartPoleEnv(sutton_barto_reward=True)
        env.reset(seed=0)
        self.assertEqual(env.step(0)[1], 0.0)
        env.state = np.array([0.0, 0.0, 0.2094, 1.0])
        self.assertEqual(env.step(1)[1], -1.0)

    def test_truncates_at_500_with_a_balancing_policy(self):
        env = CartPoleEnv()
        env.reset(seed=0)
        for n in range(1, 501):
            _, _, terminated, truncated, _ = env.step(1 if env.state[2] + 0.5 * env.state[3] > 0
                                                      else 0)
            self.assertFalse(terminated)
            self.assertEqual(truncated, n == 500)
        env.reset()
        self.assertFalse(env.step(0)[3])

    def test_custom_and_disabled_time_limit(self):
        env = CartPoleEnv(max_episode_steps=3)
        env.reset(seed=1)
        self.assertEqual([env.step(i % 2)[3] for i in range(3)], [False, False, True])
        env = CartPoleEnv(max_episode_steps=None)
        env.reset(seed=1)
        self.assertIsNone(env.spec.max_episode_steps)
        with self.assertRaisesRegex(ValueError, "max_episode_steps"):
            CartPoleEnv(max_episode_steps=0)

    def test_invalid_action_and_step_before_reset(self):
        env = CartPoleEnv()
        with self.assertRaisesRegex(error.ResetNeeded, "before calling env.reset"):
            env.step(0)
        env.reset(seed=0)
        with self.assertRaisesRegex(AssertionError, "invalid"):
            env.step(2)
        with self.assertRaisesRegex(AssertionError, "invalid"):
            env.step(np.array([1]))
        env.step(np.int64(1))
        env.step(np.array(0))

    def test_seeding_determinism_and_seedless_reset(self):
        actions = [i % 2 for i in range(30)] + [1] * 40
        a = rollout(CartPoleEnv(), 5, actions)
        b = rollout(CartPoleEnv(), 5, actions)
        c = rollout(CartPoleEnv(), 6, actions)
        self.assertTrue(same_events(a, b))
        self.assertFalse(same_events(a, c))
        resets = [e for e in a if e[0] == "reset"]
        self.assertGreaterEqual(len(resets), 2)  # the 40 pushes to the right end an episode
        self.assertFalse(np.array_equal(resets[0][1], resets[1][1]))
        env = CartPoleEnv()
        first, _ = env.reset(seed=9)
        second, _ = env.reset()
        again, _ = env.reset(seed=9)
        self.assertFalse(np.array_equal(first, second))
        self.assertTrue(np.array_equal(first, again))

    def test_render(self):
        env = CartPoleEnv(render_mode="rgb_array")
        env.reset(seed=0)
        frame = env.render()
        self.assertEqual((frame.shape, frame.dtype), ((400, 600, 3), np.dtype(np.uint8)))
        self.assertTrue(np.all(frame[0, 0] == 255))  # white sky
        self.assertTrue(np.any(np.all(frame == (202, 152, 101), axis=-1)))  # the pole
        env.state = np.array([1.5, 0.0, 0.15, 0.0])
        self.assertFalse(np.array_equal(frame, env.render()))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.assertIsNone(CartPoleEnv().render())
        with self.assertRaisesRegex(ValueError, "render_mode 'human' is not supported"):
            CartPoleEnv(render_mode="human")


class OtherEnvsTest(unittest.TestCase):
    FACTORIES = {
        "cartpole": CartPoleEnv,
        "dict": DictObsEnv,
        "multidiscrete": MultiDiscreteEnv,
        "multibinary": MultiBinaryEnv,
        "discretestart": DiscreteStartEnv,
        "image": ImageEnv,
        "pixel": PixelObsEnv,
        "info": InfoEnv,
        "wrongdtype": bad.WrongDtypeEnv,
    }

    def _actions(self, env, n, seed):
        env.action_space.seed(seed)
        return [env.action_space.sample() for _ in range(n)]

    def test_all_good_envs_deterministic_and_in_space(self):
        for name, factory in self.FACTORIES.items():
            with self.subTest(env=name):
                env = factory()
                actions = self._actions(env, 60, seed=1)
                a = rollout(env, 3, actions)
                b = rollout(factory(), 3, actions)
                self.assertTrue(same_events(a, b))
                if name != "wrongdtype":
                    for event in a:
                        self.assertTrue(env.observation_space.contains(event[1]),
                                        f"{name}: {event[1]!r}")
                other = factory()
                self.assertFalse(same_events(a, rollout(other, 4, actions)),
                                 f"{name}: seed 3 and 4 gave the same rollout")

    def test_dictenv_structure_and_length(self):
        env = DictObsEnv()
        space = env.observation_space
        self.assertEqual(list(space.spaces), ["pair", "position", "sensors", "velocity"])
        self.assertEqual(list(space["sensors"].spaces), ["contact", "lidar"])
        self.assertEqual(space["velocity"].dtype, np.float64)
        self.assertEqual(space["position"].dtype, np.float32)
        self.assertEqual(type(space["pair"]).__name__, "Tuple")
        self.assertEqual(repr(env.action_space), "Box(-1.0, 1.0, (2,), float32)")
        lengths = set()
        for seed in range(200):
            obs, info = env.reset(seed=seed)
            self.assertEqual(list(obs), ["pair", "position", "sensors", "velocity"])
            n = 0
            terminated = False
            while not terminated:
                obs, _, terminated, truncated, info = env.step(np.zeros(2, dtype=np.float32))
                n += 1
                self.assertFalse(truncated)
            self.assertEqual(n, info["length"])
            self.assertTrue(10 <= n <= 20)
            lengths.add(n)
        self.assertEqual(lengths, set(range(10, 21)))

    def test_dictenv_dynamics(self):
        env = DictObsEnv()
        obs0, _ = env.reset(seed=2)
        obs1, reward, _, _, _ = env.step(np.array([1.0, -1.0], dtype=np.float32))
        np.testing.assert_allclose(obs1["velocity"], [0.1, -0.1])
        np.testing.assert_allclose(obs1["position"][:2], obs0["position"][:2] + [0.05, -0.05],
                                   rtol=1e-6)
        self.assertAlmostEqual(float(obs1["position"][2]), 0.1, places=6)
        self.assertEqual(int(obs1["pair"][0]), 1)
        self.assertEqual(obs1["pair"][1].tolist(), [0.0])
        self.assertAlmostEqual(reward, -float(np.linalg.norm(env._position[:2])))

    def test_multidiscrete_echo(self):
        env = MultiDiscreteEnv()
        obs, _ = env.reset(seed=0)
        self.assertEqual(obs.tolist(), [0, 0, 0, 0])
        obs, reward, _, _, _ = env.step(np.array([2, 3, 1]))
        self.assertEqual(obs.tolist(), [2, 3, 1, 1])
        self.assertEqual(reward, float(np.sum(np.array([2, 3, 1]) == env._target)))
        obs, _, _, _, _ = env.step([0, 1, 0])
        self.assertEqual(obs.tolist(), [0, 1, 0, 2])
        with self.assertRaises(AssertionError):
            env.step([3, 0, 0])
        truncs = [env.step([0, 0, 0])[3] for _ in range(8)]
        self.assertEqual(truncs, [False] * 7 + [True])

    def test_multibinary_terminates_on_pattern(self):
        env = MultiBinaryEnv()
        pattern, _ = env.reset(seed=5)
        obs, reward, terminated, _, _ = env.step(1 - pattern)
        self.assertEqual(obs.tolist(), [1] * 5)
        self.assertEqual((reward, terminated), (0.0, False))
        obs, reward, terminated, _, _ = env.step(pattern.copy())
        self.assertEqual((obs.tolist(), reward, terminated), ([0] * 5, 5.0, True))

    def test_discrete_start(self):
        env = DiscreteStartEnv()
        self.assertEqual(int(env.action_space.start), -1)
        env.reset(seed=0)
        target = env._target
        step = 1 if target > 0 else -1
        for i in range(abs(target)):
            obs, reward, terminated, _, info = env.step(step)
            self.assertEqual(obs.tolist(), [step * (i + 1), step])
        self.assertTrue(terminated)
        self.assertEqual(reward, 0.0)
        self.assertEqual(math.copysign(1.0, reward), 1.0)
        with self.assertRaises(AssertionError):
            env.step(2)

    def test_image_env_render_depends_on_state(self):
        env = ImageEnv()
        obs, _ = env.reset(seed=0)
        pos0 = env._pos.copy()
        f0 = env.render()
        self.assertEqual((f0.shape, f0.dtype), ((48, 64, 3), np.dtype(np.uint8)))
        env.step(4)
        f1 = env.render()
        self.assertFalse(np.array_equal(f0, f1))
        x, y = obs[0], obs[1]
        row, col = int(round((1 - y) * 47)), int(round(x * 63))
        self.assertEqual(f0[row, col].tolist(), [255, 255, 255])
        far = (0 if row > 10 else 47, 0)
        self.assertEqual(f0[far].tolist(), [0, 128, int(round(255 * pos0[0]))])
        self.assertEqual(f1[far].tolist(), [4, 128, int(round(255 * env._pos[0]))])
        env.reset(seed=0)
        self.assertTrue(np.array_equal(f0, env.render()))
        env.reset(seed=1)
        self.assertFalse(np.array_equal(f0, env.render()))
        self.assertEqual(env.render_mode, "rgb_array")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            quiet = ImageEnv(render_mode=None)
            quiet.reset(seed=0)
            self.assertIsNone(quiet.render())

    def test_pixel_obs_env(self):
        env = PixelObsEnv(render_mode="rgb_array")
        space = env.observation_space
        self.assertEqual((space.shape, space.dtype), ((32, 32, 3), np.dtype(np.uint8)))
        self.assertEqual((int(space.low.min()), int(space.high.max())), (0, 255))
        obs, _ = env.reset(seed=0)
        self.assertEqual(obs.dtype, np.uint8)
        self.assertTrue(np.array_equal(obs, env.render()))
        obs2 = env.step(1)[0]
        self.assertFalse(np.array_equal(obs, obs2))

    def test_info_env(self):
        env = InfoEnv()
        _, info = env.reset(seed=0)
        self.assertEqual(set(info), {"score", "lives", "flags"})
        self.assertEqual((info["score"], info["lives"]), (0.0, 3))
        self.assertEqual(info["flags"].dtype, np.bool_)
        n, terminated = 0, False
        total = 0.0
        while not terminated:
            _, reward, terminated, _, info = env.step(1)
            total += reward
            n += 1
            self.assertIs(type(info["score"]), float)
            self.assertIs(type(info["lives"]), int)
            self.assertEqual(info["flags"].shape, (2,))
            self.assertEqual(info["flags"].tolist(), [n % 2 == 0, True])
            self.assertEqual(info["score"], total)
        self.assertEqual((n, info["lives"]), (15, 0))
        env = InfoEnv(drop_key_at_step=1)
        env.reset(seed=0)
        self.assertIn("score", env.step(0)[4])
        self.assertNotIn("score", env.step(0)[4])


class LegacyEnvTest(unittest.TestCase):
    def test_old_api(self):
        env = LegacyEnv()
        self.assertEqual(env.seed(42), [42])
        obs = env.reset()
        self.assertIsInstance(obs, np.ndarray)
        ref, _ = CartPoleEnv().reset(seed=42)
        self.assertTrue(np.array_equal(obs, ref))
        with self.assertRaises(TypeError):
            env.reset(seed=1)
        result = env.step(1)
        self.assertEqual(len(result), 4)
        self.assertEqual(result[1:], (1.0, False, {}))

    def test_time_limit_truncated_flag(self):
        env = LegacyEnv()
        env.seed(0)
        env.reset()
        for n in range(1, 31):
            _, _, done, info = env.step(1 if env._inner.state[2] > 0 else 0)
            self.assertEqual(done, n == 30)
        self.assertIs(info["TimeLimit.truncated"], True)
        env = LegacyEnv(max_episode_steps=200)
        env.seed(0)
        env.reset()
        done, n = False, 0
        while not done:
            _, _, done, info = env.step(1)
            n += 1
        self.assertLess(n, 200)
        self.assertNotIn("TimeLimit.truncated", info)
        # The pole falls on the very step that reaches the limit: done, but not truncated.
        env = LegacyEnv(max_episode_steps=n)
        env.seed(0)
        env.reset()
        for _ in range(n):
            _, _, done, info = env.step(1)
        self.assertTrue(done)
        self.assertIs(info["TimeLimit.truncated"], False)

    def test_seed_determinism(self):
        def run(seed):
            env = LegacyEnv(max_episode_steps=7)
            env.seed(seed)
            out = [env.reset()]
            for i in range(20):
                obs, _, done, _ = env.step(i % 2)
                out.append(obs)
                if done:
                    out.append(env.reset())
            return out
        self.assertTrue(same_value(run(3), run(3)))
        self.assertFalse(same_value(run(3), run(4)))

    def test_render(self):
        env = LegacyEnv()
        env.seed(0)
        env.reset()
        self.assertEqual(env.render(mode="rgb_array").shape, (400, 600, 3))
        with self.assertRaises(NotImplementedError):
            env.render()


class BadEnvsTest(unittest.TestCase):
    def test_raising_env_step(self):
        env = bad.RaisingEnv(raise_at_step=2)
        env.reset(seed=0)
        env.step(0)
        env.step(1)
        with self.assertRaises(ValueError) as cm:
            env.step(0)
        self.assertEqual(str(cm.exception), "boom at step 2")
        env.reset()
        env.step(0)  # the count restarts at reset

    def test_raising_env_other_places(self):
        with self.assertRaisesRegex(ValueError, "^boom in reset$"):
            bad.RaisingEnv(raise_in_reset=True).reset(seed=0)
        env = bad.RaisingEnv(raise_in_reset=2)
        env.reset(seed=0)
        with self.assertRaisesRegex(ValueError, "boom in reset"):
            env.reset()
        env.reset()
        with self.assertRaisesRegex(ValueError, "boom in close"):
            bad.RaisingEnv(raise_in_close=True).close()
        bad.RaisingEnv().close()
        with self.assertRaisesRegex(ValueError, "boom in __init__"):
            bad.RaisingEnv(raise_in_init=True)
        with self.assertRaisesRegex(ValueError, "boom in render"):
            bad.RaisingEnv(raise_in_render=True).render()
        with self.assertRaises(SystemExit) as cm:
            env = bad.RaisingEnv(raise_at_step=0, exc_type="SystemExit")
            env.reset(seed=0)
            env.step(0)
        self.assertEqual(str(cm.exception), "boom at step 0")
        with self.assertRaisesRegex(ValueError, "exc_type must be one of"):
            bad.RaisingEnv(exc_type="OSError")
        env = bad.RaisingEnv(raise_at_step=None)
        env.reset(seed=0)
        for _ in range(10):
            env.step(1)

    def test_wrong_shape(self):
        env = bad.WrongShapeEnv(bad_at_step=1)
        obs, _ = env.reset(seed=0)
        self.assertEqual(obs.shape, (4,))
        self.assertEqual(env.step(0)[0].shape, (4,))
        obs = env.step(0)[0]
        self.assertEqual(obs.shape, (5,))
        self.assertFalse(env.observation_space.contains(obs))
        env = bad.WrongShapeEnv(bad_in_reset=True, bad_shape=(2, 2))
        self.assertEqual(env.reset(seed=0)[0].shape, (2, 2))

    def test_nan(self):
        env = bad.NaNEnv(nan_at_step=1)
        env.reset(seed=0)
        obs, reward, *_ = env.step(0)
        self.assertFalse(np.isnan(obs).any() or math.isnan(reward))
        obs, reward, *_ = env.step(0)
        self.assertTrue(np.isnan(obs[0]) and not np.isnan(obs[1:]).any())
        self.assertFalse(math.isnan(reward))
        env = bad.NaNEnv(nan_at_step=0, where="reward")
        env.reset(seed=0)
        obs, reward, *_ = env.step(0)
        self.assertTrue(math.isnan(reward) and not np.isnan(obs).any())
        env = bad.NaNEnv(nan_at_step=0, where="both", value=float("inf"))
        env.reset(seed=0)
        obs, reward, *_ = env.step(0)
        self.assertTrue(np.isinf(obs[0]) and math.isinf(reward))

    def test_none(self):
        env = bad.NoneEnv(none_at_step=1)
        env.reset(seed=0)
        self.assertEqual(len(env.step(0)), 5)
        self.assertIsNone(env.step(0))
        self.assertIsNone(bad.NoneEnv(none_in_reset=True).reset(seed=0))

    def test_wrong_tuple(self):
        env = bad.WrongTupleEnv(bad_at_step=1)
        env.reset(seed=0)
        self.assertEqual(len(env.step(0)), 5)
        result = env.step(0)
        self.assertEqual(len(result), 3)
        self.assertEqual(result[1], 1.0)
        env = bad.WrongTupleEnv(bad_at_step=0, length=6)
        env.reset(seed=0)
        self.assertEqual(len(env.step(0)), 6)
        self.assertEqual(len(bad.WrongTupleEnv(bad_in_reset=True).reset(seed=0)), 3)
        with self.assertRaises(ValueError):
            bad.WrongTupleEnv(length=5)

    def test_wrong_dtype(self):
        env = bad.WrongDtypeEnv()
        obs, _ = env.reset(seed=0)
        self.assertIsInstance(obs, list)
        self.assertTrue(all(type(v) is float for v in obs))
        self.assertEqual(np.asarray(obs, dtype=np.float32).tolist(), obs)  # exact cast
        obs, reward, terminated, truncated, _ = env.step(1)
        self.assertIsInstance(obs, list)
        self.assertIs(type(reward), np.float32)
        self.assertIs(type(terminated), np.bool_)
        self.assertIs(type(truncated), np.bool_)
        env = bad.WrongDtypeEnv(mode="float64")
        obs, _ = env.reset(seed=0)
        self.assertEqual(obs.dtype, np.float64)
        self.assertFalse(env.observation_space.contains(obs))  # float64 does not fit float32
        ref = bad.WrongDtypeEnv()
        self.assertEqual(ref.reset(seed=0)[0], obs.tolist())


class FakeRegistryTest(unittest.TestCase):
    def setUp(self):
        self.gym = _import_fake("fake_gymnasium", "gymnasium")

    def test_make_cartpole(self):
        env = self.gym.make("CartPole-v1")
        self.assertIsInstance(env, CartPoleEnv)
        self.assertIsInstance(env, self.gym.Env)
        self.assertEqual(env.spec.id, "CartPole-v1")
        self.assertEqual(env.spec.max_episode_steps, 500)
        self.assertEqual(env.spec.entry_point, "crl_testenvs.cartpole:CartPoleEnv")
        env = self.gym.make("CartPole-v1", render_mode="rgb_array", max_episode_steps=7)
        self.assertEqual(env.render_mode, "rgb_array")
        self.assertEqual((env.max_episode_steps, env.spec.max_episode_steps), (7, 7))
        self.assertIsNone(self.gym.make("CartPole-v1", max_episode_steps=-1).max_episode_steps)
        self.assertIsInstance(self.gym.make("CartPole"), CartPoleEnv)  # latest version

    def test_make_test_ids(self):
        self.assertIsInstance(self.gym.make("TestDict-v0"), DictObsEnv)
        self.assertIsInstance(self.gym.make("TestImage-v0"), ImageEnv)
        env = self.gym.make("TestRaising-v0", raise_at_step=0)
        env.reset(seed=0)
        with self.assertRaisesRegex(ValueError, "boom at step 0"):
            env.step(0)
        self.assertIn("TestInfo-v0", self.gym.registry)

    def test_unknown_ids_raise_gymnasium_errors(self):
        err = self.gym.error
        with self.assertRaises(err.NameNotFound) as cm:
            self.gym.make("NoSuchEnv-v0")
        self.assertEqual(str(cm.exception), "Environment `NoSuchEnv` doesn't exist.")
        self.assertEqual(type(cm.exception).__module__, "gymnasium.error")
        self.assertIsInstance(cm.exception, err.UnregisteredEnv)
        self.assertIsInstance(cm.exception, err.Error)
        with self.assertRaises(err.NameNotFound) as cm:
            self.gym.make("CartPol-v1")
        self.assertEqual(str(cm.exception),
                         "Environment `CartPol` doesn't exist. Did you mean: `CartPole`?")
        with self.assertRaises(err.VersionNotFound) as cm:
            self.gym.make("CartPole-v9")
        self.assertEqual(str(cm.exception),
                         "Environment version `v9` for environment `CartPole` doesn't exist. "
                         "It provides versioned environments: [ `v1` ].")
        with self.assertRaises(err.DeprecatedEnv) as cm:
            self.gym.make("CartPole-v0")
        self.assertEqual(str(cm.exception), "Environment version v0 for `CartPole` is deprecated. "
                                            "Please use `CartPole-v1` instead.")
        with self.assertRaises(err.NamespaceNotFound) as cm:
            self.gym.make("ALE/Pong-v5")
        self.assertEqual(str(cm.exception),
                         "Namespace ALE not found. Have you installed the proper package for ALE?")
        with self.assertRaisesRegex(err.Error, "^Malformed environment ID: bad id!"):
            self.gym.make("bad id!")

    def test_bad_kwargs_message(self):
        with self.assertRaisesRegex(TypeError, "was raised from the environment creator for "
                                               "CartPole-v1 with kwargs"):
            self.gym.make("CartPole-v1", no_such_kwarg=1)

    def test_spaces_module_and_version(self):
        self.assertEqual(self.gym.__version__, "1.0.0-fake")
        self.assertIs(self.gym.spaces.Box, spaces.Box)
        self.assertIs(self.gym.spaces.Dict, spaces.Dict)
        self.assertIsInstance(self.gym.make("CartPole-v1").action_space, self.gym.spaces.Discrete)
        self.assertEqual(self.gym.spec("TestDict-v0").entry_point,
                         "crl_testenvs.dictenv:DictObsEnv")


class FakeOldGymTest(unittest.TestCase):
    def setUp(self):
        self.gym = _import_fake("fake_gym", "gym")

    def test_make_legacy(self):
        env = self.gym.make("LegacyCartPole-v0")
        self.assertIsInstance(env, LegacyEnv)
        self.assertEqual(env.max_episode_steps, 30)
        self.assertEqual(self.gym.make("LegacyCartPole-v0", max_episode_steps=5).max_episode_steps, 5)
        self.assertTrue(self.gym.__version__.startswith("0.21"))
        self.assertIs(self.gym.spaces.Discrete, spaces.Discrete)

    def test_unknown(self):
        with self.assertRaises(self.gym.error.UnregisteredEnv) as cm:
            self.gym.make("Nope-v0")
        self.assertEqual(str(cm.exception), "No registered env with id: Nope-v0")
        with self.assertRaisesRegex(self.gym.error.DeprecatedEnv,
                                    r"Env LegacyCartPole-v1 not found \(valid versions include "
                                    r"\['LegacyCartPole-v0'\]\)"):
            self.gym.make("LegacyCartPole-v1")
        with self.assertRaisesRegex(self.gym.error.Error, "malformed environment ID"):
            self.gym.make("no-version")


class ReferenceRolloutTest(unittest.TestCase):
    SCRIPT = os.path.join(HERE, "reference_rollout.py")

    def run_script(self, *args):
        proc = subprocess.run([sys.executable, self.SCRIPT, *args], capture_output=True, text=True,
                              timeout=60)
        lines = [json.loads(line) for line in proc.stdout.splitlines()]
        return proc.returncode, lines, proc.stderr

    def test_cartpole_matches_direct_loop(self):
        actions = [1] * 12 + [0, 1] * 5
        rc, lines, err = self.run_script("crl_testenvs.cartpole:CartPoleEnv", "7",
                                         json.dumps(actions), '{"max_episode_steps": 15}')
        self.assertEqual(rc, 0, err)
        env = CartPoleEnv(max_episode_steps=15)
        expected = [{"reset": True, "t": 0, "seed": 7, "obs": env.reset(seed=7)[0].tolist()}]
        for t, a in enumerate(actions):
            obs, r, te, tr, _ = env.step(a)
            expected.append({"t": t, "obs": obs.tolist(), "reward": r, "terminated": te,
                             "truncated": tr})
            if te or tr:
                expected.append({"reset": True, "t": t + 1, "seed": None,
                                 "obs": env.reset()[0].tolist()})
        self.assertEqual(lines, expected)
        self.assertGreater(sum(1 for line in lines if line.get("reset")), 1)

    def test_dict_obs_encoding(self):
        rc, lines, err = self.run_script("crl_testenvs.dictenv:DictObsEnv", "1",
                                         "[[0.5, -0.5]]")
        self.assertEqual(rc, 0, err)
        obs = lines[1]["obs"]
        self.assertEqual(list(obs), ["pair", "position", "sensors", "velocity"])
        self.assertEqual(obs["pair"][0], 1)
        self.assertEqual(len(obs["sensors"]["lidar"]), 8)
        self.assertIn("length", lines[1]["info"])

    def test_legacy_env(self):
        rc, lines, err = self.run_script("crl_testenvs.legacy:LegacyEnv", "42", "[1, 1, 0]",
                                         '{"max_episode_steps": 2}')
        self.assertEqual(rc, 0, err)
        self.assertEqual(lines[0]["obs"], CartPoleEnv().reset(seed=42)[0].tolist())
        self.assertEqual((lines[2]["terminated"], lines[2]["truncated"]), (False, True))
        self.assertEqual(lines[3]["reset"], True)
        self.assertIsNone(lines[3]["seed"])

    def test_error_and_nan_and_usage(self):
        rc, lines, _ = self.run_script("crl_testenvs.bad:RaisingEnv", "0", "[0, 0, 0]",
                                       '{"raise_at_step": 1}')
        self.assertEqual(rc, 1)
        self.assertEqual(lines[-1], {"error": "ValueError: boom at step 1", "t": 1, "phase": "step"})
        rc, lines, _ = self.run_script("crl_testenvs.bad:NaNEnv", "0", "[0]",
                                       '{"nan_at_step": 0, "where": "both"}')
        self.assertEqual(rc, 0)
        self.assertEqual((lines[1]["obs"][0], lines[1]["reward"]), ("NaN", "NaN"))
        rc, _, err = self.run_script("nocolon", "0", "[]")
        self.assertEqual(rc, 2)
        self.assertIn("pkg.module:Name", err)
        rc, _, err = self.run_script("crl_testenvs.cartpole:CartPoleEnv", "x", "[]")
        self.assertEqual(rc, 2)
        self.assertIn("SEED 'x' is not an integer", err)

    def test_jsonable(self):
        sys.path.insert(0, HERE)
        import reference_rollout as rr
        out = io.StringIO()
        value = {"a": (np.int64(3), np.array([1.5, np.inf], dtype=np.float32)),
                 "b": np.bool_(True), "c": -np.inf}
        json.dump(rr.jsonable(value), out, allow_nan=False)
        self.assertEqual(out.getvalue(), '{"a": [3, [1.5, "Infinity"]], "b": true, "c": "-Infinity"}')
        self.assertEqual(rr.to_action(spaces.Discrete(3, start=-1), -1), -1)
        act = rr.to_action(spaces.Box(-1, 1, (2,)), [0.5, 0.25])
        self.assertEqual((act.dtype, act.tolist()), (np.float32, [0.5, 0.25]))


if __name__ == "__main__":
    unittest.main()
