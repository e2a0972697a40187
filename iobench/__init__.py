"""iobench: can this storage feed these GPUs?"""

__version__ = "0.1.0"
