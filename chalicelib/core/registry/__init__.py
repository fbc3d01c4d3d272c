"""The xRegistry endpoint registry as a pure domain (design.md §9)."""
