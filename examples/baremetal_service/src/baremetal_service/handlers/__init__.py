"""The HTTP layer: one module per resource, and :mod:`.routes`, the Flask application over them."""
