"""The tasks' names, shared by the data loaders and the run configuration.

Plain constants, no TensorFlow: `experiments.runner.config` imports them
without loading the data modules, and the loaders never import the runner.
"""

TASKS = ('stackoverflow_lr', 'emnist', 'shakespeare', 'mnist', 'fashion_mnist',
         'digits')
STORED = 'stored'  # RunConfig.population: the clients in the data files.
