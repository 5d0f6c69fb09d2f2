"""``python -m statemigrate.cli``: the same command line as ``statemigrate``."""

from . import main

if __name__ == "__main__":
    main(prog_name="statemigrate")
