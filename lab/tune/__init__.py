"""The launch-shape tuning command: measure a GPU (measure.py), derive the tables
(derive.py, no GPU), write tuning/launch_shapes.toml."""
