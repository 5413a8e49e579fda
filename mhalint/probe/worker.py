"""The probe worker: imports torch once, then runs each site's experiment and streams one JSON line per result.

Protocol: stdin is one JSON object {"site_timeout": seconds, "sites": [{"id": int, "code": str, "arguments":
{str: scalar}}]}. stdout gets {"torch": version} once torch is imported, then {"id", "status", "evidence"} per
site, flushed as it goes so that a crash loses only the sites not yet run. Nothing of the user's code reaches
this process: only rule codes and plain values.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys

from mhalint.finding import SKIPPED

MAX_SITES = 10_000
_SCALARS = (str, int, float, bool, type(None))


class SiteTimeout(Exception):
    pass


def main() -> None:
    try:
        payload = json.loads(sys.stdin.read())
        sites, site_timeout = _validate(payload)
    except (ValueError, TypeError) as error:
        _emit({"error": f"malformed probe request: {error}"})
        sys.exit(2)
    except RecursionError:
        _emit({"error": "malformed probe request: nested too deeply"})
        sys.exit(2)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import torch
    except ImportError as error:
        _emit({"error": f"torch cannot be imported: {error}"})
        sys.exit(3)
    torch.set_num_threads(1)
    from mhalint.rule import load_rules  # after torch: nothing else is needed to answer "no torch"

    rules = load_rules()
    _emit({"torch": torch.__version__})
    for site in sites:
        _emit({"id": site["id"], **_run(site, rules, torch, site_timeout)})


def _validate(payload) -> tuple[list[dict], float]:
    """Refuse anything but the documented shape, with a reason; sites with bad fields are skipped, not run."""
    if not isinstance(payload, dict) or not isinstance(payload.get("sites"), list):
        raise ValueError('expected an object with a "sites" list')
    timeout = payload.get("site_timeout", 20)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not 0 < timeout <= 3600:
        raise ValueError("site_timeout must be a number of seconds between 0 and 3600")
    if len(payload["sites"]) > MAX_SITES:
        raise ValueError(f"more than {MAX_SITES} sites")
    sites = []
    for site in payload["sites"]:
        if not isinstance(site, dict) or not isinstance(site.get("id"), int):
            raise ValueError("every site needs an integer id")
        sites.append(site)
    return sites, float(timeout)


def _run(site: dict, rules, torch, timeout: float) -> dict:
    code, arguments = site.get("code"), site.get("arguments")
    if not isinstance(code, str) or not isinstance(arguments, dict) or \
            not all(isinstance(k, str) and isinstance(v, _SCALARS) for k, v in arguments.items()):
        return _skipped("malformed site: needs a string code and an arguments object of plain values")
    rule = rules.get(code)
    if rule is None or rule.probe is None:
        return _skipped(f"{code} has no probe experiment")
    torch.manual_seed(0)  # the same numbers on every run
    try:
        with _time_limit(timeout):
            status, evidence = rule.probe(arguments, torch)
    except SiteTimeout:
        return _skipped(f"the experiment took longer than {timeout:g} s and was stopped")
    except MemoryError:
        return _skipped("the experiment ran out of memory (probe memory cap)")
    except Exception as error:  # an experiment that fails on odd arguments must not stop the other sites
        return _skipped(f"the experiment could not run: {type(error).__name__}: {str(error).splitlines()[0][:200]}")
    return {"status": status, "evidence": evidence}


def _skipped(reason: str) -> dict:
    return {"status": SKIPPED, "evidence": reason}


@contextlib.contextmanager
def _time_limit(seconds: float):
    def expire(signum, frame):
        raise SiteTimeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _emit(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()
