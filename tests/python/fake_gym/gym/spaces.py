# Fake gym.spaces: re-exports crl_testenvs.spaces under old gym's module name.
from crl_testenvs.spaces import Box, Dict, Discrete, MultiBinary, MultiDiscrete, Space, Tuple

__all__ = ["Space", "Box", "Discrete", "MultiDiscrete", "MultiBinary", "Dict", "Tuple"]
