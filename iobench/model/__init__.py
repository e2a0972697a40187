"""The pure models: GPU starvation (inputs, bound, interval) and the diagnosis."""
