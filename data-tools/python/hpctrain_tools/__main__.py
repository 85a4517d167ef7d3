"""Entry point: python3 -m hpctrain_tools study|plot|scaling|export ARGS...

The hpctrain program runs this with PYTHONPATH set to the folder that holds the package.
When the interpreter it found lacks PyYAML or matplotlib (a pyenv or venv python on PATH,
say) and the system's /usr/bin/python3 has them, the command starts again under that one.
"""

import importlib
import importlib.util
import os
import sys

NEEDS = {"study": ["yaml"], "plot": ["matplotlib"], "scaling": [], "export": ["torch", "h5py"]}
SYSTEM_PYTHON = "/usr/bin/python3"


def _missing(modules):
    return [m for m in modules if importlib.util.find_spec(m) is None]


def main():
    args = sys.argv[1:]
    if not args or args[0] not in NEEDS:
        print("usage: python3 -m hpctrain_tools study|plot|scaling|export ARGS... "
              "(normally started as hpctrain study|plot|scaling|export)", file=sys.stderr)
        return 2
    command = args[0]
    missing = _missing(NEEDS[command])
    if missing:
        here = os.path.realpath(sys.executable)
        if os.path.exists(SYSTEM_PYTHON) and os.path.realpath(SYSTEM_PYTHON) != here \
                and not os.environ.get("HPCTRAIN_TOOLS_REEXEC"):
            os.environ["HPCTRAIN_TOOLS_REEXEC"] = "1"
            os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, "-m", "hpctrain_tools"] + args)
        if command == "study":  # plots are optional for a study; its YAML is not
            print(f"error: hpctrain {command}: {sys.executable} has no {', '.join(missing)} "
                  "(Debian: apt install python3-yaml python3-matplotlib)", file=sys.stderr)
            return 2
        if command == "export":
            print(f"error: hpctrain export: {sys.executable} has no {', '.join(missing)}: "
                  "--format pytorch and onnx need python3-torch (and python3-h5py); "
                  "--format hdf5-layers does not", file=sys.stderr)
            return 2
    module = {"study": "study", "plot": "plots", "scaling": "scaling", "export": "export"}[command]
    if command == "plot" and missing:
        print(f"error: hpctrain plot: {sys.executable} has no matplotlib "
              "(Debian: apt install python3-matplotlib)", file=sys.stderr)
        return 2
    return importlib.import_module(f"hpctrain_tools.{module}").main(args[1:])


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # output piped into `head`, say: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
