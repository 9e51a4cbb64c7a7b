"""The run layer: configuration, plans, the training loop, checkpoints,
the privacy ledger, records and reports. Uses data/, infra/ and the library.
"""
