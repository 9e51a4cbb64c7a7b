"""Infrastructure: TFF worker processes and their reaper, the cache of TFF's
compiled computations, the simulation of the history downlink, and files
written whole or not at all.
"""
