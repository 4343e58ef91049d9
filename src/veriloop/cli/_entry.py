"""``python -m veriloop.cli._entry``: the command line without the installed script."""

from veriloop.cli import main

if __name__ == "__main__":
    main()
