"""The checkpoint model, its spec, its estimate and its report rows (data layer)."""
