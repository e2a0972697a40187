"""The qualification suite, its verdict and its checkpoint requirements."""
