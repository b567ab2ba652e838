"""Views for this area (placeholder until written)."""

SECTIONS: dict = {}
