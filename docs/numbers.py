"""``python docs/numbers.py``: the docs' figures checked against their scripts.

Run:  python docs/numbers.py --check          # the fast checks (seconds): exit 1 on a mismatch
      python docs/numbers.py --check --slow   # also the examples' tables (minutes)
      python docs/numbers.py --list           # which figures come from which script
      python docs/numbers.py --write          # rewrite the inventory table in docs/numbers.md

The checker's code is docs/check_numbers.py; this file keeps the command's name, which users and
CI call. That name is also the standard library's ``numbers``, and any script run from docs/ has
docs/ first on ``sys.path``, so its ``import numbers`` (numpy's, on ``import numpy``) finds this
file. Imported under that name, this file therefore loads the standard library's module and
puts it in its own place in ``sys.modules``: every script here, this one included, gets the real
``numbers``. (The alternatives were worse: renaming the command breaks its callers, and each
script taking docs/ off its own ``sys.path`` leaves the next new script exposed.)
"""

import sys

if __name__ == "numbers":  # `import numbers` with docs/ first on sys.path: not this command
    import importlib.machinery
    import importlib.util
    import os

    _here = os.path.dirname(os.path.abspath(__file__))
    _path = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    _spec = importlib.machinery.PathFinder.find_spec("numbers", _path)
    if _spec is None or _spec.loader is None:
        raise ImportError("the standard library's numbers module was not found", name="numbers")
    _stdlib = importlib.util.module_from_spec(_spec)
    sys.modules["numbers"] = _stdlib  # the import statement returns what sys.modules holds
    _spec.loader.exec_module(_stdlib)

elif __name__ == "__main__":
    from check_numbers import main  # docs/ is first on sys.path when run as a script

    raise SystemExit(main())
