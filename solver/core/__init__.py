"""The bottom layer: the problem and schedule models, the instance, errors, figures, the method registry."""
