"""The xRegistry endpoint registry as a pure domain (DESIGN.md §9)."""
