"""Workload and profile files and the generators' parameter tables."""
