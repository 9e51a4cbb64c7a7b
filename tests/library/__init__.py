"""Tests of the library, tff_dprec: one module per library module."""
