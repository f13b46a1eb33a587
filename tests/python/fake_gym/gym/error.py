# Fake gym.error: the old-gym exception classes the fake make() raises.


class Error(Exception):
    """Error superclass."""


class UnregisteredEnv(Error):
    """Raised when the user requests an env from the registry that does not actually exist."""


class DeprecatedEnv(Error):
    """Raised when the user requests an env whose name exists but not with that version."""
