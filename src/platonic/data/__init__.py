"""Data the library draws from: probe sampling (method.md §1.6)."""
