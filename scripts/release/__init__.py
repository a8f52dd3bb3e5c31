"""The release pipeline (pipeline.py), its blocking gates (gates.py) and the local index."""
