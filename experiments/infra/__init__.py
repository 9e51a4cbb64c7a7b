"""Infrastructure: TFF worker processes and their reaper, and the simulation
of the history downlink. Uses the library only.
"""
