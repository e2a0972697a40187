"""The result file and its typed blocks, statistics (histograms, steady state), measured phases and data verification."""
