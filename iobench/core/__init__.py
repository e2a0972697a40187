"""The base layer: errors, units, redaction, CPU accounting, tools, data generation, the coordinator interface and a generator's plan. Imports nothing else from iobench."""
