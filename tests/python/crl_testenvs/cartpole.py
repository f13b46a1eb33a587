# Pure numpy CartPole-v1 with Gymnasium 1.x equations, seeding and a built-in 500-step limit.
"""CartPoleEnv: Gymnasium's ``CartPole-v1`` as ``gymnasium.make("CartPole-v1")`` returns it.

Equations, constants, thresholds, reward and seeding are those of
``gymnasium/envs/classic_control/cartpole.py`` (1.x): Euler integration, float64 state,
float32 observation, ``reset(seed=s)`` draws the state from ``uniform(-0.05, 0.05, 4)`` of a
PCG64 generator seeded like Gymnasium. The TimeLimit wrapper that ``gymnasium.make`` adds
(``max_episode_steps=500``) is folded into the env so a bare constructor, the reference
rollout script and crl all see the same truncation. ``render_mode="rgb_array"`` draws the
same scene as Gymnasium's pygame renderer (cart, pole, axle, track) with numpy only; pixel
values are close to Gymnasium's but not identical (no anti-aliasing).
"""

import math

import numpy as np

from crl_testenvs import error, spaces
from crl_testenvs.core import Env, TimeLimitMixin, check_action, check_max_episode_steps, warn
from crl_testenvs.registration import EnvSpec


def _parse_reset_bounds(options, default_low, default_high):
    """Gymnasium's classic_control ``maybe_parse_reset_bounds``."""
    if options is None:
        return default_low, default_high
    low = options.get("low") if "low" in options else default_low
    high = options.get("high") if "high" in options else default_high
    try:
        low, high = float(low), float(high)
    except (ValueError, TypeError) as e:
        raise ValueError(f"An option ({low if not isinstance(low, float) else high}) could not be "
                         "converted to a float.") from e
    if low > high:
        raise ValueError(f"Lower bound ({low}) must be lower than higher bound ({high}).")
    return low, high


