"""``python -m statemigrate``: the same command line as ``statemigrate``."""

from .cli import main

if __name__ == "__main__":
    main(prog_name="statemigrate")
