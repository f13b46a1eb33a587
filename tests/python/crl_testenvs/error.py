# Exception classes of crl_testenvs, named and nested like gymnasium.error's.
"""The subset of Gymnasium's error hierarchy the test environments and the fake registry raise.

Class names and the inheritance chain mirror ``gymnasium.error`` so code that reports
``type(exc).__name__`` (or catches by base class) behaves the same against the fakes.
"""


class Error(Exception):
    """Error superclass."""


class Unregistered(Error):
    """An item was requested from the registry that does not exist."""


class UnregisteredEnv(Unregistered):
    """An env was requested from the registry that does not exist."""


class NamespaceNotFound(UnregisteredEnv):
    """The namespace of the requested env id does not exist."""


class NameNotFound(UnregisteredEnv):
    """The name of the requested env id does not exist."""


class VersionNotFound(UnregisteredEnv):
    """The version of the requested env id does not exist."""


class DeprecatedEnv(Error):
    """The requested version is older than the latest registered one."""


class RegistrationError(Error):
    """An invalid env registration was attempted."""


class DependencyNotInstalled(Error):
    """A dependency needed for a feature is missing."""


class ResetNeeded(Error):
    """step() or render() was called before reset()."""


class InvalidAction(Error):
    """An action outside the action space was given."""
