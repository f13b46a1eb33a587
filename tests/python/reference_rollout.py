#!/usr/bin/python3
# Python-driven reference loop: runs an env over given actions and prints one JSON line per event.
"""Usage: reference_rollout.py ENTRY_POINT SEED ACTIONS_JSON [KWARGS_JSON]

ENTRY_POINT   "pkg.module:Name"; Name is called with the KWARGS_JSON object as keyword
              arguments (default {}) to build the env.
SEED          integer passed to the first reset(seed=SEED) (old-gym envs, whose reset() takes
              no seed: env.seed(SEED) then reset()).
ACTIONS_JSON  a JSON list with one action per step: a number for Discrete, a (nested) list for
              Box/MultiDiscrete/MultiBinary, an object / list for Dict / Tuple action spaces.
              "@FILE" reads the JSON from FILE, "-" from stdin.

Output on stdout, one JSON object per line:

  {"reset": true, "t": T, "seed": SEED or null, "obs": OBS}
      after every reset; T is the index of the next action. The first reset is seeded, the
      ones after an episode ends (terminated or truncated) are not.
  {"t": T, "obs": OBS, "reward": R, "terminated": B, "truncated": B[, "info": INFO]}
      after action number T (0-based over the whole run); "info" only when non-empty.
  {"error": "ExcType: message", "t": T, "phase": "reset"|"step"|"close"}
      if the env raises; the script then exits with status 1.

OBS/INFO encoding: arrays and tuples become (nested) JSON lists, dicts JSON objects in the
env's key order, numpy scalars plain numbers or booleans; floats are printed with Python's
shortest round-trip repr (float32 values exactly, as doubles); non-finite floats are the
strings "NaN", "Infinity" and "-Infinity" (JSON has no literal for them). For old-gym envs,
terminated = done and not info["TimeLimit.truncated"], truncated = done and that flag.

Exit status: 0 when all actions ran, 1 when the env raised, 2 on bad usage.
"""

import importlib
import inspect
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _usage(message):
    sys.stderr.write(f"reference_rollout.py: {message}\n"
                     "usage: reference_rollout.py ENTRY_POINT SEED ACTIONS_JSON [KWARGS_JSON]\n")
    sys.exit(2)


def jsonable(x):
    """Convert an observation/info value to plain JSON types (see the module docstring)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, np.generic):
        return jsonable(x.item())
    if isinstance(x, bool) or x is None or isinstance(x, (int, str)):
        return x
    if isinstance(x, float):
        if math.isnan(x):
            return "NaN"
        if math.isinf(x):
            return "Infinity" if x > 0 else "-Infinity"
        return x
    return str(x)


def to_action(space, a):
    """Turn a JSON action into what a Gymnasium consumer would pass for ``space``."""
    kind = type(space).__name__
    if kind == "Discrete":
        return np.int64(a)
    if kind in ("Box", "MultiDiscrete", "MultiBinary"):
        return np.asarray(a, dtype=space.dtype).reshape(space.shape)
    if kind == "Dict":
        return {k: to_action(sub, a[k]) for k, sub in space.spaces.items()}
    if kind == "Tuple":
        return tuple(to_action(sub, x) for sub, x in zip(space.spaces, a))
    return a


def _emit(record):
    sys.stdout.write(json.dumps(record, allow_nan=False) + "\n")


def _fail(exc, t, phase):
    _emit({"error": f"{type(exc).__name__}: {exc}", "t": t, "phase": phase})
    sys.stdout.flush()
    sys.exit(1)


def _load_json(text, what):
    if text == "-":
        text = sys.stdin.read()
    elif text.startswith("@"):
        with open(text[1:], encoding="utf-8") as f:
            text = f.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        _usage(f"{what} is not valid JSON: {e}")


def _takes_seed(reset):
    try:
        params = inspect.signature(reset).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == "seed" or p.kind == p.VAR_KEYWORD for p in params)


def main(argv):
    if len(argv) not in (4, 5):
        _usage("expected 3 or 4 arguments")
    entry_point, seed_text, actions_text = argv[1:4]
    if ":" not in entry_point:
        _usage(f"ENTRY_POINT {entry_point!r} must look like 'pkg.module:Name'")
    try:
        seed = int(seed_text)
    except ValueError:
        _usage(f"SEED {seed_text!r} is not an integer")
    actions = _load_json(actions_text, "ACTIONS_JSON")
    if not isinstance(actions, list):
        _usage("ACTIONS_JSON must be a JSON list")
    kwargs = _load_json(argv[4], "KWARGS_JSON") if len(argv) == 5 else {}
    if not isinstance(kwargs, dict):
        _usage("KWARGS_JSON must be a JSON object")

    module_name, attr = entry_point.split(":", 1)
    creator = getattr(importlib.import_module(module_name), attr)
    env = creator(**kwargs)
    new_api = _takes_seed(env.reset)

    def do_reset(t, first):
        try:
            if new_api:
                obs, _info = env.reset(seed=seed if first else None)
            else:
                if first:
                    env.seed(seed)
                obs = env.reset()
        except BaseException as e:  # the env's own failure, SystemExit included
            _fail(e, t, "reset")
        _emit({"reset": True, "t": t, "seed": seed if first else None, "obs": jsonable(obs)})

    do_reset(0, True)
    for t, a in enumerate(actions):
        try:
            result = env.step(to_action(env.action_space, a))
        except BaseException as e:
            _fail(e, t, "step")
        if len(result) == 4:
            obs, reward, done, info = result
            cut = bool(info.get("TimeLimit.truncated", False))
            terminated, truncated = bool(done) and not cut, bool(done) and cut
        else:
            obs, reward, terminated, truncated, info = result
        record = {"t": t, "obs": jsonable(obs), "reward": jsonable(float(reward)),
                  "terminated": bool(terminated), "truncated": bool(truncated)}
        if info:
            record["info"] = jsonable(info)
        _emit(record)
        if terminated or truncated:
            do_reset(t + 1, False)
    try:
        env.close()
    except BaseException as e:
        _fail(e, len(actions), "close")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
