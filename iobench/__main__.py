"""``python -m iobench`` (and ``torchrun -m iobench``) run the command line."""

from .cli.app import main

if __name__ == "__main__":
    main()
