"""The tuner: rank every candidate with the GPU's model, benchmark only the top-k."""
