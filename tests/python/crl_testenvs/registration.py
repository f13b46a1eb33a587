# Env ids, EnvSpec and make() of crl_testenvs, with Gymnasium's id grammar and error texts.
"""A small env registry that behaves like ``gymnasium.envs.registration``.

``make(id)`` resolves ids of the form ``[namespace/]name[-vN]`` (and ``module:id``) and raises
``NameNotFound`` / ``VersionNotFound`` / ``DeprecatedEnv`` / ``NamespaceNotFound`` with
Gymnasium's messages. Unlike Gymnasium it returns the env itself, not a wrapper chain: the
envs apply their own time limit, and ``make(..., max_episode_steps=N)`` is passed to the
constructor (``-1`` turns the limit off). ``env.spec`` is set to the full EnvSpec.
"""

import copy
import dataclasses
import difflib
import importlib
import re

from crl_testenvs import error

ENV_ID_RE = re.compile(
    r"^(?:(?P<namespace>[\w:-]+)\/)?(?:(?P<name>[\w:.-]+?))(?:-v(?P<version>\d+))?$")


def parse_env_id(env_id):
    match = ENV_ID_RE.fullmatch(env_id)
    if not match:
        raise error.Error(
            f"Malformed environment ID: {env_id}. (Currently all IDs must be of the form "
            "[namespace/](env-name)-v(version). (namespace is optional))")
    ns, name, version = match.group("namespace", "name", "version")
    if version is not None:
        version = int(version)
    return ns, name, version


def get_env_id(ns, name, version):
    full_name = name if ns is None else f"{ns}/{name}"
    if version is not None:
        full_name = f"{full_name}-v{version}"
    return full_name


@dataclasses.dataclass
class EnvSpec:
    """The fields of ``gymnasium.envs.registration.EnvSpec`` (1.x)."""

    id: str
    entry_point: object = None
    reward_threshold: object = None
    nondeterministic: bool = False
    max_episode_steps: object = None
    order_enforce: bool = True
    disable_env_checker: bool = False
    kwargs: dict = dataclasses.field(default_factory=dict)
    namespace: object = dataclasses.field(init=False)
    name: str = dataclasses.field(init=False)
    version: object = dataclasses.field(init=False)
    additional_wrappers: tuple = dataclasses.field(default_factory=tuple)
    vector_entry_point: object = None

    def __post_init__(self):
        self.namespace, self.name, self.version = parse_env_id(self.id)

    def make(self, **kwargs):
        return make(self, **kwargs)


registry = {}


def register(id, entry_point=None, reward_threshold=None, nondeterministic=False,
             max_episode_steps=None, order_enforce=True, disable_env_checker=False,
             additional_wrappers=(), vector_entry_point=None, kwargs=None):
    spec_ = EnvSpec(id=id, entry_point=entry_point, reward_threshold=reward_threshold,
                    nondeterministic=nondeterministic, max_episode_steps=max_episode_steps,
                    order_enforce=order_enforce, disable_env_checker=disable_env_checker,
                    kwargs=dict(kwargs or {}), additional_wrappers=tuple(additional_wrappers),
                    vector_entry_point=vector_entry_point)
    registry[spec_.id] = spec_


def _check_namespace_exists(ns):
    if ns is None:
        return
    namespaces = {s.namespace for s in registry.values() if s.namespace is not None}
    if ns in namespaces:
        return
    suggestion = difflib.get_close_matches(ns, namespaces, n=1) if namespaces else None
    if suggestion:
        suggestion_msg = f"Did you mean: `{suggestion[0]}`?"
    else:
        suggestion_msg = f"Have you installed the proper package for {ns}?"
    raise error.NamespaceNotFound(f"Namespace {ns} not found. {suggestion_msg}")


def _check_name_exists(ns, name):
    _check_namespace_exists(ns)
    names = {s.name for s in registry.values() if s.namespace == ns}
    if name in names:
        return
    suggestion = difflib.get_close_matches(name, names, n=1)
    namespace_msg = f" in namespace {ns}" if ns else ""
    suggestion_msg = f" Did you mean: `{suggestion[0]}`?" if suggestion else ""
    raise error.NameNotFound(f"Environment `{name}` doesn't exist{namespace_msg}.{suggestion_msg}")


