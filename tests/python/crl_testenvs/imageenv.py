# ImageEnv (rgb_array render of its state) and PixelObsEnv (uint8 image observations).
"""Envs for the pixel paths (``from_pixels`` rendering and image observation spaces).

ImageEnv
    A dot moving in the unit square. action ``Discrete(5)`` (0 stay, 1 up, 2 down, 3 left,
    4 right, each changing the velocity by 0.02); observation ``Box(-1.0, 1.0, (4,), float32)`` =
    [x, y, vx, vy] with x, y in [0, 1] (walls reflect the velocity). The rng draws the start
    position (uniform(0.2, 0.8), 2) and velocity (uniform(-0.05, 0.05), 2) at reset.
    ``render_mode="rgb_array"`` (the default): ``render()`` returns a (48, 64, 3) uint8 frame:
    background red = 4 * (t mod 64), green = 128, blue = 255 * x; a 6x6 white square centred
    at the dot (row = round((1 - y) * 47), col = round(x * 63)). With ``render_mode=None``
    ``render()`` warns and returns None. Reward = -|(x, y) - (0.5, 0.5)|; truncates after
    ``max_episode_steps`` (default 50).
PixelObsEnv
    observation ``Box(0, 255, (32, 32, 3), uint8)``: black image, a 4x4 block whose colour and
    position are the state, plus a one-pixel frame whose grey level is 8 * (t mod 32).
    action ``Discrete(4)`` (up, down, left, right by one pixel, clamped to the image). The rng
    draws the block position (0..28 each) and colour at reset. Reward = 1.0 when the
    block's top-left pixel lies in the top-left quadrant else 0.0; truncates after
    ``max_episode_steps`` (default 30). ``render()`` (``render_mode="rgb_array"``) returns
    the observation image.
"""

import numpy as np

from crl_testenvs import spaces
from crl_testenvs.core import Env, TimeLimitMixin, check_action, check_max_episode_steps, warn

_MOVES5 = np.array([[0.0, 0.0], [0.0, 0.02], [0.0, -0.02], [-0.02, 0.0], [0.02, 0.0]])
_MOVES4 = np.array([[-1, 0], [1, 0], [0, -1], [0, 1]])  # (row, col) deltas


def _check_render_mode(env, render_mode):
    if render_mode is not None and render_mode not in env.metadata["render_modes"]:
        raise ValueError(f"{type(env).__name__}: render_mode {render_mode!r} is not supported; "
                         f"use one of {env.metadata['render_modes']} or None")
    return render_mode


class ImageEnv(TimeLimitMixin, Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}
    height = 48
    width = 64

    def __init__(self, render_mode="rgb_array", max_episode_steps=50):
        self.render_mode = _check_render_mode(self, render_mode)
        self.max_episode_steps = check_max_episode_steps(max_episode_steps)
        self.action_space = spaces.Discrete(5)
        self.observation_space = spaces.Box(-1.0, 1.0, (4,), np.float32)
        self._pos = None

    def _obs(self):
        return np.concatenate([self._pos, self._vel]).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._pos = self.np_random.uniform(0.2, 0.8, size=2)
        self._vel = self.np_random.uniform(-0.05, 0.05, size=2)
        self._time_limit_reset()
        return self._obs(), {}

    def step(self, action):
        self._require_reset()
        check_action(self.action_space, action)
        self._vel = np.clip(self._vel + _MOVES5[int(action)], -1.0, 1.0)
        pos = self._pos + self._vel
        for i in range(2):
            if pos[i] < 0.0:
                pos[i], self._vel[i] = -pos[i], -self._vel[i]
            elif pos[i] > 1.0:
                pos[i], self._vel[i] = 2.0 - pos[i], -self._vel[i]
        self._pos = np.clip(pos, 0.0, 1.0)
        truncated = self._time_limit_step()
        reward = -float(np.linalg.norm(self._pos - 0.5))
        return self._obs(), reward, False, truncated, {}

    def render(self):
        if self.render_mode is None:
            warn("You are calling render method without specifying any render mode.")
            return None
        if self._pos is None:
            return None
        t = self._elapsed_steps
        img = np.empty((self.height, self.width, 3), dtype=np.uint8)
        img[..., 0] = (4 * (t % 64)) % 256
        img[..., 1] = 128
        img[..., 2] = int(round(255 * self._pos[0]))
        row = int(round((1.0 - self._pos[1]) * (self.height - 1)))
        col = int(round(self._pos[0] * (self.width - 1)))
        img[max(row - 3, 0):row + 3, max(col - 3, 0):col + 3] = 255
        return img


class PixelObsEnv(TimeLimitMixin, Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}
    size = 32

    def __init__(self, render_mode=None, max_episode_steps=30):
        self.render_mode = _check_render_mode(self, render_mode)
        self.max_episode_steps = check_max_episode_steps(max_episode_steps)
        self.action_space = spaces.Discrete(4)
        self.observation_space = spaces.Box(0, 255, (self.size, self.size, 3), np.uint8)
        self._block = None

    def _image(self):
        img = np.zeros((self.size, self.size, 3), dtype=np.uint8)
        grey = (8 * (self._elapsed_steps % 32)) % 256
        img[0, :] = img[-1, :] = img[:, 0] = img[:, -1] = grey
        r, c = self._block
        img[r:r + 4, c:c + 4] = self._colour
        return img

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._block = self.np_random.integers(0, self.size - 4 + 1, size=2)
        self._colour = self.np_random.integers(64, 256, size=3).astype(np.uint8)
        self._time_limit_reset()
        return self._image(), {}

    def step(self, action):
        self._require_reset()
        check_action(self.action_space, action)
        self._block = np.clip(self._block + _MOVES4[int(action)], 0, self.size - 4)
        truncated = self._time_limit_step()
        half = self.size // 2
        reward = 1.0 if (self._block[0] < half and self._block[1] < half) else 0.0
        return self._image(), reward, False, truncated, {}

    def render(self):
        if self.render_mode is None:
            warn("You are calling render method without specifying any render mode.")
            return None
        if self._block is None:
            return None
        return self._image()

