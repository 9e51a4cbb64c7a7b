"""Infrastructure: TFF worker processes and their reaper, the cache of TFF's
compiled computations, and the simulation of the history downlink.
"""
