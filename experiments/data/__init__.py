"""Tasks and their data: TFF's loaders, embedded StackOverflow in TFF's
format, and its array fast path. Uses the library only.
"""