def _check_version_exists(ns, name, version):
    if get_env_id(ns, name, version) in registry:
        return
    _check_name_exists(ns, name)
    if version is None:
        return
    message = (f"Environment version `v{version}` for environment "
               f"`{get_env_id(ns, name, None)}` doesn't exist.")
    env_specs = sorted((s for s in registry.values() if s.namespace == ns and s.name == name),
                       key=lambda s: int(s.version or -1))
    default_spec = [s for s in env_specs if s.version is None]
    if default_spec:
        message += f" It provides the default version `{default_spec[0].id}`."
        if len(env_specs) == 1:
            raise error.DeprecatedEnv(message)
    versioned = [s for s in env_specs if s.version is not None]
    latest = max(versioned, key=lambda s: s.version, default=None)
    if latest is not None and version > latest.version:
        version_list_msg = ", ".join(f"`v{s.version}`" for s in env_specs)
        message += f" It provides versioned environments: [ {version_list_msg} ]."
        raise error.VersionNotFound(message)
    if latest is not None and version < latest.version:
        raise error.DeprecatedEnv(
            f"Environment version v{version} for `{get_env_id(ns, name, None)}` is deprecated. "
            f"Please use `{latest.id}` instead.")


def _find_spec(env_id):
    module, env_name = (None, env_id) if ":" not in env_id else env_id.split(":")
    if module is not None:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as e:
            raise ModuleNotFoundError(
                f"{e}. Environment registration via importing a module failed. "
                f"Check whether '{module}' contains env registration and can be imported.") from e
    env_spec = registry.get(env_name)
    ns, name, version = parse_env_id(env_name)
    if version is None:
        versions = [s.version for s in registry.values()
                    if s.namespace == ns and s.name == name and s.version is not None]
        if versions:
            env_spec = registry.get(get_env_id(ns, name, max(versions)))
    if env_spec is None:
        _check_version_exists(ns, name, version)
        raise error.Error(f"No registered env with id: {env_name}. Did you register it, or import "
                          "the package that registers it? Use `gymnasium.pprint_registry()` to see "
                          "all of the registered environments.")
    return env_spec


def load_env_creator(name):
    mod_name, attr_name = name.split(":")
    return getattr(importlib.import_module(mod_name), attr_name)


def spec(env_id):
    return _find_spec(env_id)


def make(id, max_episode_steps=None, disable_env_checker=None, **kwargs):
    """Build a registered env; ``max_episode_steps`` overrides the spec's limit (-1: none)."""
    env_spec = id if isinstance(id, EnvSpec) else _find_spec(id)
    env_kwargs = copy.deepcopy(env_spec.kwargs)
    env_kwargs.update(kwargs)
    limit = env_spec.max_episode_steps
    if max_episode_steps is not None:
        limit = None if max_episode_steps == -1 else max_episode_steps
    if env_spec.max_episode_steps is not None or max_episode_steps is not None:
        env_kwargs["max_episode_steps"] = limit
    if env_spec.entry_point is None:
        raise error.Error(f"{env_spec.id} registered but entry_point is not specified")
    creator = (env_spec.entry_point if callable(env_spec.entry_point)
               else load_env_creator(env_spec.entry_point))
    try:
        env = creator(**env_kwargs)
    except TypeError as e:
        raise type(e)(f"{e} was raised from the environment creator for {env_spec.id} with "
                      f"kwargs ({env_kwargs})")
    env.unwrapped.spec = dataclasses.replace(env_spec, max_episode_steps=limit, kwargs=env_kwargs)
    return env


def pprint_registry():
    for env_id in sorted(registry):
        print(env_id)


def _register_builtin():
    register("CartPole-v1", "crl_testenvs.cartpole:CartPoleEnv", reward_threshold=475.0,
             max_episode_steps=500)
    register("TestDict-v0", "crl_testenvs.dictenv:DictObsEnv")
    register("TestMultiDiscrete-v0", "crl_testenvs.multiaction:MultiDiscreteEnv",
             max_episode_steps=10)
    register("TestMultiBinary-v0", "crl_testenvs.multiaction:MultiBinaryEnv",
             max_episode_steps=20)
    register("TestDiscreteStart-v0", "crl_testenvs.multiaction:DiscreteStartEnv",
             max_episode_steps=20)
    register("TestImage-v0", "crl_testenvs.imageenv:ImageEnv", max_episode_steps=50)
    register("TestPixelObs-v0", "crl_testenvs.imageenv:PixelObsEnv", max_episode_steps=30)
    register("TestInfo-v0", "crl_testenvs.infoenv:InfoEnv", max_episode_steps=50)
    register("TestRaising-v0", "crl_testenvs.bad:RaisingEnv", max_episode_steps=50)
    register("TestWrongShape-v0", "crl_testenvs.bad:WrongShapeEnv", max_episode_steps=50)
    register("TestNaN-v0", "crl_testenvs.bad:NaNEnv", max_episode_steps=50)
    register("TestNone-v0", "crl_testenvs.bad:NoneEnv", max_episode_steps=50)
    register("TestWrongTuple-v0", "crl_testenvs.bad:WrongTupleEnv", max_episode_steps=50)
    register("TestWrongDtype-v0", "crl_testenvs.bad:WrongDtypeEnv", max_episode_steps=50)


_register_builtin()
