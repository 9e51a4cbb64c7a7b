"""Studies built on the run layer: the paper's Table 1 (reproduce, utility),
the epsilon sweep, tuning, the privacy audit and tables, benchmarks.
"""
