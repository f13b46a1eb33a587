# Fake gymnasium.error: re-exports crl_testenvs.error (Gymnasium's class names and hierarchy).
"""The classes are crl_testenvs.error's; importing this module relabels their ``__module__`` as
``gymnasium.error`` so tracebacks read ``gymnasium.error.NameNotFound: ...`` as with Gymnasium."""

from crl_testenvs.error import (DependencyNotInstalled, DeprecatedEnv, Error, InvalidAction,
                                NameNotFound, NamespaceNotFound, RegistrationError, ResetNeeded,
                                Unregistered, UnregisteredEnv, VersionNotFound)

__all__ = ["Error", "Unregistered", "UnregisteredEnv", "NamespaceNotFound", "NameNotFound",
           "VersionNotFound", "DeprecatedEnv", "RegistrationError", "DependencyNotInstalled",
           "ResetNeeded", "InvalidAction"]

for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
