"""``python -m veriloop``: the command line, as torchrun starts it (``torchrun ... -m veriloop train CONFIG``)."""

from veriloop.cli import main

if __name__ == "__main__":
    main()
