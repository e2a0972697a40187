"""``python -m iobench`` (and ``torchrun -m iobench``) run the command line."""

from .cli import main

if __name__ == "__main__":
    main()
