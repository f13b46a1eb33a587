# crl_testenvs: pure-Python test envs that duck-type the Gymnasium Env API, for crl's gym plugin.
"""Test environments for crl's ``gym`` backend; numpy and the standard library only.

Every env is deterministic given ``reset(seed=...)`` (LegacyEnv: ``seed(...)``) and the actions.
See tests/python/README.md for what each env is for.
"""

from crl_testenvs import error, spaces
from crl_testenvs.bad import (NaNEnv, NoneEnv, RaisingEnv, WrongDtypeEnv, WrongShapeEnv,
                              WrongTupleEnv)
from crl_testenvs.cartpole import CartPoleEnv
from crl_testenvs.core import Env
from crl_testenvs.dictenv import DictObsEnv
from crl_testenvs.imageenv import ImageEnv, PixelObsEnv
from crl_testenvs.infoenv import InfoEnv
from crl_testenvs.legacy import LegacyEnv
from crl_testenvs.multiaction import DiscreteStartEnv, MultiBinaryEnv, MultiDiscreteEnv
from crl_testenvs.registration import EnvSpec, make, register, registry, spec

__version__ = "1.0"

__all__ = [
    "error", "spaces", "Env", "EnvSpec", "make", "register", "registry", "spec",
    "CartPoleEnv", "DictObsEnv", "ImageEnv", "PixelObsEnv", "InfoEnv", "LegacyEnv",
    "DiscreteStartEnv", "MultiBinaryEnv", "MultiDiscreteEnv",
    "NaNEnv", "NoneEnv", "RaisingEnv", "WrongDtypeEnv", "WrongShapeEnv", "WrongTupleEnv",
]