class CartPoleEnv(TimeLimitMixin, Env):
    """Balance a pole on a cart. Action Discrete(2) (0 push left, 1 push right); obs Box(4,) float32."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}

    def __init__(self, sutton_barto_reward=False, render_mode=None, max_episode_steps=500):
        self._sutton_barto_reward = bool(sutton_barto_reward)

        self.gravity = 9.8
        self.masscart = 1.0
        self.masspole = 0.1
        self.total_mass = self.masspole + self.masscart
        self.length = 0.5  # half the pole's length
        self.polemass_length = self.masspole * self.length
        self.force_mag = 10.0
        self.tau = 0.02  # seconds between state updates
        self.kinematics_integrator = "euler"

        self.theta_threshold_radians = 12 * 2 * math.pi / 360
        self.x_threshold = 2.4

        # Twice the failure thresholds so the failing observation is still inside the space.
        high = np.array([self.x_threshold * 2, np.inf, self.theta_threshold_radians * 2, np.inf],
                        dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.observation_space = spaces.Box(-high, high, dtype=np.float32)

        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"CartPoleEnv: render_mode {render_mode!r} is not supported; "
                             f"use one of {self.metadata['render_modes']} or None")
        self.render_mode = render_mode
        self.screen_width = 600
        self.screen_height = 400

        self.max_episode_steps = check_max_episode_steps(max_episode_steps)
        self.state = None
        self.steps_beyond_terminated = None
        self.spec = EnvSpec(id="CartPole-v1", entry_point="crl_testenvs.cartpole:CartPoleEnv",
                            reward_threshold=475.0, max_episode_steps=self.max_episode_steps,
                            kwargs={"sutton_barto_reward": self._sutton_barto_reward,
                                    "render_mode": render_mode})

    def step(self, action):
        if self.state is None:
            raise error.ResetNeeded("Cannot call env.step() before calling env.reset()")
        check_action(self.action_space, action)
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if action == 1 else -self.force_mag
        costheta = np.cos(theta)
        sintheta = np.sin(theta)

        temp = (force + self.polemass_length * np.square(theta_dot) * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * np.square(costheta) / self.total_mass))
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass

        if self.kinematics_integrator == "euler":
            x = x + self.tau * x_dot
            x_dot = x_dot + self.tau * xacc
            theta = theta + self.tau * theta_dot
            theta_dot = theta_dot + self.tau * thetaacc
        else:  # semi-implicit euler
            x_dot = x_dot + self.tau * xacc
            x = x + self.tau * x_dot
            theta_dot = theta_dot + self.tau * thetaacc
            theta = theta + self.tau * theta_dot

        self.state = np.array((x, x_dot, theta, theta_dot), dtype=np.float64)

        terminated = bool(x < -self.x_threshold or x > self.x_threshold
                          or theta < -self.theta_threshold_radians
                          or theta > self.theta_threshold_radians)

        if not terminated:
            reward = 0.0 if self._sutton_barto_reward else 1.0
        elif self.steps_beyond_terminated is None:
            self.steps_beyond_terminated = 0
            reward = -1.0 if self._sutton_barto_reward else 1.0
        else:
            if self.steps_beyond_terminated == 0:
                warn("You are calling 'step()' even though this environment has already returned "
                     "terminated = True. You should always call 'reset()' once you receive "
                     "'terminated = True' -- any further steps are undefined behavior.")
            self.steps_beyond_terminated += 1
            reward = -1.0 if self._sutton_barto_reward else 0.0

        truncated = self._time_limit_step()
        return np.array(self.state, dtype=np.float32), reward, terminated, truncated, {}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        low, high = _parse_reset_bounds(options, -0.05, 0.05)
        self.state = self.np_random.uniform(low=low, high=high, size=(4,))
        self.steps_beyond_terminated = None
        self._time_limit_reset()
        return np.array(self.state, dtype=np.float32), {}

    def render(self):
        if self.render_mode is None:
            warn("You are calling render method without specifying any render mode. You can "
                 "specify the render_mode at initialization, e.g. "
                 'gym.make("CartPole-v1", render_mode="rgb_array")')
            return None
        if self.state is None:
            return None
        return self._draw()

    def _draw(self):
        """Rasterise Gymnasium's scene (y axis up, then flipped) into a (400, 600, 3) uint8 frame."""
        w, h = self.screen_width, self.screen_height
        scale = w / (self.x_threshold * 2)
        polewidth = 10.0
        polelen = scale * (2 * self.length)
        cartwidth, cartheight = 50.0, 30.0
        axleoffset = cartheight / 4.0
        cartx = self.state[0] * scale + w / 2.0
        carty = 100.0
        theta = float(self.state[2])

        img = np.full((h, w, 3), 255, dtype=np.uint8)
        # Pixel centres in the unflipped frame, where y grows upwards from the bottom row.
        ys, xs = np.mgrid[0:h, 0:w]
        px = xs + 0.5
        py = ys + 0.5

        cart = ((np.abs(px - cartx) <= cartwidth / 2) & (py >= carty - cartheight / 2)
                & (py <= carty + cartheight / 2))
        img[cart] = (0, 0, 0)

        # Pole: rectangle [-pw/2, pw/2] x [-pw/2, polelen - pw/2] rotated by -theta about the axle.
        ax, ay = cartx, carty + axleoffset
        dx, dy = px - ax, py - ay
        c, s = math.cos(theta), math.sin(theta)
        u = c * dx - s * dy       # rotate the pixel by +theta back into the pole frame
        v = s * dx + c * dy
        pole = ((np.abs(u) <= polewidth / 2) & (v >= -polewidth / 2)
                & (v <= polelen - polewidth / 2))
        img[pole] = (202, 152, 101)

        axle = (dx * dx + dy * dy) <= (polewidth / 2) ** 2
        img[axle] = (129, 132, 203)

        img[int(carty), :] = (0, 0, 0)
        return np.ascontiguousarray(img[::-1])

    def close(self):
        self.state = None
