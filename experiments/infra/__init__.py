"""Infrastructure: TFF worker processes (reaped by tff_dprec.worker_reaper),
the cache of TFF's compiled computations, the simulation of the history
downlink, files written whole or not at all, and quiet native logging.
"""
