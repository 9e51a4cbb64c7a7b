"""The run layer: configuration, the aggregator registry, the training loop,
checkpoints, the privacy ledger, records and reports. Uses data/, infra/ and
the library.
"""
