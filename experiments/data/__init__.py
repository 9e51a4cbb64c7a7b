"""Tasks and their data; uses the library only (a layout test keeps it so).

* `tasks`: the tasks (`create_task`), their models, splits and defaults;
  TFF's loaders where their files are present.
* `names`: the task names (plain constants, no imports).
* `images`: IDX image files (Fashion-MNIST, MNIST) and the paper's split.
* `stackoverflow_data`: the embedded StackOverflow data in TFF's format.
* `stackoverflow_population`: the paper's 342,477 training clients, each
  made on demand from the embedded generator.
* `stackoverflow_arrays`: its array fast path (cached NumPy arrays).

Importing this package imports none of them.
"""
