# pyembed's Python half: process-wide set-up of the embedded interpreter (compiled into every Python-backed plugin).
#
# Defined once per process as the module _crl_pyembed_1; the C side adds the
# crl error codes (E_NOT_FOUND, ...) as module constants.
import os
import sys


class CrlError(Exception):
    """A problem the user fixes (config, installation): crl reports its message alone, without a traceback."""

    def __init__(self, code, message):
        Exception.__init__(self, message)
        self.crl_code = code


_setup_done = False


class OsExitInHost(BaseException):
    """os._exit called by Python code in the process that embeds crl (raised instead of ending it)."""


def _guard_os_exit():
    """os._exit in crl's own process would end it on the spot: no message, no flush, whatever status the
    env chose (a rollout that "succeeds" with exit 0 and no output).  Raise instead, so the call that ran
    the env fails with a message and a traceback.  Forked children (multiprocessing) and crl's env worker
    processes (CRL_ENV_WORKER_PROCESS), where exiting is the contained failure, keep the real os._exit."""
    if os.environ.get('CRL_ENV_WORKER_PROCESS') or getattr(os._exit, '_crl_guard', False):
        return
    real_exit = os._exit
    host_pid = os.getpid()

    def _exit(status):
        if os.getpid() != host_pid:
            real_exit(status)
        raise OsExitInHost('os._exit(%r) was called in the crl process itself, which it would end without a word '
                           '(no flush, no message, exit status %r); crl refuses it here. Run this env with [env] '
                           'executor = processes: a worker process that exits is reported as a worker failure '
                           '(and restarted with on_worker_failure = restart)' % (status, status))
    _exit._crl_guard = True
    _exit.__doc__ = real_exit.__doc__
    os._exit = _exit


def _binary(prefix):
    v = '%d.%d' % sys.version_info[:2]
    for name in ('python' + v, 'python3', 'python'):
        p = os.path.join(prefix, 'bin', name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def _site_index():
    for i, p in enumerate(sys.path):
        if p.endswith('site-packages') or p.endswith('dist-packages'):
            return i
    return len(sys.path)


def setup_once():
    """sys.executable and VIRTUAL_ENV, once per process; returns warnings."""
    global _setup_done
    if _setup_done:
        return []
    _setup_done = True
    warnings = []
    # Embedded, CPython guesses sys.executable from PATH (often another
    # Python); the binary beside the library we run is the honest answer,
    # and what multiprocessing needs.
    exe = _binary(sys.base_exec_prefix)
    if exe:
        sys.executable = sys._base_executable = exe
    venv = os.environ.get('VIRTUAL_ENV')
    if venv:
        v = 'python%d.%d' % sys.version_info[:2]
        site_dir = os.path.join(venv, 'lib', v, 'site-packages')
        if os.path.isdir(site_dir):
            import site
            before = list(sys.path)
            site.addsitedir(site_dir)
            added = [p for p in sys.path if p not in before]
            # As inside the venv: its packages win over the system's.
            sys.path[:] = before
            i = _site_index()
            sys.path[i:i] = added
            sys.prefix = sys.exec_prefix = venv
            exe = _binary(venv)
            if exe:
                sys.executable = exe
        else:
            import glob
            have = sorted(os.path.basename(os.path.dirname(p))
                          for p in glob.glob(os.path.join(venv, 'lib', 'python*', 'site-packages')))
            warnings.append('VIRTUAL_ENV=%s is ignored: it has no lib/%s/site-packages (it has %s); crl embeds '
                            'Python %s, so make the venv with %s -m venv'
                            % (venv, v, ', '.join(have) or 'none', sys.version.split()[0],
                               _binary(sys.base_exec_prefix) or v))
    _guard_os_exit()
    return warnings


def add_paths(paths, owner):
    """Put paths at the front of sys.path, each once; returns warnings."""
    import importlib
    warnings = []
    for p in reversed(list(paths)):
        full = os.path.abspath(os.path.expanduser(p))
        if not os.path.isdir(full):
            warnings.append('%s: python_path entry %s is not a directory; Python finds nothing there' % (owner, full))
        while full in sys.path:
            sys.path.remove(full)
        sys.path.insert(0, full)
    importlib.invalidate_caches()
    return warnings


def describe():
    return 'Python %s at %s' % (sys.version.split()[0], sys.executable)


def missing_module(name, what, plugin):
    """The CrlError for a module that is not importable: where we looked and how to fix it."""
    top = name.split('.')[0]
    return CrlError(E_NOT_FOUND,  # noqa: F821 (added by the C side)
                    "%s: no module named '%s' in the embedded %s; sys.path searched: %s; fix: add the directory "
                    "that holds it to [plugin.%s] python_path, or to PYTHONPATH, or install it (pip install %s) "
                    "into a virtualenv made with this Python and set VIRTUAL_ENV"
                    % (what, name, describe(), sys.path, plugin, top))


def import_module(name, what, plugin):
    import importlib
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        missing = e.name or name
        if missing != name:
            what = "%s (module '%s' needs it)" % (what, name)
        raise missing_module(missing, what, plugin) from None
