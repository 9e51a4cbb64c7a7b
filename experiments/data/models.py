"""The Keras models of the image tasks (LeNet-5 for the paper's MNIST
protocol, a small CNN for the 8x8 digits)."""

import tensorflow as tf


def lenet5(input_shape, num_classes):
  """LeNet-5 with ReLU and max pooling (the paper's MNIST model)."""
  layers = tf.keras.layers
  return tf.keras.Sequential([
      layers.Conv2D(6, 5, padding='same', activation='relu',
                    input_shape=input_shape),
      layers.MaxPooling2D(2),
      layers.Conv2D(16, 5, activation='relu'),
      layers.MaxPooling2D(2),
      layers.Flatten(),
      layers.Dense(120, activation='relu'),
      layers.Dense(84, activation='relu'),
      layers.Dense(num_classes, activation='softmax'),
  ])


def small_cnn(input_shape, num_classes):
  """Two 3x3 convolutions and a dense layer (the digits task)."""
  layers = tf.keras.layers
  return tf.keras.Sequential([
      layers.Conv2D(16, 3, padding='same', activation='relu',
                    input_shape=input_shape),
      layers.MaxPooling2D(2),
      layers.Conv2D(32, 3, padding='same', activation='relu'),
      layers.MaxPooling2D(2),
      layers.Flatten(),
      layers.Dense(64, activation='relu'),
      layers.Dense(num_classes, activation='softmax'),
  ])
